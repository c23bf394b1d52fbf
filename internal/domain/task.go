package domain

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// This file turns Kueue Workloads into the figures of the Tasks dashboard.
// Everything here is pure: no I/O, and the current time is passed in.

// TaskState is where a task stands, as the dashboard groups tasks.
type TaskState string

const (
	// TaskPending: waiting for quota or admission. It also covers tasks
	// evicted for a reason other than preemption (PodsReady timeout, a
	// stopped queue, node failures, deactivation...): Reason says which.
	TaskPending TaskState = "Pending"
	// TaskAdmitted: running, with quota reserved and admitted, not finished.
	TaskAdmitted TaskState = "Admitted"
	// TaskPreempted: evicted by preemption and not admitted again yet (this
	// includes the short time its pods are being stopped).
	TaskPreempted TaskState = "Preempted"
	// TaskFinished: the job ended (succeeded, failed, or its owner is gone).
	TaskFinished TaskState = "Finished"
)

// Task is one Kueue Workload as the Tasks dashboard shows it.
type Task struct {
	Namespace string
	Name      string
	// Team is the namespace without the settings' prefix ("hyperpod-ns-nlp"
	// gives "nlp"); empty when the namespace lacks the prefix.
	Team string
	// ClusterQueue is status.admission.clusterQueue; a pending Workload does
	// not name it, so it is empty until AssignPositions resolves it from the
	// LocalQueue.
	ClusterQueue string
	LocalQueue   string // spec.queueName
	// Class is spec.priorityClassRef.name, or the lowest class when the
	// Workload has none.
	Class    string
	Priority int32 // spec.priority; 0 (Kueue's default) when unset
	State    TaskState
	// Deactivated: spec.active is false. Kueue does not queue it until it
	// is reactivated; positions and statistics leave it out.
	Deactivated bool
	// Queued: Kueue holds it in its ClusterQueue's pending queue (pending or
	// preempted, active, no quota reserved). Only queued tasks get a Position.
	Queued bool
	// GPUs is the total nvidia.com/gpu of the task: the admitted usage
	// (status.admission.podSetAssignments[].resourceUsage) when quota is
	// reserved, else the sum over podSets of count × per-pod requests.
	GPUs int64
	// Flavors are the ResourceFlavors (instance types) the task was admitted
	// on: those assigned to nvidia.com/gpu, or every assigned one for a task
	// without GPUs. Sorted; empty while pending.
	Flavors []string
	// Borrowing is set by MarkBorrowing (TaskOf cannot know it).
	Borrowing bool

	Created time.Time
	// WaitStart is when the task last started waiting: the last transition
	// of the Requeued condition, else the creation time (Kueue's
	// workload.QueuedWaitTime).
	WaitStart time.Time
	// QueueOrder is the timestamp Kueue orders its queue by
	// (workload.Ordering.GetQueueOrderTimestamp with Kueue's defaults): the
	// creation time, or the eviction time after an eviction by PodsReady
	// timeout or by an admission check. A preempted task keeps its creation
	// time and so its place in line.
	QueueOrder time.Time
	AdmittedAt time.Time // Admitted condition transition, when it is True
	FinishedAt time.Time // Finished condition transition, when it is True

	// Wait is from WaitStart to admission; to now while still waiting (to
	// the end for a task that finished without being admitted again).
	Wait time.Duration
	// Run is FinishedAt−AdmittedAt, or now−AdmittedAt while running, plus
	// status.accumulatedPastExecutionTimeSeconds (time run before earlier
	// evictions).
	Run time.Duration

	// Reason says in plain words why the task is where it is.
	Reason string
	// KueueMessage is the raw Kueue condition message(s) behind Reason, for
	// a tooltip.
	KueueMessage string
	// Position in its ClusterQueue's queue, 1 being next in line; 0 when not
	// queued or unknown. Set by AssignPositions.
	Position int
}

// TaskOf reads one Workload. lowestClass is the class of tasks without a
// priority class; now is the time waits and runs are measured to.
func TaskOf(wl *kueuev1beta2.Workload, s Settings, lowestClass string, now time.Time) Task {
	conds := wl.Status.Conditions
	t := Task{
		Namespace:   wl.Namespace,
		Name:        wl.Name,
		LocalQueue:  string(wl.Spec.QueueName),
		Class:       lowestClass,
		Created:     wl.CreationTimestamp.Time,
		WaitStart:   wl.CreationTimestamp.Time,
		QueueOrder:  wl.CreationTimestamp.Time,
		Deactivated: wl.Spec.Active != nil && !*wl.Spec.Active,
	}
	t.Team, _ = s.TeamOfNamespace(wl.Namespace)
	if ref := wl.Spec.PriorityClassRef; ref != nil && ref.Name != "" {
		t.Class = ref.Name
	}
	if wl.Spec.Priority != nil {
		t.Priority = *wl.Spec.Priority
	}

	reserved := apimeta.IsStatusConditionTrue(conds, kueuev1beta2.WorkloadQuotaReserved)
	admission := wl.Status.Admission
	if !reserved {
		admission = nil // a stale admission never counts
	}
	if admission != nil {
		t.ClusterQueue = string(admission.ClusterQueue)
		t.Flavors = admittedFlavors(admission)
	}
	t.GPUs = workloadGPUs(wl, admission)

	if c := apimeta.FindStatusCondition(conds, kueuev1beta2.WorkloadRequeued); c != nil {
		t.WaitStart = c.LastTransitionTime.Time
	}
	evicted := trueCondition(conds, kueuev1beta2.WorkloadEvicted)
	if evicted != nil && (evicted.Reason == kueuev1beta2.WorkloadEvictedByPodsReadyTimeout ||
		evicted.Reason == kueuev1beta2.WorkloadEvictedByAdmissionCheck) {
		t.QueueOrder = evicted.LastTransitionTime.Time
	}
	admitted := trueCondition(conds, kueuev1beta2.WorkloadAdmitted)
	if admitted != nil {
		t.AdmittedAt = admitted.LastTransitionTime.Time
	}
	finished := trueCondition(conds, kueuev1beta2.WorkloadFinished)
	if finished != nil {
		t.FinishedAt = finished.LastTransitionTime.Time
	}
	preempted := trueCondition(conds, kueuev1beta2.WorkloadPreempted)

	switch {
	case finished != nil:
		t.State = TaskFinished
	case t.Deactivated:
		t.State = TaskPending
	case preempted != nil:
		t.State = TaskPreempted
	case admitted != nil:
		t.State = TaskAdmitted
	default:
		t.State = TaskPending
	}
	t.Queued = (t.State == TaskPending || t.State == TaskPreempted) && !t.Deactivated && !reserved && t.LocalQueue != ""

	end := now
	if finished != nil {
		end = t.FinishedAt
	}
	switch {
	case admitted != nil:
		t.Wait = nonNegative(t.AdmittedAt.Sub(t.WaitStart))
		t.Run = nonNegative(end.Sub(t.AdmittedAt))
	default:
		t.Wait = nonNegative(end.Sub(t.WaitStart))
	}
	if past := wl.Status.AccumulatedPastExecutionTimeSeconds; past != nil && *past > 0 {
		t.Run += time.Duration(*past) * time.Second
	}

	t.Reason, t.KueueMessage = taskReason(wl, s, t, now)
	return t
}

func trueCondition(conds []metav1.Condition, typ string) *metav1.Condition {
	c := apimeta.FindStatusCondition(conds, typ)
	if c == nil || c.Status != metav1.ConditionTrue {
		return nil
	}
	return c
}

func nonNegative(d time.Duration) time.Duration { return max(d, 0) }

// admittedFlavors are the flavors assigned to GPUs, or all assigned flavors
// when the task uses no GPU.
func admittedFlavors(a *kueuev1beta2.Admission) []string {
	var gpu, all []string
	for _, psa := range a.PodSetAssignments {
		for r, f := range psa.Flavors {
			all = append(all, string(f))
			if r == ResourceGPU {
				gpu = append(gpu, string(f))
			}
		}
	}
	if len(gpu) == 0 {
		gpu = all
	}
	slices.Sort(gpu)
	return slices.Compact(gpu)
}

// workloadGPUs totals nvidia.com/gpu over the podSets: from the admitted
// resource usage where Kueue recorded it, else count × per-pod requests.
func workloadGPUs(wl *kueuev1beta2.Workload, admission *kueuev1beta2.Admission) int64 {
	var total int64
	for _, ps := range wl.Spec.PodSets {
		count := int64(ps.Count)
		if admission != nil {
			if psa := findAssignment(admission, ps.Name); psa != nil {
				if psa.ResourceUsage != nil {
					total += quantity(psa.ResourceUsage, ResourceGPU)
					continue
				}
				if psa.Count != nil {
					count = int64(*psa.Count)
				}
			}
		}
		total += count * podGPUs(&ps.Template.Spec)
	}
	return total
}

func findAssignment(a *kueuev1beta2.Admission, name kueuev1beta2.PodSetReference) *kueuev1beta2.PodSetAssignment {
	for i := range a.PodSetAssignments {
		if a.PodSetAssignments[i].Name == name {
			return &a.PodSetAssignments[i]
		}
	}
	return nil
}

// podGPUs is the GPUs one pod needs, as the scheduler counts them: all
// containers (and sidecars) together, or the largest init container if that
// is more. A limit stands in for a missing request, as Kueue does.
func podGPUs(spec *corev1.PodSpec) int64 {
	var regular, sidecars, initMax int64
	for _, c := range spec.Containers {
		regular += containerGPUs(c)
	}
	for _, c := range spec.InitContainers {
		g := containerGPUs(c)
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sidecars += g
			continue
		}
		initMax = max(initMax, g+sidecars)
	}
	return max(regular+sidecars, initMax)
}

func containerGPUs(c corev1.Container) int64 {
	if q, ok := c.Resources.Requests[ResourceGPU]; ok {
		return q.Value()
	}
	return quantity(c.Resources.Limits, ResourceGPU)
}
