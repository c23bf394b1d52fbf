package kueue_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/kueue"
	"github.com/openquota/console/internal/testenv"
)

// A topology-aware flavor whose node labels no node has, as Kueue's TAS
// example is on a cluster without those labels: Kueue keeps a job there
// pending ("no topology domains"), and the what-if says it would wait, not
// that it would start.
func TestAFlavorWithoutTopologyNodesAdmitsNothing(t *testing.T) {
	c := clients(t)
	s := isolated(t)
	ctx := context.Background()
	id := rand.String(5)
	topology, flavor, queue := "topology-"+id, "tas-flavor-"+id, "tas-cluster-queue-"+id
	create := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("creating %s: %v", what, err)
		}
	}
	_, err := c.Kueue.KueueV1beta2().Topologies().Create(ctx, &kueuev1beta2.Topology{ObjectMeta: metav1.ObjectMeta{Name: topology},
		Spec: kueuev1beta2.TopologySpec{Levels: []kueuev1beta2.TopologyLevel{{NodeLabel: "kubernetes.io/hostname"}}}}, metav1.CreateOptions{})
	create("the topology", err)
	t.Cleanup(func() {
		_ = c.Kueue.KueueV1beta2().Topologies().Delete(context.Background(), topology, metav1.DeleteOptions{})
	})
	_, err = c.Kueue.KueueV1beta2().ResourceFlavors().Create(ctx, &kueuev1beta2.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: flavor},
		Spec: kueuev1beta2.ResourceFlavorSpec{NodeLabels: map[string]string{"cloud.provider.com/node-group": "tas-group-" + id},
			TopologyName: (*kueuev1beta2.TopologyReference)(&topology)}}, metav1.CreateOptions{})
	create("the flavor", err)
	t.Cleanup(func() {
		_ = c.Kueue.KueueV1beta2().ResourceFlavors().Delete(context.Background(), flavor, metav1.DeleteOptions{})
	})
	q := resource.MustParse
	_, err = c.Kueue.KueueV1beta2().ClusterQueues().Create(ctx, &kueuev1beta2.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: queue},
		Spec: kueuev1beta2.ClusterQueueSpec{NamespaceSelector: &metav1.LabelSelector{}, ResourceGroups: []kueuev1beta2.ResourceGroup{{
			CoveredResources: []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, domain.ResourceGPU},
			Flavors: []kueuev1beta2.FlavorQuotas{{Name: kueuev1beta2.ResourceFlavorReference(flavor), Resources: []kueuev1beta2.ResourceQuota{
				{Name: corev1.ResourceCPU, NominalQuota: q("100")}, {Name: corev1.ResourceMemory, NominalQuota: q("100Gi")},
				{Name: domain.ResourceGPU, NominalQuota: q("8")}}}},
		}}}}, metav1.CreateOptions{})
	create("the ClusterQueue", err)
	t.Cleanup(func() {
		_ = c.Kueue.KueueV1beta2().ClusterQueues().Delete(context.Background(), queue, metav1.DeleteOptions{})
	})
	ns := testenv.Namespace(t, c.Kube, s.NamespacePrefix+"tas")
	_, err = c.Kueue.KueueV1beta2().LocalQueues(ns).Create(ctx, &kueuev1beta2.LocalQueue{ObjectMeta: metav1.ObjectMeta{Name: "tas-user-queue", Namespace: ns},
		Spec: kueuev1beta2.LocalQueueSpec{ClusterQueue: kueuev1beta2.ClusterQueueReference(queue)}}, metav1.CreateOptions{})
	create("the LocalQueue", err)

	// Kueue keeps a job of one GPU there pending, for want of a topology domain.
	wl := testenv.WorkloadOf(t, c.Kueue, testenv.Submit(t, c.Kube, testenv.Job{Namespace: ns, LocalQueue: "tas-user-queue", Name: "plain", GPUs: 1}),
		"was found no topology domain", func(w *kueuev1beta2.Workload) bool {
			cond := apimeta.FindStatusCondition(w.Status.Conditions, kueuev1beta2.WorkloadQuotaReserved)
			return cond != nil && cond.Status == metav1.ConditionFalse && strings.Contains(cond.Message, "topology")
		})
	time.Sleep(time.Second)
	if got, err := c.Kueue.KueueV1beta2().Workloads(ns).Get(ctx, wl.Name, metav1.GetOptions{}); err != nil || apimeta.IsStatusConditionTrue(got.Status.Conditions, kueuev1beta2.WorkloadQuotaReserved) {
		t.Fatalf("Kueue admitted the job on a flavor without nodes (err %v)", err)
	}

	// The what-if agrees: the same job waits.
	cache := startCache(t, c, s)
	noShapes := func(string) (domain.InstanceShape, bool) { return domain.InstanceShape{}, false }
	a, err := cache.WhatIf(ctx, s, kueue.SchedulerConfig{}, domain.WhatIf{Team: queue,
		Rows: []domain.WhatIfRow{{InstanceType: flavor, Pods: 1, GPUs: 1, CPUMilli: 1000, MemoryMiB: 1024}}}, noShapes)
	if err != nil {
		t.Fatal(err)
	}
	if a.Admitted || !strings.Contains(a.Reason, "no topology domains in flavor "+flavor+": no ready node has its labels") {
		t.Errorf("the what-if of a job on %s: %+v", flavor, a)
	}
}
