package domain

import (
	"fmt"
	"slices"
	"strings"
	"time"
	"unique"

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
	// not name it, so the read model resolves it from the LocalQueue.
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
	// Borrowing: a running task past its queue's nominal GPU quota (see
	// Snapshot.Borrowing; TaskOf cannot know it).
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
	// queued or unknown (see Snapshot.Position).
	Position int
}

// TaskFacts is what one Workload says about its task, without the clock:
// the read model keeps these and computes waits, runs, queue positions and
// borrowing when a page reads them (Snapshot.Task), so no periodic rebuild
// is needed. A TaskFacts is never changed once the read model holds it; a
// change of the Workload makes a new one.
type TaskFacts struct {
	Namespace, Name, Team  string
	ClusterQueue           string // as Task.ClusterQueue
	LocalQueue, Class      string
	Priority               int32
	State                  TaskState
	Deactivated, Queued    bool
	GPUs                   int64
	Flavors                []string
	Created, WaitStart     time.Time
	QueueOrder             time.Time
	AdmittedAt, FinishedAt time.Time
	KueueMessage           string

	classRef           string // spec.priorityClassRef.name: "" takes the lowest class
	admittedIn         string // status.admission.clusterQueue, while quota is reserved
	queue              string // the ClusterQueue whose queue holds it; "" when not queued
	admitted, finished bool   // the Admitted and Finished conditions are True
	pastRun            time.Duration
	// The reason in words is reasonHead, then a countdown while the task
	// waits to be requeued (until requeueAt), then reasonTail.
	reasonHead, reasonTail string
	requeueAt              time.Time
}

// FactsOf reads one Workload. lowestClass is the class of tasks without a
// priority class.
func FactsOf(wl *kueuev1beta2.Workload, s Settings, lowestClass string) *TaskFacts {
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
	f := &TaskFacts{}
	t.Team, _ = s.TeamOfNamespace(wl.Namespace)
	if ref := wl.Spec.PriorityClassRef; ref != nil && ref.Name != "" {
		t.Class = ref.Name
		f.classRef = intern(ref.Name)
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

	// Most strings repeat across tasks (namespaces, queues, classes, Kueue's
	// messages): one copy of each is kept.
	f.Namespace, f.Name, f.Team, f.ClusterQueue, f.LocalQueue, f.Class = intern(t.Namespace), t.Name, intern(t.Team), intern(t.ClusterQueue), intern(t.LocalQueue), intern(t.Class)
	for i := range t.Flavors {
		t.Flavors[i] = intern(t.Flavors[i])
	}
	f.Priority, f.State, f.Deactivated, f.Queued, f.GPUs, f.Flavors = t.Priority, t.State, t.Deactivated, t.Queued, t.GPUs, t.Flavors
	f.Created, f.WaitStart, f.QueueOrder, f.AdmittedAt, f.FinishedAt = t.Created, t.WaitStart, t.QueueOrder, t.AdmittedAt, t.FinishedAt
	f.admitted, f.finished = admitted != nil, finished != nil
	f.admittedIn = f.ClusterQueue
	if past := wl.Status.AccumulatedPastExecutionTimeSeconds; past != nil && *past > 0 {
		f.pastRun = time.Duration(*past) * time.Second
	}
	reason, raw, countdownAt := taskReason(wl, s, t)
	f.reasonHead, f.KueueMessage = intern(reason), intern(raw)
	if rs := wl.Status.RequeueState; countdownAt >= 0 && rs != nil && rs.RequeueAt != nil {
		f.reasonHead, f.reasonTail = intern(reason[:countdownAt]), intern(reason[countdownAt:])
		f.requeueAt = rs.RequeueAt.Time
	}
	return f
}

// WaitAt is the task's wait at now: from WaitStart to admission; to now
// while it waits (to the end for a task that finished without being
// admitted again).
func (f *TaskFacts) WaitAt(now time.Time) time.Duration {
	if f.admitted {
		return nonNegative(f.AdmittedAt.Sub(f.WaitStart))
	}
	return nonNegative(f.end(now).Sub(f.WaitStart))
}

// RunAt is the task's run at now: FinishedAt−AdmittedAt, or now−AdmittedAt
// while running, plus status.accumulatedPastExecutionTimeSeconds (time run
// before earlier evictions).
func (f *TaskFacts) RunAt(now time.Time) time.Duration {
	run := f.pastRun
	if f.admitted {
		run += nonNegative(f.end(now).Sub(f.AdmittedAt))
	}
	return run
}

func (f *TaskFacts) end(now time.Time) time.Time {
	if f.finished {
		return f.FinishedAt
	}
	return now
}

// ReasonAt says in plain words why the task is where it is, at now.
// borrowing marks a running task that uses borrowed quota (see
// Snapshot.Borrowing).
func (f *TaskFacts) ReasonAt(now time.Time, borrowing bool) string {
	head := f.reasonHead
	if borrowing && f.State == TaskAdmitted {
		t := Task{Flavors: f.Flavors, ClusterQueue: f.ClusterQueue}
		plain := admittedPhrase(t)
		t.Borrowing = true
		head = strings.Replace(head, plain, admittedPhrase(t), 1)
	}
	if f.requeueAt.After(now) {
		head += fmt.Sprintf("; back in the queue in %s", f.requeueAt.Sub(now).Round(time.Second))
	}
	return head + f.reasonTail
}

// At is the task as the dashboard shows it at now, with its queue position
// (0 when not queued) and whether it borrows.
func (f *TaskFacts) At(now time.Time, position int, borrowing bool) Task {
	return Task{
		Namespace: f.Namespace, Name: f.Name, Team: f.Team, ClusterQueue: f.ClusterQueue, LocalQueue: f.LocalQueue,
		Class: f.Class, Priority: f.Priority, State: f.State, Deactivated: f.Deactivated, Queued: f.Queued,
		GPUs: f.GPUs, Flavors: f.Flavors, Borrowing: borrowing,
		Created: f.Created, WaitStart: f.WaitStart, QueueOrder: f.QueueOrder, AdmittedAt: f.AdmittedAt, FinishedAt: f.FinishedAt,
		Wait: f.WaitAt(now), Run: f.RunAt(now),
		Reason: f.ReasonAt(now, borrowing), KueueMessage: f.KueueMessage,
		Position: position,
	}
}

// TaskOf reads one Workload at now, before queue positions and borrowing
// are known. lowestClass is the class of tasks without a priority class.
func TaskOf(wl *kueuev1beta2.Workload, s Settings, lowestClass string, now time.Time) Task {
	return FactsOf(wl, s, lowestClass).At(now, 0, false)
}

func intern(s string) string { return unique.Make(s).Value() }

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
