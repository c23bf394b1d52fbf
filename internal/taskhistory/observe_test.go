package taskhistory

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/kueuetest"
)

var t0 = time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC)

func min_(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }

// kinds lists the events' kinds and times, for short comparisons.
func kinds(es []Event) []string {
	var out []string
	for _, e := range es {
		out = append(out, string(e.Kind)+"@"+e.At.Sub(t0).String())
	}
	return out
}

// A Workload's life, state by state: each Diff yields exactly the events
// that state adds, and a summary whose times are domain.FactsOf's.
func TestDiffFollowsALife(t *testing.T) {
	w := newWL("nlp", "train", min_(0)).class("training", 100).pods(2, 4)
	preemptor := "uid-cv-urgent"
	msg := preemptionMsg(preemptor, "reclamation within the cohort", "hyperpod-ns-cv-clusterqueue", "hyperpod-ns-nlp-clusterqueue")
	steps := []struct {
		name   string
		state  *kueuev1beta2.Workload
		events []string
		check  func(t *testing.T, c Change)
	}{
		{"created", w.snap(), nil, func(t *testing.T, c Change) {
			want := Task{UID: "uid-nlp-train", Namespace: "hyperpod-ns-nlp", Name: "train", OwnerKind: "Job", OwnerName: "train", OwnerUID: "job-train",
				Team: "nlp", Class: "training", Priority: 100, LocalQueue: "hyperpod-ns-nlp-localqueue", Created: min_(0),
				Requests: Resources{GPUs: 8, CPUMilli: 8000, MemoryMiB: 32768},
				PodSets:  []PodSetRequest{{Name: "main", Count: 2, Amount: Resources{GPUs: 8, CPUMilli: 8000, MemoryMiB: 32768}}},
				State:    domain.TaskPending, WaitStart: min_(0)}
			if diff := cmp.Diff(want, c.Task, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("task (-want +got):\n%s", diff)
			}
		}},
		{"pending", w.pending(min_(1)).snap(), nil, nil},
		{"admitted", w.admit(min_(5), "ml.p5.48xlarge").snap(), []string{"quota_reserved@5m0s", "admitted@5m0s"}, func(t *testing.T, c Change) {
			if c.Task.AdmittedAt != min_(5) || c.Task.Wait != 5*time.Minute || c.Task.ClusterQueue != "hyperpod-ns-nlp-clusterqueue" {
				t.Errorf("admitted at %v, wait %v, queue %q", c.Task.AdmittedAt, c.Task.Wait, c.Task.ClusterQueue)
			}
			want := []FlavorUsage{{Flavor: "ml.p5.48xlarge", Amount: Resources{GPUs: 8, CPUMilli: 8000, MemoryMiB: 32768}}}
			if diff := cmp.Diff(want, c.Events[1].Usage); diff != "" {
				t.Errorf("admitted usage (-want +got):\n%s", diff)
			}
		}},
		{"preempted", w.preempt(min_(65), kueuev1beta2.InCohortReclamationReason, msg).snap(), []string{"evicted@1h5m0s", "preempted@1h5m0s"}, func(t *testing.T, c Change) {
			p := c.Events[1]
			if want := (Preemptor{UID: preemptor, JobUID: "job-" + preemptor, ClusterQueue: "hyperpod-ns-cv-clusterqueue",
				Path: "/shared-pool/hyperpod-ns-cv-clusterqueue"}); p.Preemptor != want {
				t.Errorf("preemptor %+v, want %+v", p.Preemptor, want)
			}
			if p.ReasonWords != "Preempted: team cv reclaimed its lent quota" {
				t.Errorf("reason in words %q", p.ReasonWords)
			}
			if c.Task.State != domain.TaskPreempted || c.Task.AdmittedAt != min_(5) {
				t.Errorf("while its pods stop: state %s, admitted %v", c.Task.State, c.Task.AdmittedAt)
			}
		}},
		{"released", w.release(min_(66)).snap(), nil, func(t *testing.T, c Change) {
			if !c.Task.AdmittedAt.IsZero() || c.Task.ReleasedAt != min_(66) || c.Task.PastExecution != 61*time.Minute {
				t.Errorf("released: admitted %v, released %v, past %v", c.Task.AdmittedAt, c.Task.ReleasedAt, c.Task.PastExecution)
			}
		}},
		{"requeued", w.requeue(min_(70)).snap(), []string{"requeued@1h10m0s"}, func(t *testing.T, c Change) {
			if c.Task.WaitStart != min_(70) {
				t.Errorf("wait start %v, want the requeue", c.Task.WaitStart)
			}
		}},
		{"admitted again", w.admit(min_(80), "ml.p5.48xlarge").snap(), []string{"quota_reserved@1h20m0s", "admitted@1h20m0s"}, func(t *testing.T, c Change) {
			if c.Task.Wait != 10*time.Minute {
				t.Errorf("wait %v, want from the requeue to the second admission", c.Task.Wait)
			}
		}},
		{"finished", w.finish(min_(140), kueuev1beta2.WorkloadFinishedReasonSucceeded).snap(), []string{"finished@2h20m0s"}, func(t *testing.T, c Change) {
			if c.Task.Outcome != OutcomeSucceeded || c.Task.Run != 60*time.Minute+61*time.Minute || c.Task.State != domain.TaskFinished {
				t.Errorf("finished: outcome %q, run %v, state %s", c.Task.Outcome, c.Task.Run, c.Task.State)
			}
		}},
	}
	var prev *kueuev1beta2.Workload
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			c, ok := Diff(prev, st.state, teamPrefix)
			if prev != nil && !ok && (len(st.events) > 0 || st.check != nil) {
				t.Fatal("Diff found nothing to record")
			}
			if diff := cmp.Diff(st.events, kinds(c.Events)); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if st.check != nil {
				st.check(t, c)
			}
			// The summary is domain.FactsOf's, whatever the state.
			live := domain.FactsOf(st.state, domain.Settings{NamespacePrefix: teamPrefix}, "").At(t0, 0, false)
			if c.Task.AdmittedAt != live.AdmittedAt || c.Task.WaitStart != live.WaitStart || c.Task.FinishedAt != live.FinishedAt || c.Task.State != live.State {
				t.Errorf("summary times differ from domain.FactsOf: %+v vs %+v", c.Task, live)
			}
		})
		prev = st.state
	}

	// A first sight (an informer add, a backfill) shows every event the
	// state still shows; the earlier preemption is gone from the conditions.
	c, _ := Diff(nil, prev, teamPrefix)
	if diff := cmp.Diff([]string{"requeued@1h10m0s", "quota_reserved@1h20m0s", "admitted@1h20m0s", "finished@2h20m0s"}, kinds(c.Events)); diff != "" {
		t.Errorf("backfill events (-want +got):\n%s", diff)
	}
}

// Re-seeing a state records nothing: an informer resync, or a status
// change the history does not follow.
func TestDiffOfTheSameStateIsEmpty(t *testing.T) {
	w := newWL("nlp", "train", min_(0)).class("training", 100).pods(1, 8).admit(min_(2), "ml.p5.48xlarge")
	if c, ok := Diff(w.snap(), w.snap(), teamPrefix); ok {
		t.Errorf("resync recorded %+v", c)
	}
	other := w.snap()
	other.ResourceVersion = "99"
	other.Status.SchedulingStats = &kueuev1beta2.SchedulingStats{}
	if _, ok := Diff(w.snap(), other, teamPrefix); ok {
		t.Error("a status change the history ignores was recorded")
	}
}

// A Workload deleted before it finished ends at the deletion, its run
// counted to it; one deleted after finishing keeps its finish.
func TestGone(t *testing.T) {
	running := newWL("nlp", "run", min_(0)).pods(1, 2).admit(min_(10), "ml.g5.2xlarge").snap()
	c := Gone(running, teamPrefix, min_(40))
	if c.Task.Outcome != OutcomeDeleted || c.Task.FinishedAt != min_(40) || c.Task.Run != 30*time.Minute || c.Task.DeletedAt != min_(40) {
		t.Errorf("deleted while running: %+v", c.Task)
	}
	if got := kinds(c.Events); got[len(got)-1] != "deleted@40m0s" {
		t.Errorf("events %v end without the deletion", got)
	}
	done := newWL("nlp", "done", min_(0)).pods(1, 2).admit(min_(10), "ml.g5.2xlarge").finish(min_(20), "Failed").snap()
	done.DeletionTimestamp = ptr.To(metav1.NewTime(min_(30)))
	c = Gone(done, teamPrefix, min_(31))
	if c.Task.Outcome != OutcomeFailed || c.Task.FinishedAt != min_(20) || c.Task.Run != 10*time.Minute || c.Task.DeletedAt != min_(30) {
		t.Errorf("deleted after failing: %+v", c.Task)
	}
}

func TestQueueOf(t *testing.T) {
	q := resource.MustParse
	cq := &kueuev1beta2.ClusterQueue{
		ObjectMeta: metav1.ObjectMeta{Name: "hyperpod-ns-nlp-clusterqueue", Labels: map[string]string{domain.TeamLabel: "nlp"}},
		Spec: kueuev1beta2.ClusterQueueSpec{CohortName: "shared-pool", ResourceGroups: []kueuev1beta2.ResourceGroup{{
			Flavors: []kueuev1beta2.FlavorQuotas{{Name: "ml.p5.48xlarge", Resources: []kueuev1beta2.ResourceQuota{
				{Name: domain.ResourceGPU, NominalQuota: q("16"), BorrowingLimit: ptr.To(q("8")), LendingLimit: ptr.To(q("4"))},
				{Name: corev1.ResourceCPU, NominalQuota: q("384")},
				{Name: corev1.ResourceMemory, NominalQuota: q("4Ti")},
				{Name: "vpc.amazonaws.com/efa", NominalQuota: q("64")},
				{Name: "nvidia.com/mig-1g.10gb", NominalQuota: q("7")},
			}}},
		}}},
	}
	got := QueueOf(cq, teamPrefix, t0)
	want := QueueState{ClusterQueue: cq.Name, Team: "nlp", Cohort: "shared-pool", At: t0, Quotas: []Quota{
		{Flavor: "ml.p5.48xlarge", Resource: "nvidia.com/gpu", Nominal: 16, BorrowingLimit: ptr.To[int64](8), LendingLimit: ptr.To[int64](4)},
		{Flavor: "ml.p5.48xlarge", Resource: "cpu", Nominal: 384000},
		{Flavor: "ml.p5.48xlarge", Resource: "memory", Nominal: 4 << 20},
		{Flavor: "ml.p5.48xlarge", Resource: "nvidia.com/mig-1g.10gb", Nominal: 7},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("QueueOf (-want +got):\n%s", diff)
	}
}

func TestDurationsAreExact(t *testing.T) {
	var d Durations
	for _, x := range []time.Duration{time.Second + 1, 2*time.Second + 999_999, 0, -5} {
		d.Add(x)
	}
	if d.N != 4 || d.Max != 2*time.Second+999_999 || d.Avg() != (3*time.Second+1_000_000)/4 {
		t.Errorf("N %d Max %v Avg %v", d.N, d.Max, d.Avg())
	}
	// A million ten-hour runs: 3.6e19 ns overflows an int64, not Durations.
	var big Durations
	for range 1000 {
		big.Add(10 * time.Hour)
	}
	var all Durations
	for range 1000 {
		all.Merge(big)
	}
	if all.N != 1_000_000 || all.Avg() != 10*time.Hour {
		t.Errorf("a million ten-hour runs: N %d, average %v", all.N, all.Avg())
	}
}

// The live pages (the read model's tasks) and the history (observe, Diff)
// read the same Workloads alike: with pod overhead, several pod sets on
// several flavors, MIG slices, Neuron devices, reclaimed pods, admitted,
// pending, preempted and finished.
func TestLiveAndHistoryCountAlike(t *testing.T) {
	s := domain.Settings{NamespacePrefix: teamPrefix}
	q := resource.MustParse
	mk := func(team, name string) *kueuetest.WorkloadWrapper {
		return kueuetest.MakeWorkload(s, s.Namespace(team), name).WithUID("uid-" + name).Queue(s.LocalQueue(team)).Class("training").Created(min_(0))
	}
	workers := corev1.PodSpec{
		Containers: []corev1.Container{{Name: "w", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			domain.ResourceGPU: q("8"), corev1.ResourceCPU: q("96"), corev1.ResourceMemory: q("1Ti")}}}},
		Overhead: corev1.ResourceList{corev1.ResourceCPU: q("1"), corev1.ResourceMemory: q("1Gi")},
	}
	launcher := corev1.PodSpec{Containers: []corev1.Container{{Name: "l", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU: q("2"), corev1.ResourceMemory: q("4Gi")}}}}}
	migPod := corev1.PodSpec{Containers: []corev1.Container{{Name: "m", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
		"nvidia.com/mig-1g.10gb": q("1"), corev1.ResourceCPU: q("1")}}}}}
	neuronPod := corev1.PodSpec{Containers: []corev1.Container{{Name: "n", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
		domain.ResourceNeuron: q("16"), corev1.ResourceCPU: q("4")}}}}}
	preemption := preemptionMsg("uid-urgent", "reclamation within the cohort", "hyperpod-ns-cv-clusterqueue", "hyperpod-ns-nlp-clusterqueue")
	wls := []*kueuev1beta2.Workload{
		mk("nlp", "pending-overhead").PodSpec("workers", 2, workers).Obj(),
		mk("nlp", "two-flavors").PodSpec("launcher", 1, launcher).PodSpec("workers", 2, workers).
			AdmittedOn(min_(5), map[string]string{"launcher": "ml.c5.2xlarge", "workers": "ml.p5.48xlarge"}).Obj(),
		mk("cv", "mig").PodSpec("main", 2, migPod).Admitted(min_(6), "ml.p4d.24xlarge").Obj(),
		mk("cv", "neuron").PodSpec("main", 2, neuronPod).Admitted(min_(7), "ml.trn1.32xlarge").Obj(),
		mk("cv", "reclaimed").GPUs(8, 4).Admitted(min_(8), "ml.p5.48xlarge").Reclaimable("main", 1).Obj(),
		mk("nlp", "preempted").GPUs(8, 1).Admitted(min_(9), "ml.p5.48xlarge").
			Preempted(min_(30), kueuev1beta2.InCohortReclamationReason, preemption).Obj(),
		mk("nlp", "finished").GPUs(2, 1).Admitted(min_(10), "ml.g5.2xlarge").Finished(min_(40), kueuev1beta2.WorkloadFinishedReasonSucceeded).Obj(),
	}
	now := min_(60)
	snap := domain.BuildSnapshot(domain.SnapshotInput{Settings: s, Workloads: wls}, now)

	// figures are what both sides say of a task.
	type figures struct {
		Team, Class                                string
		State                                      domain.TaskState
		GPUs                                       int64
		Flavors                                    []string
		Usage                                      []domain.FlavorAmount
		Created, WaitStart, AdmittedAt, FinishedAt time.Time
		Wait, Run                                  time.Duration
		Preempted                                  string
	}
	for _, wl := range wls {
		t.Run(wl.Name, func(t *testing.T) {
			f := snap.Find(wl.Namespace, wl.Name)
			if f == nil {
				t.Fatal("not in the read model")
			}
			task := snap.Task(f)
			live := figures{Team: task.Team, Class: task.Class, State: task.State, GPUs: task.GPUs, Flavors: task.Flavors, Usage: f.Usage,
				Created: task.Created, WaitStart: task.WaitStart, AdmittedAt: task.AdmittedAt, FinishedAt: task.FinishedAt,
				Wait: task.Wait, Run: task.Run}
			if task.State == domain.TaskPreempted {
				live.Preempted = task.Reason
			}

			c := observe(wl, teamPrefix, now)
			hist := figures{Team: c.Task.Team, Class: c.Task.Class, State: c.Task.State, GPUs: c.Task.Requests.GPUs, Flavors: c.Task.Flavors,
				Created: c.Task.Created, WaitStart: c.Task.WaitStart, AdmittedAt: c.Task.AdmittedAt, FinishedAt: c.Task.FinishedAt,
				Wait: live.Wait, Run: c.Task.Run}
			if !c.Task.AdmittedAt.IsZero() { // the history keeps waits that ended in an admission
				hist.Wait = c.Task.Wait
			}
			for _, e := range c.Events {
				switch e.Kind {
				case EventAdmitted:
					hist.GPUs, hist.Usage = 0, e.Usage
					for _, u := range e.Usage {
						hist.GPUs += u.GPUs
					}
				case EventPreempted:
					hist.Preempted = e.ReasonWords
				}
			}
			if diff := cmp.Diff(live, hist, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("live and history differ (-live +history):\n%s", diff)
			}
		})
	}

	// And the figures are Kueue's.
	want := map[string][]domain.FlavorAmount{
		"two-flavors": {{Flavor: "ml.c5.2xlarge", Amount: Resources{CPUMilli: 2000, MemoryMiB: 4096}},
			{Flavor: "ml.p5.48xlarge", Amount: Resources{GPUs: 16, CPUMilli: 194_000, MemoryMiB: 2 * (1<<20 + 1024)}}},
		"mig":       {{Flavor: "ml.p4d.24xlarge", Amount: Resources{CPUMilli: 2000}, Partitions: map[string]int64{"mig-1g.10gb": 2}}},
		"neuron":    {{Flavor: "ml.trn1.32xlarge", Amount: Resources{Neuron: 32, CPUMilli: 8000}}},
		"reclaimed": {{Flavor: "ml.p5.48xlarge", Amount: Resources{GPUs: 24, CPUMilli: 3000}}},
		"finished":  {{Flavor: "ml.g5.2xlarge", Amount: Resources{GPUs: 2, CPUMilli: 1000}}},
	}
	got := map[string][]domain.FlavorAmount{}
	for _, wl := range wls {
		if f := snap.Find(wl.Namespace, wl.Name); f != nil && len(f.Usage) > 0 {
			got[wl.Name] = f.Usage
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("usage per flavor (-want +got):\n%s", diff)
	}
	if r := domain.ReadWorkload(wls[0], s); r.Requests != (Resources{GPUs: 16, CPUMilli: 194_000, MemoryMiB: 2 * (1<<20 + 1024)}) {
		t.Errorf("pending with overhead: requests %+v", r.Requests)
	}
}
