// Package impact answers "what will Kueue do?" before anything is written:
// which admitted Workloads a change would preempt, which pending ones it
// would admit, and where a job submitted now would go. It does not model
// Kueue's rules: it runs Kueue's own scheduler (the module in go.mod, the
// version the console supports) over an in-memory copy of the cluster's
// queues, cohorts, flavors and Workloads, until no queue has a head left.
// Nothing it does reaches the apiserver: its client answers from the copy.
//
// It imports no console package (the cluster side hands it the copy) and
// neither HTTP nor pages.
package impact

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"unique"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/workload/concurrentadmission"
)

// Shape is what the preview keeps of one Workload: what Kueue's scheduler
// reads of it, and nothing else (no templates beyond one pod's effective
// requests and where it may run). At 50 000 Workloads the objects
// themselves would be most of the console's memory; a Shape is a few
// hundred bytes.
type Shape struct {
	Namespace, Name string
	UID             types.UID
	Queue           kueue.LocalQueueName
	Priority        *int32
	PriorityClass   *kueue.PriorityClassRef
	Created         metav1.Time
	Active          *bool
	PodSets         []PodSetShape
	// Admission is the Workload's while it holds quota.
	Admission *kueue.Admission
	// Conditions are Kueue's, without their messages.
	Conditions      []metav1.Condition
	ReclaimablePods []kueue.ReclaimablePod
}

// PodSetShape is one pod set: how many pods, one pod's requests (what
// Kueue counts: the containers', init containers' and overhead's), and the
// scheduling constraints that decide which flavors it may take.
type PodSetShape struct {
	Name         kueue.PodSetReference
	Count        int32
	MinCount     *int32
	Requests     corev1.ResourceList
	NodeSelector map[string]string
	Tolerations  []corev1.Toleration
	Affinity     *corev1.Affinity
	Topology     bool // a topology request: node-level placement the preview cannot predict
	// Claims: its pods ask for devices through resource claims (Dynamic
	// Resource Allocation), which Kueue charges by its deviceClassMappings
	// and the copy does not count.
	Claims bool
}

// kueueConditions are the conditions whose being true Kueue's scheduler
// and queues read: holding quota, an eviction in flight, and the reasons
// that move a Workload's place in its queue. A false one reads as absent.
var kueueConditions = []string{kueue.WorkloadQuotaReserved, kueue.WorkloadAdmitted, kueue.WorkloadEvicted,
	kueue.WorkloadPreempted, kueue.WorkloadDeactivationTarget}

// Most Workloads share their requests, priority class and condition
// reasons with many others: one copy of each is kept.
var (
	sharedRequests sync.Map // canonical form → corev1.ResourceList
	sharedClasses  sync.Map // name → *kueue.PriorityClassRef
)

func shareRequests(l corev1.ResourceList) corev1.ResourceList {
	names := slices.Sorted(maps.Keys(l))
	var key strings.Builder
	for _, n := range names {
		q := l[n]
		key.WriteString(string(n) + "=" + q.String() + ";")
	}
	got, _ := sharedRequests.LoadOrStore(key.String(), l)
	return got.(corev1.ResourceList)
}

func shareClass(ref *kueue.PriorityClassRef) *kueue.PriorityClassRef {
	if ref == nil {
		return nil
	}
	got, _ := sharedClasses.LoadOrStore(string(ref.Kind)+"/"+ref.Name, ref)
	return got.(*kueue.PriorityClassRef)
}

// ShapeOf reads the Shape of wl; nil for a finished Workload, which holds
// nothing and waits for nothing.
func ShapeOf(wl *kueue.Workload) *Shape {
	// A concurrent-admission Variant is Kueue's attempt at its parent's
	// task on one flavor: the copy holds the task (which bears the
	// admission of its admitted Variant) and tries its flavors in order.
	if apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadFinished) || concurrentadmission.IsVariant(wl) {
		return nil
	}
	s := &Shape{
		Namespace: wl.Namespace, Name: wl.Name, UID: wl.UID, Queue: wl.Spec.QueueName,
		Priority: wl.Spec.Priority, PriorityClass: shareClass(wl.Spec.PriorityClassRef), Created: wl.CreationTimestamp,
		Active: wl.Spec.Active, ReclaimablePods: wl.Status.ReclaimablePods,
	}
	// The informer's object goes once read; what the Shape points to of it
	// (its admission, selectors, tolerations) stays, unshared and unchanged.
	s.Admission = wl.Status.Admission
	for _, c := range wl.Status.Conditions {
		if c.Status == metav1.ConditionTrue && slices.Contains(kueueConditions, c.Type) {
			s.Conditions = append(s.Conditions, metav1.Condition{Type: unique.Make(c.Type).Value(), Status: metav1.ConditionTrue,
				Reason: unique.Make(c.Reason).Value(), LastTransitionTime: c.LastTransitionTime})
		}
	}
	s.PodSets = make([]PodSetShape, len(wl.Spec.PodSets))
	for i, ps := range wl.Spec.PodSets {
		spec := &ps.Template.Spec
		s.PodSets[i] = PodSetShape{
			Name: ps.Name, Count: ps.Count, MinCount: ps.MinCount, Requests: shareRequests(podRequests(spec)),
			NodeSelector: spec.NodeSelector, Tolerations: spec.Tolerations, Topology: asksTopology(ps.TopologyRequest),
			Claims: len(spec.ResourceClaims) > 0,
		}
		if spec.Affinity != nil && spec.Affinity.NodeAffinity != nil {
			s.PodSets[i].Affinity = &corev1.Affinity{NodeAffinity: spec.Affinity.NodeAffinity}
		}
	}
	return s
}

// asksTopology reports a request for nodes close to each other. Kueue's
// job integrations give every pod set a request naming only its pod index
// label: that asks for nothing.
func asksTopology(r *kueue.PodSetTopologyRequest) bool {
	return r != nil && (r.Required != nil || r.Preferred != nil || (r.Unconstrained != nil && *r.Unconstrained))
}

// podRequests is one pod's requests as Kueue counts them: the larger of the
// containers' sum and each init container, plus the overhead. A container
// with limits and no requests requests its limits.
func podRequests(spec *corev1.PodSpec) corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, c := range spec.Containers {
		for r, q := range effective(c) {
			sum := out[r]
			sum.Add(q)
			out[r] = sum
		}
	}
	for _, c := range spec.InitContainers {
		for r, q := range effective(c) {
			if cur, ok := out[r]; !ok || q.Cmp(cur) > 0 {
				out[r] = q.DeepCopy()
			}
		}
	}
	for r, q := range spec.Overhead {
		sum := out[r]
		sum.Add(q)
		out[r] = sum
	}
	return out
}

func effective(c corev1.Container) corev1.ResourceList {
	out := maps.Clone(c.Resources.Requests)
	if out == nil {
		out = corev1.ResourceList{}
	}
	for r, q := range c.Resources.Limits {
		if _, ok := out[r]; !ok {
			out[r] = q
		}
	}
	return out
}

// Admitted reports whether the Workload holds quota now.
func (s *Shape) Admitted() bool {
	return s.Admission != nil && apimeta.IsStatusConditionTrue(s.Conditions, kueue.WorkloadQuotaReserved)
}

// Evicting reports an eviction under way: Kueue evicted the Workload, which
// still holds its quota until its job stops.
func (s *Shape) Evicting() bool {
	return s.Admitted() && s.condition(kueue.WorkloadEvicted).Status == metav1.ConditionTrue
}

// condition is the Shape's condition of type typ (zero when it has none).
func (s *Shape) condition(typ string) metav1.Condition {
	if c := apimeta.FindStatusCondition(s.Conditions, typ); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// Key is the Workload's namespace/name.
func (s *Shape) Key() string { return s.Namespace + "/" + s.Name }

// Workload is an object Kueue's scheduler reads as it would read the real
// one.
func (s *Shape) Workload() *kueue.Workload {
	wl := &kueue.Workload{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name, UID: s.UID, CreationTimestamp: s.Created},
		Spec: kueue.WorkloadSpec{QueueName: s.Queue, Priority: s.Priority, PriorityClassRef: s.PriorityClass,
			Active: s.Active},
		Status: kueue.WorkloadStatus{Conditions: slices.Clone(s.Conditions), ReclaimablePods: s.ReclaimablePods},
	}
	if s.Admission != nil {
		wl.Status.Admission = s.Admission.DeepCopy()
	}
	wl.Spec.PodSets = make([]kueue.PodSet, len(s.PodSets))
	for i, ps := range s.PodSets {
		wl.Spec.PodSets[i] = kueue.PodSet{Name: ps.Name, Count: ps.Count, MinCount: ps.MinCount,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				// A copy: Kueue may default what it is given; the shared one stays.
				Containers:   []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: maps.Clone(ps.Requests)}}},
				NodeSelector: ps.NodeSelector, Tolerations: ps.Tolerations, Affinity: ps.Affinity,
			}}}
	}
	return wl
}
