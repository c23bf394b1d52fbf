// This file orders tasks: queued tasks as Kueue does, running tasks to
// estimate which borrow, and the task list's sets.

package domain

import (
	"cmp"
	"strings"
	"sync"
	"time"

	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// LocalQueueKey is the key of a namespaced object (a LocalQueue, a
// Workload) in the read model.
func LocalQueueKey(namespace, name string) string { return namespace + "/" + name }

// Queue positions (Snapshot.Position) number the queued tasks (pending or
// preempted, active, no quota reserved) within each ClusterQueue, 1 being
// next in line, the way Kueue orders a BestEffortFIFO ClusterQueue: higher
// priority first, then the earlier QueueOrder timestamp (creation, or
// eviction after a PodsReady timeout or admission-check eviction), then
// namespace/name (Kueue breaks the last tie by UID). A pending Workload does
// not name its ClusterQueue, so the model resolves it from the LocalQueue;
// tasks whose LocalQueue is unknown get no position.
//
// This is the console's estimate. Kueue's visibility API
// (visibility.kueue.x-k8s.io pendingworkloads) is authoritative: it also
// knows the priority boost annotation, admission fair sharing and the
// workload Kueue is currently trying to admit, none of which a Workload
// object shows.
var queueOrder = kueueOrder(func(f *TaskFacts) time.Time { return f.QueueOrder })

func inQueueOrder(a, b *TaskFacts) bool { return queueOrder(a, b) < 0 }

// queue is one ClusterQueue's queued tasks in a snapshot. Positions are
// counted once, when first asked, and kept while the queue is unchanged.
type queue struct {
	tasks     *tree
	once      sync.Once
	positions map[*TaskFacts]int
}

func (q *queue) position(f *TaskFacts) int {
	q.once.Do(func() {
		q.positions = make(map[*TaskFacts]int, q.tasks.Len())
		q.tasks.Ascend(func(g *TaskFacts) bool {
			q.positions[g] = len(q.positions) + 1
			return true
		})
	})
	return q.positions[f]
}

// Borrowing (Snapshot.Borrowing) is an estimate too: Kueue records
// borrowing per ClusterQueue, not per Workload. Within each ClusterQueue
// and GPU flavor, running tasks are taken in the order Kueue keeps them
// when it reclaims quota (higher priority first, then earlier admission);
// those past the queue's nominal GPU quota borrow. They are the ones Kueue
// would preempt first when a lender reclaims its quota.
var admissionOrder = kueueOrder(func(f *TaskFacts) time.Time { return f.AdmittedAt })

func inAdmissionOrder(a, b *TaskFacts) bool { return admissionOrder(a, b) < 0 }

// groupKey names the running tasks of one ClusterQueue on one GPU flavor.
type groupKey struct{ clusterQueue, flavor string }

// groupOf is the borrowing group of a task: running, with GPUs, on one flavor.
func groupOf(f *TaskFacts) (groupKey, bool) {
	if f.State != TaskAdmitted || f.GPUs == 0 || len(f.Flavors) != 1 {
		return groupKey{}, false
	}
	return groupKey{f.ClusterQueue, f.Flavors[0]}, true
}

// firstBorrowing is the first task of a group, in admission order, past the
// nominal quota: it and those after it borrow. It looks at no more tasks
// than fit in the quota (each holds a GPU at least).
func firstBorrowing(group *tree, nominal int64) (first *TaskFacts, found bool) {
	var used int64
	group.Ascend(func(f *TaskFacts) bool {
		if used += f.GPUs; used > nominal {
			first, found = f, true
			return false
		}
		return true
	})
	return first, found
}

// nominalGPUs is each ClusterQueue's nominal GPU quota per flavor.
func nominalGPUs(cqs map[string]*kueuev1beta2.ClusterQueue) map[groupKey]int64 {
	nominal := map[groupKey]int64{}
	for _, cq := range cqs {
		for _, rg := range cq.Spec.ResourceGroups {
			for _, f := range rg.Flavors {
				for _, r := range f.Resources {
					if r.Name == ResourceGPU {
						nominal[groupKey{cq.Name, string(f.Name)}] += r.NominalQuota.Value()
					}
				}
			}
		}
	}
	return nominal
}

// kueueOrder is how Kueue orders Workloads: higher priority first, then the
// earlier of a timestamp (when it queued, or was admitted), then by
// namespace and name (Kueue breaks the last tie by UID).
func kueueOrder(at func(*TaskFacts) time.Time) func(a, b *TaskFacts) int {
	return func(a, b *TaskFacts) int {
		if c := cmp.Compare(b.Priority, a.Priority); c != 0 {
			return c
		}
		if c := at(a).Compare(at(b)); c != 0 {
			return c
		}
		return compareNames(a, b)
	}
}

func compareNames(a, b *TaskFacts) int {
	if a.Namespace != b.Namespace {
		return strings.Compare(a.Namespace, b.Namespace)
	}
	return strings.Compare(a.Name, b.Name)
}

// The task list's orders of its sets.
func byName(a, b *TaskFacts) bool { return compareNames(a, b) < 0 }

func newestAdmission(a, b *TaskFacts) bool {
	if c := b.AdmittedAt.Compare(a.AdmittedAt); c != 0 {
		return c < 0
	}
	return compareNames(a, b) < 0
}

func newestFinish(a, b *TaskFacts) bool {
	if c := b.FinishedAt.Compare(a.FinishedAt); c != 0 {
		return c < 0
	}
	return compareNames(a, b) < 0
}
