// This file orders queued tasks as Kueue does and estimates which running
// tasks borrow.

package domain

import (
	"cmp"
	"slices"
	"strings"
	"time"

	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// LocalQueueKey is the key of a LocalQueue in AssignPositions' map.
func LocalQueueKey(namespace, name string) string { return namespace + "/" + name }

// AssignPositions numbers the queued tasks (pending or preempted, active, no
// quota reserved) within each ClusterQueue, 1 being next in line, the way
// Kueue orders a BestEffortFIFO ClusterQueue: higher priority first, then the
// earlier QueueOrder timestamp (creation, or eviction after a PodsReady
// timeout or admission-check eviction), then namespace/name (Kueue breaks
// the last tie by UID). A pending Workload does not name its ClusterQueue, so
// clusterQueueOf resolves it from the LocalQueue (key LocalQueueKey(ns, name));
// the task's ClusterQueue is filled in from it when empty. Tasks not queued,
// or whose LocalQueue is not in the map, get Position 0.
//
// This is the console's estimate. Kueue's visibility API
// (visibility.kueue.x-k8s.io pendingworkloads) is authoritative: it also
// knows the priority boost annotation, admission fair sharing and the
// workload Kueue is currently trying to admit, none of which a Workload
// object shows.
func AssignPositions(tasks []Task, clusterQueueOf map[string]string) {
	byQueue := map[string][]*Task{}
	for i := range tasks {
		t := &tasks[i]
		t.Position = 0
		cq, ok := clusterQueueOf[LocalQueueKey(t.Namespace, t.LocalQueue)]
		if !ok || t.LocalQueue == "" {
			continue
		}
		if t.ClusterQueue == "" {
			t.ClusterQueue = cq
		}
		if t.Queued {
			byQueue[cq] = append(byQueue[cq], t)
		}
	}
	for _, queue := range byQueue {
		slices.SortFunc(queue, kueueOrder(func(t *Task) time.Time { return t.QueueOrder }))
		for i, t := range queue {
			t.Position = i + 1
		}
	}
}

// MarkBorrowing estimates which running tasks use borrowed GPU quota, and
// says so in their Reason. Kueue records borrowing per ClusterQueue, not per
// Workload, so this is an estimate: within each ClusterQueue and GPU flavor,
// running tasks are taken in the order Kueue keeps them when it reclaims
// quota (higher priority first, then earlier admission); those past the
// queue's nominal GPU quota are marked borrowing. They are the ones Kueue
// would preempt first when a lender reclaims its quota.
func MarkBorrowing(tasks []Task, queues []*kueuev1beta2.ClusterQueue) {
	nominal := map[string]int64{} // cq/flavor
	for _, cq := range queues {
		for _, rg := range cq.Spec.ResourceGroups {
			for _, f := range rg.Flavors {
				for _, r := range f.Resources {
					if r.Name == ResourceGPU {
						nominal[cq.Name+"/"+string(f.Name)] += r.NominalQuota.Value()
					}
				}
			}
		}
	}
	groups := map[string][]*Task{}
	for i := range tasks {
		t := &tasks[i]
		if t.State != TaskAdmitted || t.GPUs == 0 || len(t.Flavors) != 1 {
			continue
		}
		key := t.ClusterQueue + "/" + t.Flavors[0]
		if _, ok := nominal[key]; ok {
			groups[key] = append(groups[key], t)
		}
	}
	for key, group := range groups {
		slices.SortFunc(group, kueueOrder(func(t *Task) time.Time { return t.AdmittedAt }))
		var used int64
		for _, t := range group {
			used += t.GPUs
			if used > nominal[key] && !t.Borrowing {
				phrase := admittedPhrase(*t)
				t.Borrowing = true
				t.Reason = strings.Replace(t.Reason, phrase, admittedPhrase(*t), 1)
			}
		}
	}
}

// kueueOrder is how Kueue orders Workloads: higher priority first, then the
// earlier of a timestamp (when it queued, or was admitted), then by
// namespace and name (Kueue breaks the last tie by UID).
func kueueOrder(at func(*Task) time.Time) func(a, b *Task) int {
	return func(a, b *Task) int {
		if c := cmp.Compare(b.Priority, a.Priority); c != 0 {
			return c
		}
		if c := at(a).Compare(at(b)); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	}
}
