package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/kueuetest"
)

// clusterFixture is a small cluster: team a borrows 2 GPUs of team b's
// quota in cohort shared-pool while b has a task waiting, on two ready
// ml.p5.48xlarge nodes and one cordoned.
type clusterFixture struct {
	now   time.Time
	input domain.SnapshotInput
	snap  *domain.Snapshot
	nodes []*corev1.Node
	teams []domain.TeamState
}

func newClusterFixture(t *testing.T) clusterFixture {
	t.Helper()
	s := domain.DefaultSettings
	now := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)
	gpu := func(n int64) resource.Quantity { return *resource.NewQuantity(n, resource.DecimalSI) }
	queue := func(team string, usage, borrowed int64) *kueuev1beta2.ClusterQueue {
		cq := kueuetest.MakeClusterQueue(s.ClusterQueue(team)).Cohort("shared-pool").Nominal(8, nil).Usage(usage, borrowed).
			Labels(domain.ManagedByLabel, domain.ManagedByValue, domain.TeamLabel, team).Obj()
		return cq
	}
	qa, qb := queue("a", 10, 2), queue("b", 0, 0)
	classes := []*kueuev1beta2.WorkloadPriorityClass{
		{ObjectMeta: metav1.ObjectMeta{Name: "training"}, Value: 100},
		{ObjectMeta: metav1.ObjectMeta{Name: "batch"}, Value: 10},
	}
	wl := func(ns, name string) *kueuetest.WorkloadWrapper { return kueuetest.MakeWorkload(s, ns, name) }
	nsA, nsB := s.Namespace("a"), s.Namespace("b")
	workloads := []*kueuev1beta2.Workload{
		// a: two running training tasks (the later admitted 10 minutes ago),
		// one batch task finished an hour ago.
		wl(nsA, "train-1").GPUs(4, 1).Queue(s.LocalQueue("a")).Class("training").Created(now.Add(-3*time.Hour)).
			Admitted(now.Add(-2*time.Hour), "ml.p5.48xlarge").Obj(),
		wl(nsA, "train-2").GPUs(6, 1).Queue(s.LocalQueue("a")).Class("training").Created(now.Add(-20*time.Minute)).
			Admitted(now.Add(-10*time.Minute), "ml.p5.48xlarge").Obj(),
		wl(nsA, "batch-1").GPUs(1, 1).Queue(s.LocalQueue("a")).Class("batch").Created(now.Add(-4*time.Hour)).
			Admitted(now.Add(-3*time.Hour), "ml.p5.48xlarge").Finished(now.Add(-time.Hour), "Succeeded").Obj(),
		// b: a training task waiting for 90 minutes, a batch task for 30.
		wl(nsB, "train-3").GPUs(8, 1).Queue(s.LocalQueue("b")).Class("training").Created(now.Add(-90*time.Minute)).
			Pending("Pending", "couldn't assign flavors", now.Add(-90*time.Minute)).Obj(),
		wl(nsB, "batch-2").GPUs(2, 1).Queue(s.LocalQueue("b")).Class("batch").Created(now.Add(-30*time.Minute)).
			Pending("Pending", "couldn't assign flavors", now.Add(-30*time.Minute)).Obj(),
	}
	input := domain.SnapshotInput{Settings: s, ClusterQueues: []*kueuev1beta2.ClusterQueue{qa, qb},
		LocalQueues: []*kueuev1beta2.LocalQueue{
			kueuetest.MakeLocalQueue(nsA, s.LocalQueue("a"), qa.Name), kueuetest.MakeLocalQueue(nsB, s.LocalQueue("b"), qb.Name)},
		Workloads: workloads, Classes: classes}

	node := func(name string, ready, cordoned bool) *corev1.Node {
		status := corev1.ConditionFalse
		if ready {
			status = corev1.ConditionTrue
		}
		capacity := corev1.ResourceList{domain.ResourceGPU: gpu(8), corev1.ResourceCPU: resource.MustParse("192"),
			corev1.ResourceMemory: resource.MustParse("2048Gi")}
		return &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{domain.InstanceTypeLabel: "ml.p5.48xlarge"}},
			Spec:       corev1.NodeSpec{Unschedulable: cordoned},
			Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity,
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}},
		}
	}
	nodes := []*corev1.Node{node("n1", true, false), node("n2", true, false), node("n3", true, true)}
	teams := []domain.TeamState{
		{Team: domain.Team{Name: "a", Quota: []domain.QuotaInput{{InstanceType: "ml.p5.48xlarge", GPUs: ptr.To[int64](8)}}}, ClusterQueue: qa},
		// b asks for more of the type than its two ready instances have.
		{Team: domain.Team{Name: "b", Quota: []domain.QuotaInput{{InstanceType: "ml.p5.48xlarge", Count: ptr.To[int64](3)}}}, ClusterQueue: qb},
	}
	return clusterFixture{now: now, input: input, snap: domain.BuildSnapshot(input, now), nodes: nodes, teams: teams}
}

func (f clusterFixture) console() *Console {
	c := NewConsole()
	c.RegisterCluster(ClusterSources{
		Snapshot: func() *domain.Snapshot { return f.snap },
		InstanceTypes: func() []domain.InstanceTypeCapacity {
			return domain.BuildOverview(domain.DefaultSettings, f.nodes, nil).InstanceTypes
		},
		Teams: func() []domain.TeamState { return f.teams },
		Fleet: func() (domain.ShapeLookup, map[string]int) { return domain.LiveShapes(f.nodes) },
	})
	return c
}

// The figures of clusterFixture, exactly: per team from its ClusterQueue's
// quota and status and its tasks, per team and class from the tasks, per
// instance type from the nodes and the teams' quota.
func TestClusterMetrics(t *testing.T) {
	f := newClusterFixture(t)
	const (
		a = `cluster_queue="hyperpod-ns-a-clusterqueue",cohort="shared-pool"`
		b = `cluster_queue="hyperpod-ns-b-clusterqueue",cohort="shared-pool"`
	)
	want := `
# HELP quota_console_read_model_snapshot_timestamp_seconds When the read model's latest snapshot was taken (Unix time); the cluster figures below are as of then. Absent until the caches have synced.
# TYPE quota_console_read_model_snapshot_timestamp_seconds gauge
quota_console_read_model_snapshot_timestamp_seconds 1.7724528e+09
# HELP quota_console_team_nominal_quota A team's nominal quota (its ClusterQueue's nominalQuota summed over flavors), by resource: nvidia.com/gpu always, aws.amazon.com/neurondevice when the team has any.
# TYPE quota_console_team_nominal_quota gauge
quota_console_team_nominal_quota{` + a + `,resource="nvidia.com/gpu",team="a"} 8
quota_console_team_nominal_quota{` + b + `,resource="nvidia.com/gpu",team="b"} 8
# HELP quota_console_team_resource_usage What a team's admitted tasks hold (its ClusterQueue's flavorsUsage, own quota and borrowed), by resource.
# TYPE quota_console_team_resource_usage gauge
quota_console_team_resource_usage{` + a + `,resource="nvidia.com/gpu",team="a"} 10
quota_console_team_resource_usage{` + b + `,resource="nvidia.com/gpu",team="b"} 0
# HELP quota_console_team_borrowed What a team uses above its nominal quota, from other teams' quota in its cohort, by resource.
# TYPE quota_console_team_borrowed gauge
quota_console_team_borrowed{` + a + `,resource="nvidia.com/gpu",team="a"} 2
quota_console_team_borrowed{` + b + `,resource="nvidia.com/gpu",team="b"} 0
# HELP quota_console_team_lent A team's idle quota that other teams of its cohort use now (its share of what they borrow), by resource.
# TYPE quota_console_team_lent gauge
quota_console_team_lent{` + a + `,resource="nvidia.com/gpu",team="a"} 0
quota_console_team_lent{` + b + `,resource="nvidia.com/gpu",team="b"} 2
# HELP quota_console_team_pending_demand What a team's pending and preempted tasks ask for, by resource.
# TYPE quota_console_team_pending_demand gauge
quota_console_team_pending_demand{` + a + `,resource="nvidia.com/gpu",team="a"} 0
quota_console_team_pending_demand{` + b + `,resource="nvidia.com/gpu",team="b"} 10
# HELP quota_console_team_tasks A team's tasks by state: running (admitted), pending, preempted (waiting again after a preemption); deactivated tasks are not counted.
# TYPE quota_console_team_tasks gauge
quota_console_team_tasks{` + a + `,state="pending",team="a"} 0
quota_console_team_tasks{` + a + `,state="preempted",team="a"} 0
quota_console_team_tasks{` + a + `,state="running",team="a"} 2
quota_console_team_tasks{` + b + `,state="pending",team="b"} 2
quota_console_team_tasks{` + b + `,state="preempted",team="b"} 0
quota_console_team_tasks{` + b + `,state="running",team="b"} 0
# HELP quota_console_team_longest_wait_seconds How long a team's longest-waiting task (pending or preempted, active, not admitted) has waited since it last started waiting; 0 when none waits.
# TYPE quota_console_team_longest_wait_seconds gauge
quota_console_team_longest_wait_seconds{` + a + `,team="a"} 0
quota_console_team_longest_wait_seconds{` + b + `,team="b"} 5400
# HELP quota_console_team_class_pending_tasks A team's pending and preempted tasks (active) of one priority class.
# TYPE quota_console_team_class_pending_tasks gauge
quota_console_team_class_pending_tasks{cluster_queue="hyperpod-ns-a-clusterqueue",priority_class="batch",team="a"} 0
quota_console_team_class_pending_tasks{cluster_queue="hyperpod-ns-a-clusterqueue",priority_class="training",team="a"} 0
quota_console_team_class_pending_tasks{cluster_queue="hyperpod-ns-b-clusterqueue",priority_class="batch",team="b"} 1
quota_console_team_class_pending_tasks{cluster_queue="hyperpod-ns-b-clusterqueue",priority_class="training",team="b"} 1
# HELP quota_console_team_class_longest_wait_seconds How long a team's longest-waiting task of one priority class has waited; 0 when none waits.
# TYPE quota_console_team_class_longest_wait_seconds gauge
quota_console_team_class_longest_wait_seconds{cluster_queue="hyperpod-ns-a-clusterqueue",priority_class="batch",team="a"} 0
quota_console_team_class_longest_wait_seconds{cluster_queue="hyperpod-ns-a-clusterqueue",priority_class="training",team="a"} 0
quota_console_team_class_longest_wait_seconds{cluster_queue="hyperpod-ns-b-clusterqueue",priority_class="batch",team="b"} 1800
quota_console_team_class_longest_wait_seconds{cluster_queue="hyperpod-ns-b-clusterqueue",priority_class="training",team="b"} 5400
# HELP quota_console_team_class_last_admission_timestamp_seconds The latest admission (Unix time) of a team's tasks of one priority class that the cluster still holds, running or finished; absent when none was admitted.
# TYPE quota_console_team_class_last_admission_timestamp_seconds gauge
quota_console_team_class_last_admission_timestamp_seconds{cluster_queue="hyperpod-ns-a-clusterqueue",priority_class="batch",team="a"} 1.772442e+09
quota_console_team_class_last_admission_timestamp_seconds{cluster_queue="hyperpod-ns-a-clusterqueue",priority_class="training",team="a"} 1.7724522e+09
# HELP quota_console_namespace_team Always 1: the team whose ClusterQueue a namespace's LocalQueues feed (one team per namespace), to join per-namespace metrics such as dcgm-exporter's with the teams.
# TYPE quota_console_namespace_team gauge
quota_console_namespace_team{team="a",team_namespace="hyperpod-ns-a"} 1
quota_console_namespace_team{team="b",team_namespace="hyperpod-ns-b"} 1
# HELP quota_console_instance_type_nodes Nodes of an instance type by state: ready (Ready and schedulable) or not_ready (not Ready, or cordoned).
# TYPE quota_console_instance_type_nodes gauge
quota_console_instance_type_nodes{instance_type="ml.p5.48xlarge",state="not_ready"} 1
quota_console_instance_type_nodes{instance_type="ml.p5.48xlarge",state="ready"} 2
# HELP quota_console_instance_type_ready_capacity What the ready nodes of an instance type offer (ready instances times the shape), by resource; cpu in cores, memory in bytes.
# TYPE quota_console_instance_type_ready_capacity gauge
quota_console_instance_type_ready_capacity{instance_type="ml.p5.48xlarge",resource="cpu"} 384
quota_console_instance_type_ready_capacity{instance_type="ml.p5.48xlarge",resource="memory"} 4.398046511104e+12
quota_console_instance_type_ready_capacity{instance_type="ml.p5.48xlarge",resource="nvidia.com/gpu"} 16
# HELP quota_console_instance_type_quota The console's teams' quota on an instance type summed over teams, by resource; cpu in cores, memory in bytes.
# TYPE quota_console_instance_type_quota gauge
quota_console_instance_type_quota{instance_type="ml.p5.48xlarge",resource="cpu"} 768
quota_console_instance_type_quota{instance_type="ml.p5.48xlarge",resource="memory"} 8.796093022208e+12
quota_console_instance_type_quota{instance_type="ml.p5.48xlarge",resource="nvidia.com/gpu"} 32
# HELP quota_console_team_instance_type_quota A console team's quota on an instance type, by resource; cpu in cores, memory in bytes.
# TYPE quota_console_team_instance_type_quota gauge
quota_console_team_instance_type_quota{cluster_queue="hyperpod-ns-a-clusterqueue",instance_type="ml.p5.48xlarge",resource="cpu",team="a"} 192
quota_console_team_instance_type_quota{cluster_queue="hyperpod-ns-a-clusterqueue",instance_type="ml.p5.48xlarge",resource="memory",team="a"} 2.199023255552e+12
quota_console_team_instance_type_quota{cluster_queue="hyperpod-ns-a-clusterqueue",instance_type="ml.p5.48xlarge",resource="nvidia.com/gpu",team="a"} 8
quota_console_team_instance_type_quota{cluster_queue="hyperpod-ns-b-clusterqueue",instance_type="ml.p5.48xlarge",resource="cpu",team="b"} 576
quota_console_team_instance_type_quota{cluster_queue="hyperpod-ns-b-clusterqueue",instance_type="ml.p5.48xlarge",resource="memory",team="b"} 6.597069766656e+12
quota_console_team_instance_type_quota{cluster_queue="hyperpod-ns-b-clusterqueue",instance_type="ml.p5.48xlarge",resource="nvidia.com/gpu",team="b"} 24
`
	// Gathering also checks that no series comes twice.
	if err := testutil.GatherAndCompare(f.console().Cluster, strings.NewReader(want), clusterMetricNames...); err != nil {
		t.Error(err)
	}
}

// clusterMetricNames are every metric RegisterCluster exports.
var clusterMetricNames = []string{
	"quota_console_read_model_snapshot_timestamp_seconds",
	"quota_console_team_nominal_quota", "quota_console_team_resource_usage", "quota_console_team_borrowed",
	"quota_console_team_lent", "quota_console_team_pending_demand", "quota_console_team_tasks",
	"quota_console_team_longest_wait_seconds", "quota_console_team_class_pending_tasks",
	"quota_console_team_class_longest_wait_seconds", "quota_console_team_class_last_admission_timestamp_seconds",
	"quota_console_namespace_team", "quota_console_instance_type_nodes", "quota_console_instance_type_ready_capacity",
	"quota_console_instance_type_quota", "quota_console_team_instance_type_quota",
}

// Before the caches sync, the snapshot has no time: no figure of it is
// exported (an alert would take zeros for facts), the nodes' still are.
func TestClusterMetricsWaitForTheFirstSnapshot(t *testing.T) {
	f := newClusterFixture(t)
	f.snap = domain.NewModel(domain.DefaultSettings).Snapshot(time.Time{})
	f.teams = nil
	want := `
# HELP quota_console_instance_type_nodes Nodes of an instance type by state: ready (Ready and schedulable) or not_ready (not Ready, or cordoned).
# TYPE quota_console_instance_type_nodes gauge
quota_console_instance_type_nodes{instance_type="ml.p5.48xlarge",state="not_ready"} 1
quota_console_instance_type_nodes{instance_type="ml.p5.48xlarge",state="ready"} 2
# HELP quota_console_instance_type_ready_capacity What the ready nodes of an instance type offer (ready instances times the shape), by resource; cpu in cores, memory in bytes.
# TYPE quota_console_instance_type_ready_capacity gauge
quota_console_instance_type_ready_capacity{instance_type="ml.p5.48xlarge",resource="cpu"} 384
quota_console_instance_type_ready_capacity{instance_type="ml.p5.48xlarge",resource="memory"} 4.398046511104e+12
quota_console_instance_type_ready_capacity{instance_type="ml.p5.48xlarge",resource="nvidia.com/gpu"} 16
`
	if err := testutil.GatherAndCompare(f.console().Cluster, strings.NewReader(want), clusterMetricNames...); err != nil {
		t.Error(err)
	}
}

// The waits are as of the snapshot, whose time the read model moves on
// every few seconds: not as of the scrape.
func TestClusterMetricsWaitsAreAsOfTheSnapshot(t *testing.T) {
	f := newClusterFixture(t)
	if got := valueOf(t, f.console(), "quota_console_team_longest_wait_seconds", "team", "b"); got != 5400 {
		t.Errorf("longest wait %v, want 5400", got)
	}
	model := domain.NewModel(domain.DefaultSettings)
	model.Load(f.input)
	f.snap = model.Snapshot(f.now.Add(10 * time.Minute))
	if got := valueOf(t, f.console(), "quota_console_team_longest_wait_seconds", "team", "b"); got != 6000 {
		t.Errorf("longest wait 10 minutes later %v, want 6000", got)
	}
}

// valueOf is the value of the one gauge or counter series of name whose label key has value.
func valueOf(t *testing.T, c *Console, name, key, value string) float64 {
	t.Helper()
	fams, err := prometheus.Gatherers{c.Registry, c.Cluster}.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, fam := range fams {
		if fam.GetName() != name {
			continue
		}
		for _, m := range fam.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == key && l.GetValue() == value {
					if m.Counter != nil {
						return m.GetCounter().GetValue()
					}
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatalf("no %s{%s=%q}", name, key, value)
	return 0
}

// The figures name every team: they are never in the registry the pages'
// public /metrics serves.
func TestClusterMetricsAreNotOnThePagesRegistry(t *testing.T) {
	f := newClusterFixture(t)
	n, err := testutil.GatherAndCount(f.console().Registry, clusterMetricNames...)
	if err != nil || n != 0 {
		t.Errorf("%d series of the cluster figures in Registry (%v), want none", n, err)
	}
}
