package domain

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
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
			FairSharing: &kueuev1beta2.FairSharing{Weight: ptrTo(resource.MustParse("0.75"))}}},
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
		{Name: "org", Declared: true, Weight: "0.75", Own: g(4), Quota: g(36), InUse: g(14), Borrowed: g(2),
			Queues: []CohortQueue{{Name: "prod", Team: "prod", Quota: g(16), InUse: g(4), Weight: "30"}}},
		{Name: "research", Depth: 1, Parent: "org", Declared: true, Quota: g(16), InUse: g(10), Borrowed: g(2),
			Queues: []CohortQueue{
				{Name: "research-a", Team: "research-a", Quota: g(8), InUse: g(10), Borrowed: g(2)},
				{Name: "research-b", Team: "research-b", Quota: g(8)}}},
	}
	// The per-flavor quotas are TestBorrowableAsKueueHasIt's.
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(CohortRow{}, "OwnQuotas"), cmpopts.IgnoreFields(CohortQueue{}, "Quotas"), cmpopts.IgnoreUnexported(CohortRow{})); diff != "" {
		t.Errorf("cohort tree (-want +got):\n%s", diff)
	}
	if w := LimitWords(got[2].Queues[0].Quotas, ResourceGPU, func(n int64) string { return fmt.Sprint(n) }); w != "ml.p5.48xlarge: lends at most 2" {
		t.Errorf("research-a's limits: %q", w)
	}
	if h := got[1].Headroom(); h != g(22) {
		t.Errorf("org's headroom: %+v, want 22 GPUs", h)
	}

	// Two flavors: a100 used beyond its quota does not eat the free h100.
	twoFlavors := []*kueuev1beta2.ClusterQueue{
		kueuetest.MakeClusterQueue("a").Cohort("x").Quota("a100", ResourceGPU, "4").Quota("h100", ResourceGPU, "2").
			UsageOf("a100", ResourceGPU, "4", "0").Obj(),
		kueuetest.MakeClusterQueue("b").Cohort("x").Quota("a100", ResourceGPU, "2").UsageOf("a100", ResourceGPU, "4", "2").Obj(),
	}
	rows := CohortTree(DefaultSettings, nil, twoFlavors)
	if len(rows) != 1 || rows[0].Quota != g(8) || rows[0].InUse != g(8) || rows[0].Headroom() != g(2) {
		t.Errorf("cohort x of a100 used 8 of 6 and h100 0 of 2: %+v, headroom %+v, want 2 GPUs (the h100)", rows, rows[0].Headroom())
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

func TestBorrowable(t *testing.T) {
	// Every queue's and cohort's GPUs are on one flavor, f.
	q := func(name string, quota, inUse, borrowed int64) CohortQueue {
		return CohortQueue{Name: name, Team: name, Quotas: []FlavorQuota{{Flavor: "f", Resource: ResourceGPU, Nominal: quota, InUse: inUse, Borrowed: borrowed}}}
	}
	lends := func(c CohortQueue, limit int64) CohortQueue {
		c.Quotas[0].LendingLimit = &limit
		return c
	}
	borrows := func(c CohortQueue, limit int64) CohortQueue {
		c.Quotas[0].BorrowingLimit = &limit
		return c
	}
	cohort := func(name string, own int64, qs ...CohortQueue) CohortRow {
		return CohortRow{Name: name, OwnQuotas: []FlavorQuota{{Flavor: "f", Resource: ResourceGPU, Nominal: own}}, Queues: qs}
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
		// c holds 2 beyond its quota: of b's idle 5.
		{"others' idle quota", []CohortRow{cohort("c", 0, q("a", 8, 8, 0), q("b", 8, 3, 0), q("c", 4, 6, 2))}, "a", want{3, CanBorrow}},
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
			b := Borrowable(tc.tree, tc.queue, ResourceGPU)
			if diff := cmp.Diff(tc.want, want{b.Total, b.Why}); diff != "" {
				t.Errorf("Borrowable GPUs (-want +got):\n%s", diff)
			}
		})
	}
}

// Kueue's hierarchical cohorts, as its cohort concept page sets them up:
// what a queue may borrow is Kueue's available() per flavor, with cohorts'
// own quota and lending limits and queues' borrowing limits, and never
// another flavor's idle quota.
func TestBorrowableAsKueueHasIt(t *testing.T) {
	quota := func(flavor string, nominal int64, lend, borrow *int64) kueuev1beta2.FlavorQuotas {
		r := kueuev1beta2.ResourceQuota{Name: ResourceGPU, NominalQuota: *resource.NewQuantity(nominal, resource.DecimalSI)}
		if lend != nil {
			r.LendingLimit = resource.NewQuantity(*lend, resource.DecimalSI)
		}
		if borrow != nil {
			r.BorrowingLimit = resource.NewQuantity(*borrow, resource.DecimalSI)
		}
		return kueuev1beta2.FlavorQuotas{Name: kueuev1beta2.ResourceFlavorReference(flavor), Resources: []kueuev1beta2.ResourceQuota{r}}
	}
	groups := func(fs ...kueuev1beta2.FlavorQuotas) []kueuev1beta2.ResourceGroup {
		return []kueuev1beta2.ResourceGroup{{CoveredResources: []corev1.ResourceName{ResourceGPU}, Flavors: fs}}
	}
	queue := func(name, cohort string, rgs []kueuev1beta2.ResourceGroup, usage map[string][2]int64) *kueuev1beta2.ClusterQueue {
		cq := &kueuev1beta2.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: kueuev1beta2.ClusterQueueSpec{CohortName: kueuev1beta2.CohortReference(cohort), ResourceGroups: rgs}}
		for _, f := range []string{"a100", "l4"} {
			if u, ok := usage[f]; ok {
				cq.Status.FlavorsUsage = append(cq.Status.FlavorsUsage, kueuev1beta2.FlavorUsage{Name: kueuev1beta2.ResourceFlavorReference(f),
					Resources: []kueuev1beta2.ResourceUsage{{Name: ResourceGPU, Total: *resource.NewQuantity(u[0], resource.DecimalSI), Borrowed: *resource.NewQuantity(u[1], resource.DecimalSI)}}})
			}
		}
		return cq
	}
	n := func(v int64) *int64 { return &v }
	cohorts := []*kueuev1beta2.Cohort{
		{ObjectMeta: metav1.ObjectMeta{Name: "root"}, Spec: kueuev1beta2.CohortSpec{ResourceGroups: groups(quota("a100", 2, nil, nil))}},
		// important keeps its own L4s to itself.
		{ObjectMeta: metav1.ObjectMeta{Name: "important"}, Spec: kueuev1beta2.CohortSpec{ParentName: "root", ResourceGroups: groups(quota("l4", 2, n(0), nil))}},
		{ObjectMeta: metav1.ObjectMeta{Name: "regular"}, Spec: kueuev1beta2.CohortSpec{ParentName: "root"}},
	}
	// 8 A100s in all; a2 keeps 1 of its 2 to itself and uses none; a1
	// holds 5 (3 borrowed, limit 4), b1 its 2: the one idle A100 is a2's.
	queues := []*kueuev1beta2.ClusterQueue{
		queue("a1", "important", groups(quota("a100", 2, nil, n(4)), quota("l4", 2, nil, nil)), map[string][2]int64{"a100": {5, 3}, "l4": {2, 0}}),
		queue("a2", "important", groups(quota("a100", 2, n(1), nil)), nil),
		queue("b1", "regular", groups(quota("a100", 2, nil, nil)), map[string][2]int64{"a100": {2, 0}}),
		queue("alone", "", groups(quota("a100", 2, nil, nil)), nil),
	}
	tree := CohortTree(DefaultSettings, cohorts, queues)
	cases := []struct {
		queue string
		want  BorrowableNow
	}{
		// Not a2's kept A100, nor important's L4s, which b1 has no quota of.
		{"b1", BorrowableNow{Why: NothingIdle, Flavors: 1}},
		// Important's own L4s, kept in its subtree; no A100 is idle.
		{"a1", BorrowableNow{Total: 2, ByFlavor: []FlavorAmountOf{{Flavor: "l4", Amount: 2}}, Why: CanBorrow, Flavors: 2}},
		// Its kept A100 is its own, not borrowed.
		{"a2", BorrowableNow{Why: NothingIdle, Flavors: 1}},
		{"alone", BorrowableNow{Why: NotInCohort}},
	}
	for _, tc := range cases {
		if diff := cmp.Diff(tc.want, Borrowable(tree, tc.queue, ResourceGPU)); diff != "" {
			t.Errorf("%s may borrow (-want +got):\n%s", tc.queue, diff)
		}
	}

	// Once b1 ends its tasks, 2 A100s are idle, of which a1 may borrow 1
	// more: its borrowing limit of 4, less the 3 it borrows.
	queues[2].Status.FlavorsUsage = nil
	tree = CohortTree(DefaultSettings, cohorts, queues)
	want := BorrowableNow{Total: 3, ByFlavor: []FlavorAmountOf{{Flavor: "a100", Amount: 1}, {Flavor: "l4", Amount: 2}}, Why: CanBorrow, Flavors: 2}
	if diff := cmp.Diff(want, Borrowable(tree, "a1", ResourceGPU)); diff != "" {
		t.Errorf("a1 may borrow, b1 idle (-want +got):\n%s", diff)
	}
}
