// This file orders tasks: queued tasks as Kueue does, and the task list's
// sets.

package domain

import (
	"cmp"
	"strings"
	"sync"
	"time"
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
	tasks *tree
	// strict: the ClusterQueue is StrictFIFO: Kueue tries only its head.
	strict    bool
	once      sync.Once
	positions map[*TaskFacts]int
	// behind are the tasks Kueue has not tried (untried) because of a task
	// ahead of them that did not fit: the one just like them (Kueue skips
	// the same scheduling shape), or in a StrictFIFO queue its head.
	behind map[*TaskFacts]*TaskFacts
}

func (q *queue) count() {
	q.once.Do(func() {
		q.positions = make(map[*TaskFacts]int, q.tasks.Len())
		var head *TaskFacts
		var noFit map[string]*TaskFacts // the first task of each shape that did not fit
		q.tasks.Ascend(func(g *TaskFacts) bool {
			q.positions[g] = len(q.positions) + 1
			if head == nil {
				head = g
			}
			var ahead *TaskFacts
			switch {
			case !g.untried:
			case q.strict:
				if head != g && head.noFitWords != "" {
					ahead = head
				}
			case g.sameShape != "":
				ahead = noFit[g.sameShape]
			}
			if ahead != nil {
				if q.behind == nil {
					q.behind = map[*TaskFacts]*TaskFacts{}
				}
				q.behind[g] = ahead
			}
			if g.noFitWords != "" && g.sameShape != "" && noFit[g.sameShape] == nil {
				if noFit == nil {
					noFit = map[string]*TaskFacts{}
				}
				noFit[g.sameShape] = g
			}
			return true
		})
	})
}

func (q *queue) position(f *TaskFacts) int {
	q.count()
	return q.positions[f]
}

// waitsBehind is the task ahead of f whose not fitting keeps Kueue from
// trying f (see queue.behind); nil for none.
func (q *queue) waitsBehind(f *TaskFacts) *TaskFacts {
	q.count()
	return q.behind[f]
}

// kueueOrder is how Kueue orders Workloads in a queue: higher priority
// first, then the earlier of a timestamp, then by namespace and name (Kueue
// breaks the last tie by UID).
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
