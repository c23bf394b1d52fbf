package domain

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/kueuetest"
)

func TestCohortTree(t *testing.T) {
	gpus := func(n string) []kueuev1beta2.ResourceGroup {
		return []kueuev1beta2.ResourceGroup{{CoveredResources: []corev1.ResourceName{ResourceGPU},
			Flavors: []kueuev1beta2.FlavorQuotas{{Name: "ml.p5.48xlarge", Resources: []kueuev1beta2.ResourceQuota{{Name: ResourceGPU, NominalQuota: resource.MustParse(n)}}}}}}
	}
	cohorts := []*kueuev1beta2.Cohort{
		{ObjectMeta: metav1.ObjectMeta{Name: "org"}, Spec: kueuev1beta2.CohortSpec{ResourceGroups: gpus("4"),
			FairSharing: &kueuev1beta2.FairSharing{Weight: ptrTo(resource.MustParse("2"))}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "research"}, Spec: kueuev1beta2.CohortSpec{ParentName: "org"}},
	}
	queues := []*kueuev1beta2.ClusterQueue{
		kueuetest.MakeClusterQueue("research-b").Cohort("research").Nominal(8, nil).Usage(0, 0).Obj(),
		kueuetest.MakeClusterQueue("research-a").Cohort("research").Nominal(8, ptrTo[int64](2)).Usage(10, 2).Obj(),
		kueuetest.MakeClusterQueue("prod").Cohort("org").Nominal(16, nil).Usage(4, 0).Obj(),
		kueuetest.MakeClusterQueue("legacy-q").Cohort("legacy").Nominal(2, nil).Usage(1, 0).Obj(),
		kueuetest.MakeClusterQueue("alone").Nominal(2, nil).Obj(),
	}
	got := CohortTree(DefaultSettings, cohorts, queues)
	want := []CohortRow{
		{Name: "legacy", QuotaGPUs: 2, InUseGPUs: 1,
			Queues: []CohortQueue{{Name: "legacy-q", Team: "legacy-q", QuotaGPUs: 2, InUseGPUs: 1}}},
		{Name: "org", Declared: true, Weight: "2", OwnGPUs: 4, QuotaGPUs: 36, InUseGPUs: 14, BorrowedGPUs: 2,
			Queues: []CohortQueue{{Name: "prod", Team: "prod", QuotaGPUs: 16, InUseGPUs: 4}}},
		{Name: "research", Depth: 1, Parent: "org", Declared: true, QuotaGPUs: 16, InUseGPUs: 10, BorrowedGPUs: 2,
			Queues: []CohortQueue{
				{Name: "research-a", Team: "research-a", QuotaGPUs: 8, InUseGPUs: 10, BorrowedGPUs: 2, LendingLimitGPUs: 2, LendingLimited: true},
				{Name: "research-b", Team: "research-b", QuotaGPUs: 8}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("cohort tree (-want +got):\n%s", diff)
	}
	if h := got[1].HeadroomGPUs(); h != 22 {
		t.Errorf("org's headroom: %d, want 22", h)
	}

	// A cycle (Kueue refuses it) still shows every cohort, once.
	cycle := []*kueuev1beta2.Cohort{
		{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: kueuev1beta2.CohortSpec{ParentName: "b"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Spec: kueuev1beta2.CohortSpec{ParentName: "a"}},
	}
	if rows := CohortTree(DefaultSettings, cycle, nil); len(rows) != 2 {
		t.Errorf("a cycle of two cohorts: %d rows", len(rows))
	}
}
