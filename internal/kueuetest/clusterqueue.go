package kueuetest

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// ClusterQueueWrapper builds test ClusterQueues with one GPU flavor,
// ml.p5.48xlarge.
type ClusterQueueWrapper struct{ kueuev1beta2.ClusterQueue }

// MakeClusterQueue starts a ClusterQueue that admits every namespace
// (namespaceSelector {}, as Kueue's getting-started example has it).
func MakeClusterQueue(name string) *ClusterQueueWrapper {
	return &ClusterQueueWrapper{kueuev1beta2.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: kueuev1beta2.ClusterQueueSpec{NamespaceSelector: &metav1.LabelSelector{}}}}
}

// Namespaces has the queue admit the namespaces selector selects (nil:
// none, Kueue's default).
func (w *ClusterQueueWrapper) Namespaces(selector *metav1.LabelSelector) *ClusterQueueWrapper {
	w.Spec.NamespaceSelector = selector
	return w
}

// Obj is the ClusterQueue built.
func (w *ClusterQueueWrapper) Obj() *kueuev1beta2.ClusterQueue { return &w.ClusterQueue }

// Cohort puts the queue in a cohort.
func (w *ClusterQueueWrapper) Cohort(name string) *ClusterQueueWrapper {
	w.Spec.CohortName = kueuev1beta2.CohortReference(name)
	return w
}

// Nominal gives the queue a GPU quota, and a lending limit when not nil.
func (w *ClusterQueueWrapper) Nominal(gpus int64, lendingLimit *int64) *ClusterQueueWrapper {
	rq := kueuev1beta2.ResourceQuota{Name: GPU, NominalQuota: *resource.NewQuantity(gpus, resource.DecimalSI)}
	if lendingLimit != nil {
		rq.LendingLimit = resource.NewQuantity(*lendingLimit, resource.DecimalSI)
	}
	w.Spec.ResourceGroups = []kueuev1beta2.ResourceGroup{{CoveredResources: []corev1.ResourceName{GPU},
		Flavors: []kueuev1beta2.FlavorQuotas{{Name: "ml.p5.48xlarge", Resources: []kueuev1beta2.ResourceQuota{rq}}}}}
	return w
}

// Quota adds a nominal quota of a resource on flavor (each flavor in its
// own resource group).
func (w *ClusterQueueWrapper) Quota(flavor string, name corev1.ResourceName, nominal string) *ClusterQueueWrapper {
	rq := kueuev1beta2.ResourceQuota{Name: name, NominalQuota: resource.MustParse(nominal)}
	for i := range w.Spec.ResourceGroups {
		rg := &w.Spec.ResourceGroups[i]
		if len(rg.Flavors) == 1 && string(rg.Flavors[0].Name) == flavor {
			rg.CoveredResources = append(rg.CoveredResources, name)
			rg.Flavors[0].Resources = append(rg.Flavors[0].Resources, rq)
			return w
		}
	}
	w.Spec.ResourceGroups = append(w.Spec.ResourceGroups, kueuev1beta2.ResourceGroup{CoveredResources: []corev1.ResourceName{name},
		Flavors: []kueuev1beta2.FlavorQuotas{{Name: kueuev1beta2.ResourceFlavorReference(flavor), Resources: []kueuev1beta2.ResourceQuota{rq}}}})
	return w
}

// Usage is the GPUs its admitted Workloads hold, borrowed ones among them,
// as Kueue reports in the queue's status.
func (w *ClusterQueueWrapper) Usage(total, borrowed int64) *ClusterQueueWrapper {
	w.Status.FlavorsUsage = []kueuev1beta2.FlavorUsage{{Name: "ml.p5.48xlarge", Resources: []kueuev1beta2.ResourceUsage{{
		Name: GPU, Total: *resource.NewQuantity(total, resource.DecimalSI), Borrowed: *resource.NewQuantity(borrowed, resource.DecimalSI),
	}}}}
	return w
}

// UsageOf adds what its admitted Workloads hold of a resource on flavor,
// borrowed among it, as Kueue reports in the queue's status.
func (w *ClusterQueueWrapper) UsageOf(flavor string, name corev1.ResourceName, total, borrowed string) *ClusterQueueWrapper {
	ru := kueuev1beta2.ResourceUsage{Name: name, Total: resource.MustParse(total), Borrowed: resource.MustParse(borrowed)}
	for i := range w.Status.FlavorsUsage {
		if fu := &w.Status.FlavorsUsage[i]; string(fu.Name) == flavor {
			fu.Resources = append(fu.Resources, ru)
			return w
		}
	}
	w.Status.FlavorsUsage = append(w.Status.FlavorsUsage, kueuev1beta2.FlavorUsage{Name: kueuev1beta2.ResourceFlavorReference(flavor), Resources: []kueuev1beta2.ResourceUsage{ru}})
	return w
}

// Stopped holds the queue: it admits nothing new.
func (w *ClusterQueueWrapper) Stopped() *ClusterQueueWrapper {
	w.Spec.StopPolicy = ptr.To(kueuev1beta2.Hold)
	return w
}

// MakeLocalQueue is a LocalQueue in namespace that feeds clusterQueue.
func MakeLocalQueue(namespace, name, clusterQueue string) *kueuev1beta2.LocalQueue {
	return &kueuev1beta2.LocalQueue{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       kueuev1beta2.LocalQueueSpec{ClusterQueue: kueuev1beta2.ClusterQueueReference(clusterQueue)},
	}
}

// Labels sets the ClusterQueue's labels.
func (w *ClusterQueueWrapper) Labels(kv ...string) *ClusterQueueWrapper {
	if w.ObjectMeta.Labels == nil {
		w.ObjectMeta.Labels = map[string]string{}
	}
	for i := 0; i+1 < len(kv); i += 2 {
		w.ObjectMeta.Labels[kv[i]] = kv[i+1]
	}
	return w
}

// WrittenBy records manager as the field manager of the ClusterQueue's spec
// (what `kubectl apply` or a GitOps tool leaves in managedFields).
func (w *ClusterQueueWrapper) WrittenBy(manager string) *ClusterQueueWrapper {
	w.ManagedFields = append(w.ManagedFields, metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationApply,
		APIVersion: "kueue.x-k8s.io/v1beta2", FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:cohortName":{}}}`)})
	return w
}

// MakeCohort is a Cohort under parent ("" for a root) with gpus GPUs of its
// own on ml.p5.48xlarge (none when 0).
func MakeCohort(name, parent string, gpus int64) *kueuev1beta2.Cohort {
	co := &kueuev1beta2.Cohort{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: kueuev1beta2.CohortSpec{ParentName: kueuev1beta2.CohortReference(parent)}}
	if gpus > 0 {
		co.Spec.ResourceGroups = []kueuev1beta2.ResourceGroup{{CoveredResources: []corev1.ResourceName{GPU},
			Flavors: []kueuev1beta2.FlavorQuotas{{Name: "ml.p5.48xlarge",
				Resources: []kueuev1beta2.ResourceQuota{{Name: GPU, NominalQuota: *resource.NewQuantity(gpus, resource.DecimalSI)}}}}}}
	}
	return co
}
