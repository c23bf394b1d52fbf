// This file is the console's one rule of borrowing, and how the read model
// applies it to the tasks running now.

package domain

import (
	"cmp"
	"slices"

	corev1 "k8s.io/api/core/v1"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// BorrowedResources are the resources of fixed names whose borrowing the
// console accounts for, those of the usage report: GPUs, Neuron devices and
// vCPU. accountsBorrowing adds every MIG profile's partitions.
var BorrowedResources = []corev1.ResourceName{ResourceGPU, ResourceNeuron, corev1.ResourceCPU}

// accountsBorrowing is whether a task that borrows r borrows: r is one of
// BorrowedResources or a MIG profile's partitions, which the usage report
// counts borrowed partition-hours of.
func accountsBorrowing(r corev1.ResourceName) bool {
	_, mig := PartitionOf(r)
	return mig || slices.Contains(BorrowedResources, r)
}

// Borrows is whether a task that takes takes of a resource on a flavor
// borrows, when its ClusterQueue already held held there and has a nominal
// quota of nominal: Kueue's rule (its flavor assigner borrows when usage +
// request > nominal, ClusterQueueSnapshot.BorrowingWith). A task borrows
// when it does so for any resource accountsBorrowing names on any flavor it
// holds, of those its ClusterQueue has a quota for (Kueue admits no other).
//
// What the queue held before a task is what the tasks admitted before it
// (CompareAdmissions) and still holding quota hold. At its admission that is
// Kueue's usage then; afterwards it only lessens, as earlier tasks end, so
// a task borrows from its admission until the tasks before it fit in the
// nominal quota with it. The Tasks page shows whether a running task borrows
// now (Snapshot.Borrowing); the task history records whether it borrowed at
// its admission (and a task borrowed when any admission did); the usage
// report's borrowed hours are the same excess over the nominal quota,
// integrated over time.
func Borrows(held, takes, nominal int64) bool { return takes > 0 && held+takes > nominal }

// Holding is an admission holding quota on one flavor of a ClusterQueue,
// from At until Ended (zero: still), in Unix milliseconds.
type Holding struct {
	At, Ended       int64
	Namespace, Name string // the task's: at the same At, by name
	Amount          FlavorAmount
}

// BorrowsAmong is Borrows for holding y among the other holdings of its
// ClusterQueue's flavor (not those of y's own task): what those admitted
// before y that still held quota when y began held, what y holds, and the
// nominal quota in force then of each resource it accounts borrowing of
// (accountsBorrowing) the queue has one for.
func BorrowsAmong(y Holding, others []Holding, nominal map[corev1.ResourceName]int64) bool {
	for r, n := range nominal {
		if !accountsBorrowing(r) {
			continue
		}
		var before int64
		for _, x := range others {
			if (x.Ended == 0 || x.Ended > y.At) && CompareAdmissions(x.At, x.Namespace, x.Name, y.At, y.Namespace, y.Name) < 0 {
				before += x.Amount.Of(r)
			}
		}
		if Borrows(before, y.Amount.Of(r), n) {
			return true
		}
	}
	return false
}

// CompareAdmissions orders admissions as Kueue made them, one at a time:
// the earlier admission first (times in Unix milliseconds); at the same
// time (conditions keep seconds), by namespace and then name.
func CompareAdmissions(at1 int64, namespace1, name1 string, at2 int64, namespace2, name2 string) int {
	return cmp.Or(cmp.Compare(at1, at2), cmp.Compare(namespace1, namespace2), cmp.Compare(name1, name2))
}

// Of is a's amount of r, in a's units; 0 for a resource Amount does not
// follow.
func (a Amount) Of(r corev1.ResourceName) int64 {
	switch r {
	case ResourceGPU:
		return a.GPUs
	case ResourceNeuron:
		return a.Neuron
	case corev1.ResourceCPU:
		return a.CPUMilli
	case corev1.ResourceMemory:
		return a.MemoryMiB
	}
	return 0
}

// Of is what f holds of r: a MIG profile's partitions, or its Amount's.
func (f FlavorAmount) Of(r corev1.ResourceName) int64 {
	if profile, ok := PartitionOf(r); ok {
		return f.Partitions[profile]
	}
	return f.Amount.Of(r)
}

// admissionOrder orders tasks holding quota by CompareAdmissions.
func admissionOrder(a, b *TaskFacts) int {
	return CompareAdmissions(a.AdmittedAt.UnixMilli(), a.Namespace, a.Name, b.AdmittedAt.UnixMilli(), b.Namespace, b.Name)
}

func inAdmissionOrder(a, b *TaskFacts) bool { return admissionOrder(a, b) < 0 }

// groupKey names the tasks holding quota of one resource on one flavor of
// one ClusterQueue: a borrowing group.
type groupKey struct {
	clusterQueue, flavor string
	resource             corev1.ResourceName
}

// eachGroup calls fn with each borrowing group of a task: those of the
// resources it holds on each flavor, while it holds quota.
func eachGroup(f *TaskFacts, fn func(groupKey)) {
	if !f.admitted || f.finished || f.admittedIn == "" {
		return
	}
	for _, u := range f.Usage {
		for _, r := range BorrowedResources {
			if u.Of(r) > 0 {
				fn(groupKey{f.admittedIn, u.Flavor, r})
			}
		}
		for profile, n := range u.Partitions {
			if n > 0 {
				fn(groupKey{f.admittedIn, u.Flavor, PartitionResource(profile)})
			}
		}
	}
}

// holds is what f holds of a group's resource on its flavor.
func holds(f *TaskFacts, key groupKey) int64 {
	for _, u := range f.Usage {
		if u.Flavor == key.flavor {
			return u.Of(key.resource)
		}
	}
	return 0
}

// firstBorrowing is the first task of a group, in admission order, that
// borrows: it and every later one do (each holds some of the resource, so
// what is held before them only grows). It looks at no more tasks than fit
// in the quota.
func firstBorrowing(group *tree, key groupKey, nominal int64) (first *TaskFacts, found bool) {
	var held int64
	group.Ascend(func(f *TaskFacts) bool {
		takes := holds(f, key)
		if Borrows(held, takes, nominal) {
			first, found = f, true
			return false
		}
		held += takes
		return true
	})
	return first, found
}

// CanBorrowIn reports whether a queue in cohort ("" for none) can borrow. A
// queue in no cohort borrows from no one: what it holds beyond its quota
// (after the quota was cut) is over quota, and Kueue counts none of it
// borrowed.
func CanBorrowIn(cohort string) bool { return cohort != "" }

// nominalQuotas are each ClusterQueue's nominal quotas of the borrowed
// resources, per flavor, of the queues that CanBorrowIn.
func nominalQuotas(cqs map[string]*kueuev1beta2.ClusterQueue) map[groupKey]int64 {
	nominal := map[groupKey]int64{}
	for _, cq := range cqs {
		if !CanBorrowIn(string(cq.Spec.CohortName)) {
			continue
		}
		for _, rg := range cq.Spec.ResourceGroups {
			for _, f := range rg.Flavors {
				for _, r := range f.Resources {
					if accountsBorrowing(r.Name) {
						nominal[groupKey{cq.Name, string(f.Name), r.Name}] += units(r.Name, r.NominalQuota)
					}
				}
			}
		}
	}
	return nominal
}
