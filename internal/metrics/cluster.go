package metrics

import (
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/openquota/console/internal/domain"
)

// ClusterSources are where the console's figures about the cluster come
// from. Each is read when /metrics is scraped, from what the console holds
// already (the read model's snapshot, the informer caches): never a
// request to the apiserver or to Prometheus. A nil source exports nothing.
type ClusterSources struct {
	// Snapshot is the read model's latest snapshot.
	Snapshot func() *domain.Snapshot
	// InstanceTypes are the nodes by instance type, as the overview counts
	// them (domain.Overview.InstanceTypes).
	InstanceTypes func() []domain.InstanceTypeCapacity
	// Teams are the teams the console manages, with their quota per
	// instance type, and Fleet the instance shapes and how many instances
	// of each type are ready: the Teams page's allocation by type.
	Teams func() []domain.TeamState
	Fleet func() (domain.ShapeLookup, map[string]int)
}

// OngoingWindow is the window of the read model's figures of what still
// runs or waits that the collector reads: the Tasks page's default, so that
// both share the snapshot's tallies. The figures exported do not depend on
// it.
const OngoingWindow = 24 * time.Hour

// Resource label values: Kueue's resource names; cpu in cores, memory in
// bytes, as Kueue's own metrics count them.
const (
	resourceGPU    = string(domain.ResourceGPU)
	resourceNeuron = string(domain.ResourceNeuron)
	resourceCPU    = "cpu"
	resourceMemory = "memory"
)

var (
	teamLabels      = []string{"team", "cluster_queue", "cohort"}
	teamResource    = append(slices.Clone(teamLabels), "resource")
	teamClassLabels = []string{"team", "cluster_queue", "priority_class"}

	descSnapshotTime = prometheus.NewDesc("quota_console_read_model_snapshot_timestamp_seconds",
		"When the read model's latest snapshot was taken (Unix time); the cluster figures below are as of then. Absent until the caches have synced.", nil, nil)
	descTeamQuota = prometheus.NewDesc("quota_console_team_nominal_quota",
		"A team's nominal quota (its ClusterQueue's nominalQuota summed over flavors), by resource: nvidia.com/gpu always, aws.amazon.com/neurondevice when the team has any.", teamResource, nil)
	descTeamUsage = prometheus.NewDesc("quota_console_team_resource_usage",
		"What a team's admitted tasks hold (its ClusterQueue's flavorsUsage, own quota and borrowed), by resource.", teamResource, nil)
	descTeamBorrowed = prometheus.NewDesc("quota_console_team_borrowed",
		"What a team uses above its nominal quota, from other teams' quota in its cohort, by resource.", teamResource, nil)
	descTeamLent = prometheus.NewDesc("quota_console_team_lent",
		"A team's idle quota that other teams of its cohort use now (its share of what they borrow), by resource.", teamResource, nil)
	descTeamPendingDemand = prometheus.NewDesc("quota_console_team_pending_demand",
		"What a team's pending and preempted tasks ask for, by resource.", teamResource, nil)
	descTeamTasks = prometheus.NewDesc("quota_console_team_tasks",
		"A team's tasks by state: running (admitted), pending, preempted (waiting again after a preemption); deactivated tasks are not counted.",
		append(slices.Clone(teamLabels), "state"), nil)
	descTeamLongestWait = prometheus.NewDesc("quota_console_team_longest_wait_seconds",
		"How long a team's longest-waiting task (pending or preempted, active, not admitted) has waited since it last started waiting; 0 when none waits.", teamLabels, nil)
	descClassPending = prometheus.NewDesc("quota_console_team_class_pending_tasks",
		"A team's pending and preempted tasks (active) of one priority class.", teamClassLabels, nil)
	descClassLongestWait = prometheus.NewDesc("quota_console_team_class_longest_wait_seconds",
		"How long a team's longest-waiting task of one priority class has waited; 0 when none waits.", teamClassLabels, nil)
	descClassLastAdmission = prometheus.NewDesc("quota_console_team_class_last_admission_timestamp_seconds",
		"The latest admission (Unix time) of a team's tasks of one priority class that the cluster still holds, running or finished; absent when none was admitted.",
		teamClassLabels, nil)
	descNamespaceTeam = prometheus.NewDesc("quota_console_namespace_team",
		"Always 1: the team whose ClusterQueue a namespace's LocalQueues feed (one team per namespace), to join per-namespace metrics such as dcgm-exporter's with the teams.",
		[]string{"team_namespace", "team"}, nil)
	descTypeNodes = prometheus.NewDesc("quota_console_instance_type_nodes",
		"Nodes of an instance type by state: ready (Ready and schedulable) or not_ready (not Ready, or cordoned).", []string{"instance_type", "state"}, nil)
	descTypeReadyCapacity = prometheus.NewDesc("quota_console_instance_type_ready_capacity",
		"What the ready nodes of an instance type offer (ready instances times the shape), by resource; cpu in cores, memory in bytes.",
		[]string{"instance_type", "resource"}, nil)
	descTypeQuota = prometheus.NewDesc("quota_console_instance_type_quota",
		"The console's teams' quota on an instance type summed over teams, by resource; cpu in cores, memory in bytes.", []string{"instance_type", "resource"}, nil)
	descTeamTypeQuota = prometheus.NewDesc("quota_console_team_instance_type_quota",
		"A console team's quota on an instance type, by resource; cpu in cores, memory in bytes.",
		[]string{"team", "cluster_queue", "instance_type", "resource"}, nil)
)

// RegisterCluster exports the console's figures about the cluster in
// c.Cluster, read from src when scraped.
func (c *Console) RegisterCluster(src ClusterSources) {
	c.Cluster.MustRegister(clusterCollector{src})
}

type clusterCollector struct{ src ClusterSources }

func (clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descSnapshotTime, descTeamQuota, descTeamUsage, descTeamBorrowed, descTeamLent,
		descTeamPendingDemand, descTeamTasks, descTeamLongestWait, descClassPending, descClassLongestWait,
		descClassLastAdmission, descNamespaceTeam, descTypeNodes, descTypeReadyCapacity, descTypeQuota, descTeamTypeQuota} {
		ch <- d
	}
}

func (cc clusterCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	if cc.src.Snapshot != nil {
		// Before the caches sync the snapshot is empty and has no time:
		// export nothing rather than zeros an alert would take for facts.
		if snap := cc.src.Snapshot(); snap != nil && !snap.Taken.IsZero() {
			collectSnapshot(snap, gauge)
		}
	}
	if cc.src.InstanceTypes != nil {
		for _, it := range cc.src.InstanceTypes() {
			gauge(descTypeNodes, float64(it.Ready), it.Type, "ready")
			gauge(descTypeNodes, float64(it.NotReady), it.Type, "not_ready")
		}
	}
	if cc.src.Teams != nil && cc.src.Fleet != nil {
		collectAllocation(cc.src.Teams(), cc.src.Fleet, gauge)
	}
}

type gaugeFunc func(d *prometheus.Desc, v float64, labels ...string)

func collectSnapshot(snap *domain.Snapshot, gauge gaugeFunc) {
	now := snap.Taken
	gauge(descSnapshotTime, unixSeconds(now))
	ongoing := snap.Ongoing(domain.Selection{}, OngoingWindow, now)
	queueOf := map[string]string{}
	longest := map[string]time.Duration{}
	for _, o := range ongoing {
		longest[o.Team] = max(longest[o.Team], o.LongestWait)
	}
	namespaces := map[string]bool{}
	for _, u := range snap.Teams {
		if _, seen := queueOf[u.Team]; !seen {
			queueOf[u.Team] = u.ClusterQueue
		}
		amounts := []struct {
			d *prometheus.Desc
			a domain.Amount
		}{{descTeamQuota, u.Allocated}, {descTeamUsage, u.InUse}, {descTeamBorrowed, u.Borrowed},
			{descTeamLent, u.Lent}, {descTeamPendingDemand, u.PendingDemand}}
		neuron := false
		for _, x := range amounts {
			neuron = neuron || x.a.Neuron != 0
		}
		for _, x := range amounts {
			gauge(x.d, float64(x.a.GPUs), u.Team, u.ClusterQueue, u.Cohort, resourceGPU)
			if neuron {
				gauge(x.d, float64(x.a.Neuron), u.Team, u.ClusterQueue, u.Cohort, resourceNeuron)
			}
		}
		gauge(descTeamTasks, float64(u.Running), u.Team, u.ClusterQueue, u.Cohort, "running")
		gauge(descTeamTasks, float64(u.Pending), u.Team, u.ClusterQueue, u.Cohort, "pending")
		gauge(descTeamTasks, float64(u.Preempted), u.Team, u.ClusterQueue, u.Cohort, "preempted")
		gauge(descTeamLongestWait, longest[u.Team].Seconds(), u.Team, u.ClusterQueue, u.Cohort)
		for _, ns := range u.Namespaces {
			if !namespaces[ns] {
				namespaces[ns] = true
				gauge(descNamespaceTeam, 1, ns, u.Team)
			}
		}
	}
	for _, o := range ongoing {
		labels := []string{o.Team, queueOf[o.Team], o.Class}
		gauge(descClassPending, float64(o.Pending+o.Preempted), labels...)
		gauge(descClassLongestWait, o.LongestWait.Seconds(), labels...)
		if !o.LastAdmission.IsZero() {
			gauge(descClassLastAdmission, unixSeconds(o.LastAdmission), labels...)
		}
	}
}

// collectAllocation exports the teams' quota per instance type and what
// the ready nodes of each type offer (the Teams page's allocation by type).
func collectAllocation(teams []domain.TeamState, fleet func() (domain.ShapeLookup, map[string]int), gauge gaugeFunc) {
	shapes, available := fleet()
	plain := make([]domain.Team, len(teams))
	for i, t := range teams {
		plain[i] = t.Team
		byType := map[string]domain.Quota{}
		var order []string
		for _, row := range t.Quota {
			shape, ok := shapes(row.InstanceType)
			if !ok {
				continue
			}
			q, seen := byType[row.InstanceType]
			if !seen {
				order = append(order, row.InstanceType)
			}
			byType[row.InstanceType] = addQuota(q, domain.DeriveQuota(row, shape))
		}
		for _, it := range order {
			for _, r := range quotaResources(byType[it], domain.Quota{}) {
				gauge(descTeamTypeQuota, r.value, t.Name, t.ClusterQueue.Name, it, r.name)
			}
		}
	}
	types := map[string]bool{}
	for _, a := range domain.AllocationByType(plain, shapes, available) {
		if a.Allocated == (domain.Quota{}) { // capacity nobody was given: below
			continue
		}
		types[a.Type] = true
		for _, r := range quotaResources(a.Allocated, a.Capacity) {
			gauge(descTypeQuota, r.value, a.Type, r.name)
			gauge(descTypeReadyCapacity, r.capacity, a.Type, r.name)
		}
	}
	for it, n := range available {
		if types[it] {
			continue
		}
		shape, ok := shapes(it)
		if !ok {
			continue
		}
		for _, r := range quotaResources(domain.Quota{}, domain.Capacity(shape, n)) {
			gauge(descTypeReadyCapacity, r.capacity, it, r.name)
		}
	}
}

func addQuota(a, b domain.Quota) domain.Quota {
	return domain.Quota{GPUs: a.GPUs + b.GPUs, Neuron: a.Neuron + b.Neuron, EFA: a.EFA + b.EFA,
		CPUMilli: a.CPUMilli + b.CPUMilli, MemoryMiB: a.MemoryMiB + b.MemoryMiB}
}

type resourceFigure struct {
	name            string
	value, capacity float64
}

// quotaResources are the resources of the console's capacity rule
// (domain.Quota.Exceeds) that q or capacity has, in Kueue's units.
func quotaResources(q, capacity domain.Quota) []resourceFigure {
	var out []resourceFigure
	for _, r := range []resourceFigure{
		{resourceGPU, float64(q.GPUs), float64(capacity.GPUs)},
		{resourceNeuron, float64(q.Neuron), float64(capacity.Neuron)},
		{resourceCPU, float64(q.CPUMilli) / 1000, float64(capacity.CPUMilli) / 1000},
		{resourceMemory, float64(q.MemoryMiB << 20), float64(capacity.MemoryMiB << 20)},
	} {
		if r.value != 0 || r.capacity != 0 {
			out = append(out, r)
		}
	}
	return out
}

// unixSeconds is t in Unix seconds, to the millisecond.
func unixSeconds(t time.Time) float64 { return float64(t.UnixMilli()) / 1000 }
