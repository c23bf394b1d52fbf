package domain

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/openquota/console/internal/kueuetest"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

var taskT0 = time.Date(2025, 6, 2, 8, 0, 0, 0, time.UTC)

// at is taskT0 plus some minutes.
func at(minutes int) time.Time { return taskT0.Add(time.Duration(minutes) * time.Minute) }

const (
	p5  = "ml.p5.48xlarge"
	p4d = "ml.p4d.24xlarge"
	nlp = "hyperpod-ns-nlp"
	cv  = "hyperpod-ns-cv"
)

// newWorkload starts a test Workload named with the default settings.
func newWorkload(ns, name string) *kueuetest.WorkloadWrapper {
	return kueuetest.MakeWorkload(DefaultSettings, ns, name)
}

func preemptionMsg(reason, preemptorCQ string) string {
	return "Preempted to accommodate a workload (UID: u1, JobUID: j1) due to " + reason +
		"; preemptor path: /shared-pool/" + preemptorCQ + "; preemptee path: /shared-pool/hyperpod-ns-nlp-clusterqueue"
}

const gpuShortMsg = "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor ml.p5.48xlarge, 4 more needed"

// TaskOf reads one Workload at now, before queue positions and borrowing
// are known. lowestClass is the class of tasks without a priority class.
func TaskOf(wl *kueuev1beta2.Workload, s Settings, lowestClass string, now time.Time) Task {
	return FactsOf(wl, s, lowestClass).At(now, 0, false)
}

func TestTaskOf(t *testing.T) {
	nlpCQ := "hyperpod-ns-nlp-clusterqueue"
	reclaimMsg := preemptionMsg("reclamation within the cohort", "hyperpod-ns-cv-clusterqueue")
	cases := []struct {
		name string
		wl   *kueuev1beta2.Workload
		now  time.Time
		want Task
	}{
		{
			name: "pending with no conditions",
			wl:   newWorkload(nlp, "a").Queue("lq").Class("training").Priority(100).GPUs(2, 1).Created(at(0)).Obj(),
			now:  at(30),
			want: Task{Namespace: nlp, Name: "a", Team: "nlp", LocalQueue: "lq", Class: "training", Priority: 100,
				State: TaskPending, Queued: true, GPUs: 2, Requests: Amount{GPUs: 2, CPUMilli: 1000}, Created: at(0), WaitStart: at(0), QueueOrder: at(0),
				Wait: 30 * time.Minute, Reason: "Waiting to be evaluated by the scheduler"},
		},
		{
			name: "pending with a QuotaReserved=False message",
			wl: newWorkload(nlp, "a").Queue("lq").Class("training").GPUs(4, 1).Created(at(0)).
				Pending(kueuev1beta2.WorkloadQuotaReservedReasonWaitingForQuota, gpuShortMsg, at(1)).Obj(),
			now: at(30),
			want: Task{Namespace: nlp, Name: "a", Team: "nlp", LocalQueue: "lq", Class: "training",
				State: TaskPending, Queued: true, GPUs: 4, Requests: Amount{GPUs: 4, CPUMilli: 1000}, Created: at(0), WaitStart: at(0), QueueOrder: at(0),
				Wait:   30 * time.Minute,
				Reason: "Waiting for quota: needs 4 more nvidia.com/gpu on ml.p5.48xlarge", KueueMessage: gpuShortMsg},
		},
		{
			name: "admitted and running",
			wl:   newWorkload(nlp, "a").Queue("lq").Class("training").GPUs(8, 2).Created(at(0)).Admitted(at(10), p5).Obj(),
			now:  at(40),
			want: Task{Namespace: nlp, Name: "a", Team: "nlp", ClusterQueue: nlpCQ, LocalQueue: "lq", Class: "training",
				State: TaskAdmitted, GPUs: 16, Requests: Amount{GPUs: 16, CPUMilli: 2000}, Flavors: []string{p5}, Created: at(0), WaitStart: at(0), QueueOrder: at(0),
				AdmittedAt: at(10), Wait: 10 * time.Minute, Run: 30 * time.Minute,
				Reason: "Admitted on flavor ml.p5.48xlarge", KueueMessage: "The workload is admitted"},
		},
		{
			name: "finished",
			wl: newWorkload(nlp, "a").Queue("lq").Class("training").GPUs(8, 1).Created(at(0)).Admitted(at(10), p5).
				Finished(at(70), kueuev1beta2.WorkloadFinishedReasonSucceeded).Obj(),
			now: at(100),
			want: Task{Namespace: nlp, Name: "a", Team: "nlp", ClusterQueue: nlpCQ, LocalQueue: "lq", Class: "training",
				State: TaskFinished, GPUs: 8, Requests: Amount{GPUs: 8, CPUMilli: 1000}, Flavors: []string{p5}, Created: at(0), WaitStart: at(0), QueueOrder: at(0),
				AdmittedAt: at(10), FinishedAt: at(70), Wait: 10 * time.Minute, Run: time.Hour,
				Reason: "Finished: succeeded", KueueMessage: "Job finished"},
		},
		{
			name: "requeued after a PodsReady timeout: waits from the requeue, queued from the eviction",
			wl: newWorkload(nlp, "a").Queue("lq").Class("training").GPUs(8, 1).Created(at(0)).Admitted(at(10), p5).
				Evicted(at(40), kueuev1beta2.WorkloadEvictedByPodsReadyTimeout, "Exceeded the PodsReady timeout default/a").
				Requeued(at(45)).Obj(),
			now: at(60),
			want: Task{Namespace: nlp, Name: "a", Team: "nlp", LocalQueue: "lq", Class: "training",
				State: TaskPending, Queued: true, GPUs: 8, Requests: Amount{GPUs: 8, CPUMilli: 1000}, Created: at(0), WaitStart: at(45), QueueOrder: at(40),
				Wait: 15 * time.Minute, Run: 30 * time.Minute,
				Reason:       "Evicted: its pods did not all become ready in time; requeued",
				KueueMessage: "Exceeded the PodsReady timeout default/a"},
		},
		{
			name: "in backoff after a PodsReady timeout",
			wl: newWorkload(nlp, "a").Queue("lq").Class("training").GPUs(8, 1).Created(at(0)).Admitted(at(10), p5).
				Evicted(at(40), kueuev1beta2.WorkloadEvictedByPodsReadyTimeout, "Exceeded the PodsReady timeout default/a").
				RequeueAt(at(41)).Obj(),
			now: at(40).Add(30 * time.Second),
			want: Task{Namespace: nlp, Name: "a", Team: "nlp", LocalQueue: "lq", Class: "training",
				State: TaskPending, Queued: true, GPUs: 8, Requests: Amount{GPUs: 8, CPUMilli: 1000}, Created: at(0), WaitStart: at(40), QueueOrder: at(40),
				Wait: 30 * time.Second, Run: 30 * time.Minute,
				Reason:       "Evicted: its pods did not all become ready in time; requeued; back in the queue in 30s",
				KueueMessage: "Exceeded the PodsReady timeout default/a"},
		},
		{
			name: "admitted again after a preemption: the wait is the last one",
			wl: newWorkload(nlp, "a").Queue("lq").Class("training").GPUs(8, 1).Created(at(0)).Admitted(at(10), p5).
				Preempted(at(40), kueuev1beta2.InCohortReclamationReason, reclaimMsg).Admitted(at(50), p4d).Obj(),
			now: at(60),
			want: Task{Namespace: nlp, Name: "a", Team: "nlp", ClusterQueue: nlpCQ, LocalQueue: "lq", Class: "training",
				State: TaskAdmitted, GPUs: 8, Requests: Amount{GPUs: 8, CPUMilli: 1000}, Flavors: []string{p4d}, Created: at(0), WaitStart: at(40), QueueOrder: at(0),
				AdmittedAt: at(50), Wait: 10 * time.Minute, Run: 40 * time.Minute,
				Reason: "Admitted on flavor ml.p4d.24xlarge", KueueMessage: "The workload is admitted"},
		},
		{
			name: "preempted: keeps its place in line, run so far kept",
			wl: newWorkload(nlp, "a").Queue("lq").Class("training").GPUs(8, 1).Created(at(0)).Admitted(at(10), p5).
				Preempted(at(40), kueuev1beta2.InCohortReclamationReason, reclaimMsg).Obj(),
			now: at(45),
			want: Task{Namespace: nlp, Name: "a", Team: "nlp", LocalQueue: "lq", Class: "training",
				State: TaskPreempted, Queued: true, GPUs: 8, Requests: Amount{GPUs: 8, CPUMilli: 1000}, Created: at(0), WaitStart: at(40), QueueOrder: at(0),
				Wait: 5 * time.Minute, Run: 30 * time.Minute,
				Reason: "Preempted: team cv reclaimed its lent quota", KueueMessage: reclaimMsg},
		},
		{
			name: "accumulated past execution time is added to the run",
			wl: newWorkload(nlp, "a").Queue("lq").Class("training").GPUs(1, 1).Created(at(0)).Admitted(at(10), p5).
				PastExecution(600).Obj(),
			now: at(40),
			want: Task{Namespace: nlp, Name: "a", Team: "nlp", ClusterQueue: nlpCQ, LocalQueue: "lq", Class: "training",
				State: TaskAdmitted, GPUs: 1, Requests: Amount{GPUs: 1, CPUMilli: 1000}, Flavors: []string{p5}, Created: at(0), WaitStart: at(0), QueueOrder: at(0),
				AdmittedAt: at(10), Wait: 10 * time.Minute, Run: 40 * time.Minute,
				Reason: "Admitted on flavor ml.p5.48xlarge", KueueMessage: "The workload is admitted"},
		},
		{
			name: "no priority class: the lowest class, default priority; outside team namespaces no team",
			wl:   newWorkload("default", "a").Queue("lq").GPUs(1, 1).Created(at(0)).Obj(),
			now:  at(5),
			want: Task{Namespace: "default", Name: "a", LocalQueue: "lq", Class: "low", ClassAssumed: true,
				State: TaskPending, Queued: true, GPUs: 1, Requests: Amount{GPUs: 1, CPUMilli: 1000}, Created: at(0), WaitStart: at(0), QueueOrder: at(0),
				Wait: 5 * time.Minute, Reason: "Waiting to be evaluated by the scheduler"},
		},
		{
			name: "deactivated: pending but not queued",
			wl: newWorkload(nlp, "a").Queue("lq").Class("training").GPUs(1, 1).Created(at(0)).Inactive().
				Pending(kueuev1beta2.WorkloadInadmissible, "The workload is deactivated", at(1)).Obj(),
			now: at(5),
			want: Task{Namespace: nlp, Name: "a", Team: "nlp", LocalQueue: "lq", Class: "training",
				State: TaskPending, Deactivated: true, GPUs: 1, Requests: Amount{GPUs: 1, CPUMilli: 1000}, Created: at(0), WaitStart: at(0), QueueOrder: at(0),
				Wait:   5 * time.Minute,
				Reason: "Stopped: deactivated (spec.active is false); it will not be queued until reactivated"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := TaskOf(tc.wl, DefaultSettings, "low", tc.now)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("TaskOf (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTaskPreemptedReasons(t *testing.T) {
	cases := []struct {
		reason, human, preemptorCQ string
		want                       string
	}{
		{kueuev1beta2.InClusterQueueReason, "prioritization in the ClusterQueue", "hyperpod-ns-nlp-clusterqueue",
			"Preempted by a higher-priority task of the same team"},
		{kueuev1beta2.InCohortReclamationReason, "reclamation within the cohort", "hyperpod-ns-cv-clusterqueue",
			"Preempted: team cv reclaimed its lent quota"},
		{kueuev1beta2.InCohortReclamationReason, "reclamation within the cohort", "someone-elses-queue",
			"Preempted: another team reclaimed its lent quota"},
		{kueuev1beta2.InCohortFairSharingReason, "Fair Sharing within the cohort", "hyperpod-ns-cv-clusterqueue",
			"Preempted to restore fair sharing: team cv was below its fair share"},
		{kueuev1beta2.InCohortReclaimWhileBorrowingReason, "reclamation within the cohort while borrowing", "hyperpod-ns-cv-clusterqueue",
			"Preempted by a higher-priority task of team cv that is also borrowing"},
	}
	for _, tc := range cases {
		t.Run(tc.reason+" by "+tc.preemptorCQ, func(t *testing.T) {
			msg := preemptionMsg(tc.human, tc.preemptorCQ)
			wl := newWorkload(nlp, "a").Queue("lq").GPUs(8, 1).Created(at(0)).Admitted(at(10), p5).
				Preempted(at(20), tc.reason, msg).Obj()
			got := TaskOf(wl, DefaultSettings, "low", at(30))
			if got.State != TaskPreempted || !got.Queued {
				t.Errorf("state %s queued %v, want Preempted and queued", got.State, got.Queued)
			}
			if diff := cmp.Diff([]string{tc.want, msg}, []string{got.Reason, got.KueueMessage}); diff != "" {
				t.Errorf("reason, message (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTaskReasons(t *testing.T) {
	reclaimMsg := preemptionMsg("reclamation within the cohort", "hyperpod-ns-cv-clusterqueue")
	multi := "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor ml.p4d.24xlarge, 8 more needed, " +
		"insufficient unused quota for nvidia.com/gpu in flavor ml.p4d.24xlarge, 8 more needed, " +
		"insufficient unused quota for nvidia.com/gpu in flavor ml.p5.48xlarge, 4 more needed; " +
		"couldn't assign flavors to pod set workers: insufficient unused quota for nvidia.com/gpu in flavor ml.p5.48xlarge, 12 more needed. " +
		"Pending the preemption of 2 workload(s)"
	tooBig := "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor ml.p5.48xlarge, " +
		"previously considered podsets requests (8) + current podset request (32) > maximum capacity (24)"
	base := func() *kueuetest.WorkloadWrapper { return newWorkload(nlp, "a").Queue("lq").GPUs(8, 1).Created(at(0)) }
	cases := []struct {
		name string
		wl   *kueuev1beta2.Workload
		want string
	}{
		{"several flavors, pod sets and resources, with preemption under way",
			base().Pending(kueuev1beta2.WorkloadQuotaReservedReasonWaitingForQuota, multi, at(1)).Obj(),
			"Waiting for quota: needs 8 more cpu and 8 more nvidia.com/gpu on ml.p4d.24xlarge, or 12 more nvidia.com/gpu on ml.p5.48xlarge; preempting 2 tasks to make room"},
		{"more than the team can ever get",
			base().Pending(kueuev1beta2.WorkloadQuotaReservedReasonExceedsMaxQuota, tooBig, at(1)).Obj(),
			"Too big for the team's quota: needs 40 nvidia.com/gpu on ml.p5.48xlarge, but at most 24 can ever be available to the team, borrowing included"},
		{"resource not covered",
			base().Pending(kueuev1beta2.WorkloadQuotaReservedReasonNoMatchingFlavor, "couldn't assign flavors to pod set main: resource example.com/fpga unavailable in ClusterQueue", at(1)).Obj(),
			"The team has no quota for example.com/fpga"},
		{"taint not tolerated",
			base().Pending(kueuev1beta2.WorkloadQuotaReservedReasonNoMatchingFlavor, "couldn't assign flavors to pod set main: untolerated taint {gpu true NoSchedule <nil>} in flavor ml.p5.48xlarge", at(1)).Obj(),
			"No flavor of the team's queue accepts it: ml.p5.48xlarge has the taint gpu=true:NoSchedule, which the task does not tolerate"},
		{"taint and node labels",
			base().Pending(kueuev1beta2.WorkloadQuotaReservedReasonNoMatchingFlavor, "couldn't assign flavors to pod set main: untolerated taint {spot true NoSchedule <nil>} in flavor spot, flavor on-demand doesn't match node affinity", at(1)).Obj(),
			"No flavor of the team's queue accepts it: spot has the taint spot=true:NoSchedule, which the task does not tolerate; on-demand's node labels do not match the task's node selector or affinity"},
		{"no matching flavor, in other words",
			base().Pending(kueuev1beta2.WorkloadQuotaReservedReasonNoMatchingFlavor, "couldn't assign flavors to pod set main: no flavor fits", at(1)).Obj(),
			"No instance type in the team's quota matches the task's node selector, affinity or tolerations"},
		{"missing LocalQueue",
			base().Pending(kueuev1beta2.WorkloadQuotaReservedReasonMisconfigured, "LocalQueue lq doesn't exist", at(1)).Obj(),
			"Its queue does not exist in this namespace"},
		{"stopped ClusterQueue",
			base().Pending(kueuev1beta2.WorkloadQuotaReservedReasonSuspended, "ClusterQueue hyperpod-ns-nlp-clusterqueue is stopped", at(1)).Obj(),
			"The team's queue is stopped: no new tasks are admitted"},
		{"unknown message kept",
			base().Pending("Something", "a new Kueue message", at(1)).Obj(),
			"Pending: a new Kueue message"},
		{"no queue name",
			newWorkload(nlp, "a").GPUs(1, 1).Created(at(0)).Obj(),
			"Not submitted to a queue: the job has no kueue.x-k8s.io/queue-name label"},
		{"quota reserved, admission check pending",
			func() *kueuev1beta2.Workload {
				b := base().Admitted(at(5), p5).Condition(kueuev1beta2.WorkloadAdmitted, false, "UnsatisfiedAdmissionChecks", "The workload has not all checks ready", at(5))
				b.Status.AdmissionChecks = []kueuev1beta2.AdmissionCheckState{{Name: "capacity", State: kueuev1beta2.CheckStatePending}}
				return b.Obj()
			}(),
			"Quota reserved; waiting for admission checks: capacity"},
		{"admitted, pods starting",
			base().Admitted(at(5), p5).Condition(kueuev1beta2.WorkloadPodsReady, false, kueuev1beta2.WorkloadWaitForStart, "Not all pods are ready or succeeded", at(5)).Obj(),
			"Admitted on flavor ml.p5.48xlarge; pods not all started since Jun 2 08:05 UTC"},
		{"admitted with fewer pods than asked (partial admission)",
			newWorkload(nlp, "a").Queue("lq").PodSet("launcher", 1, 0).PodSet("workers", 4, 2).Created(at(0)).Admitted(at(5), p5).Usage("workers", 2, 4).Obj(),
			"Admitted on flavor ml.p5.48xlarge with workers: 2 of 4 pods (partial admission: the job may start smaller)"},
		{"preempted, pods still stopping",
			base().Admitted(at(5), p5).Condition(kueuev1beta2.WorkloadPreempted, true, kueuev1beta2.InClusterQueueReason, "x", at(6)).
				Condition(kueuev1beta2.WorkloadEvicted, true, kueuev1beta2.WorkloadEvictedByPreemption, "x", at(6)).Obj(),
			"Preempted by a higher-priority task of the same team; its pods are being stopped"},
		{"preempted, then told by the scheduler why it still waits",
			base().Admitted(at(5), p5).Preempted(at(6), kueuev1beta2.InCohortReclamationReason, reclaimMsg).
				Pending(kueuev1beta2.WorkloadQuotaReservedReasonWaitingForQuota, gpuShortMsg, at(7)).Obj(),
			"Preempted: team cv reclaimed its lent quota. Waiting for quota: needs 4 more nvidia.com/gpu on ml.p5.48xlarge"},
		{"evicted because the team's queue was stopped",
			base().Admitted(at(5), p5).Evicted(at(6), kueuev1beta2.WorkloadEvictedByClusterQueueStopped, "The ClusterQueue is stopped").Obj(),
			"Evicted: the team's ClusterQueue was stopped"},
		{"failed",
			base().Admitted(at(5), p5).Finished(at(9), kueuev1beta2.WorkloadFinishedReasonFailed).Obj(),
			"Finished: failed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := TaskOf(tc.wl, DefaultSettings, "low", at(10))
			if diff := cmp.Diff(tc.want, got.Reason); diff != "" {
				t.Errorf("Reason (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTaskGPUs(t *testing.T) {
	cases := []struct {
		name string
		wl   *kueuev1beta2.Workload
		want int64
	}{
		{"pod sets with count > 1 and several containers",
			newWorkload(nlp, "a").PodSet("launcher", 1, 0).PodSet("workers", 4, 2, 1).Obj(), 12},
		{"a limit stands in for a missing request; the largest init container counts when larger",
			func() *kueuev1beta2.Workload {
				b := newWorkload(nlp, "a").PodSet("main", 2, 1)
				spec := &b.Spec.PodSets[0].Template.Spec
				spec.Containers = append(spec.Containers, corev1.Container{Name: "limits-only",
					Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{ResourceGPU: resource.MustParse("2")}}})
				spec.InitContainers = []corev1.Container{{Name: "warmup",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{ResourceGPU: resource.MustParse("4")}}}}
				return b.Obj()
			}(), 8},
		{"admitted: the admitted usage (partial admission)",
			newWorkload(nlp, "a").PodSet("launcher", 1, 0).PodSet("workers", 4, 2, 1).Admitted(at(1), p5).Usage("workers", 2, 6).Obj(), 6},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := TaskOf(tc.wl, DefaultSettings, "low", at(2)).GPUs; got != tc.want {
				t.Errorf("GPUs = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestAssignPositions(t *testing.T) {
	reclaimMsg := preemptionMsg("reclamation within the cohort", "hyperpod-ns-cv-clusterqueue")
	wls := []*kueuev1beta2.Workload{
		// Team nlp, two LocalQueues feeding one ClusterQueue.
		newWorkload(nlp, "low-old").Queue("lq").Priority(10).Created(at(0)).Obj(),
		newWorkload(nlp, "high-new").Queue("lq").Priority(100).Created(at(20)).Obj(),
		newWorkload(nlp, "high-old").Queue("lq-batch").Priority(100).Created(at(5)).Obj(),
		// Preempted long after creation: Kueue keeps its creation time.
		newWorkload(nlp, "preempted").Queue("lq").Priority(10).Created(at(2)).Admitted(at(3), p5).
			Preempted(at(30), kueuev1beta2.InCohortReclamationReason, reclaimMsg).Requeued(at(30)).Obj(),
		// PodsReady timeout: queued again from the eviction time.
		newWorkload(nlp, "timed-out").Queue("lq").Priority(10).Created(at(1)).Admitted(at(2), p5).
			Evicted(at(25), kueuev1beta2.WorkloadEvictedByPodsReadyTimeout, "Exceeded the PodsReady timeout").Requeued(at(26)).Obj(),
		newWorkload(nlp, "same-time-b").Queue("lq").Priority(10).Created(at(10)).Obj(),
		newWorkload(nlp, "same-time-a").Queue("lq").Priority(10).Created(at(10)).Obj(),
		// Not queued.
		newWorkload(nlp, "running").Queue("lq").Priority(1000).Created(at(0)).Admitted(at(1), p5).Obj(),
		newWorkload(nlp, "inactive").Queue("lq").Priority(1000).Created(at(0)).Inactive().Obj(),
		newWorkload(nlp, "no-such-queue").Queue("ghost").Priority(1000).Created(at(0)).Obj(),
		// Team cv, its own ClusterQueue.
		newWorkload(cv, "cv-1").Queue("lq").Priority(10).Created(at(7)).Obj(),
	}
	lq := func(ns, name, cq string) *kueuev1beta2.LocalQueue {
		return &kueuev1beta2.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: kueuev1beta2.LocalQueueSpec{ClusterQueue: kueuev1beta2.ClusterQueueReference(cq)}}
	}
	tasks := snapshotTasks(SnapshotInput{Settings: DefaultSettings, Workloads: wls, LocalQueues: []*kueuev1beta2.LocalQueue{
		lq(nlp, "lq", "nlp-cq"), lq(nlp, "lq-batch", "nlp-cq"), lq(cv, "lq", "cv-cq")}}, at(40))
	type pos struct {
		CQ       string
		Position int
	}
	got := map[string]pos{}
	for _, tk := range tasks {
		got[tk.Name] = pos{tk.ClusterQueue, tk.Position}
	}
	want := map[string]pos{
		"high-old":      {"nlp-cq", 1},
		"high-new":      {"nlp-cq", 2},
		"low-old":       {"nlp-cq", 3},
		"preempted":     {"nlp-cq", 4},
		"same-time-a":   {"nlp-cq", 5},
		"same-time-b":   {"nlp-cq", 6},
		"timed-out":     {"nlp-cq", 7},
		"running":       {"hyperpod-ns-nlp-clusterqueue", 0},
		"inactive":      {"nlp-cq", 0},
		"no-such-queue": {"", 0},
		"cv-1":          {"cv-cq", 1},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("positions (-want +got):\n%s", diff)
	}
}

// snapshotTasks builds a snapshot and shows its tasks at now.
func snapshotTasks(in SnapshotInput, now time.Time) []Task {
	snap := BuildSnapshot(in, now)
	var tasks []Task
	for _, f := range snap.Tasks(TaskQuery{State: ListAll}) {
		tasks = append(tasks, snap.Task(f))
	}
	return tasks
}

func TestStatsByClass(t *testing.T) {
	now := at(24 * 60)
	window := now.Add(-24 * time.Hour) // at(0)
	classes := []string{"critical", "training", "low"}
	h := time.Hour
	tasks := []Task{
		// training, team nlp
		{Team: "nlp", Class: "training", State: TaskFinished, AdmittedAt: at(60), FinishedAt: at(180), Wait: 10 * time.Minute, Run: 2 * h},
		{Team: "nlp", Class: "training", State: TaskAdmitted, AdmittedAt: at(600), Wait: 30 * time.Minute, Run: 4 * h},
		{Team: "nlp", Class: "training", State: TaskPending, Queued: true, Wait: 50 * time.Minute},
		// training, team cv
		{Team: "cv", Class: "training", State: TaskAdmitted, AdmittedAt: at(900), Wait: 20 * time.Minute, Run: 6 * h},
		{Team: "cv", Class: "training", State: TaskPreempted, Queued: true, Wait: 5 * time.Minute, Run: 1 * h},
		// Old: admitted and finished before the window; counts for nothing.
		{Team: "cv", Class: "training", State: TaskFinished, AdmittedAt: at(-300), FinishedAt: at(-10), Wait: 9 * h, Run: 9 * h},
		// Admitted before the window, finished in it: its run counts, not its wait.
		{Team: "cv", Class: "training", State: TaskFinished, AdmittedAt: at(-60), FinishedAt: at(120), Wait: 8 * h, Run: 3 * h},
		// Deactivated: neither pending nor waiting.
		{Team: "cv", Class: "training", State: TaskPending, Deactivated: true, Wait: 7 * h},
		// low, team nlp; a class the policy does not list.
		{Team: "nlp", Class: "low", State: TaskPending, Queued: true, Wait: h},
		{Team: "nlp", Class: "legacy", State: TaskAdmitted, AdmittedAt: at(100), Wait: time.Minute, Run: h},
	}
	got := StatsByClass(tasks, classes, window, now)
	want := []ClassStats{
		{Class: "critical"},
		{Class: "training", Running: 2, Pending: 1, Preempted: 1,
			// runs 2h, 4h, 6h, 3h; waits 10m, 30m, 50m, 20m, 5m
			AvgRun: 15 * h / 4, AvgWait: 23 * time.Minute, LongestRun: 6 * h, LongestWait: 50 * time.Minute,
			// nlp longest run 4h, cv 6h; nlp longest wait 50m, cv 20m
			AvgLongestRun: 5 * h, AvgLongestWait: 35 * time.Minute,
			Samples: 6, RunSamples: 4, WaitSamples: 5},
		{Class: "low", Pending: 1, AvgWait: h, LongestWait: h, AvgLongestWait: h, Samples: 1, WaitSamples: 1},
		{Class: "legacy", Running: 1, AvgRun: h, LongestRun: h, AvgLongestRun: h,
			AvgWait: time.Minute, LongestWait: time.Minute, AvgLongestWait: time.Minute, Samples: 1, RunSamples: 1, WaitSamples: 1},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("StatsByClass (-want +got):\n%s", diff)
	}
}

func TestStatsWindowExcludesOldFinishedTasks(t *testing.T) {
	now := at(48 * 60)
	tasks := []Task{
		{Team: "nlp", Class: "training", State: TaskFinished, AdmittedAt: at(0), FinishedAt: at(60), Wait: time.Minute, Run: time.Hour},
		{Team: "nlp", Class: "training", State: TaskFinished, AdmittedAt: at(47 * 60), FinishedAt: at(47*60 + 30), Wait: 2 * time.Minute, Run: 30 * time.Minute},
		// Finished in the window without ever running (e.g. deleted while pending).
		{Team: "nlp", Class: "training", State: TaskFinished, FinishedAt: at(47 * 60), Wait: 3 * time.Hour},
	}
	got := StatsByClass(tasks, []string{"training"}, now.Add(-24*time.Hour), now)
	want := []ClassStats{{Class: "training",
		AvgRun: 30 * time.Minute, LongestRun: 30 * time.Minute, AvgLongestRun: 30 * time.Minute,
		AvgWait: 2 * time.Minute, LongestWait: 2 * time.Minute, AvgLongestWait: 2 * time.Minute,
		Samples: 1, RunSamples: 1, WaitSamples: 1}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("StatsByClass (-want +got):\n%s", diff)
	}
}

func TestStatsByTeamAndClass(t *testing.T) {
	now := at(24 * 60)
	h := time.Hour
	tasks := []Task{
		{Team: "nlp", Class: "training", State: TaskAdmitted, AdmittedAt: at(60), Wait: 10 * time.Minute, Run: 2 * h},
		{Team: "nlp", Class: "training", State: TaskFinished, AdmittedAt: at(60), FinishedAt: at(120), Wait: 30 * time.Minute, Run: h},
		{Team: "cv", Class: "low", State: TaskPending, Queued: true, Wait: h},
		{Team: "speech", Class: "training", State: TaskPreempted, Queued: true, Wait: 2 * h},
		{Namespace: "default", Class: "low", State: TaskAdmitted, AdmittedAt: at(60), Run: h},
	}
	got := StatsByTeamAndClass(tasks, []string{"nlp", "cv", "empty"}, []string{"training", "low"}, now.Add(-24*h), now)
	want := []TeamClassStats{
		{Team: "nlp", Classes: []ClassStats{
			{Class: "training", Running: 1, AvgRun: 90 * time.Minute, LongestRun: 2 * h, AvgLongestRun: 2 * h,
				AvgWait: 20 * time.Minute, LongestWait: 30 * time.Minute, AvgLongestWait: 30 * time.Minute,
				Samples: 2, RunSamples: 2, WaitSamples: 2},
			{Class: "low"},
		}},
		{Team: "cv", Classes: []ClassStats{
			{Class: "training"},
			{Class: "low", Pending: 1, AvgWait: h, LongestWait: h, AvgLongestWait: h, Samples: 1, WaitSamples: 1},
		}},
		{Team: "empty", Classes: []ClassStats{{Class: "training"}, {Class: "low"}}},
		{Team: "speech", Classes: []ClassStats{
			{Class: "training", Preempted: 1, AvgWait: 2 * h, LongestWait: 2 * h, AvgLongestWait: 2 * h, Samples: 1, WaitSamples: 1},
			{Class: "low"},
		}},
		{Team: "", Classes: []ClassStats{
			{Class: "training"},
			{Class: "low", Running: 1, AvgRun: h, LongestRun: h, AvgLongestRun: h, Samples: 1, RunSamples: 1, WaitSamples: 1},
		}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("StatsByTeamAndClass (-want +got):\n%s", diff)
	}
}

func TestTaskNamedByOwner(t *testing.T) {
	type named struct{ OwnerKind, OwnerName, Shown, Aside, InWords string }
	cases := []struct {
		name string
		wl   *kueuetest.WorkloadWrapper
		want named
	}{
		{name: "a bare Workload keeps its own name", wl: newWorkload(nlp, "solo"),
			want: named{Shown: "solo", Aside: "Workload hyperpod-ns-nlp/solo", InWords: "hyperpod-ns-nlp/solo"}},
		{name: "a Job's Workload is named by its Job", wl: newWorkload(nlp, "job-big-869d5").OwnedBy("Job", "big", true),
			want: named{OwnerKind: "Job", OwnerName: "big", Shown: "Job big", Aside: "Workload hyperpod-ns-nlp/job-big-869d5",
				InWords: "Job big (Workload hyperpod-ns-nlp/job-big-869d5)"}},
		{name: "the controller first, whatever the order", wl: newWorkload(nlp, "pytorchjob-bert-1a2b3").
			OwnedBy("ConfigMap", "settings", false).OwnedBy("PyTorchJob", "bert", true),
			want: named{OwnerKind: "PyTorchJob", OwnerName: "bert", Shown: "PyTorchJob bert", Aside: "Workload hyperpod-ns-nlp/pytorchjob-bert-1a2b3",
				InWords: "PyTorchJob bert (Workload hyperpod-ns-nlp/pytorchjob-bert-1a2b3)"}},
		{name: "without a controller, the first owner", wl: newWorkload(nlp, "jobset-train-77aa1").
			OwnedBy("JobSet", "train", false).OwnedBy("RayJob", "other", false),
			want: named{OwnerKind: "JobSet", OwnerName: "train", Shown: "JobSet train", Aside: "Workload hyperpod-ns-nlp/jobset-train-77aa1",
				InWords: "JobSet train (Workload hyperpod-ns-nlp/jobset-train-77aa1)"}},
		{name: "a pod group is named by its group, not by its first pod", wl: newWorkload(nlp, "sample-group").
			Annotation("kueue.x-k8s.io/is-group-workload", "true").OwnedBy("Pod", "sample-leader-x7", false).OwnedBy("Pod", "sample-worker-2k", false),
			want: named{OwnerKind: "Pod group", OwnerName: "sample-group", Shown: "Pod group sample-group", Aside: "Workload hyperpod-ns-nlp/sample-group",
				InWords: "Pod group sample-group (Workload hyperpod-ns-nlp/sample-group)"}},
		{name: "a StatefulSet's pods are named by their StatefulSet", wl: newWorkload(nlp, "statefulset-web-90cde").
			Annotation("kueue.x-k8s.io/is-group-workload", "true").Annotation("kueue.x-k8s.io/job-owner-gvk", "apps/v1, Kind=StatefulSet").
			Annotation("kueue.x-k8s.io/job-owner-name", "web").OwnedBy("Pod", "web-0", false).OwnedBy("StatefulSet", "web", false),
			want: named{OwnerKind: "StatefulSet", OwnerName: "web", Shown: "StatefulSet web", Aside: "Workload hyperpod-ns-nlp/statefulset-web-90cde",
				InWords: "StatefulSet web (Workload hyperpod-ns-nlp/statefulset-web-90cde)"}},
		{name: "a single pod is named by itself", wl: newWorkload(nlp, "pod-sleep-34ec8").OwnedBy("Pod", "sleep", true),
			want: named{OwnerKind: "Pod", OwnerName: "sleep", Shown: "Pod sleep", Aside: "Workload hyperpod-ns-nlp/pod-sleep-34ec8",
				InWords: "Pod sleep (Workload hyperpod-ns-nlp/pod-sleep-34ec8)"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			task := TaskOf(tc.wl.Obj(), DefaultSettings, "", taskT0)
			n := task.Named()
			got := named{OwnerKind: task.OwnerKind, OwnerName: task.OwnerName, Shown: n.Shown(), Aside: n.Aside(), InWords: n.InWords()}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("named (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTaskNameMatches(t *testing.T) {
	n := TaskName{Workload: "job-big-869d5", OwnerKind: "Job", OwnerName: "big"}
	cases := []struct {
		part string
		want bool
	}{{"big", true}, {"869d5", true}, {"job", true}, {"small", false}}
	for _, tc := range cases {
		if got := n.Matches(tc.part); got != tc.want {
			t.Errorf("Matches(%q) = %v, want %v", tc.part, got, tc.want)
		}
	}
}

// Kueue gives no reason to the tasks it does not try: in a BestEffortFIFO
// queue, the ones just like a task that did not fit (same priority, pods
// and requests: Kueue skips them until the queue's quota changes); in a
// StrictFIFO queue, everything behind a head that does not fit. They say
// so, with the reason of the task they wait behind, instead of "waiting to
// be evaluated". A task of another shape, or the queue's first, is one
// Kueue has really not tried yet.
func TestATaskKueueSkipsSaysWhy(t *testing.T) {
	const short = "Waiting for quota: needs 4 more nvidia.com/gpu on ml.p5.48xlarge"
	reclaimed := preemptionMsg("reclamation within the cohort", "hyperpod-ns-cv-clusterqueue")
	sweep := func(name string, minute int) *kueuev1beta2.Workload {
		return newWorkload(nlp, name).Queue("lq").GPUs(8, 1).Created(at(minute)).Obj()
	}
	cq := func(name string, strategy kueuev1beta2.QueueingStrategy) *kueuev1beta2.ClusterQueue {
		return &kueuev1beta2.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: kueuev1beta2.ClusterQueueSpec{QueueingStrategy: strategy, NamespaceSelector: &metav1.LabelSelector{}}}
	}
	lq := func(name, queue string) *kueuev1beta2.LocalQueue {
		return &kueuev1beta2.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: nlp, Name: name},
			Spec: kueuev1beta2.LocalQueueSpec{ClusterQueue: kueuev1beta2.ClusterQueueReference(queue)}}
	}
	notFit := func(wl *kueuev1beta2.Workload) *kueuev1beta2.Workload {
		return (&kueuetest.WorkloadWrapper{Workload: *wl}).Pending("Pending", gpuShortMsg, at(9)).Obj()
	}
	for _, tc := range []struct {
		name     string
		strategy kueuev1beta2.QueueingStrategy
		wls      []*kueuev1beta2.Workload
		want     map[string]string
	}{
		{"the same shape in a BestEffortFIFO queue", kueuev1beta2.BestEffortFIFO,
			[]*kueuev1beta2.Workload{notFit(sweep("sweep-1", 1)), sweep("sweep-2", 2), sweep("sweep-3", 3),
				newWorkload(nlp, "other").Queue("lq").GPUs(4, 1).Created(at(4)).Obj()},
			map[string]string{
				"sweep-1": short,
				"sweep-2": short + " (Kueue skips it while sweep-1, ahead of it and just like it, does not fit)",
				"sweep-3": short + " (Kueue skips it while sweep-1, ahead of it and just like it, does not fit)",
				"other":   "Waiting to be evaluated by the scheduler",
			}},
		{"the first, not tried yet, and one like it", kueuev1beta2.BestEffortFIFO,
			[]*kueuev1beta2.Workload{sweep("sweep-1", 1), sweep("sweep-2", 2)},
			map[string]string{"sweep-1": "Waiting to be evaluated by the scheduler", "sweep-2": "Waiting to be evaluated by the scheduler"}},
		{"no claim after a preemption, a head preempting for room, or a task in backoff", kueuev1beta2.BestEffortFIFO,
			[]*kueuev1beta2.Workload{
				// Preempted and requeued: the QuotaReserved message is the eviction's; Kueue has not tried it since.
				newWorkload(nlp, "preempted").Queue("lq").GPUs(8, 1).Created(at(0)).Admitted(at(1), p5).
					Preempted(at(2), kueuev1beta2.InCohortReclamationReason, reclaimed).Pending("Pending", reclaimed, at(2)).Obj(),
				sweep("sweep-1", 1),
				(&kueuetest.WorkloadWrapper{Workload: *newWorkload(nlp, "head").Queue("lq").GPUs(2, 1).Created(at(2)).Obj()}).
					Pending("Pending", gpuShortMsg+". Pending the preemption of 1 workload(s)", at(9)).Obj(),
				newWorkload(nlp, "behind-head").Queue("lq").GPUs(2, 1).Created(at(3)).Obj(),
				(&kueuetest.WorkloadWrapper{Workload: *newWorkload(nlp, "backoff").Queue("lq").GPUs(4, 1).Created(at(4)).Obj()}).
					Pending("Pending", gpuShortMsg, at(9)).RequeueAt(at(20)).Obj(),
				newWorkload(nlp, "behind-backoff").Queue("lq").GPUs(4, 1).Created(at(5)).Obj(),
			},
			map[string]string{
				"preempted":      "Preempted: team cv reclaimed its lent quota",
				"sweep-1":        "Waiting to be evaluated by the scheduler",
				"head":           short + "; preempting 1 task to make room",
				"behind-head":    "Waiting to be evaluated by the scheduler",
				"backoff":        short,
				"behind-backoff": "Waiting to be evaluated by the scheduler",
			}},
		{"a preempted task Kueue tried again: only what the scheduler said of it", kueuev1beta2.BestEffortFIFO,
			[]*kueuev1beta2.Workload{
				newWorkload(nlp, "sweep-1").Queue("lq").GPUs(8, 1).Created(at(0)).Admitted(at(1), p5).
					Preempted(at(2), kueuev1beta2.InCohortReclamationReason, reclaimed).Pending("Pending", gpuShortMsg, at(3)).Obj(),
				sweep("sweep-2", 2),
			},
			map[string]string{
				"sweep-1": "Preempted: team cv reclaimed its lent quota. " + short,
				"sweep-2": short + " (Kueue skips it while sweep-1, ahead of it and just like it, does not fit)",
			}},
		{"behind the head of a StrictFIFO queue", kueuev1beta2.StrictFIFO,
			[]*kueuev1beta2.Workload{notFit(sweep("sweep-1", 1)), newWorkload(nlp, "other").Queue("lq").GPUs(4, 1).Created(at(4)).Obj()},
			map[string]string{
				"sweep-1": short,
				"other":   "Waits behind sweep-1, first in its queue, which does not fit (a StrictFIFO queue admits in order): " + short,
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tasks := snapshotTasks(SnapshotInput{Settings: DefaultSettings, Workloads: tc.wls,
				ClusterQueues: []*kueuev1beta2.ClusterQueue{cq("nlp-cq", tc.strategy)}, LocalQueues: []*kueuev1beta2.LocalQueue{lq("lq", "nlp-cq")}}, at(10))
			got := map[string]string{}
			for _, tk := range tasks {
				got[tk.Name] = tk.Reason
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("reasons (-want +got):\n%s", diff)
			}
		})
	}
}

// A queue turned StrictFIFO: from the next snapshot on, what waits behind
// its head that did not fit says so; turned back, it no longer does.
func TestAQueueTurnedStrictSaysWhoWaitsBehindItsHead(t *testing.T) {
	m := NewModel(DefaultSettings)
	queue := func(strategy kueuev1beta2.QueueingStrategy) *kueuev1beta2.ClusterQueue {
		return &kueuev1beta2.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "nlp-cq"}, Spec: kueuev1beta2.ClusterQueueSpec{QueueingStrategy: strategy, NamespaceSelector: &metav1.LabelSelector{}}}
	}
	m.SetClusterQueue(queue(kueuev1beta2.BestEffortFIFO))
	m.SetLocalQueue(&kueuev1beta2.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: nlp, Name: "lq"}, Spec: kueuev1beta2.LocalQueueSpec{ClusterQueue: "nlp-cq"}})
	m.SetWorkload((&kueuetest.WorkloadWrapper{Workload: *newWorkload(nlp, "head").Queue("lq").GPUs(8, 1).Created(at(0)).Obj()}).
		Pending("Pending", gpuShortMsg, at(1)).Obj())
	m.SetWorkload(newWorkload(nlp, "other").Queue("lq").GPUs(2, 1).Created(at(1)).Obj())
	reason := func() string {
		snap := m.Snapshot(at(10))
		return snap.Task(snap.Find(nlp, "other")).Reason
	}
	const untried = "Waiting to be evaluated by the scheduler"
	behind := "Waits behind head, first in its queue, which does not fit (a StrictFIFO queue admits in order): " +
		"Waiting for quota: needs 4 more nvidia.com/gpu on ml.p5.48xlarge"
	for i, step := range []struct {
		strategy kueuev1beta2.QueueingStrategy
		want     string
	}{{kueuev1beta2.BestEffortFIFO, untried}, {kueuev1beta2.StrictFIFO, behind}, {kueuev1beta2.BestEffortFIFO, untried}} {
		m.SetClusterQueue(queue(step.strategy))
		if got := reason(); got != step.want {
			t.Errorf("step %d, %s: %q, want %q", i, step.strategy, got, step.want)
		}
	}
}

// Kueue's words for a queue that can never hold a task, as its flavor
// assigner writes them, against those for a shortfall that other tasks
// finishing ends.
func TestCannotFit(t *testing.T) {
	const head = "couldn't assign flavors to pod set main: "
	for msg, want := range map[string]bool{
		head + "insufficient quota for cpu in flavor reservation, previously considered podsets requests (0) + current podset request (12) > maximum capacity (4)": true,
		head + "resource nvidia.com/gpu unavailable in ClusterQueue":                                                   true,
		head + "untolerated taint {spot true NoSchedule} in flavor spot, flavor on-demand doesn't match node affinity": true,
		head + "flavor spot does not provide resource nvidia.com/gpu":                                                  true,
		// One flavor may yet have room: not never.
		head + "insufficient unused quota for cpu in flavor on-demand, 3 more needed, untolerated taint {spot true NoSchedule} in flavor spot": false,
		head + "insufficient unused quota for nvidia.com/gpu in flavor ml.p5.48xlarge, 4 more needed":                                          false,
		head + "no topology domains at level: kubernetes.io/hostname":                                                                          false,
		"ClusterQueue cluster-queue is inactive":                                                                                               false,
		"":                                                                                                                                     false,
	} {
		if got := cannotFit(msg); got != want {
			t.Errorf("cannotFit(%q) = %v, want %v", msg, got, want)
		}
	}
}

// A task its queue can never hold, as the queue is defined, cannot start
// however many others finish; nor can the tasks that wait behind it: the
// same shape in a BestEffortFIFO queue (Kueue tries the first for them),
// anything behind the head of a StrictFIFO queue.
func TestATaskItsQueueCanNeverHoldCannotStart(t *testing.T) {
	const tooBig = "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor ml.p5.48xlarge, previously considered podsets requests (0) + current podset request (16) > maximum capacity (8)"
	big := func(name string, minute int) *kueuev1beta2.Workload {
		return newWorkload(nlp, name).Queue("lq").GPUs(16, 1).Created(at(minute)).Obj()
	}
	tried := func(wl *kueuev1beta2.Workload, msg string) *kueuev1beta2.Workload {
		return (&kueuetest.WorkloadWrapper{Workload: *wl}).Pending("Pending", msg, at(9)).Obj()
	}
	for _, tc := range []struct {
		strategy kueuev1beta2.QueueingStrategy
		wls      []*kueuev1beta2.Workload
		want     map[string]string
	}{
		{kueuev1beta2.BestEffortFIFO, []*kueuev1beta2.Workload{tried(big("big-1", 1), tooBig), big("big-2", 2),
			tried(newWorkload(nlp, "short").Queue("lq").GPUs(4, 1).Created(at(3)).Obj(), gpuShortMsg)},
			map[string]string{
				"big-1": "its queue, as it is defined, can never hold it: Too big for the team's quota: needs 16 nvidia.com/gpu on ml.p5.48xlarge, but at most 8 can ever be available to the team, borrowing included",
				"big-2": "its queue, as it is defined, can never hold big-1, just like it: Too big for the team's quota: needs 16 nvidia.com/gpu on ml.p5.48xlarge, but at most 8 can ever be available to the team, borrowing included",
				"short": "",
			}},
		{kueuev1beta2.StrictFIFO, []*kueuev1beta2.Workload{tried(big("big-1", 1), tooBig), newWorkload(nlp, "small").Queue("lq").GPUs(1, 1).Created(at(4)).Obj()},
			map[string]string{
				"big-1": "its queue, as it is defined, can never hold it: Too big for the team's quota: needs 16 nvidia.com/gpu on ml.p5.48xlarge, but at most 8 can ever be available to the team, borrowing included",
				"small": "it waits behind big-1, first in its StrictFIFO queue, which the queue, as it is defined, can never hold: Too big for the team's quota: needs 16 nvidia.com/gpu on ml.p5.48xlarge, but at most 8 can ever be available to the team, borrowing included",
			}},
	} {
		t.Run(string(tc.strategy), func(t *testing.T) {
			snap := BuildSnapshot(SnapshotInput{Settings: DefaultSettings, Workloads: tc.wls,
				ClusterQueues: []*kueuev1beta2.ClusterQueue{{ObjectMeta: metav1.ObjectMeta{Name: "nlp-cq"}, Spec: kueuev1beta2.ClusterQueueSpec{QueueingStrategy: tc.strategy, NamespaceSelector: &metav1.LabelSelector{}}}},
				LocalQueues: []*kueuev1beta2.LocalQueue{{ObjectMeta: metav1.ObjectMeta{Namespace: nlp, Name: "lq"},
					Spec: kueuev1beta2.LocalQueueSpec{ClusterQueue: "nlp-cq"}}}}, at(10))
			got := map[string]string{}
			for _, wl := range tc.wls {
				got[wl.Name] = snap.CannotStart(snap.Find(wl.Namespace, wl.Name))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("cannot start (-want +got):\n%s", diff)
			}
		})
	}
}

// A job that accepts fewer pods (partial admission) is not one its queue
// can never hold when Kueue says its full size is too big: Kueue tries
// fewer pods too. Its reason says so.
func TestAJobAdmissibleInPartCanStart(t *testing.T) {
	const tooBig = "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor ml.p5.48xlarge, previously considered podsets requests (0) + current podset request (10) > maximum capacity (6)"
	wl := newWorkload(nlp, "partial").Queue("lq").GPUs(1, 10).Created(at(1)).Pending("Pending", tooBig, at(9)).Obj()
	least := int32(2)
	wl.Spec.PodSets[0].MinCount = &least
	snap := BuildSnapshot(SnapshotInput{Settings: DefaultSettings, Workloads: []*kueuev1beta2.Workload{wl},
		ClusterQueues: []*kueuev1beta2.ClusterQueue{{ObjectMeta: metav1.ObjectMeta{Name: "nlp-cq"}, Spec: kueuev1beta2.ClusterQueueSpec{NamespaceSelector: &metav1.LabelSelector{}}}},
		LocalQueues: []*kueuev1beta2.LocalQueue{{ObjectMeta: metav1.ObjectMeta{Namespace: nlp, Name: "lq"},
			Spec: kueuev1beta2.LocalQueueSpec{ClusterQueue: "nlp-cq"}}}}, at(10))
	task := snap.Find(wl.Namespace, wl.Name)
	if got := snap.CannotStart(task); got != "" {
		t.Errorf("cannot start: %q", got)
	}
	if r := snap.Task(task).Reason; !strings.Contains(r, "at its full size; it accepts as few as 2 pods (partial admission)") {
		t.Errorf("reason %q", r)
	}
}
