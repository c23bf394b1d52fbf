package domain

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/kueuetest"
)

func TestInsights(t *testing.T) {
	s := DefaultSettings
	now := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	cq := func(team string, total, borrowed int64) *kueuev1beta2.ClusterQueue {
		return kueuetest.MakeClusterQueue(s.ClusterQueue(team)).Cohort(s.Cohort).Nominal(8, nil).Usage(total, borrowed).Obj()
	}
	in := SnapshotInput{Settings: s,
		ClusterQueues: []*kueuev1beta2.ClusterQueue{cq("alpha", 12, 4), cq("beta", 0, 0)},
		LocalQueues: []*kueuev1beta2.LocalQueue{
			kueuetest.MakeLocalQueue(s.Namespace("alpha"), s.LocalQueue("alpha"), s.ClusterQueue("alpha")),
			kueuetest.MakeLocalQueue(s.Namespace("beta"), s.LocalQueue("beta"), s.ClusterQueue("beta"))},
		Workloads: []*kueuev1beta2.Workload{
			kueuetest.MakeWorkload(s, s.Namespace("alpha"), "serve").Queue(s.LocalQueue("alpha")).Class("inference").GPUs(12, 1).
				Created(now.Add(-5*time.Hour)).Admitted(now.Add(-5*time.Hour), "ml.p5.48xlarge").Obj(),
			kueuetest.MakeWorkload(s, s.Namespace("beta"), "train").Queue(s.LocalQueue("beta")).Class("training").GPUs(4, 1).
				Created(now.Add(-3*time.Hour)).Pending("Pending", "couldn't assign flavors", now.Add(-3*time.Hour)).Obj(),
		}}
	snap := BuildSnapshot(in, now)
	got := Insights(InsightInput{Snapshot: snap, Now: now, Thresholds: DefaultInsightThresholds,
		Capacity:    []InstanceTypeCapacity{{Type: "ml.p5.48xlarge", Count: 2, Ready: 1, NotReady: 1, GPUs: 16}},
		Utilization: map[string]float64{"alpha": 4, "beta": 80},
		Unavailable: []string{"Prometheus does not answer."}})
	var rules []string
	for _, i := range got {
		rules = append(rules, i.Severity.String()+" "+i.Rule+" "+i.Team+": "+i.Title)
	}
	want := []string{
		"critical starving-class : Class training: 1 task waiting, none admitted in 1h 00m",
		"warning dependency : Prometheus does not answer.",
		"warning idle-gpus alpha: Team alpha holds 12 GPUs at 4 % utilization",
		"warning long-wait beta: Team beta: 1 task of class training waiting, the longest for 3h 00m",
		"warning quota-beyond-capacity : 16 GPUs of quota on ml.p5.48xlarge, 8 on its ready nodes",
		"info borrowing alpha: Team alpha borrows 4 GPUs while team beta, which lends, waits for 4 GPUs",
		"info not-ready-nodes : 1 of 2 ml.p5.48xlarge nodes not ready",
	}
	if diff := cmp.Diff(want, rules); diff != "" {
		t.Errorf("insights (-want +got):\n%s", diff)
	}
	if got[3].Link != "/tasks?class=training&state=Queued&team=beta" {
		t.Errorf("the long wait links to %q", got[3].Link)
	}

	// The policy's thresholds: a class's own long wait wins over the
	// policy's, and a higher idle threshold finds beta's GPUs idle too.
	p := Policy{Alerts: PolicyAlerts{LongWaitMinutes: 240, IdleUtilizationPercent: 90},
		Classes: []PriorityClass{{Name: "training", LongWaitMinutes: 120}, {Name: "inference"}}}
	th := p.InsightThresholds()
	if diff := cmp.Diff(InsightThresholds{LongWait: 4 * time.Hour, IdleUtilization: 90,
		ClassLongWait: map[string]time.Duration{"training": 2 * time.Hour}, SustainedBorrowing: 2 * time.Hour}, th); diff != "" {
		t.Errorf("thresholds (-want +got):\n%s", diff)
	}
	var waits []string
	for _, i := range Insights(InsightInput{Snapshot: snap, Now: now, Thresholds: th}) {
		if i.Rule == "long-wait" || i.Rule == "starving-class" {
			waits = append(waits, i.Rule+" "+i.Evidence)
		}
	}
	if len(waits) != 2 || !strings.Contains(waits[1], "Over the 2h 00m threshold") {
		t.Errorf("with training's own 2 h, its 3 h wait: %v", waits)
	}
	p.Classes[0].LongWaitMinutes = 0 // the policy's 4 h: a 3 h wait is fine
	for _, i := range Insights(InsightInput{Snapshot: snap, Now: now, Thresholds: p.InsightThresholds()}) {
		if i.Rule == "long-wait" || i.Rule == "starving-class" {
			t.Errorf("under a 4 h threshold a 3 h wait is an insight: %+v", i)
		}
	}
	if got := DefaultPolicy.InsightThresholds(); !cmp.Equal(got, DefaultInsightThresholds) {
		t.Errorf("a policy without alerts has thresholds %+v", got)
	}

	// A class that runs but admitted nothing within the threshold starves
	// too: alpha's inference task has run for 5 h, its next waits for 2 h.
	in.Workloads = append(in.Workloads, kueuetest.MakeWorkload(s, s.Namespace("alpha"), "serve-next").Queue(s.LocalQueue("alpha")).
		Class("inference").GPUs(1, 1).Created(now.Add(-2*time.Hour)).Pending("Pending", "", now.Add(-2*time.Hour)).Obj())
	var starving []string
	for _, i := range Insights(InsightInput{Snapshot: BuildSnapshot(in, now), Now: now, Thresholds: DefaultInsightThresholds}) {
		if i.Rule == "starving-class" {
			starving = append(starving, i.Title+" "+i.Evidence)
		}
	}
	if len(starving) != 2 || !strings.Contains(strings.Join(starving, "\n"), "Class inference: 1 task waiting, none admitted in 1h 00m The last admission of the class was 5h 00m ago. 1 of the class run") {
		t.Errorf("starving classes: %q", starving)
	}

	// Idle GPUs are judged each on its own average over the hour where it
	// is known: alpha at 4 % now but 50 % over the hour is not idle; at 80 %
	// now but 5 % over the hour it is; and when 9 of its 12 GPUs work hard
	// over the hour, the 3 that do not are idle, though the team's average
	// (72 %) is high.
	busy := func(n int, v float64) []float64 {
		out := make([]float64, n)
		for i := range out {
			out[i] = v
		}
		return out
	}
	idle := func(current map[string]float64, hour map[string][]float64) Insight {
		for _, i := range Insights(InsightInput{Snapshot: snap, Now: now, Thresholds: DefaultInsightThresholds, Utilization: current, GPUsOverWindow: hour}) {
			if i.Rule == "idle-gpus" {
				return i
			}
		}
		return Insight{}
	}
	if got := idle(map[string]float64{"alpha": 4}, map[string][]float64{"alpha": busy(12, 50)}); got.Rule != "" {
		t.Errorf("busy over the hour, idle now: %+v", got)
	}
	if got := idle(map[string]float64{"alpha": 80}, map[string][]float64{"alpha": busy(12, 5)}); got.Title != "Team alpha holds 12 GPUs at 5 % utilization" ||
		!strings.Contains(got.Evidence, "12 of its 12 GPUs worked under 10 % (hardware utilization, dcgm-exporter, each GPU averaged over the last 1h 00m)") {
		t.Errorf("idle over the hour: %+v", got)
	}
	mixed := append(busy(9, 95), 1, 2, 3)
	if got := idle(map[string]float64{"alpha": 72}, map[string][]float64{"alpha": mixed}); got.Title != "Team alpha holds 3 GPUs at 2 % utilization" ||
		!strings.Contains(got.Evidence, "3 of its 12 GPUs worked under 10 %") || !strings.Contains(got.Evidence, "3 GPU-hours an hour are held without work") {
		t.Errorf("3 idle GPUs among 12: %+v", got)
	}
	// More readings than GPUs Kueue says it holds (a pod gone, its series
	// not yet): never more idle than held.
	if got := idle(nil, map[string][]float64{"alpha": busy(20, 0)}); got.Title != "Team alpha holds 12 GPUs at 0 % utilization" {
		t.Errorf("20 readings for 12 GPUs: %+v", got)
	}
	// The headline counts idle GPUs by the same reading.
	for name, tc := range map[string]struct {
		hour map[string][]float64
		want int64
	}{"busy": {map[string][]float64{"alpha": busy(12, 50)}, 0}, "idle": {map[string][]float64{"alpha": busy(12, 5)}, 12},
		"3 of 12": {map[string][]float64{"alpha": mixed}, 3}} {
		in := InsightInput{Snapshot: snap, Now: now, Thresholds: DefaultInsightThresholds,
			Utilization: map[string]float64{"alpha": 50}, GPUsOverWindow: tc.hour}
		if h := HeadlineOf(in); h.Idle != tc.want || !h.IdleKnown {
			t.Errorf("%s: the headline counts %d idle GPUs (known %v), want %d", name, h.Idle, h.IdleKnown, tc.want)
		}
	}
	if h := HeadlineOf(InsightInput{Snapshot: snap, Now: now, Thresholds: DefaultInsightThresholds}); h.IdleKnown {
		t.Errorf("without Prometheus the idle GPUs are known: %+v", h)
	}

	// Borrowing seen since 3 h ago is sustained: a warning with how long;
	// seen since 1 h ago, still a note.
	since := TrackBorrowing(nil, snap.Teams, now.Add(-3*time.Hour))
	if diff := cmp.Diff(map[string]time.Time{"alpha": now.Add(-3 * time.Hour)}, TrackBorrowing(since, snap.Teams, now)); diff != "" {
		t.Errorf("TrackBorrowing keeps the first sighting (-want +got):\n%s", diff)
	}
	for seen, want := range map[time.Duration]string{3 * time.Hour: "warning Team alpha borrows 4 GPUs while team beta, which lends, waits for 4 GPUs, borrowing for 3h 00m",
		time.Hour: "info Team alpha borrows 4 GPUs while team beta, which lends, waits for 4 GPUs"} {
		found := ""
		for _, i := range Insights(InsightInput{Snapshot: snap, Now: now, Thresholds: DefaultInsightThresholds,
			BorrowingSince: map[string]time.Time{"alpha": now.Add(-seen)}}) {
			if i.Rule == "borrowing" {
				found = i.Severity.String() + " " + i.Title
			}
		}
		if found != want {
			t.Errorf("borrowing seen for %s: %q, want %q", seen, found, want)
		}
	}
	if got := TrackBorrowing(since, nil, now); len(got) != 0 {
		t.Errorf("a team that stopped borrowing is still tracked: %v", got)
	}

	// Below every threshold, nothing needs attention.
	calm := Insights(InsightInput{Snapshot: snap, Now: now.Add(-150 * time.Minute), Thresholds: DefaultInsightThresholds,
		Capacity: []InstanceTypeCapacity{{Type: "ml.p5.48xlarge", Count: 2, Ready: 2, GPUs: 16}}, Utilization: map[string]float64{"alpha": 50}})
	for _, i := range calm {
		if i.Rule != "borrowing" {
			t.Errorf("a calm cluster has insight %+v", i)
		}
	}
}

// The model dates each team's borrowing from the snapshot that first saw
// it, keeps the date while it lasts, and starts again after a break.
func TestModelDatesBorrowing(t *testing.T) {
	s := DefaultSettings
	t0 := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	m := NewModel(s)
	set := func(used, borrowed int64) {
		m.SetClusterQueue(kueuetest.MakeClusterQueue(s.ClusterQueue("alpha")).Cohort(s.Cohort).Nominal(8, nil).Usage(used, borrowed).Obj())
	}
	for _, step := range []struct {
		at             time.Duration
		used, borrowed int64
		since          time.Duration // -1: not borrowing
	}{
		{0, 10, 2, 0}, {time.Hour, 12, 4, 0}, {2 * time.Hour, 6, 0, -1}, {3 * time.Hour, 9, 1, 3 * time.Hour},
	} {
		set(step.used, step.borrowed)
		got, ok := m.Snapshot(t0.Add(step.at)).BorrowingSince["alpha"]
		switch {
		case step.since < 0 && ok:
			t.Errorf("at +%s, not borrowing, dated %s", step.at, got)
		case step.since >= 0 && (!ok || !got.Equal(t0.Add(step.since))):
			t.Errorf("at +%s borrowing since %s (%v), want %s", step.at, got, ok, t0.Add(step.since))
		}
	}
}

// A queue that admits nothing while tasks wait in it is an insight at
// once, not after the long-wait threshold: critical when Kueue keeps it
// inactive, a warning when an admin stopped it.
func TestAQueueThatAdmitsNothingWithTasksWaiting(t *testing.T) {
	s := DefaultSettings
	now := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	inactive := kueuetest.MakeClusterQueue("cluster-queue").Nominal(4, nil).Obj()
	inactive.Status.Conditions = []metav1.Condition{{Type: kueuev1beta2.ClusterQueueActive, Status: metav1.ConditionFalse,
		Reason: kueuev1beta2.ClusterQueueActiveReasonAdmissionCheckInactive, Message: "Can't admit new workloads: references inactive AdmissionCheck(s): sample-prov."}}
	stopped := kueuetest.MakeClusterQueue(s.ClusterQueue("beta")).Nominal(4, nil).Stopped().Obj()
	idle := kueuetest.MakeClusterQueue(s.ClusterQueue("gamma")).Nominal(4, nil).Stopped().Obj() // nothing waits
	in := SnapshotInput{Settings: s, ClusterQueues: []*kueuev1beta2.ClusterQueue{inactive, stopped, idle},
		LocalQueues: []*kueuev1beta2.LocalQueue{kueuetest.MakeLocalQueue("default", "user-queue", "cluster-queue"),
			kueuetest.MakeLocalQueue(s.Namespace("beta"), s.LocalQueue("beta"), s.ClusterQueue("beta"))},
		Workloads: []*kueuev1beta2.Workload{
			kueuetest.MakeWorkload(s, "default", "sample-job").Queue("user-queue").GPUs(1, 1).Created(now.Add(-time.Minute)).Obj(),
			kueuetest.MakeWorkload(s, s.Namespace("beta"), "train").Queue(s.LocalQueue("beta")).GPUs(1, 1).Created(now.Add(-time.Minute)).Obj(),
		}}
	var got []string
	for _, i := range Insights(InsightInput{Snapshot: BuildSnapshot(in, now), Now: now, Thresholds: DefaultInsightThresholds}) {
		if i.Rule == "queue-admits-nothing" {
			got = append(got, i.Severity.String()+" "+i.Team+": "+i.Title+" "+i.Evidence)
		}
	}
	want := []string{
		"critical cluster-queue: Team cluster-queue: 1 task waiting in a queue that admits nothing They wait until its queue changes: Kueue keeps its queue inactive: Can't admit new workloads: references inactive AdmissionCheck(s): sample-prov.",
		"warning beta: Team beta: 1 task waiting in a queue that admits nothing They wait until its queue changes: its queue is stopped.",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("insights (-want +got):\n%s", diff)
	}
}
