package taskhistory

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/domain"
)

const teamPrefix = "hyperpod-ns-"

// wl builds Workloads the way Kueue's controllers leave them, one state
// after another: each method changes the Workload and returns it, and
// snap() copies the current state.
type wl struct{ kueuev1beta2.Workload }

func newWL(team, name string, created time.Time) *wl {
	w := &wl{kueuev1beta2.Workload{ObjectMeta: metav1.ObjectMeta{
		Namespace: teamPrefix + team, Name: name, UID: types.UID("uid-" + team + "-" + name),
		CreationTimestamp: metav1.NewTime(created),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: name,
			UID: types.UID("job-" + name), Controller: ptr.To(true)}},
	}}}
	w.Spec.QueueName = kueuev1beta2.LocalQueueName(teamPrefix + team + "-localqueue")
	return w
}

func (w *wl) snap() *kueuev1beta2.Workload { return w.DeepCopy() }

func (w *wl) class(name string, value int32) *wl {
	w.Spec.PriorityClassRef = kueuev1beta2.NewWorkloadPriorityClassRef(name)
	w.Spec.Priority = ptr.To(value)
	return w
}

// pods adds the pod set "main": pods pods of one container asking for gpus
// GPUs, 4 vCPU and 16 GiB.
func (w *wl) pods(pods int32, gpus int64) *wl {
	w.Spec.PodSets = append(w.Spec.PodSets, kueuev1beta2.PodSet{Name: "main", Count: pods, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			domain.ResourceGPU:    *resource.NewQuantity(gpus, resource.DecimalSI),
			corev1.ResourceCPU:    resource.MustParse("4"),
			corev1.ResourceMemory: resource.MustParse("16Gi"),
		}}}},
	}}})
	return w
}

// migPods adds the pod set "mig": pods pods of one container asking for
// perPod partitions of a MIG profile ("mig-1g.10gb") and nothing else.
func (w *wl) migPods(pods int32, profile string, perPod int64) *wl {
	w.Spec.PodSets = append(w.Spec.PodSets, kueuev1beta2.PodSet{Name: "mig", Count: pods, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			domain.PartitionResource(profile): *resource.NewQuantity(perPod, resource.DecimalSI),
		}}}},
	}}})
	return w
}

func (w *wl) cond(typ string, status bool, reason, msg string, at time.Time) *wl {
	s := metav1.ConditionFalse
	if status {
		s = metav1.ConditionTrue
	}
	if c := apimeta.FindStatusCondition(w.Status.Conditions, typ); c != nil && c.Status == s && c.Reason == reason && c.Message == msg {
		return w
	}
	apimeta.RemoveStatusCondition(&w.Status.Conditions, typ)
	w.Status.Conditions = append(w.Status.Conditions, metav1.Condition{Type: typ, Status: s, Reason: reason, Message: msg, LastTransitionTime: metav1.NewTime(at)})
	return w
}

func (w *wl) pending(at time.Time) *wl {
	return w.cond(kueuev1beta2.WorkloadQuotaReserved, false, "Pending", "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor ml.p5.48xlarge, 8 more needed", at)
}

func (w *wl) clusterQueue() string {
	return domain.Settings{NamespacePrefix: teamPrefix}.ClusterQueue(w.Namespace[len(teamPrefix):])
}

// admit reserves quota on flavor for every resource asked for and admits,
// clearing an eviction as Kueue does.
func (w *wl) admit(at time.Time, flavor string) *wl {
	a := &kueuev1beta2.Admission{ClusterQueue: kueuev1beta2.ClusterQueueReference(w.clusterQueue())}
	for _, ps := range w.Spec.PodSets {
		req := ps.Template.Spec.Containers[0].Resources.Requests
		usage := corev1.ResourceList{}
		flavors := map[corev1.ResourceName]kueuev1beta2.ResourceFlavorReference{}
		for name, q := range req {
			v := q.DeepCopy()
			for range ps.Count - 1 {
				v.Add(q)
			}
			usage[name], flavors[name] = v, kueuev1beta2.ResourceFlavorReference(flavor)
		}
		a.PodSetAssignments = append(a.PodSetAssignments, kueuev1beta2.PodSetAssignment{Name: ps.Name, ResourceUsage: usage, Count: ptr.To(ps.Count),
			Flavors: flavors})
	}
	w.Status.Admission = a
	w.cond(kueuev1beta2.WorkloadQuotaReserved, true, "QuotaReserved", "Quota reserved in ClusterQueue "+w.clusterQueue(), at)
	for _, typ := range []string{kueuev1beta2.WorkloadEvicted, kueuev1beta2.WorkloadPreempted} {
		if c := apimeta.FindStatusCondition(w.Status.Conditions, typ); c != nil && c.Status == metav1.ConditionTrue {
			w.cond(typ, false, "QuotaReserved", "Previously: "+c.Message, at)
		}
	}
	return w.cond(kueuev1beta2.WorkloadAdmitted, true, "Admitted", "The workload is admitted", at)
}

// preemptionMsg is Kueue v0.19's Preempted message.
func preemptionMsg(preemptorUID, reasonWords, preemptorCQ, preempteeCQ string) string {
	return fmt.Sprintf("Preempted to accommodate a workload (UID: %s, JobUID: job-%s) due to %s; preemptor path: /shared-pool/%s; preemptee path: /shared-pool/%s",
		preemptorUID, preemptorUID, reasonWords, preemptorCQ, preempteeCQ)
}

// preempt marks the eviction by preemption (the pods are being stopped).
func (w *wl) preempt(at time.Time, reason, msg string) *wl {
	w.cond(kueuev1beta2.WorkloadEvicted, true, kueuev1beta2.WorkloadEvictedByPreemption, msg, at)
	w.cond(kueuev1beta2.WorkloadPreempted, true, reason, msg, at)
	return w.cond(kueuev1beta2.WorkloadRequeued, false, kueuev1beta2.WorkloadEvictedByPreemption, msg, at)
}

// release ends the admission after an eviction: quota released, the run so
// far added to accumulatedPastExecutionTimeSeconds.
func (w *wl) release(at time.Time) *wl {
	if c := apimeta.FindStatusCondition(w.Status.Conditions, kueuev1beta2.WorkloadAdmitted); c != nil && c.Status == metav1.ConditionTrue {
		d := int32(at.Sub(c.LastTransitionTime.Time).Seconds())
		w.Status.AccumulatedPastExecutionTimeSeconds = ptr.To(ptr.Deref(w.Status.AccumulatedPastExecutionTimeSeconds, 0) + d)
	}
	w.Status.Admission = nil
	w.cond(kueuev1beta2.WorkloadQuotaReserved, false, "Pending", "Preempted", at)
	return w.cond(kueuev1beta2.WorkloadAdmitted, false, "NoReservation", "The workload has no reservation", at)
}

func (w *wl) requeue(at time.Time) *wl {
	return w.cond(kueuev1beta2.WorkloadRequeued, true, "BackoffFinished", "The workload backoff was finished", at)
}

func (w *wl) finish(at time.Time, reason string) *wl {
	return w.cond(kueuev1beta2.WorkloadFinished, true, reason, "Job finished", at)
}

func (w *wl) deactivate() *wl {
	w.Spec.Active = ptr.To(false)
	return w
}
