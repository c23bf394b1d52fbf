package kueuetest

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/utils/ptr"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// GPU is the resource name of NVIDIA GPUs.
const GPU corev1.ResourceName = "nvidia.com/gpu"

// Names are the naming rules a builder needs (domain.Settings has them).
type Names interface {
	TeamOfNamespace(ns string) (string, bool)
	ClusterQueue(team string) string
}

// WorkloadWrapper builds test Workloads the way Kueue's controllers leave
// them, in the style of Kueue's pkg/util/testing wrappers.
type WorkloadWrapper struct {
	kueuev1beta2.Workload
	names        Names
	clusterQueue string // where Admitted reserves quota; "" for the namespace's team queue
}

// MakeWorkload starts a Workload in namespace ns; names find the team's
// ClusterQueue it is admitted in.
func MakeWorkload(names Names, ns, name string) *WorkloadWrapper {
	return &WorkloadWrapper{Workload: kueuev1beta2.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, names: names}
}

func (b *WorkloadWrapper) Obj() *kueuev1beta2.Workload { return &b.Workload }

// Clone is a deep copy, to change as the next version of the Workload.
func (b *WorkloadWrapper) Clone() *WorkloadWrapper {
	return &WorkloadWrapper{Workload: *b.Workload.DeepCopy(), names: b.names, clusterQueue: b.clusterQueue}
}

// In makes Admitted reserve quota in the ClusterQueue cq, for a queue not
// named after a team namespace.
func (b *WorkloadWrapper) In(cq string) *WorkloadWrapper {
	b.clusterQueue = cq
	return b
}

// OwnedBy adds an owner reference, as the job integrations of Kueue set
// it (apiVersion left out: the console reads kind and name).
func (b *WorkloadWrapper) OwnedBy(kind, name string, controller bool) *WorkloadWrapper {
	b.OwnerReferences = append(b.OwnerReferences, metav1.OwnerReference{Kind: kind, Name: name,
		UID: types.UID(kind + "-" + name), Controller: ptr.To(controller)})
	return b
}

// VariantOf makes it the Variant of parent for flavor, as Kueue's
// concurrent admission makes it: owned by the parent Workload, allowed
// the one flavor.
func (b *WorkloadWrapper) VariantOf(parent *kueuev1beta2.Workload, flavor string) *WorkloadWrapper {
	b.OwnerReferences = append(b.OwnerReferences, metav1.OwnerReference{APIVersion: kueuev1beta2.SchemeGroupVersion.String(),
		Kind: "Workload", Name: parent.Name, UID: parent.UID, Controller: ptr.To(true)})
	return b.Annotation("kueue.x-k8s.io/workload-allowed-resource-flavors", flavor)
}

// Annotation sets an annotation, as Kueue's integrations mark Workloads.
func (b *WorkloadWrapper) Annotation(key, value string) *WorkloadWrapper {
	if b.Annotations == nil {
		b.Annotations = map[string]string{}
	}
	b.Annotations[key] = value
	return b
}

func (b *WorkloadWrapper) Queue(lq string) *WorkloadWrapper {
	b.Spec.QueueName = kueuev1beta2.LocalQueueName(lq)
	return b
}

func (b *WorkloadWrapper) Class(name string) *WorkloadWrapper {
	b.Spec.PriorityClassRef = kueuev1beta2.NewWorkloadPriorityClassRef(name)
	return b
}

// PodClass names a Kubernetes PriorityClass, as Kueue does for a Job with a
// priorityClassName, with the priority Kueue gives it.
func (b *WorkloadWrapper) PodClass(name string, priority int32) *WorkloadWrapper {
	b.Spec.PriorityClassRef = kueuev1beta2.NewPodPriorityClassRef(name)
	b.Spec.Priority = ptr.To(priority)
	return b
}

func (b *WorkloadWrapper) Priority(p int32) *WorkloadWrapper {
	b.Spec.Priority = ptr.To(p)
	return b
}

func (b *WorkloadWrapper) Created(t time.Time) *WorkloadWrapper {
	b.CreationTimestamp = metav1.NewTime(t)
	return b
}

func (b *WorkloadWrapper) Inactive() *WorkloadWrapper {
	b.Spec.Active = ptr.To(false)
	return b
}

// GPUs adds the pod set "main" of pods pods with one container requesting perPod GPUs.
func (b *WorkloadWrapper) GPUs(perPod int64, pods int32) *WorkloadWrapper {
	return b.PodSet("main", pods, perPod)
}

// PodSet adds a pod set whose pods have one container per GPU request given.
func (b *WorkloadWrapper) PodSet(name string, count int32, containerGPUs ...int64) *WorkloadWrapper {
	ps := kueuev1beta2.PodSet{Name: kueuev1beta2.PodSetReference(name), Count: count}
	for i, g := range containerGPUs {
		ps.Template.Spec.Containers = append(ps.Template.Spec.Containers, corev1.Container{
			Name: name + string(rune('a'+i)),
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("1"),
				GPU:                *resource.NewQuantity(g, resource.DecimalSI),
			}},
		})
	}
	b.Spec.PodSets = append(b.Spec.PodSets, ps)
	return b
}

// PodSpec adds a pod set of count pods of spec.
func (b *WorkloadWrapper) PodSpec(name string, count int32, spec corev1.PodSpec) *WorkloadWrapper {
	b.Spec.PodSets = append(b.Spec.PodSets, kueuev1beta2.PodSet{Name: kueuev1beta2.PodSetReference(name), Count: count,
		Template: corev1.PodTemplateSpec{Spec: spec}})
	return b
}

// WithUID sets the Workload's UID (the task history keys tasks by it).
func (b *WorkloadWrapper) WithUID(uid string) *WorkloadWrapper {
	b.Workload.UID = types.UID(uid)
	return b
}

// Reclaimable marks count pods of a pod set as done for good
// (status.reclaimablePods): Kueue gives their quota back.
func (b *WorkloadWrapper) Reclaimable(podSet string, count int32) *WorkloadWrapper {
	b.Status.ReclaimablePods = append(b.Status.ReclaimablePods, kueuev1beta2.ReclaimablePod{Name: kueuev1beta2.PodSetReference(podSet), Count: count})
	return b
}

// Condition sets a condition outright, transition time included.
func (b *WorkloadWrapper) Condition(typ string, status bool, reason, msg string, t time.Time) *WorkloadWrapper {
	s := metav1.ConditionFalse
	if status {
		s = metav1.ConditionTrue
	}
	apimeta.RemoveStatusCondition(&b.Status.Conditions, typ)
	b.Status.Conditions = append(b.Status.Conditions, metav1.Condition{
		Type: typ, Status: s, Reason: reason, Message: msg, LastTransitionTime: metav1.NewTime(t),
	})
	return b
}

// Pending is the scheduler's verdict: QuotaReserved=False.
func (b *WorkloadWrapper) Pending(reason, msg string, t time.Time) *WorkloadWrapper {
	return b.Condition(kueuev1beta2.WorkloadQuotaReserved, false, reason, msg, t)
}

// Admitted reserves quota in the namespace's team ClusterQueue on flavor and
// admits, clearing an earlier eviction as Kueue does.
func (b *WorkloadWrapper) Admitted(t time.Time, flavor string) *WorkloadWrapper {
	flavors := map[string]string{}
	for _, ps := range b.Spec.PodSets {
		flavors[string(ps.Name)] = flavor
	}
	return b.AdmittedOn(t, flavors)
}

// AdmittedOn is Admitted with each pod set on its own flavor (by pod set
// name). Each pod set's resourceUsage is what Kueue records: one pod's
// requests as the scheduler counts them (overhead included, a limit for a
// missing request) times its pods, every resource on the pod set's flavor.
func (b *WorkloadWrapper) AdmittedOn(t time.Time, flavorOfPodSet map[string]string) *WorkloadWrapper {
	cq := b.clusterQueue
	if cq == "" {
		team, _ := b.names.TeamOfNamespace(b.Namespace)
		cq = b.names.ClusterQueue(team)
	}
	a := &kueuev1beta2.Admission{ClusterQueue: kueuev1beta2.ClusterQueueReference(cq)}
	for _, ps := range b.Spec.PodSets {
		flavor := kueuev1beta2.ResourceFlavorReference(flavorOfPodSet[string(ps.Name)])
		usage := corev1.ResourceList{}
		flavors := map[corev1.ResourceName]kueuev1beta2.ResourceFlavorReference{}
		for r, q := range podRequests(ps.Template.Spec) {
			total := q.DeepCopy()
			total.Mul(int64(ps.Count))
			usage[r] = total
			flavors[r] = flavor
		}
		a.PodSetAssignments = append(a.PodSetAssignments, kueuev1beta2.PodSetAssignment{
			Name: ps.Name, Flavors: flavors, ResourceUsage: usage, Count: ptr.To(ps.Count),
		})
	}
	b.Status.Admission = a
	for _, typ := range []string{kueuev1beta2.WorkloadEvicted, kueuev1beta2.WorkloadPreempted} {
		if c := apimeta.FindStatusCondition(b.Status.Conditions, typ); c != nil && c.Status == metav1.ConditionTrue {
			b.Condition(typ, false, "QuotaReserved", "Previously: "+c.Message, t)
		}
	}
	b.Condition(kueuev1beta2.WorkloadQuotaReserved, true, "QuotaReserved", "Quota reserved in ClusterQueue "+string(a.ClusterQueue), t)
	return b.Condition(kueuev1beta2.WorkloadAdmitted, true, "Admitted", "The workload is admitted", t)
}

// podRequests is one pod's requests as Kueue counts them: limits stand in
// for missing requests (its webhook), then the scheduler's sum with
// overhead.
func podRequests(spec corev1.PodSpec) corev1.ResourceList {
	spec = *spec.DeepCopy()
	for _, cs := range [][]corev1.Container{spec.Containers, spec.InitContainers} {
		for i := range cs {
			for r, q := range cs[i].Resources.Limits {
				if _, ok := cs[i].Resources.Requests[r]; !ok {
					if cs[i].Resources.Requests == nil {
						cs[i].Resources.Requests = corev1.ResourceList{}
					}
					cs[i].Resources.Requests[r] = q
				}
			}
		}
	}
	return resourcehelper.PodRequests(&corev1.Pod{Spec: spec}, resourcehelper.PodResourcesOptions{})
}

// Usage overrides the admitted GPU usage of a pod set (partial admission).
func (b *WorkloadWrapper) Usage(podSet string, count int32, gpus int64) *WorkloadWrapper {
	for i := range b.Status.Admission.PodSetAssignments {
		psa := &b.Status.Admission.PodSetAssignments[i]
		if string(psa.Name) == podSet {
			psa.Count = ptr.To(count)
			psa.ResourceUsage[GPU] = *resource.NewQuantity(gpus, resource.DecimalSI)
		}
	}
	return b
}

func (b *WorkloadWrapper) Requeued(t time.Time) *WorkloadWrapper {
	return b.Condition(kueuev1beta2.WorkloadRequeued, true, kueuev1beta2.WorkloadBackoffFinished, "The workload backoff was finished", t)
}

func (b *WorkloadWrapper) RequeueAt(t time.Time) *WorkloadWrapper {
	b.Status.RequeueState = &kueuev1beta2.RequeueState{Count: ptr.To[int32](1), RequeueAt: ptr.To(metav1.NewTime(t))}
	return b
}

func (b *WorkloadWrapper) Finished(t time.Time, reason string) *WorkloadWrapper {
	return b.Condition(kueuev1beta2.WorkloadFinished, true, reason, "Job finished", t)
}

// Evicted does what Kueue does on eviction: Evicted=True, the run so far
// added to the past execution time, quota released, Requeued set (True only
// after a preemption or node failure).
func (b *WorkloadWrapper) Evicted(t time.Time, reason, msg string) *WorkloadWrapper {
	b.Condition(kueuev1beta2.WorkloadEvicted, true, reason, msg, t)
	if c := apimeta.FindStatusCondition(b.Status.Conditions, kueuev1beta2.WorkloadAdmitted); c != nil && c.Status == metav1.ConditionTrue {
		past := ptr.Deref(b.Status.AccumulatedPastExecutionTimeSeconds, 0) + int32(t.Sub(c.LastTransitionTime.Time).Seconds())
		b.Status.AccumulatedPastExecutionTimeSeconds = &past
	}
	b.Status.Admission = nil
	b.Condition(kueuev1beta2.WorkloadAdmitted, false, "NoReservation", "The workload has no reservation", t)
	b.Pending(kueuev1beta2.WorkloadQuotaReservedReasonPendingEvaluation, msg, t)
	requeued := reason == kueuev1beta2.WorkloadEvictedByPreemption || reason == kueuev1beta2.WorkloadEvictedDueToNodeFailures
	return b.Condition(kueuev1beta2.WorkloadRequeued, requeued, reason, msg, t)
}

// Preempted is an eviction by preemption with its Preempted condition.
func (b *WorkloadWrapper) Preempted(t time.Time, reason, msg string) *WorkloadWrapper {
	b.Condition(kueuev1beta2.WorkloadPreempted, true, reason, msg, t)
	return b.Evicted(t, kueuev1beta2.WorkloadEvictedByPreemption, msg)
}

func (b *WorkloadWrapper) PastExecution(seconds int32) *WorkloadWrapper {
	b.Status.AccumulatedPastExecutionTimeSeconds = ptr.To(seconds)
	return b
}
