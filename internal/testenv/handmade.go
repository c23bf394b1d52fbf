package testenv

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// HandMade is a Kueue setup written by hand the way Kueue's getting-started
// and shared-quota examples are, applied with kubectl: a ClusterQueue in a
// cohort of its own, serving two ordinary namespaces by a label, with two
// resource groups (GPUs, vCPU and memory on an instance type's flavor, with
// a lending limit on the GPUs; pods on a flavor without node labels), and a
// LocalQueue "user-queue" in each namespace, and a group bound to the edit
// role in the first. All of it goes when the test ends.
type HandMade struct {
	ID, Flavor, ClusterQueue, Cohort string
	Namespaces                       []string
	c                                Clients
}

// gpu is the resource name of NVIDIA GPUs.
const gpu corev1.ResourceName = "nvidia.com/gpu"

// ApplyHandMade writes a HandMade setup whose GPUs are on gpuFlavor (a
// ResourceFlavor that must exist) with 4 GPUs of quota, 1 of them lendable,
// in cohort ("" for a cohort of its own).
func ApplyHandMade(t testing.TB, c Clients, gpuFlavor, cohort string) HandMade {
	t.Helper()
	return ApplyHandMadeWith(t, c, gpuFlavor, cohort, nil)
}

// ApplyHandMadeWith is ApplyHandMade with the ClusterQueue changed by edit
// (nil: none) before it is created.
func ApplyHandMadeWith(t testing.TB, c Clients, gpuFlavor, cohort string, edit func(*kueuev1beta2.ClusterQueue)) HandMade {
	t.Helper()
	ctx := context.Background()
	id := rand.String(5)
	if cohort == "" {
		cohort = "org-" + id
	}
	h := HandMade{ID: id, Flavor: "default-flavor-" + id, ClusterQueue: "cluster-queue-" + id, Cohort: cohort, c: c}
	kubectl := metav1.CreateOptions{FieldManager: "kubectl-client-side-apply"}
	for _, name := range []string{"research-" + id, "vision-" + id} {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"research-group": id}}}
		if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, ns, kubectl); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Kube.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{}) })
		h.Namespaces = append(h.Namespaces, name)
	}
	rf := &kueuev1beta2.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: h.Flavor}}
	if _, err := c.Kueue.KueueV1beta2().ResourceFlavors().Create(ctx, rf, kubectl); err != nil {
		t.Fatal(err)
	}
	q := resource.MustParse
	cq := &kueuev1beta2.ClusterQueue{
		ObjectMeta: metav1.ObjectMeta{Name: h.ClusterQueue},
		Spec: kueuev1beta2.ClusterQueueSpec{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"research-group": id}},
			CohortName:        kueuev1beta2.CohortReference(h.Cohort),
			ResourceGroups: []kueuev1beta2.ResourceGroup{{
				CoveredResources: []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, gpu},
				Flavors: []kueuev1beta2.FlavorQuotas{{Name: kueuev1beta2.ResourceFlavorReference(gpuFlavor), Resources: []kueuev1beta2.ResourceQuota{
					{Name: corev1.ResourceCPU, NominalQuota: q("9")}, {Name: corev1.ResourceMemory, NominalQuota: q("36Gi")},
					{Name: gpu, NominalQuota: q("4"), LendingLimit: ptr.To(q("1"))},
				}}},
			}, {
				CoveredResources: []corev1.ResourceName{corev1.ResourcePods},
				Flavors: []kueuev1beta2.FlavorQuotas{{Name: kueuev1beta2.ResourceFlavorReference(h.Flavor), Resources: []kueuev1beta2.ResourceQuota{
					{Name: corev1.ResourcePods, NominalQuota: q("50")},
				}}},
			}},
		},
	}
	if edit != nil {
		edit(cq)
	}
	if _, err := c.Kueue.KueueV1beta2().ClusterQueues().Create(ctx, cq, kubectl); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		for _, ns := range h.Namespaces {
			_ = c.Kueue.KueueV1beta2().Workloads(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		}
		_ = c.Kueue.KueueV1beta2().ClusterQueues().Delete(ctx, h.ClusterQueue, metav1.DeleteOptions{})
		_ = c.Kueue.KueueV1beta2().ResourceFlavors().Delete(ctx, h.Flavor, metav1.DeleteOptions{})
	})
	// Who may run jobs: a group bound to Kubernetes' edit role in the first
	// namespace, as a cluster without the console grants it.
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: h.Namespaces[0], Name: "researchers"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: h.Group()}}}
	if _, err := c.Kube.RbacV1().RoleBindings(rb.Namespace).Create(ctx, rb, kubectl); err != nil {
		t.Fatal(err)
	}
	for _, ns := range h.Namespaces {
		lq := &kueuev1beta2.LocalQueue{ObjectMeta: metav1.ObjectMeta{Name: "user-queue", Namespace: ns},
			Spec: kueuev1beta2.LocalQueueSpec{ClusterQueue: kueuev1beta2.ClusterQueueReference(h.ClusterQueue)}}
		if _, err := c.Kueue.KueueV1beta2().LocalQueues(ns).Create(ctx, lq, kubectl); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

// Group is the group the setup binds to the edit role in its first
// namespace.
func (h HandMade) Group() string { return "researchers-" + h.ID }

// Workload submits a bare Workload of gpus GPUs to the namespace's
// user-queue: Kueue admits it on quota alone.
func (h HandMade) Workload(t testing.TB, ns, name string, gpus int64) {
	t.Helper()
	res := corev1.ResourceList{gpu: *resource.NewQuantity(gpus, resource.DecimalSI),
		corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}
	wl := &kueuev1beta2.Workload{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: kueuev1beta2.WorkloadSpec{QueueName: "user-queue", PodSets: []kueuev1beta2.PodSet{{Name: "main", Count: 1,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "main", Image: "trainer", Resources: corev1.ResourceRequirements{Requests: res}}}}}}}},
	}
	if _, err := h.c.Kueue.KueueV1beta2().Workloads(ns).Create(context.Background(), wl, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating Workload %s: %v", name, err)
	}
}

// Admissions are the setup's Workloads' admissions as Kueue keeps them:
// the ClusterQueue and since when quota is reserved ("pending" while none is).
func (h HandMade) Admissions(t testing.TB) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, ns := range h.Namespaces {
		list, err := h.c.Kueue.KueueV1beta2().Workloads(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, wl := range list.Items {
			state := "pending"
			for _, cond := range wl.Status.Conditions {
				if cond.Type == kueuev1beta2.WorkloadQuotaReserved && cond.Status == metav1.ConditionTrue && wl.Status.Admission != nil {
					state = string(wl.Status.Admission.ClusterQueue) + " since " + cond.LastTransitionTime.UTC().Format(time.RFC3339)
				}
			}
			out[ns+"/"+wl.Name] = state
		}
	}
	return out
}

// WaitAdmitted waits until Kueue has admitted n of the setup's Workloads
// and returns their admissions.
func (h HandMade) WaitAdmitted(t testing.TB, n, total int) map[string]string {
	t.Helper()
	var got map[string]string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		got = h.Admissions(t)
		admitted := 0
		for _, st := range got {
			if st != "pending" {
				admitted++
			}
		}
		return admitted == n && len(got) == total, nil
	})
	if err != nil {
		t.Fatalf("Kueue never admitted %d of %d Workloads: %v", n, total, got)
	}
	return got
}

// ApplyGitOpsQueue writes a ClusterQueue as a GitOps tool would (server-side
// apply by argocd-controller) in cohort, with gpus GPUs on gpuFlavor and a
// LocalQueue "user-queue" in a namespace of its own, which HandMade then
// holds. It goes when the test ends.
func ApplyGitOpsQueue(t testing.TB, c Clients, gpuFlavor, cohort string, gpus int64) HandMade {
	t.Helper()
	ctx := context.Background()
	id := rand.String(5)
	h := HandMade{ID: id, ClusterQueue: "gitops-queue-" + id, Cohort: cohort, Namespaces: []string{"platform-" + id}, c: c}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: h.Namespaces[0]}}
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Kube.CoreV1().Namespaces().Delete(context.Background(), h.Namespaces[0], metav1.DeleteOptions{})
	})
	cq := &kueuev1beta2.ClusterQueue{
		TypeMeta:   metav1.TypeMeta{APIVersion: kueuev1beta2.SchemeGroupVersion.String(), Kind: "ClusterQueue"},
		ObjectMeta: metav1.ObjectMeta{Name: h.ClusterQueue, Labels: map[string]string{"app.kubernetes.io/instance": "platform-queues"}},
		Spec: kueuev1beta2.ClusterQueueSpec{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": h.Namespaces[0]}},
			CohortName:        kueuev1beta2.CohortReference(cohort),
			ResourceGroups: []kueuev1beta2.ResourceGroup{{
				CoveredResources: []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, gpu},
				Flavors: []kueuev1beta2.FlavorQuotas{{Name: kueuev1beta2.ResourceFlavorReference(gpuFlavor), Resources: []kueuev1beta2.ResourceQuota{
					{Name: corev1.ResourceCPU, NominalQuota: resource.MustParse("48")}, {Name: corev1.ResourceMemory, NominalQuota: resource.MustParse("192Gi")},
					{Name: gpu, NominalQuota: *resource.NewQuantity(gpus, resource.DecimalSI)},
				}}},
			}},
		},
	}
	body, err := json.Marshal(cq)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Kueue.KueueV1beta2().ClusterQueues().Patch(ctx, h.ClusterQueue, types.ApplyPatchType, body,
		metav1.PatchOptions{FieldManager: "argocd-controller", Force: ptr.To(true)}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_ = c.Kueue.KueueV1beta2().Workloads(h.Namespaces[0]).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		_ = c.Kueue.KueueV1beta2().ClusterQueues().Delete(ctx, h.ClusterQueue, metav1.DeleteOptions{})
	})
	lq := &kueuev1beta2.LocalQueue{ObjectMeta: metav1.ObjectMeta{Name: "user-queue", Namespace: h.Namespaces[0]},
		Spec: kueuev1beta2.LocalQueueSpec{ClusterQueue: kueuev1beta2.ClusterQueueReference(h.ClusterQueue)}}
	if _, err := c.Kueue.KueueV1beta2().LocalQueues(h.Namespaces[0]).Create(ctx, lq, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return h
}

// ApplyCohort writes a Cohort by hand, under parent ("" for a root), with
// gpus GPUs of its own on gpuFlavor (none when 0). It goes when the test ends.
func ApplyCohort(t testing.TB, c Clients, name, parent, gpuFlavor string, gpus int64) {
	t.Helper()
	co := &kueuev1beta2.Cohort{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: kueuev1beta2.CohortSpec{ParentName: kueuev1beta2.CohortReference(parent)}}
	if gpus > 0 {
		co.Spec.ResourceGroups = []kueuev1beta2.ResourceGroup{{CoveredResources: []corev1.ResourceName{gpu},
			Flavors: []kueuev1beta2.FlavorQuotas{{Name: kueuev1beta2.ResourceFlavorReference(gpuFlavor),
				Resources: []kueuev1beta2.ResourceQuota{{Name: gpu, NominalQuota: *resource.NewQuantity(gpus, resource.DecimalSI)}}}}}}
	}
	if _, err := c.Kueue.KueueV1beta2().Cohorts().Create(context.Background(), co, metav1.CreateOptions{FieldManager: "kubectl-client-side-apply"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Kueue.KueueV1beta2().Cohorts().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}
