package domain

import (
	"sort"
	"time"

	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// Snapshot is the console's read model: everything the dashboards show,
// rebuilt from the informer caches when they change (see Live), shared by
// every page view and live update.
type Snapshot struct {
	Version uint64
	Taken   time.Time
	Policy  Policy
	Classes []string // highest priority first; tasks naming none count in the last
	Tasks   []Task
	Teams   []TeamUsage
}

// SnapshotInput is what a snapshot is built from.
type SnapshotInput struct {
	Settings      Settings
	ClusterQueues []*kueuev1beta2.ClusterQueue
	LocalQueues   []*kueuev1beta2.LocalQueue
	Workloads     []*kueuev1beta2.Workload
	Classes       []*kueuev1beta2.WorkloadPriorityClass
	Cohort        *kueuev1beta2.Cohort
}

// BuildSnapshot computes tasks, queue positions and team usage.
func BuildSnapshot(in SnapshotInput, now time.Time) *Snapshot {
	snap := &Snapshot{Taken: now, Policy: ReadPolicy(in.Cohort, in.Classes)}
	snap.Classes = classOrder(snap.Policy, in.Classes)
	lowest := ""
	if len(snap.Classes) > 0 {
		lowest = snap.Classes[len(snap.Classes)-1]
	}
	snap.Tasks = make([]Task, 0, len(in.Workloads))
	for _, wl := range in.Workloads {
		snap.Tasks = append(snap.Tasks, TaskOf(wl, in.Settings, lowest, now))
	}
	lqToCQ := make(map[string]string, len(in.LocalQueues))
	for _, lq := range in.LocalQueues {
		lqToCQ[LocalQueueKey(lq.Namespace, lq.Name)] = string(lq.Spec.ClusterQueue)
	}
	AssignPositions(snap.Tasks, lqToCQ)
	MarkBorrowing(snap.Tasks, in.ClusterQueues)
	snap.Teams = teamUsage(in.Settings, in.ClusterQueues, snap.Tasks)
	return snap
}

// classOrder lists the policy's classes by weight, highest first, then any
// other priority class in the cluster by value.
func classOrder(p Policy, wpcs []*kueuev1beta2.WorkloadPriorityClass) []string {
	type class struct {
		name  string
		value int64
	}
	seen := map[string]bool{}
	var cs []class
	for _, c := range p.Classes {
		seen[c.Name] = true
		cs = append(cs, class{c.Name, int64(c.Weight)})
	}
	for _, w := range wpcs {
		if !seen[w.Name] {
			cs = append(cs, class{w.Name, int64(w.Value)})
		}
	}
	sort.SliceStable(cs, func(i, j int) bool {
		if cs[i].value != cs[j].value {
			return cs[i].value > cs[j].value
		}
		return cs[i].name < cs[j].name
	})
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.name
	}
	return out
}
