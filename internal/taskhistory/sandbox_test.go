package taskhistory

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueinformers "sigs.k8s.io/kueue/client-go/informers/externalversions"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/testenv"
	"github.com/openquota/console/sandbox/sandboxtest"
)

const p5 = "ml.p5.48xlarge"

// sandboxClients carry the test helpers that lay out a team.
type sandboxClients struct{ testenv.Clients }

func sandboxClientsOf(t *testing.T) sandboxClients {
	t.Helper()
	return sandboxClients{testenv.SandboxClients(t, sandboxtest.Env(t))}
}

// team makes a team the way the console lays it out: namespace, a
// ClusterQueue labelled with the team, its LocalQueue, and gpus GPUs of
// quota on ml.p5.48xlarge (with CPU and memory to match); its higher
// priority tasks may preempt its lower ones.
func (c sandboxClients) team(t *testing.T, s domain.Settings, name string, gpus int64) {
	t.Helper()
	ctx := context.Background()
	ns := s.Namespace(name)
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rf := &kueuev1beta2.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: p5},
		Spec: kueuev1beta2.ResourceFlavorSpec{NodeLabels: map[string]string{domain.InstanceTypeLabel: p5}}}
	if _, err := c.Kueue.KueueV1beta2().ResourceFlavors().Create(ctx, rf, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	q := func(v string) resource.Quantity { return resource.MustParse(v) }
	cq := &kueuev1beta2.ClusterQueue{
		ObjectMeta: metav1.ObjectMeta{Name: s.ClusterQueue(name), Labels: map[string]string{domain.TeamLabel: name}},
		Spec: kueuev1beta2.ClusterQueueSpec{
			CohortName:        kueuev1beta2.CohortReference(s.Cohort),
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
			Preemption:        &kueuev1beta2.ClusterQueuePreemption{WithinClusterQueue: kueuev1beta2.PreemptionPolicyLowerPriority},
			ResourceGroups: []kueuev1beta2.ResourceGroup{{
				CoveredResources: []corev1.ResourceName{domain.ResourceGPU, corev1.ResourceCPU, corev1.ResourceMemory},
				Flavors: []kueuev1beta2.FlavorQuotas{{Name: p5, Resources: []kueuev1beta2.ResourceQuota{
					{Name: domain.ResourceGPU, NominalQuota: *resource.NewQuantity(gpus, resource.DecimalSI)},
					{Name: corev1.ResourceCPU, NominalQuota: q("96")},
					{Name: corev1.ResourceMemory, NominalQuota: q("1Ti")},
				}}},
			}},
		},
	}
	if _, err := c.Kueue.KueueV1beta2().ClusterQueues().Create(ctx, cq, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	lq := &kueuev1beta2.LocalQueue{ObjectMeta: metav1.ObjectMeta{Name: s.LocalQueue(name), Namespace: ns},
		Spec: kueuev1beta2.LocalQueueSpec{ClusterQueue: kueuev1beta2.ClusterQueueReference(cq.Name)}}
	if _, err := c.Kueue.KueueV1beta2().LocalQueues(ns).Create(ctx, lq, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_ = c.Kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
		_ = c.Kueue.KueueV1beta2().ClusterQueues().Delete(ctx, cq.Name, metav1.DeleteOptions{})
	})
}

// recorderOn runs a recorder fed by real informers on the sandbox, as the
// console wires it, until stop is called.
func recorderOn(t *testing.T, c sandboxClients, st *Store, s domain.Settings) (*Recorder, func()) {
	t.Helper()
	factory := kueueinformers.NewSharedInformerFactory(c.Kueue, 0)
	wls := factory.Kueue().V1beta2().Workloads()
	cqs := factory.Kueue().V1beta2().ClusterQueues()
	r := NewRecorder(st, RecorderConfig{
		TeamPrefix: s.NamespacePrefix,
		Identity:   "sandbox-test",
		Workloads: func(_ context.Context, page func([]*kueuev1beta2.Workload) error) error {
			all, err := wls.Lister().List(labels.Everything())
			if err != nil {
				return err
			}
			return page(all)
		},
		ClusterQueues: func() ([]*kueuev1beta2.ClusterQueue, error) {
			return cqs.Lister().List(labels.Everything())
		},
		Synced: func() bool { return wls.Informer().HasSynced() && cqs.Informer().HasSynced() },
	})
	if _, err := wls.Informer().AddEventHandler(r.WorkloadHandler()); err != nil {
		t.Fatal(err)
	}
	if _, err := cqs.Informer().AddEventHandler(r.ClusterQueueHandler()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	stopRun := running(t, r)
	eventually(t, "the recorder's backfill", func() bool { return r.Stats().Backfills >= 1 })
	return r, func() {
		stopRun()
		cancel()
		factory.Shutdown()
	}
}

// A task runs and finishes in the sandbox, recorded through real
// informers; its Job is deleted (its Workload with it) and the recorder
// restarts on the same store: the 7-day statistics still count it, as they
// did while it existed.
func TestSandboxFinishedTaskOutlivesItsJob(t *testing.T) {
	c := sandboxClientsOf(t)
	forEachStore(t, time.Now(), func(t *testing.T, st *Store) {
		st.clock = time.Now
		id := rand.String(5)
		s := domain.Settings{NamespacePrefix: "th" + id + "-", Cohort: "cohort-" + id}
		c.team(t, s, "vision", 8)
		_, stop := recorderOn(t, c, st, s)

		j := testenv.Submit(t, c.Kube, testenv.Job{Namespace: s.Namespace("vision"), LocalQueue: s.LocalQueue("vision"), Name: "quick", GPUs: 2, RunFor: 2 * time.Second})
		wl := testenv.WorkloadOf(t, c.Kueue, j, "finished", testenv.CondTrue(kueuev1beta2.WorkloadFinished))
		uid := string(wl.UID)
		eventually(t, "the finish recorded", func() bool {
			return count(t, st, `SELECT COUNT(*) FROM tasks WHERE uid = ? AND outcome = 'succeeded'`, uid) == 1
		})

		now := time.Now()
		start := now.Add(-7 * 24 * time.Hour)
		statsOf := func(live []*kueuev1beta2.Workload) []domain.TeamClassStats {
			hist, err := st.TaskStats(context.Background(), LiveWindow(start, now))
			if err != nil {
				t.Fatal(err)
			}
			// The recorder sees the whole shared sandbox: keep this test's team
			// (other tests' tasks bring their own classes).
			hist.Groups = slices.DeleteFunc(hist.Groups, func(g GroupStats) bool { return g.Team != "vision" })
			// What still runs or waits, from the live read model.
			model := domain.NewModel(s)
			model.SetPolicyObjects(nil, []*kueuev1beta2.WorkloadPriorityClass{{ObjectMeta: metav1.ObjectMeta{Name: "none"}}})
			for _, w := range live {
				model.SetWorkload(w)
			}
			ongoing := model.Snapshot(now).Ongoing(domain.Selection{}, now.Sub(start), now)
			return TeamClassStats(hist, ongoing, []string{"vision"}, []string{"none"}, "none")[:1]
		}
		before := statsOf([]*kueuev1beta2.Workload{wl})
		if diff := cmp.Diff(domain.StatsByTeamAndClass([]domain.Task{domain.FactsOf(wl, s, "none").At(now, 0, false)}, []string{"vision"}, []string{"none"}, start, now), before); diff != "" {
			t.Errorf("while the Job exists, history + live differ from kueue (-kueue +merged):\n%s", diff)
		}
		if got := before[0].Classes[0]; got.RunSamples != 1 || got.WaitSamples != 1 || got.LongestRun <= 0 {
			t.Fatalf("the finished task does not count: %+v", got)
		}

		if err := c.Kube.BatchV1().Jobs(j.Namespace).Delete(context.Background(), j.Name,
			metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the deletion recorded", func() bool {
			return count(t, st, `SELECT COUNT(*) FROM tasks WHERE uid = ? AND deleted_ms IS NOT NULL`, uid) == 1
		})
		stop()
		recorded := taskRows(t, st, uid)

		// The console restarts: a new recorder, new informers, same store.
		// (Other tests' Workloads in the shared sandbox may change meanwhile.)
		_, stop2 := recorderOn(t, c, st, s)
		defer stop2()
		if diff := cmp.Diff(recorded, taskRows(t, st, uid)); diff != "" {
			t.Errorf("the restart's backfill rewrote the task (-before +after):\n%s", diff)
		}
		if diff := cmp.Diff(before, statsOf(nil)); diff != "" {
			t.Errorf("7-day statistics after the Job was deleted and the console restarted (-before +after):\n%s", diff)
		}
		var outcome string
		if err := st.db.QueryRow(st.q(`SELECT outcome FROM tasks WHERE uid = ?`), uid).Scan(&outcome); err != nil || outcome != "succeeded" {
			t.Errorf("outcome %q (%v)", outcome, err)
		}
	})
}

// A preemption in the sandbox is recorded with its preemptor (task, team,
// class) and the GPU-hours of work it threw away.
func TestSandboxPreemptionIsRecorded(t *testing.T) {
	c := sandboxClientsOf(t)
	forEachStore(t, time.Now(), func(t *testing.T, st *Store) {
		st.clock = time.Now
		id := rand.String(5)
		s := domain.Settings{NamespacePrefix: "th" + id + "-", Cohort: "cohort-" + id}
		low, high := "th-low-"+id, "th-high-"+id
		testenv.PriorityClass(t, c.Kueue, low, 10)
		testenv.PriorityClass(t, c.Kueue, high, 1000)
		c.team(t, s, "speech", 8)
		_, stop := recorderOn(t, c, st, s)
		defer stop()

		victimJob := testenv.Submit(t, c.Kube, testenv.Job{Namespace: s.Namespace("speech"), LocalQueue: s.LocalQueue("speech"), Name: "long", Class: low, GPUs: 8})
		admitted := testenv.WorkloadOf(t, c.Kueue, victimJob, "admitted", testenv.CondTrue(kueuev1beta2.WorkloadAdmitted))
		admittedAt := apimeta.FindStatusCondition(admitted.Status.Conditions, kueuev1beta2.WorkloadAdmitted).LastTransitionTime.Time
		time.Sleep(2 * time.Second) // some work to lose

		urgentJob := testenv.Submit(t, c.Kube, testenv.Job{Namespace: s.Namespace("speech"), LocalQueue: s.LocalQueue("speech"), Name: "urgent", Class: high, GPUs: 8})
		preempted := testenv.WorkloadOf(t, c.Kueue, victimJob, "preempted", testenv.CondTrue(kueuev1beta2.WorkloadPreempted))
		urgent := testenv.WorkloadOf(t, c.Kueue, urgentJob, "created", func(*kueuev1beta2.Workload) bool { return true })
		preemptedAt := apimeta.FindStatusCondition(preempted.Status.Conditions, kueuev1beta2.WorkloadPreempted).LastTransitionTime.Time

		var page *PreemptionPage
		eventually(t, "the preemption recorded", func() bool {
			var err error
			page, err = st.Preemptions(context.Background(), PreemptionQuery{Window: Window{From: admittedAt.Add(-time.Minute), To: time.Now().Add(time.Minute)}, Team: "speech"})
			return err == nil && len(page.Preemptions) == 1 && page.Preemptions[0].Preemptor.Name != ""
		})
		p := page.Preemptions[0]
		// Both tasks named by their Jobs, the Workloads' owners.
		owner, urgentOwner := metav1.GetControllerOf(preempted), metav1.GetControllerOf(urgent)
		want := Preemption{
			At: preemptedAt,
			Task: TaskRef{UID: string(preempted.UID), Namespace: preempted.Namespace, Name: preempted.Name, Team: "speech", Class: low,
				OwnerKind: owner.Kind, OwnerName: owner.Name},
			GPUs:         8,
			ClusterQueue: s.ClusterQueue("speech"),
			Preemptor: TaskRef{UID: string(urgent.UID), Namespace: urgent.Namespace, Name: urgent.Name, Team: "speech", Class: high,
				OwnerKind: urgentOwner.Kind, OwnerName: urgentOwner.Name},
			// Kueue names the preemptor's ClusterQueue in the message.
			PreemptorClusterQueue: s.ClusterQueue("speech"),
			Reason:                kueuev1beta2.InClusterQueueReason,
			ReasonWords:           "Preempted by a higher-priority task of the same team",
			GPUHoursLost:          8 * preemptedAt.Sub(admittedAt).Hours(),
			LostKnown:             true,
		}
		p.Message = ""
		if diff := cmp.Diff(want, p); diff != "" {
			t.Errorf("recorded preemption (-want +got):\n%s", diff)
		}
		if msg := apimeta.FindStatusCondition(preempted.Status.Conditions, kueuev1beta2.WorkloadPreempted).Message; !strings.Contains(msg, "(UID: "+string(urgent.UID)+",") {
			t.Errorf("Kueue's message %q does not name the preemptor as parsePreemptor expects", msg)
		}
		by, _, err := st.PreemptionsByTeam(context.Background(), Window{From: admittedAt.Add(-time.Minute), To: time.Now().Add(time.Minute)}, "speech")
		if err != nil || len(by) != 1 || by[0].PreemptorTeam != "speech" || by[0].Count != 1 {
			t.Errorf("by team: %+v (%v)", by, err)
		}
	})
}

// taskRows are a task's rows in every table, for comparisons.
func taskRows(t *testing.T, st *Store, uid string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for table, rows := range dump(t, st) {
		for _, r := range rows {
			if strings.HasPrefix(r, uid+"|") {
				out[table] = append(out[table], r)
			}
		}
	}
	return out
}
