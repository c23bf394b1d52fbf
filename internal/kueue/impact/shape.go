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

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
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
	// Admission is the Workload's while it holds quota; shared with no one
	// (copied from the informer's object).
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
}

// kueueConditions are the conditions Kueue's scheduler and queues read.
var kueueConditions = []string{kueue.WorkloadQuotaReserved, kueue.WorkloadAdmitted, kueue.WorkloadEvicted,
	kueue.WorkloadRequeued, kueue.WorkloadFinished, kueue.WorkloadPreempted, kueue.WorkloadPodsReady,
	kueue.WorkloadDeactivationTarget}

// ShapeOf reads the Shape of wl; nil for a finished Workload, which holds
// nothing and waits for nothing.
func ShapeOf(wl *kueue.Workload) *Shape {
	if apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadFinished) {
		return nil
	}
	s := &Shape{
		Namespace: wl.Namespace, Name: wl.Name, UID: wl.UID, Queue: wl.Spec.QueueName,
		Priority: wl.Spec.Priority, PriorityClass: wl.Spec.PriorityClassRef, Created: wl.CreationTimestamp,
		Active: wl.Spec.Active, ReclaimablePods: wl.Status.ReclaimablePods,
	}
	if wl.Status.Admission != nil {
		s.Admission = wl.Status.Admission.DeepCopy()
	}
	for _, c := range wl.Status.Conditions {
		if slices.Contains(kueueConditions, c.Type) {
			c.Message = ""
			c.ObservedGeneration = 0
			s.Conditions = append(s.Conditions, c)
		}
	}
	s.PodSets = make([]PodSetShape, len(wl.Spec.PodSets))
	for i, ps := range wl.Spec.PodSets {
		spec := &ps.Template.Spec
		s.PodSets[i] = PodSetShape{
			Name: ps.Name, Count: ps.Count, MinCount: ps.MinCount, Requests: podRequests(spec),
			NodeSelector: spec.NodeSelector, Tolerations: spec.Tolerations, Topology: asksTopology(ps.TopologyRequest),
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
				Containers:   []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: ps.Requests}}},
				NodeSelector: ps.NodeSelector, Tolerations: ps.Tolerations, Affinity: ps.Affinity,
			}}}
	}
	return wl
}
