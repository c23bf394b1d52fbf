package taskhistory

import (
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/domain"
)

// This file turns Workloads into history: pure functions, no I/O.

// Diff is what the change of a Workload from old to new adds to its history
// (old is nil when the Workload is first seen: an informer add, or a
// backfill). ok is false when nothing changed that the history keeps, e.g.
// an informer resync or a status change it does not follow. Events are those
// visible in new and not in old, oldest first; when old is nil, every event
// new still shows. teamPrefix is the namespace prefix of team namespaces.
func Diff(old, new *kueuev1beta2.Workload, teamPrefix string) (c Change, ok bool) {
	cur := observe(new, teamPrefix, time.Time{})
	if old == nil {
		return cur, true
	}
	prev := observe(old, teamPrefix, time.Time{})
	seen := map[eventKey]bool{}
	for _, e := range prev.Events {
		seen[keyOf(e)] = true
	}
	var fresh []Event
	for _, e := range cur.Events {
		if !seen[keyOf(e)] {
			fresh = append(fresh, e)
		}
	}
	cur.Events = fresh
	return cur, len(fresh) > 0 || !reflect.DeepEqual(prev.Task, cur.Task)
}

// Gone is the history of a Workload deleted at at (its last state is wl). A
// task deleted before it finished ends there: outcome deleted, its run up to
// the deletion.
func Gone(wl *kueuev1beta2.Workload, teamPrefix string, at time.Time) Change {
	if wl.DeletionTimestamp != nil && wl.DeletionTimestamp.Time.Before(at) {
		at = wl.DeletionTimestamp.Time
	}
	c := observe(wl, teamPrefix, at)
	c.Task.DeletedAt = at
	if c.Task.FinishedAt.IsZero() {
		c.Task.State = domain.TaskFinished
		c.Task.FinishedAt = at
		c.Task.Outcome = OutcomeDeleted
	}
	c.Events = append(c.Events, Event{Kind: EventDeleted, At: at, ClusterQueue: c.Task.ClusterQueue})
	return c
}

type eventKey struct {
	kind EventKind
	at   int64
}

func keyOf(e Event) eventKey { return eventKey{e.Kind, e.At.UnixMilli()} }

// observe reads one state of a Workload. The times and durations come from
// domain.TaskOf, so that history and the live pages measure alike; now is the
// end of a run still going (zero: not needed).
func observe(wl *kueuev1beta2.Workload, teamPrefix string, now time.Time) Change {
	s := domain.Settings{NamespacePrefix: teamPrefix}
	live := domain.TaskOf(wl, s, "", now)
	t := Task{
		UID:           string(wl.UID),
		Namespace:     wl.Namespace,
		Name:          wl.Name,
		Team:          live.Team,
		Class:         live.Class,
		Priority:      live.Priority,
		ClusterQueue:  live.ClusterQueue,
		LocalQueue:    live.LocalQueue,
		Created:       live.Created,
		State:         live.State,
		WaitStart:     live.WaitStart,
		AdmittedAt:    live.AdmittedAt,
		FinishedAt:    live.FinishedAt,
		PastExecution: pastExecution(wl),
		Flavors:       live.Flavors,
	}
	if ref := metav1.GetControllerOfNoCopy(wl); ref != nil {
		t.OwnerKind, t.OwnerName, t.OwnerUID = ref.Kind, ref.Name, string(ref.UID)
	} else if len(wl.OwnerReferences) > 0 {
		ref := wl.OwnerReferences[0]
		t.OwnerKind, t.OwnerName, t.OwnerUID = ref.Kind, ref.Name, string(ref.UID)
	}
	t.PodSets, t.Requests = requests(wl)
	if !t.AdmittedAt.IsZero() {
		t.Wait = live.Wait
	}
	if !t.FinishedAt.IsZero() || !now.IsZero() {
		t.Run = live.Run
	}

	var events []Event
	conds := wl.Status.Conditions
	admission := wl.Status.Admission
	if c := trueCondition(conds, kueuev1beta2.WorkloadQuotaReserved); c != nil && admission != nil {
		events = append(events, Event{Kind: EventQuotaReserved, At: c.LastTransitionTime.Time, ClusterQueue: string(admission.ClusterQueue)})
	}
	if c := trueCondition(conds, kueuev1beta2.WorkloadAdmitted); c != nil && admission != nil {
		events = append(events, Event{Kind: EventAdmitted, At: c.LastTransitionTime.Time, ClusterQueue: string(admission.ClusterQueue),
			Flavors: live.Flavors, Usage: admittedUsage(wl, admission)})
	} else if c := apimeta.FindStatusCondition(conds, kueuev1beta2.WorkloadAdmitted); c != nil && t.AdmittedAt.IsZero() {
		t.ReleasedAt = c.LastTransitionTime.Time
	}
	if c := trueCondition(conds, kueuev1beta2.WorkloadEvicted); c != nil {
		events = append(events, Event{Kind: EventEvicted, At: c.LastTransitionTime.Time, ClusterQueue: t.ClusterQueue, Reason: c.Reason, Message: c.Message})
	}
	if c := trueCondition(conds, kueuev1beta2.WorkloadPreempted); c != nil {
		events = append(events, Event{Kind: EventPreempted, At: c.LastTransitionTime.Time, ClusterQueue: t.ClusterQueue,
			Reason: c.Reason, Message: c.Message, ReasonWords: preemptionWords(*c, s), Preemptor: parsePreemptor(c.Message)})
	}
	// Messages are kept where they say more than the reason: evictions and
	// preemptions.
	if c := trueCondition(conds, kueuev1beta2.WorkloadRequeued); c != nil {
		events = append(events, Event{Kind: EventRequeued, At: c.LastTransitionTime.Time, ClusterQueue: t.ClusterQueue, Reason: c.Reason})
	}
	if c := trueCondition(conds, kueuev1beta2.WorkloadFinished); c != nil {
		t.Outcome, t.FinishReason = outcomeOf(c.Reason), c.Reason
		events = append(events, Event{Kind: EventFinished, At: c.LastTransitionTime.Time, ClusterQueue: t.ClusterQueue, Reason: c.Reason})
	}
	slices.SortStableFunc(events, func(a, b Event) int { return a.At.Compare(b.At) })
	return Change{Task: t, Events: events}
}

func trueCondition(conds []metav1.Condition, typ string) *metav1.Condition {
	c := apimeta.FindStatusCondition(conds, typ)
	if c == nil || c.Status != metav1.ConditionTrue {
		return nil
	}
	return c
}

func pastExecution(wl *kueuev1beta2.Workload) time.Duration {
	if p := wl.Status.AccumulatedPastExecutionTimeSeconds; p != nil && *p > 0 {
		return time.Duration(*p) * time.Second
	}
	return 0
}

func outcomeOf(reason string) Outcome {
	switch reason {
	case kueuev1beta2.WorkloadFinishedReasonSucceeded:
		return OutcomeSucceeded
	case kueuev1beta2.WorkloadFinishedReasonFailed:
		return OutcomeFailed
	}
	return OutcomeOther
}

// preemptionWords phrases a Preempted condition the way the Tasks page does:
// domain.TaskOf is the one place that puts Kueue's conditions in words, and a
// Workload holding only that condition gets exactly that phrase.
func preemptionWords(c metav1.Condition, s domain.Settings) string {
	wl := &kueuev1beta2.Workload{Status: kueuev1beta2.WorkloadStatus{Conditions: []metav1.Condition{c}}}
	return domain.TaskOf(wl, s, "", c.LastTransitionTime.Time).Reason
}

// preemptionMessage matches Kueue v0.19's Preempted condition message
// (pkg/scheduler/preemption.preemptionMessage): "Preempted to accommodate a
// workload (UID: <uid>, JobUID: <uid>) due to <reason>; preemptor path:
// </cohort/…/clusterqueue>; preemptee path: <…>". Kueue writes UNKNOWN for
// what it does not know.
var preemptionMessage = regexp.MustCompile(`\(UID: ([^,]*), JobUID: ([^)]*)\) due to .*?; preemptor path: ([^;]*)`)

func parsePreemptor(msg string) Preemptor {
	m := preemptionMessage.FindStringSubmatch(msg)
	if m == nil {
		return Preemptor{}
	}
	known := func(s string) string {
		if s = strings.TrimSpace(s); s == "UNKNOWN" {
			return ""
		}
		return s
	}
	p := Preemptor{UID: known(m[1]), JobUID: known(m[2]), Path: known(m[3])}
	if p.Path != "" {
		p.ClusterQueue = p.Path[strings.LastIndex(p.Path, "/")+1:]
	}
	return p
}

// requests are what each pod set asks for, count × one pod's requests as the
// scheduler counts them (containers, sidecars, init containers, overhead); a
// limit stands in for a missing request, as Kueue does.
func requests(wl *kueuev1beta2.Workload) ([]PodSetRequest, Resources) {
	var sets []PodSetRequest
	var total Resources
	for _, ps := range wl.Spec.PodSets {
		r := scaled(podRequests(&ps.Template.Spec), int64(ps.Count))
		sets = append(sets, PodSetRequest{Name: string(ps.Name), Count: ps.Count, Resources: r})
		total = total.plus(r)
	}
	return sets, total
}

func podRequests(spec *corev1.PodSpec) Resources {
	pod := &corev1.Pod{Spec: *spec}
	pod.Spec.Containers = limitsAsRequests(spec.Containers)
	pod.Spec.InitContainers = limitsAsRequests(spec.InitContainers)
	return resourcesOf(resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}))
}

func limitsAsRequests(cs []corev1.Container) []corev1.Container {
	out := slices.Clone(cs)
	for i := range out {
		c := &out[i]
		for name, limit := range c.Resources.Limits {
			if _, ok := c.Resources.Requests[name]; !ok {
				c.Resources.Requests = c.Resources.Requests.DeepCopy()
				if c.Resources.Requests == nil {
					c.Resources.Requests = corev1.ResourceList{}
				}
				c.Resources.Requests[name] = limit
			}
		}
	}
	return out
}

func scaled(r Resources, n int64) Resources {
	return Resources{r.GPUs * n, r.Neuron * n, r.CPUMilli * n, r.MemoryMiB * n}
}

func resourcesOf(l corev1.ResourceList) Resources {
	var r Resources
	if q, ok := l[domain.ResourceGPU]; ok {
		r.GPUs = q.Value()
	}
	if q, ok := l[domain.ResourceNeuron]; ok {
		r.Neuron = q.Value()
	}
	if q, ok := l[corev1.ResourceCPU]; ok {
		r.CPUMilli = q.MilliValue()
	}
	if q, ok := l[corev1.ResourceMemory]; ok {
		r.MemoryMiB = q.Value() / (1 << 20)
	}
	return r
}

// admittedUsage is what an admission holds per flavor: Kueue's recorded
// resource usage of each pod set (else its requests at the admitted count),
// each resource on the flavor assigned to it.
func admittedUsage(wl *kueuev1beta2.Workload, a *kueuev1beta2.Admission) []FlavorUsage {
	byFlavor := map[string]Resources{}
	for _, psa := range a.PodSetAssignments {
		parts := map[corev1.ResourceName]Resources{}
		if psa.ResourceUsage != nil {
			for name, q := range psa.ResourceUsage {
				parts[name] = resourcesOf(corev1.ResourceList{name: q})
			}
		} else if ps := findPodSet(wl, psa.Name); ps != nil {
			count := ps.Count
			if psa.Count != nil {
				count = *psa.Count
			}
			r := scaled(podRequests(&ps.Template.Spec), int64(count))
			parts[domain.ResourceGPU] = Resources{GPUs: r.GPUs}
			parts[domain.ResourceNeuron] = Resources{Neuron: r.Neuron}
			parts[corev1.ResourceCPU] = Resources{CPUMilli: r.CPUMilli}
			parts[corev1.ResourceMemory] = Resources{MemoryMiB: r.MemoryMiB}
		}
		for name, r := range parts {
			if flavor, ok := psa.Flavors[name]; ok && r != (Resources{}) {
				byFlavor[string(flavor)] = byFlavor[string(flavor)].plus(r)
			}
		}
	}
	out := make([]FlavorUsage, 0, len(byFlavor))
	for f, r := range byFlavor {
		out = append(out, FlavorUsage{Flavor: f, Resources: r})
	}
	slices.SortFunc(out, func(a, b FlavorUsage) int { return strings.Compare(a.Flavor, b.Flavor) })
	return out
}

func findPodSet(wl *kueuev1beta2.Workload, name kueuev1beta2.PodSetReference) *kueuev1beta2.PodSet {
	for i := range wl.Spec.PodSets {
		if wl.Spec.PodSets[i].Name == name {
			return &wl.Spec.PodSets[i]
		}
	}
	return nil
}
