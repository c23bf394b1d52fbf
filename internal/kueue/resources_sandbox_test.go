package kueue_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/kueue"
	"github.com/openquota/console/internal/testenv"
)

// Kueue's HAMi example, on a Kueue configured as its "Using HAMi" page says
// (the sandbox's): pods ask for vGPUs with cores and memory per vGPU, and
// Kueue counts their totals (nvidia.com/total-gpucores), which the queue
// covers. Raising the queue's vGPUs admits the pod that waits for them: the
// preview says so, and Kueue does it. Before the preview read Kueue's
// resources configuration, it found nvidia.com/gpucores in no queue and
// kept the pod pending.
func TestThePreviewCountsResourcesAsKueuesConfigurationSays(t *testing.T) {
	c := clients(t)
	s := isolated(t)
	ctx := context.Background()
	cfg, err := (kueue.Applier{Kube: c.Kube, Kueue: c.Kueue}).SchedulerConfig(ctx,
		kueue.ConfigMapRef{Namespace: "kueue-system", Name: "kueue-manager-config", Key: "controller_manager_config.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Resources == nil || len(cfg.Resources.Transformations) == 0 {
		t.Fatal("the sandbox's Kueue has no resource transformations (restart the test sandbox: bin/sandbox down --instance test)")
	}

	flavor, cqName := s.Cohort+"-hami-flavor", s.Cohort+"-hami-queue"
	ns := testenv.Namespace(t, c.Kube, s.NamespacePrefix+"hami")
	rf := &kueuev1beta2.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: flavor}}
	quota := func(r corev1.ResourceName, n string) kueuev1beta2.ResourceQuota {
		return kueuev1beta2.ResourceQuota{Name: r, NominalQuota: resource.MustParse(n)}
	}
	cq := &kueuev1beta2.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: cqName}, Spec: kueuev1beta2.ClusterQueueSpec{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
		ResourceGroups: []kueuev1beta2.ResourceGroup{{
			CoveredResources: []corev1.ResourceName{"nvidia.com/gpu", "nvidia.com/total-gpucores", "nvidia.com/total-gpumem"},
			Flavors: []kueuev1beta2.FlavorQuotas{{Name: kueuev1beta2.ResourceFlavorReference(flavor), Resources: []kueuev1beta2.ResourceQuota{
				quota("nvidia.com/gpu", "2"), quota("nvidia.com/total-gpucores", "600"), quota("nvidia.com/total-gpumem", "20480")}}},
		}},
	}}
	lq := &kueuev1beta2.LocalQueue{ObjectMeta: metav1.ObjectMeta{Name: "user-queue", Namespace: ns},
		Spec: kueuev1beta2.LocalQueueSpec{ClusterQueue: kueuev1beta2.ClusterQueueReference(cqName)}}
	if _, err := c.Kueue.KueueV1beta2().ResourceFlavors().Create(ctx, rf, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Kueue.KueueV1beta2().ClusterQueues().Create(ctx, cq, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Kueue.KueueV1beta2().LocalQueues(ns).Create(ctx, lq, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		bg := context.Background()
		_ = c.Kueue.KueueV1beta2().LocalQueues(ns).Delete(bg, lq.Name, metav1.DeleteOptions{})
		_ = c.Kueue.KueueV1beta2().ClusterQueues().Delete(bg, cqName, metav1.DeleteOptions{})
		_ = c.Kueue.KueueV1beta2().ResourceFlavors().Delete(bg, flavor, metav1.DeleteOptions{})
	})

	// As in Kueue's sample-hami.yaml: 2 vGPUs of 30 cores and 1024 MiB each.
	vgpu := func(name string) *kueuev1beta2.Workload {
		t.Helper()
		res := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("2"), "nvidia.com/gpucores": resource.MustParse("30"),
			"nvidia.com/gpumem": resource.MustParse("1024")}
		wl := &kueuev1beta2.Workload{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: kueuev1beta2.WorkloadSpec{QueueName: "user-queue", PodSets: []kueuev1beta2.PodSet{{Name: "main", Count: 1,
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{Name: "main", Image: "gpu-burn", Resources: corev1.ResourceRequirements{Requests: res, Limits: res}}}}}}}}}
		out, err := c.Kueue.KueueV1beta2().Workloads(ns).Create(ctx, wl, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	reserved := func(name string, want bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			wl, err := c.Kueue.KueueV1beta2().Workloads(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			cond := apimeta.FindStatusCondition(wl.Status.Conditions, kueuev1beta2.WorkloadQuotaReserved)
			return cond != nil && (cond.Status == metav1.ConditionTrue) == want, nil
		}); err != nil {
			t.Fatalf("Kueue never had %s with quota reserved = %v", name, want)
		}
	}
	vgpu("first")
	reserved("first", true)
	vgpu("second")
	reserved("second", false) // the queue's 2 vGPUs are taken

	cache := startCache(t, c, s)
	raised := cq.DeepCopy()
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		live, err := cache.ClusterQueues.Get(cqName)
		if err != nil {
			return false, nil
		}
		raised = live.DeepCopy()
		return true, nil
	}); err != nil {
		t.Fatal("the cache never saw the queue")
	}
	raised.Spec.ResourceGroups[0].Flavors[0].Resources[0].NominalQuota = resource.MustParse("4")
	im, err := cache.Impact(ctx, s, cfg, kueue.ImpactChange{What: "4 vGPUs", Queues: map[string]*kueuev1beta2.ClusterQueue{cqName: raised}})
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Admitted) != 1 || im.Admitted[0].Name != "second" || len(im.Uncertain) != 0 {
		t.Errorf("the preview of 4 vGPUs: admitted %+v, uncertain %+v (%s)", im.Admitted, im.Uncertain, im.Kueue)
	}

	live, err := c.Kueue.KueueV1beta2().ClusterQueues().Get(ctx, cqName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	live.Spec.ResourceGroups[0].Flavors[0].Resources[0].NominalQuota = resource.MustParse("4")
	if _, err := c.Kueue.KueueV1beta2().ClusterQueues().Update(ctx, live, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	reserved("second", true) // and Kueue admits it
}
