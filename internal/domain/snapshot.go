package domain

import (
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// Amount is a quantity of the resources the dashboards show.
type Amount struct {
	GPUs      int64
	Neuron    int64
	CPUMilli  int64
	MemoryMiB int64
}

func (a *Amount) add(b Amount) {
	a.GPUs += b.GPUs
	a.Neuron += b.Neuron
	a.CPUMilli += b.CPUMilli
	a.MemoryMiB += b.MemoryMiB
}

func (a *Amount) addResource(r corev1.ResourceName, q int64, milli int64) {
	switch r {
	case ResourceGPU:
		a.GPUs += q
	case ResourceNeuron:
		a.Neuron += q
	case corev1.ResourceCPU:
		a.CPUMilli += milli
	case corev1.ResourceMemory:
		a.MemoryMiB += q >> 20
	}
}

// TeamUsage is one team's row of the usage dashboard.
type TeamUsage struct {
	Team, Namespace, ClusterQueue, Cohort string
	Enabled                               bool
	Allocated                             Amount // nominal quota
	InUse                                 Amount // admitted tasks' usage, own and borrowed
	Borrowed                              Amount // usage above nominal, from other teams' quota
	Lent                                  Amount // its idle quota used by others (attributed)
	PendingDemand                         Amount // what its queued tasks ask for
	Running, Pending, Preempted           int
}

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

// TeamOfClusterQueue names the team a ClusterQueue serves: the console's
// label, else the conventional name <prefix><team>-clusterqueue, else the
// queue's own name.
func TeamOfClusterQueue(s Settings, cq *kueuev1beta2.ClusterQueue) string {
	if t := cq.Labels[TeamLabel]; t != "" {
		return t
	}
	name := cq.Name
	if strings.HasPrefix(name, s.NamespacePrefix) && strings.HasSuffix(name, "-clusterqueue") {
		return strings.TrimSuffix(strings.TrimPrefix(name, s.NamespacePrefix), "-clusterqueue")
	}
	return name
}

func teamUsage(s Settings, cqs []*kueuev1beta2.ClusterQueue, tasks []Task) []TeamUsage {
	rows := make([]TeamUsage, 0, len(cqs))
	index := map[string]int{} // ClusterQueue name -> row
	for _, cq := range cqs {
		team := TeamOfClusterQueue(s, cq)
		row := TeamUsage{Team: team, Namespace: s.Namespace(team), ClusterQueue: cq.Name,
			Cohort: string(cq.Spec.CohortName), Enabled: !Stopped(cq)}
		for _, rg := range cq.Spec.ResourceGroups {
			for _, f := range rg.Flavors {
				for _, r := range f.Resources {
					row.Allocated.addResource(r.Name, r.NominalQuota.Value(), r.NominalQuota.MilliValue())
				}
			}
		}
		for _, f := range cq.Status.FlavorsUsage {
			for _, r := range f.Resources {
				row.InUse.addResource(r.Name, r.Total.Value(), r.Total.MilliValue())
				row.Borrowed.addResource(r.Name, r.Borrowed.Value(), r.Borrowed.MilliValue())
			}
		}
		index[cq.Name] = len(rows)
		rows = append(rows, row)
	}
	attributeLending(cqs, rows, index)

	byTeam := map[string]int{}
	for i, r := range rows {
		byTeam[r.Team] = i
	}
	for _, t := range tasks {
		i, ok := byTeam[t.Team]
		if !ok {
			continue
		}
		switch t.State {
		case TaskAdmitted:
			rows[i].Running++
		case TaskPending:
			if !t.Deactivated {
				rows[i].Pending++
				rows[i].PendingDemand.GPUs += t.GPUs
			}
		case TaskPreempted:
			rows[i].Preempted++
			rows[i].PendingDemand.GPUs += t.GPUs
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Team < rows[j].Team })
	return rows
}

// attributeLending splits what each cohort's teams borrow, per flavor and
// resource, among the teams that had that quota idle, in proportion to their
// idle lendable quota. Kueue does not record who lent to whom; this is the
// console's attribution.
func attributeLending(cqs []*kueuev1beta2.ClusterQueue, rows []TeamUsage, index map[string]int) {
	type key struct {
		cohort, flavor string
		resource       corev1.ResourceName
	}
	type lender struct {
		row  int
		idle float64
	}
	borrowed := map[key]float64{}
	lenders := map[key][]lender{}
	for _, cq := range cqs {
		if cq.Spec.CohortName == "" {
			continue
		}
		used := map[key][2]float64{} // total, borrowed
		for _, f := range cq.Status.FlavorsUsage {
			for _, r := range f.Resources {
				k := key{string(cq.Spec.CohortName), string(f.Name), r.Name}
				used[k] = [2]float64{amountOf(r.Name, r.Total.Value(), r.Total.MilliValue()), amountOf(r.Name, r.Borrowed.Value(), r.Borrowed.MilliValue())}
				borrowed[k] += used[k][1]
			}
		}
		for _, rg := range cq.Spec.ResourceGroups {
			for _, f := range rg.Flavors {
				for _, r := range f.Resources {
					k := key{string(cq.Spec.CohortName), string(f.Name), r.Name}
					nominal := amountOf(r.Name, r.NominalQuota.Value(), r.NominalQuota.MilliValue())
					lendable := nominal
					if r.LendingLimit != nil {
						lendable = amountOf(r.Name, r.LendingLimit.Value(), r.LendingLimit.MilliValue())
					}
					own := used[k][0] - used[k][1]
					idle := min(max(nominal-own, 0), lendable)
					if idle > 0 {
						lenders[k] = append(lenders[k], lender{index[cq.Name], idle})
					}
				}
			}
		}
	}
	for k, total := range borrowed {
		if total == 0 {
			continue
		}
		var idle float64
		for _, l := range lenders[k] {
			idle += l.idle
		}
		for _, l := range lenders[k] {
			share := total * l.idle / idle
			share = min(share, l.idle)
			switch k.resource {
			case ResourceGPU:
				rows[l.row].Lent.GPUs += int64(share + 0.5)
			case ResourceNeuron:
				rows[l.row].Lent.Neuron += int64(share + 0.5)
			case corev1.ResourceCPU:
				rows[l.row].Lent.CPUMilli += int64(share + 0.5)
			case corev1.ResourceMemory:
				rows[l.row].Lent.MemoryMiB += int64(share + 0.5)
			}
		}
	}
}

// amountOf puts resources in the units Amount keeps (cpu in milli, memory in MiB).
func amountOf(r corev1.ResourceName, value, milli int64) float64 {
	switch r {
	case corev1.ResourceCPU:
		return float64(milli)
	case corev1.ResourceMemory:
		return float64(value >> 20)
	}
	return float64(value)
}

// Totals sums the team rows.
func Totals(rows []TeamUsage) TeamUsage {
	t := TeamUsage{Team: "Total"}
	for _, r := range rows {
		t.Allocated.add(r.Allocated)
		t.InUse.add(r.InUse)
		t.Borrowed.add(r.Borrowed)
		t.Lent.add(r.Lent)
		t.PendingDemand.add(r.PendingDemand)
		t.Running += r.Running
		t.Pending += r.Pending
		t.Preempted += r.Preempted
	}
	return t
}
