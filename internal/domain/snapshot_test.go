package domain

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/openquota/console/internal/kueuetest"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// testCQ starts a team's ClusterQueue in the default cohort.
func testCQ(team string) *kueuetest.ClusterQueueWrapper {
	return kueuetest.MakeClusterQueue(DefaultSettings.ClusterQueue(team)).Cohort(DefaultSettings.Cohort)
}

func TestTeamUsageAndLending(t *testing.T) {
	cqs := []*kueuev1beta2.ClusterQueue{
		testCQ("a").Nominal(8, nil).Usage(2, 0).Obj(),
		testCQ("b").Nominal(4, nil).Usage(10, 6).Obj(),
		testCQ("c").Nominal(4, nil).Usage(0, 0).Stopped().Obj(),
		testCQ("d").Nominal(4, ptr.To[int64](0)).Usage(0, 0).Obj(), // DontLend: lends nothing
	}
	now := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	pending := newWorkload(DefaultSettings.Namespace("c"), "wait").Queue("lq").GPUs(4, 1).Created(now.Add(-time.Minute)).Obj()
	snap := BuildSnapshot(SnapshotInput{Settings: DefaultSettings, ClusterQueues: cqs, Workloads: []*kueuev1beta2.Workload{pending}}, now)

	type row struct {
		Team                                   string
		Enabled                                bool
		Allocated, InUse, Borrowed, Lent, Want int64
		Pending                                int
	}
	var got []row
	for _, r := range snap.Teams {
		got = append(got, row{r.Team, r.Enabled, r.Allocated.GPUs, r.InUse.GPUs, r.Borrowed.GPUs, r.Lent.GPUs, r.PendingDemand.GPUs, r.Pending})
	}
	// b borrows 6; a has 6 idle, c has 4 idle: a lent 3.6 → 4, c 2.4 → 2; d lends nothing.
	want := []row{
		{"a", true, 8, 2, 0, 4, 0, 0},
		{"b", true, 4, 10, 6, 0, 0, 0},
		{"c", false, 4, 0, 0, 2, 4, 1},
		{"d", true, 4, 0, 0, 0, 0, 0},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("team usage (-want +got):\n%s", diff)
	}
	total := Totals(snap.Teams)
	if total.Allocated.GPUs != 20 || total.Borrowed.GPUs != 6 || total.Lent.GPUs != 6 {
		t.Errorf("totals: %+v", total)
	}
}

// What waiting tasks ask for counts in every resource the usage pages
// show: a queue of Kueue's examples waits for vCPU and memory, a Trainium
// team for Neuron devices; a running task asks for nothing more, and a
// preempted one waits again.
func TestPendingDemandCountsEveryResource(t *testing.T) {
	now := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	ns := DefaultSettings.Namespace("c")
	pod := func(cpu, memory, neuron string) corev1.PodSpec {
		req := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}
		if neuron != "" {
			req[ResourceNeuron] = resource.MustParse(neuron)
		}
		return corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{Requests: req}}}}
	}
	wls := []*kueuev1beta2.Workload{
		newWorkload(ns, "cpu").Queue("lq").PodSpec("main", 3, pod("1", "200Mi", "")).Created(now.Add(-time.Minute)).Obj(),
		newWorkload(ns, "trn").Queue("lq").PodSpec("main", 2, pod("8", "64Gi", "16")).Created(now.Add(-time.Minute)).Obj(),
		newWorkload(ns, "again").Queue("lq").GPUs(2, 1).Created(now.Add(-time.Hour)).Admitted(now.Add(-time.Hour), "ml.p5.48xlarge").
			Preempted(now.Add(-time.Minute), kueuev1beta2.InCohortReclamationReason, "Preempted to accommodate a workload").Obj(),
		newWorkload(ns, "runs").Queue("lq").GPUs(4, 1).Created(now.Add(-time.Hour)).In(DefaultSettings.ClusterQueue("c")).
			Admitted(now.Add(-time.Hour), "ml.p5.48xlarge").Obj(),
	}
	snap := BuildSnapshot(SnapshotInput{Settings: DefaultSettings, ClusterQueues: []*kueuev1beta2.ClusterQueue{testCQ("c").Nominal(8, nil).Obj()},
		LocalQueues: []*kueuev1beta2.LocalQueue{kueuetest.MakeLocalQueue(ns, "lq", DefaultSettings.ClusterQueue("c"))}, Workloads: wls}, now)
	want := Amount{GPUs: 2, Neuron: 32, CPUMilli: 3*1000 + 2*8000 + 1000, MemoryMiB: 3*200 + 2*64*1024}
	if diff := cmp.Diff(want, snap.Teams[0].PendingDemand); diff != "" {
		t.Errorf("team c's pending demand (-want +got):\n%s", diff)
	}
}

// A queue Kueue keeps inactive says why in Kueue's words; a stopped one
// says nothing more (the usage page marks it disabled), nor an active one.
func TestInactiveQueuesSayWhy(t *testing.T) {
	inactive := testCQ("a").Nominal(8, nil).Obj()
	inactive.Status.Conditions = []metav1.Condition{{Type: kueuev1beta2.ClusterQueueActive, Status: metav1.ConditionFalse,
		Reason: kueuev1beta2.ClusterQueueActiveReasonAdmissionCheckInactive, Message: "Can't admit new workloads: references inactive AdmissionCheck(s): sample-prov."}}
	stopped := testCQ("b").Nominal(8, nil).Stopped().Obj()
	stopped.Status.Conditions = []metav1.Condition{{Type: kueuev1beta2.ClusterQueueActive, Status: metav1.ConditionFalse,
		Reason: kueuev1beta2.ClusterQueueActiveReasonStopped, Message: "Can't admit new workloads: is stopped."}}
	active := testCQ("c").Nominal(8, nil).Obj()
	active.Status.Conditions = []metav1.Condition{{Type: kueuev1beta2.ClusterQueueActive, Status: metav1.ConditionTrue,
		Reason: kueuev1beta2.ClusterQueueActiveReasonReady, Message: "Can admit new workloads"}}
	snap := BuildSnapshot(SnapshotInput{Settings: DefaultSettings, ClusterQueues: []*kueuev1beta2.ClusterQueue{inactive, stopped, active}}, time.Now())
	got := map[string]string{}
	for _, r := range snap.Teams {
		got[r.Team] = r.Inactive
	}
	want := map[string]string{"a": "Can't admit new workloads: references inactive AdmissionCheck(s): sample-prov.", "b": "", "c": ""}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("why each queue admits nothing (-want +got):\n%s", diff)
	}
}

func TestClassOrder(t *testing.T) {
	p := Policy{Classes: []PriorityClass{{Name: "low", Weight: 10}, {Name: "high", Weight: 90}}}
	other := &kueuev1beta2.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "theirs"}, Value: 50}
	if diff := cmp.Diff([]string{"high", "theirs", "low"}, classOrder(p, []*kueuev1beta2.WorkloadPriorityClass{other}, nil)); diff != "" {
		t.Errorf("class order (-want +got):\n%s", diff)
	}
	// Kubernetes PriorityClasses go by the priority of their tasks; a name
	// that is a WorkloadPriorityClass too is that one.
	pods := map[string]int32{"system-critical": 1000, "spot": -5, "theirs": 7}
	if diff := cmp.Diff([]string{"system-critical", "high", "theirs", "low", "spot"}, classOrder(p, []*kueuev1beta2.WorkloadPriorityClass{other}, pods)); diff != "" {
		t.Errorf("class order with Kubernetes PriorityClasses (-want +got):\n%s", diff)
	}
}

// Jobs with a priorityClassName (and no Kueue class label) name a
// Kubernetes PriorityClass: the class is one of the dashboard's while a
// task names it, in the order of its priority, and never the class of
// tasks that name none.
func TestClassesOfKubernetesPriorityClasses(t *testing.T) {
	s := DefaultSettings
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	objs := kueuetest.Cluster(s, s.Cohort, 2, 0, now)
	m := NewModel(s)
	m.Load(SnapshotInput{Settings: s, ClusterQueues: objs.ClusterQueues, LocalQueues: objs.LocalQueues, Classes: objs.Classes})
	before := m.Snapshot(now)
	lowest := before.LowestClass()
	ns, lq := s.Namespace("team-000"), s.LocalQueue("team-000")
	pending := func(name string) *kueuetest.WorkloadWrapper {
		return kueuetest.MakeWorkload(s, ns, name).Queue(lq).GPUs(1, 1).Created(now).Pending("Pending", "waits for quota", now)
	}
	m.SetWorkload(pending("urgent").PodClass("business-critical", 1_000_000).Obj())
	m.SetWorkload(pending("urgent-2").PodClass("business-critical", 1_000_000).Obj())
	m.SetWorkload(pending("scavenger").PodClass("preemptible", -10).Obj())
	m.SetWorkload(pending("plain").Obj())
	snap := m.Snapshot(now)

	want := append(append([]string{"business-critical"}, before.Classes...), "preemptible")
	if diff := cmp.Diff(want, snap.Classes); diff != "" {
		t.Errorf("classes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int32{"business-critical": 1_000_000, "preemptible": -10}, snap.PodClasses); diff != "" {
		t.Errorf("Kubernetes PriorityClasses (-want +got):\n%s", diff)
	}
	if snap.LowestClass() != lowest || lowest == "" {
		t.Errorf("lowest class = %q, want %q as before", snap.LowestClass(), lowest)
	}
	classOf := map[string]string{}
	for _, task := range snap.Tasks(TaskQuery{State: ListAll}) {
		classOf[task.Name] = task.Class
	}
	if diff := cmp.Diff(map[string]string{"urgent": "business-critical", "urgent-2": "business-critical", "scavenger": "preemptible", "plain": lowest}, classOf); diff != "" {
		t.Errorf("each task's class (-want +got):\n%s", diff)
	}

	m.DeleteWorkload(ns, "scavenger")
	m.DeleteWorkload(ns, "urgent")
	snap = m.Snapshot(now)
	if diff := cmp.Diff(append([]string{"business-critical"}, before.Classes...), snap.Classes); diff != "" {
		t.Errorf("classes once no task names preemptible (-want +got):\n%s", diff)
	}
	if c := ChangesBetween(before, snap); !c.Everything {
		t.Errorf("changes = %+v, want every view to redraw for a new class", c)
	}
}

// Kueue's visibility API answers a while before the snapshot: a task it
// named may have been admitted since, a new one is not named yet. Each
// queued task still has one place, from 1, Kueue's order first.
func TestQueuePositions(t *testing.T) {
	s := DefaultSettings
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	objs := kueuetest.Cluster(s, s.Cohort, 1, 0, now)
	ns, lq := s.Namespace("team-000"), s.LocalQueue("team-000")
	for i, name := range []string{"a", "b", "c", "d"} {
		objs.Workloads = append(objs.Workloads, kueuetest.MakeWorkload(s, ns, name).Queue(lq).GPUs(1, 1).
			Created(now.Add(time.Duration(i)*time.Minute)).Pending("Pending", "waits for quota", now).Obj())
	}
	snap := BuildSnapshot(SnapshotInput{Settings: s, ClusterQueues: objs.ClusterQueues, LocalQueues: objs.LocalQueues, Workloads: objs.Workloads, Classes: objs.Classes}, now)
	cq := objs.ClusterQueues[0].Name
	key := func(name string) string { return LocalQueueKey(ns, name) }
	for _, tc := range []struct {
		name  string
		kueue map[string]int
		want  map[string]int
	}{
		{"Kueue did not answer: the console's order", nil, map[string]int{"a": 1, "b": 2, "c": 3, "d": 4}},
		{"Kueue's order", map[string]int{key("c"): 0, key("a"): 1, key("b"): 2, key("d"): 3}, map[string]int{"c": 1, "a": 2, "b": 3, "d": 4}},
		{"an answer older than the snapshot", map[string]int{key("c"): 0, key("admitted-since"): 1, key("a"): 2, key("b"): 7},
			map[string]int{"c": 1, "a": 2, "b": 3, "d": 4}},
	} {
		got := map[string]int{}
		places := snap.QueuePositions(cq, tc.kueue)
		for _, f := range snap.Tasks(TaskQuery{State: ListAll}) {
			if p, ok := places.Of(f); ok {
				got[f.Name] = p
			}
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: places (-want +got):\n%s", tc.name, diff)
		}
	}
	if _, ok := snap.QueuePositions("no-such-queue", nil).Of(snap.Tasks(TaskQuery{State: ListAll})[0]); ok {
		t.Error("a queue without tasks gives a place")
	}
}
