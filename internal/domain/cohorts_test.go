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
		func() *kueuev1beta2.ClusterQueue {
			cq := kueuetest.MakeClusterQueue("prod").Cohort("org").Nominal(16, nil).Usage(4, 0).Obj()
			cq.Spec.FairSharing = &kueuev1beta2.FairSharing{Weight: ptrTo(resource.MustParse("30"))}
			return cq
		}(),
		kueuetest.MakeClusterQueue("legacy-q").Cohort("legacy").Nominal(2, nil).Usage(1, 0).Obj(),
		kueuetest.MakeClusterQueue("alone").Nominal(2, nil).Obj(),
	}
	got := CohortTree(DefaultSettings, cohorts, queues)
	g := func(n int64) Amount { return Amount{GPUs: n} }
	want := []CohortRow{
		{Name: "legacy", Quota: g(2), InUse: g(1),
			Queues: []CohortQueue{{Name: "legacy-q", Team: "legacy-q", Quota: g(2), InUse: g(1)}}},
		{Name: "org", Declared: true, Weight: "2", Own: g(4), Quota: g(36), InUse: g(14), Borrowed: g(2),
			Queues: []CohortQueue{{Name: "prod", Team: "prod", Quota: g(16), InUse: g(4), Weight: "30"}}},
		{Name: "research", Depth: 1, Parent: "org", Declared: true, Quota: g(16), InUse: g(10), Borrowed: g(2),
			Queues: []CohortQueue{
				{Name: "research-a", Team: "research-a", Quota: g(8), InUse: g(10), Borrowed: g(2), LendingLimit: g(2), LendingLimited: []corev1.ResourceName{ResourceGPU}},
				{Name: "research-b", Team: "research-b", Quota: g(8)}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("cohort tree (-want +got):\n%s", diff)
	}
	if h := got[1].Headroom(); h != g(22) {
		t.Errorf("org's headroom: %+v, want 22 GPUs", h)
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

func TestBorrowableGPUs(t *testing.T) {
	q := func(name string, quota, inUse, borrowed int64) CohortQueue {
		return CohortQueue{Name: name, Team: name, Quota: Amount{GPUs: quota}, InUse: Amount{GPUs: inUse}, Borrowed: Amount{GPUs: borrowed}}
	}
	lends := func(c CohortQueue, limit int64) CohortQueue {
		c.LendingLimited, c.LendingLimit = []corev1.ResourceName{ResourceGPU}, Amount{GPUs: limit}
		return c
	}
	borrows := func(c CohortQueue, limit int64) CohortQueue {
		c.BorrowingLimited, c.BorrowingLimit = []corev1.ResourceName{ResourceGPU}, Amount{GPUs: limit}
		return c
	}
	// cohort is a root cohort of queues, its subtree figures summed.
	cohort := func(name string, own int64, qs ...CohortQueue) CohortRow {
		r := CohortRow{Name: name, Own: Amount{GPUs: own}, Quota: Amount{GPUs: own}, Queues: qs}
		for _, q := range qs {
			r.Quota.add(q.Quota)
			r.InUse.add(q.InUse)
			r.Borrowed.add(q.Borrowed)
		}
		return r
	}
	type want struct {
		GPUs int64
		Why  NoBorrowing
	}
	cases := []struct {
		name  string
		tree  []CohortRow
		queue string
		want  want
	}{
		{"no cohort", []CohortRow{cohort("c", 0, q("b", 8, 0, 0))}, "a", want{0, NotInCohort}},
		{"alone in its cohort", []CohortRow{cohort("c", 0, q("a", 8, 0, 0))}, "a", want{0, NothingIdle}},
		{"others' idle quota", []CohortRow{cohort("c", 0, q("a", 8, 8, 0), q("b", 8, 3, 0), q("c", 4, 6, 0))}, "a", want{5, CanBorrow}},
		{"what others borrow is taken", []CohortRow{cohort("c", 0, q("a", 8, 8, 0), q("b", 8, 2, 0), q("c", 4, 6, 2))}, "a", want{4, CanBorrow}},
		{"its own borrowing is taken too", []CohortRow{cohort("c", 0, q("a", 8, 11, 3), q("b", 8, 2, 0))}, "a", want{3, CanBorrow}},
		{"lending limits cap the idle quota", []CohortRow{cohort("c", 0, q("a", 8, 8, 0), lends(q("b", 8, 0, 0), 2), lends(q("c", 8, 7, 0), 4))}, "a", want{3, CanBorrow}},
		{"everything idle is borrowed", []CohortRow{cohort("c", 0, q("a", 8, 8, 0), q("b", 8, 4, 0), q("c", 4, 8, 4))}, "a", want{0, NothingIdle}},
		{"borrowing limit left", []CohortRow{cohort("c", 0, borrows(q("a", 8, 10, 2), 5), q("b", 16, 0, 0))}, "a", want{3, CanBorrow}},
		{"borrowing limit reached", []CohortRow{cohort("c", 0, borrows(q("a", 8, 10, 2), 2), q("b", 16, 0, 0))}, "a", want{0, BorrowingLimitReached}},
		{"borrowing limit 0", []CohortRow{cohort("c", 0, borrows(q("a", 8, 0, 0), 0), q("b", 16, 0, 0))}, "a", want{0, BorrowingLimitReached}},
		{"a cohort's own quota", []CohortRow{cohort("c", 6, q("a", 8, 8, 0))}, "a", want{6, CanBorrow}},
		{"up to the root, not other roots", func() []CohortRow {
			org := cohort("org", 4, q("prod", 16, 10, 0))
			research := cohort("research", 0, q("a", 8, 8, 0), lends(q("b", 8, 0, 0), 1))
			research.Depth, research.Parent = 1, "org"
			org.Quota.add(research.Quota)
			org.InUse.add(research.InUse)
			other := cohort("other", 100, q("x", 100, 0, 0))
			return []CohortRow{org, research, other}
		}(), "a", want{11, CanBorrow}},
		{"a sibling sub-cohort lends too", func() []CohortRow {
			org := cohort("org", 0)
			left := cohort("left", 0, q("a", 8, 8, 0))
			right := cohort("right", 0, q("b", 8, 5, 0))
			left.Depth, left.Parent, right.Depth, right.Parent = 1, "org", 1, "org"
			return []CohortRow{org, left, right}
		}(), "a", want{3, CanBorrow}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n, why := BorrowableGPUs(tc.tree, tc.queue)
			if diff := cmp.Diff(tc.want, want{n, why}); diff != "" {
				t.Errorf("BorrowableGPUs (-want +got):\n%s", diff)
			}
		})
	}
}
