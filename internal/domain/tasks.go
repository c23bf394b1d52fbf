package domain

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
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
	if rest, ok := strings.CutPrefix(wl.Namespace, s.NamespacePrefix); ok && rest != "" {
		t.Team = rest
	}
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

// taskReason builds the plain-words reason and the raw Kueue message(s).
func taskReason(wl *kueuev1beta2.Workload, s Settings, t Task, now time.Time) (reason, raw string) {
	conds := wl.Status.Conditions
	quotaCond := apimeta.FindStatusCondition(conds, kueuev1beta2.WorkloadQuotaReserved)
	switch t.State {
	case TaskFinished:
		c := trueCondition(conds, kueuev1beta2.WorkloadFinished)
		return finishedReason(c), c.Message

	case TaskAdmitted:
		c := trueCondition(conds, kueuev1beta2.WorkloadAdmitted)
		reason = admittedPhrase(t)
		if ev := trueCondition(conds, kueuev1beta2.WorkloadEvicted); ev != nil {
			return reason + "; being evicted (" + ev.Reason + ")", c.Message + "\n" + ev.Message
		}
		if pr := apimeta.FindStatusCondition(conds, kueuev1beta2.WorkloadPodsReady); pr != nil && pr.Status == metav1.ConditionFalse {
			switch pr.Reason {
			case kueuev1beta2.WorkloadWaitForStart:
				reason += "; pods are starting"
			case kueuev1beta2.WorkloadWaitForRecovery:
				reason += "; recovering from a failed pod"
			}
		}
		return reason, c.Message

	case TaskPreempted:
		c := trueCondition(conds, kueuev1beta2.WorkloadPreempted)
		reason, raw = preemptedReason(c, s), c.Message
		if trueCondition(conds, kueuev1beta2.WorkloadAdmitted) != nil || trueCondition(conds, kueuev1beta2.WorkloadQuotaReserved) != nil {
			return reason + "; its pods are being stopped", raw
		}
		return appendQuotaReason(reason, raw, quotaCond, c.Message)
	}

	// Pending.
	evicted := trueCondition(conds, kueuev1beta2.WorkloadEvicted)
	if t.Deactivated {
		reason = "Stopped: deactivated (spec.active is false); it will not be queued until reactivated"
		raw = ""
		if evicted != nil {
			raw = evicted.Message
			switch {
			case strings.Contains(evicted.Reason, kueuev1beta2.WorkloadRequeuingLimitExceeded):
				reason = "Stopped: evicted too many times (requeuing limit exceeded); deactivated"
			case strings.Contains(evicted.Reason, kueuev1beta2.WorkloadMaximumExecutionTimeExceeded):
				reason = "Stopped: exceeded its maximum execution time; deactivated"
			}
		}
		return reason, raw
	}
	if wl.Spec.QueueName == "" {
		return "Not submitted to a queue: the job has no kueue.x-k8s.io/queue-name label", ""
	}
	if quotaCond != nil && quotaCond.Status == metav1.ConditionTrue {
		return reservedReason(wl), quotaCond.Message
	}
	if evicted != nil {
		reason, raw = evictedReason(evicted), evicted.Message
		if rs := wl.Status.RequeueState; rs != nil && rs.RequeueAt != nil && rs.RequeueAt.After(now) {
			reason += fmt.Sprintf("; back in the queue in %s", rs.RequeueAt.Sub(now).Round(time.Second))
		}
		return appendQuotaReason(reason, raw, quotaCond, evicted.Message)
	}
	if quotaCond == nil {
		return "Waiting to be evaluated by the scheduler", ""
	}
	return quotaReason(quotaCond.Reason, quotaCond.Message), quotaCond.Message
}

// appendQuotaReason adds what the scheduler said since an eviction: right
// after it, the QuotaReserved=False message is the eviction's own.
func appendQuotaReason(reason, raw string, quotaCond *metav1.Condition, evictionMessage string) (string, string) {
	if quotaCond == nil || quotaCond.Status != metav1.ConditionFalse || quotaCond.Message == "" || quotaCond.Message == evictionMessage {
		return reason, raw
	}
	return reason + ". " + quotaReason(quotaCond.Reason, quotaCond.Message), raw + "\n" + quotaCond.Message
}

func admittedPhrase(t Task) string {
	var b strings.Builder
	switch len(t.Flavors) {
	case 0:
		b.WriteString("Admitted")
		if t.ClusterQueue != "" {
			b.WriteString(" in ClusterQueue " + t.ClusterQueue)
		}
	case 1:
		b.WriteString("Admitted on flavor " + t.Flavors[0])
	default:
		b.WriteString("Admitted on flavors " + strings.Join(t.Flavors, ", "))
	}
	if t.Borrowing {
		b.WriteString(" (borrowing)")
	}
	return b.String()
}

func finishedReason(c *metav1.Condition) string {
	switch c.Reason {
	case kueuev1beta2.WorkloadFinishedReasonSucceeded:
		return "Finished: succeeded"
	case kueuev1beta2.WorkloadFinishedReasonFailed:
		return "Finished: failed"
	case kueuev1beta2.WorkloadFinishedReasonOwnerNotFound:
		return "Finished: its job was deleted"
	case kueuev1beta2.WorkloadFinishedReasonOutOfSync:
		return "Finished: no longer matches its job"
	}
	if c.Reason == "" {
		return "Finished"
	}
	return "Finished (" + c.Reason + ")"
}

var preemptorPath = regexp.MustCompile(`preemptor path: ([^;]+)`)

// preemptedReason explains a Preempted condition. Each team has its own
// ClusterQueue, so InClusterQueue means the same team; the preemptor's team
// is read from the "preemptor path" Kueue puts in the message, when present.
func preemptedReason(c *metav1.Condition, s Settings) string {
	other := "another team"
	if m := preemptorPath.FindStringSubmatch(c.Message); m != nil {
		path := strings.TrimSpace(m[1])
		if team := teamOfClusterQueue(s, path[strings.LastIndex(path, "/")+1:]); team != "" {
			other = "team " + team
		}
	}
	switch c.Reason {
	case kueuev1beta2.InClusterQueueReason:
		return "Preempted by a higher-priority task of the same team"
	case kueuev1beta2.InCohortReclamationReason:
		return "Preempted: " + other + " reclaimed its lent quota"
	case kueuev1beta2.InCohortFairSharingReason:
		return "Preempted to restore fair sharing: " + other + " was below its fair share"
	case kueuev1beta2.InCohortReclaimWhileBorrowingReason:
		return "Preempted by a higher-priority task of " + other + " that is also borrowing"
	}
	if c.Reason == "" {
		return "Preempted"
	}
	return "Preempted (" + c.Reason + ")"
}

// teamOfClusterQueue inverts Settings.ClusterQueue; empty when cq is not a
// team's queue.
func teamOfClusterQueue(s Settings, cq string) string {
	prefix, suffix := s.Namespace(""), strings.TrimPrefix(s.ClusterQueue(""), s.Namespace(""))
	team, ok := strings.CutPrefix(cq, prefix)
	if !ok {
		return ""
	}
	team, ok = strings.CutSuffix(team, suffix)
	if !ok || team == "" || s.ClusterQueue(team) != cq {
		return ""
	}
	return team
}

func evictedReason(c *metav1.Condition) string {
	switch c.Reason {
	case kueuev1beta2.WorkloadEvictedByPodsReadyTimeout:
		return "Evicted: its pods did not all become ready in time; requeued"
	case kueuev1beta2.WorkloadEvictedByAdmissionCheck:
		return "Evicted: an admission check asked for a retry; requeued"
	case kueuev1beta2.WorkloadEvictedByClusterQueueStopped:
		return "Evicted: the team's ClusterQueue was stopped"
	case kueuev1beta2.WorkloadEvictedByLocalQueueStopped:
		return "Evicted: the team's queue was stopped"
	case kueuev1beta2.WorkloadEvictedDueToNodeFailures:
		return "Evicted: a node it ran on failed; requeued"
	case kueuev1beta2.WorkloadEvictedByPreemption:
		return "Evicted by preemption; requeued"
	}
	if strings.HasPrefix(c.Reason, kueuev1beta2.WorkloadDeactivated) {
		return "Evicted: deactivated"
	}
	return "Evicted (" + c.Reason + ")"
}

// reservedReason explains quota reserved but not yet admitted.
func reservedReason(wl *kueuev1beta2.Workload) string {
	var pending []string
	for _, ac := range wl.Status.AdmissionChecks {
		if ac.State != kueuev1beta2.CheckStateReady {
			pending = append(pending, string(ac.Name))
		}
	}
	if len(pending) > 0 {
		return "Quota reserved; waiting for admission checks: " + strings.Join(pending, ", ")
	}
	if c := apimeta.FindStatusCondition(wl.Status.Conditions, kueuev1beta2.WorkloadAdmitted); c != nil &&
		c.Reason == kueuev1beta2.WorkloadAdmittedReasonPendingDelayedTopologyRequests {
		return "Quota reserved; waiting for a topology assignment"
	}
	return "Quota reserved; waiting to be admitted"
}

var (
	unusedQuotaRE = regexp.MustCompile(`insufficient unused quota for (\S+) in flavor ([^\s,]+), (\S+) more needed`)
	maxQuotaRE    = regexp.MustCompile(`insufficient quota for (\S+) in flavor ([^\s,]+), previously considered podsets requests \(([^)]*)\) \+ current podset request \(([^)]*)\) > maximum capacity \(([^)]*)\)`)
	preemptingRE  = regexp.MustCompile(`Pending the preemption of (\d+) workload`)
	missingRE     = regexp.MustCompile(`resource (\S+) unavailable in ClusterQueue`)
)

// quotaReason translates a QuotaReserved=False condition (the scheduler's
// or the workload controller's message) into plain words.
func quotaReason(reason, msg string) string {
	if msg == "" {
		return "Waiting to be evaluated by the scheduler"
	}
	if ms := unusedQuotaRE.FindAllStringSubmatch(msg, -1); ms != nil {
		out := "Waiting for quota: needs " + neededByFlavor(ms)
		if m := preemptingRE.FindStringSubmatch(msg); m != nil {
			out += "; preempting " + plural(m[1], "task") + " to make room"
		}
		return out
	}
	if m := maxQuotaRE.FindStringSubmatch(msg); m != nil {
		need := m[4]
		prev, err1 := resource.ParseQuantity(m[3])
		cur, err2 := resource.ParseQuantity(m[4])
		if err1 == nil && err2 == nil {
			prev.Add(cur)
			need = prev.String()
		}
		return fmt.Sprintf("Too big for the team's quota: needs %s %s on %s, but at most %s can ever be available to the team, borrowing included",
			need, m[1], m[2], m[5])
	}
	if m := missingRE.FindStringSubmatch(msg); m != nil {
		return "The team has no quota for " + m[1]
	}
	switch {
	case strings.HasPrefix(msg, "failed to assign flavors"):
		return "Cannot be scheduled: " + msg
	case strings.Contains(msg, "untolerated taint") || strings.Contains(msg, "doesn't match node affinity") ||
		reason == kueuev1beta2.WorkloadQuotaReservedReasonNoMatchingFlavor:
		return "No instance type in the team's quota matches the task's node selector, affinity or tolerations"
	case strings.Contains(msg, "LocalQueue") && strings.Contains(msg, "doesn't exist"):
		return "Its queue does not exist in this namespace"
	case strings.Contains(msg, "ClusterQueue") && strings.Contains(msg, "doesn't exist"),
		strings.Contains(msg, "ClusterQueue") && strings.Contains(msg, "not found"):
		return "The team's ClusterQueue does not exist"
	case strings.Contains(msg, "is stopped"):
		return "The team's queue is stopped: no new tasks are admitted"
	case strings.Contains(msg, "is inactive"):
		return "The team's queue is inactive (misconfigured, e.g. a missing flavor)"
	case strings.Contains(msg, "namespace doesn't match"):
		return "Its namespace is not allowed in the team's ClusterQueue"
	case strings.Contains(msg, "no longer fits after processing another workload"):
		return "Waiting for quota: another task took the free quota first"
	case strings.Contains(msg, "overlapping preemption targets"):
		return "Waiting for quota: another task is preempting the same tasks"
	case strings.Contains(msg, "failed admission checks"):
		return "Rejected by an admission check"
	case reason == kueuev1beta2.WorkloadQuotaReservedReasonWaitingForPodsReady:
		return "Waiting for earlier admitted tasks to start their pods"
	case reason == kueuev1beta2.WorkloadQuotaReservedReasonWaitingForPreemptedWorkloads:
		return "Waiting for preempted tasks to release their quota"
	case reason == kueuev1beta2.WorkloadQuotaReservedReasonTopologyPlacementFailed:
		return "Waiting for room: no topology placement fits the task"
	case reason == kueuev1beta2.WorkloadQuotaReservedReasonWaitingForQuota:
		return "Waiting for quota"
	}
	return "Pending: " + msg
}

// neededByFlavor phrases the shortfalls, flavor by flavor (the flavors are
// alternatives Kueue tried; several pod sets may name the same one, keep the
// largest shortfall).
func neededByFlavor(ms [][]string) string {
	type need struct{ resource, amount string }
	var flavors []string
	byFlavor := map[string][]need{}
	for _, m := range ms {
		res, flavor, amount := m[1], m[2], m[3]
		if _, ok := byFlavor[flavor]; !ok {
			flavors = append(flavors, flavor)
		}
		needs := byFlavor[flavor]
		i := slices.IndexFunc(needs, func(n need) bool { return n.resource == res })
		switch {
		case i < 0:
			byFlavor[flavor] = append(needs, need{res, amount})
		case moreThan(amount, needs[i].amount):
			needs[i].amount = amount
		}
	}
	parts := make([]string, 0, len(flavors))
	for _, f := range flavors {
		var amounts []string
		for _, n := range byFlavor[f] {
			amounts = append(amounts, n.amount+" more "+n.resource)
		}
		parts = append(parts, strings.Join(amounts, " and ")+" on "+f)
	}
	return strings.Join(parts, ", or ")
}

func moreThan(a, b string) bool {
	qa, err1 := resource.ParseQuantity(a)
	qb, err2 := resource.ParseQuantity(b)
	return err1 == nil && err2 == nil && qa.Cmp(qb) > 0
}

func plural(n, noun string) string {
	if n == "1" {
		return "1 " + noun
	}
	return n + " " + noun + "s"
}

// LocalQueueKey is the key of a LocalQueue in AssignPositions' map.
func LocalQueueKey(namespace, name string) string { return namespace + "/" + name }

// AssignPositions numbers the queued tasks (pending or preempted, active, no
// quota reserved) within each ClusterQueue, 1 being next in line, the way
// Kueue orders a BestEffortFIFO ClusterQueue: higher priority first, then the
// earlier QueueOrder timestamp (creation, or eviction after a PodsReady
// timeout or admission-check eviction), then namespace/name (Kueue breaks
// the last tie by UID). A pending Workload does not name its ClusterQueue, so
// clusterQueueOf resolves it from the LocalQueue (key LocalQueueKey(ns, name));
// the task's ClusterQueue is filled in from it when empty. Tasks not queued,
// or whose LocalQueue is not in the map, get Position 0.
//
// This is the console's estimate. Kueue's visibility API
// (visibility.kueue.x-k8s.io pendingworkloads) is authoritative: it also
// knows the priority boost annotation, admission fair sharing and the
// workload Kueue is currently trying to admit, none of which a Workload
// object shows.
func AssignPositions(tasks []Task, clusterQueueOf map[string]string) {
	byQueue := map[string][]*Task{}
	for i := range tasks {
		t := &tasks[i]
		t.Position = 0
		cq, ok := clusterQueueOf[LocalQueueKey(t.Namespace, t.LocalQueue)]
		if !ok || t.LocalQueue == "" {
			continue
		}
		if t.ClusterQueue == "" {
			t.ClusterQueue = cq
		}
		if t.Queued {
			byQueue[cq] = append(byQueue[cq], t)
		}
	}
	for _, queue := range byQueue {
		slices.SortFunc(queue, func(a, b *Task) int {
			if c := cmp.Compare(b.Priority, a.Priority); c != 0 {
				return c
			}
			if c := a.QueueOrder.Compare(b.QueueOrder); c != 0 {
				return c
			}
			return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
		})
		for i, t := range queue {
			t.Position = i + 1
		}
	}
}

// MarkBorrowing estimates which running tasks use borrowed GPU quota, and
// says so in their Reason. Kueue records borrowing per ClusterQueue, not per
// Workload, so this is an estimate: within each ClusterQueue and GPU flavor,
// running tasks are taken in the order Kueue keeps them when it reclaims
// quota (higher priority first, then earlier admission); those past the
// queue's nominal GPU quota are marked borrowing. They are the ones Kueue
// would preempt first when a lender reclaims its quota.
func MarkBorrowing(tasks []Task, queues []*kueuev1beta2.ClusterQueue) {
	nominal := map[string]int64{} // cq/flavor
	for _, cq := range queues {
		for _, rg := range cq.Spec.ResourceGroups {
			for _, f := range rg.Flavors {
				for _, r := range f.Resources {
					if r.Name == ResourceGPU {
						nominal[cq.Name+"/"+string(f.Name)] += r.NominalQuota.Value()
					}
				}
			}
		}
	}
	groups := map[string][]*Task{}
	for i := range tasks {
		t := &tasks[i]
		if t.State != TaskAdmitted || t.GPUs == 0 || len(t.Flavors) != 1 {
			continue
		}
		key := t.ClusterQueue + "/" + t.Flavors[0]
		if _, ok := nominal[key]; ok {
			groups[key] = append(groups[key], t)
		}
	}
	for key, group := range groups {
		slices.SortFunc(group, func(a, b *Task) int {
			if c := cmp.Compare(b.Priority, a.Priority); c != 0 {
				return c
			}
			if c := a.AdmittedAt.Compare(b.AdmittedAt); c != 0 {
				return c
			}
			return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
		})
		var used int64
		for _, t := range group {
			used += t.GPUs
			if used > nominal[key] && !t.Borrowing {
				phrase := admittedPhrase(*t)
				t.Borrowing = true
				t.Reason = strings.Replace(t.Reason, phrase, admittedPhrase(*t), 1)
			}
		}
	}
}

// ClassStats are the Tasks dashboard figures of one priority class.
//
// Running, Pending and Preempted count tasks now (deactivated tasks are not
// counted as pending). The averages cover a window:
//   - a task's wait counts once it was admitted in the window, or while it
//     is still waiting;
//   - a task's run counts once it finished in the window, or while it is
//     still running (tasks that finished without ever running are left out).
//
// AvgLongestRun (AvgLongestWait) is the average over teams of each team's
// longest run (wait) in the class within the window; teams without a run
// (wait) in the window are left out. On the dashboard: "Average longest run
// time: for each team, its longest run in this class during the window;
// averaged over the teams that ran tasks of this class."
type ClassStats struct {
	Class                         string
	Running, Pending, Preempted   int
	AvgRun, AvgWait               time.Duration
	LongestRun, LongestWait       time.Duration
	AvgLongestRun, AvgLongestWait time.Duration
	// Samples is how many tasks count in the averages (run, wait or both);
	// RunSamples and WaitSamples count each average's tasks.
	Samples, RunSamples, WaitSamples int
}

// TeamClassStats is one team's row of the team × class breakdown.
type TeamClassStats struct {
	Team    string // empty for tasks outside team namespaces
	Classes []ClassStats
}

// StatsByClass gives one row per class, in the order of classes (highest
// priority first), every class present even without tasks; classes that
// tasks name but classes lacks follow, sorted by name. Teams are told apart
// by Task.Team (tasks outside team namespaces form one group).
func StatsByClass(tasks []Task, classes []string, windowStart, now time.Time) []ClassStats {
	// Pointers, not copies: a Task is large and there may be 50 000 of them.
	byClass := map[string][]*Task{}
	for i := range tasks {
		byClass[tasks[i].Class] = append(byClass[tasks[i].Class], &tasks[i])
	}
	var rows []ClassStats
	for _, c := range withExtra(classes, byClass) {
		rows = append(rows, classStats(c, byClass[c], windowStart, now))
	}
	return rows
}

// StatsByTeamAndClass gives the same figures per team: one row per team in
// the order of teams, then teams that only tasks name (sorted; tasks outside
// team namespaces last, under ""), each with every class as StatsByClass
// lists them. Within one team, AvgLongest* equal Longest*.
func StatsByTeamAndClass(tasks []Task, teams, classes []string, windowStart, now time.Time) []TeamClassStats {
	type teamClass struct{ team, class string }
	groups := map[teamClass][]*Task{}
	byTeam := map[string]bool{}
	byClass := map[string]bool{}
	for i := range tasks {
		t := &tasks[i]
		groups[teamClass{t.Team, t.Class}] = append(groups[teamClass{t.Team, t.Class}], t)
		byTeam[t.Team], byClass[t.Class] = true, true
	}
	allClasses := withExtra(classes, byClass)
	order := withExtra(teams, byTeam)
	if i := slices.Index(order, ""); i >= 0 && !slices.Contains(teams, "") {
		order = append(slices.Delete(order, i, i+1), "")
	}
	rows := make([]TeamClassStats, 0, len(order))
	for _, team := range order {
		row := TeamClassStats{Team: team, Classes: make([]ClassStats, 0, len(allClasses))}
		for _, c := range allClasses {
			row.Classes = append(row.Classes, classStats(c, groups[teamClass{team, c}], windowStart, now))
		}
		rows = append(rows, row)
	}
	return rows
}

// withExtra is names followed by the keys of m it lacks, sorted.
func withExtra[T any](names []string, m map[string]T) []string {
	out := slices.Clone(names)
	var extra []string
	for k := range m {
		if !slices.Contains(names, k) {
			extra = append(extra, k)
		}
	}
	slices.Sort(extra)
	return append(out, extra...)
}

func inWindow(at, windowStart, now time.Time) bool {
	return !at.IsZero() && !at.Before(windowStart) && !at.After(now)
}

// countsRun and countsWait are the window rules of ClassStats.
func countsRun(t *Task, windowStart, now time.Time) bool {
	switch t.State {
	case TaskAdmitted:
		return true
	case TaskFinished:
		return inWindow(t.FinishedAt, windowStart, now) && (!t.AdmittedAt.IsZero() || t.Run > 0)
	}
	return false
}

func countsWait(t *Task, windowStart, now time.Time) bool {
	if inWindow(t.AdmittedAt, windowStart, now) {
		return true
	}
	return (t.State == TaskPending || t.State == TaskPreempted) && !t.Deactivated && t.AdmittedAt.IsZero()
}

func classStats(class string, tasks []*Task, windowStart, now time.Time) ClassStats {
	s := ClassStats{Class: class}
	var runSum, waitSum time.Duration
	longestRun, longestWait := map[string]time.Duration{}, map[string]time.Duration{}
	for _, t := range tasks {
		switch {
		case t.State == TaskAdmitted:
			s.Running++
		case t.State == TaskPreempted && !t.Deactivated:
			s.Preempted++
		case t.State == TaskPending && !t.Deactivated:
			s.Pending++
		}
		run, wait := countsRun(t, windowStart, now), countsWait(t, windowStart, now)
		if run {
			s.RunSamples++
			runSum += t.Run
			s.LongestRun = max(s.LongestRun, t.Run)
			longestRun[t.Team] = max(longestRun[t.Team], t.Run)
		}
		if wait {
			s.WaitSamples++
			waitSum += t.Wait
			s.LongestWait = max(s.LongestWait, t.Wait)
			longestWait[t.Team] = max(longestWait[t.Team], t.Wait)
		}
		if run || wait {
			s.Samples++
		}
	}
	s.AvgRun = average(runSum, s.RunSamples)
	s.AvgWait = average(waitSum, s.WaitSamples)
	s.AvgLongestRun = averageOf(longestRun)
	s.AvgLongestWait = averageOf(longestWait)
	return s
}

func average(sum time.Duration, n int) time.Duration {
	if n == 0 {
		return 0
	}
	return sum / time.Duration(n)
}

func averageOf(m map[string]time.Duration) time.Duration {
	var sum time.Duration
	for _, d := range m {
		sum += d
	}
	return average(sum, len(m))
}
