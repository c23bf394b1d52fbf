package domain

import (
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/kueuetest"
)

var inf = math.Inf(1)

func TestLentShares(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []QuotaUse
		want []float64
	}{
		{"nobody borrows", []QuotaUse{{8, 2, inf}, {4, 4, inf}}, []float64{0, 0}},
		{"one lender takes it all", []QuotaUse{{8, 2, inf}, {4, 7, inf}}, []float64{3, 0}},
		{"split by idle quota, not by nominal", []QuotaUse{
			{Nominal: 8, Used: 2, LendingLimit: inf}, // idle 6
			{Nominal: 4, Used: 1, LendingLimit: inf}, // idle 3
			{Nominal: 2, Used: 5, LendingLimit: inf}, // borrows 3
		}, []float64{2, 1, 0}},
		{"two borrowers add up", []QuotaUse{{4, 0, inf}, {4, 0, inf}, {1, 3, inf}, {1, 2, inf}}, []float64{1.5, 1.5, 0, 0}},
		{"a queue that does not lend lends nothing", []QuotaUse{{8, 0, 0}, {4, 0, inf}, {0, 2, inf}}, []float64{0, 2, 0}},
		{"lending limit caps the idle quota", []QuotaUse{{8, 0, 2}, {2, 0, inf}, {0, 2, inf}}, []float64{1, 1, 0}},
		{"borrowed beyond the cohort's idle quota is nobody's", []QuotaUse{{2, 1, inf}, {0, 4, inf}}, []float64{1, 0}},
		{"over-quota lender lends nothing", []QuotaUse{{2, 3, inf}, {2, 3, inf}}, []float64{0, 0}},
		{"empty", nil, []float64{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, LentShares(tc.in), cmpopts.EquateEmpty(), cmpopts.EquateApprox(0, 1e-12)); diff != "" {
				t.Errorf("LentShares(%v) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func TestWholeShares(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want []int64
	}{
		{[]float64{1.5, 1.5}, []int64{2, 1}},
		{[]float64{3.6, 2.4}, []int64{4, 2}},
		{[]float64{0.4, 0.3, 0.3}, []int64{1, 0, 0}},
		{[]float64{29333.333, 29333.333, 29333.334}, []int64{29333, 29333, 29334}},
		{[]float64{2, 0, 3}, []int64{2, 0, 3}},
		{nil, []int64{}},
	} {
		if diff := cmp.Diff(tc.want, wholeShares(tc.in), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("wholeShares(%v) (-want +got):\n%s", tc.in, diff)
		}
	}
}

// Two lenders of 1.5 GPUs each lent 3 GPUs between them, not 4: the lent
// column adds up to the borrowed one.
func TestLentAddsUpToBorrowed(t *testing.T) {
	cqs := []*kueuev1beta2.ClusterQueue{
		testCQ("a").Nominal(4, nil).Usage(0, 0).Obj(),
		testCQ("b").Nominal(4, nil).Usage(0, 0).Obj(),
		testCQ("c").Nominal(1, nil).Usage(4, 3).Obj(),
	}
	snap := BuildSnapshot(SnapshotInput{Settings: DefaultSettings, ClusterQueues: cqs}, time.Now())
	total := Totals(snap.Teams)
	if total.Borrowed.GPUs != 3 || total.Lent.GPUs != 3 {
		t.Errorf("borrowed %d, lent %d; want 3 and 3", total.Borrowed.GPUs, total.Lent.GPUs)
	}
}

func TestQueueRowsLimits(t *testing.T) {
	q := resource.MustParse
	limit := func(cq *kueuev1beta2.ClusterQueue, rg int, r corev1.ResourceName, borrowing, lending string) {
		for i, rq := range cq.Spec.ResourceGroups[rg].Flavors[0].Resources {
			if rq.Name == r {
				if borrowing != "" {
					cq.Spec.ResourceGroups[rg].Flavors[0].Resources[i].BorrowingLimit = ptrTo(q(borrowing))
				}
				if lending != "" {
					cq.Spec.ResourceGroups[rg].Flavors[0].Resources[i].LendingLimit = ptrTo(q(lending))
				}
			}
		}
	}
	usage := func(cq *kueuev1beta2.ClusterQueue, flavor string, r corev1.ResourceName, total, borrowed string) {
		cq.Status.FlavorsUsage = append(cq.Status.FlavorsUsage, kueuev1beta2.FlavorUsage{Name: kueuev1beta2.ResourceFlavorReference(flavor),
			Resources: []kueuev1beta2.ResourceUsage{{Name: r, Total: q(total), Borrowed: q(borrowed)}}})
	}
	a := kueuetest.MakeClusterQueue("a").Cohort("c").Quota("p5", ResourceGPU, "8").Quota("p5", corev1.ResourceCPU, "95500m").
		Quota("p5", corev1.ResourceMemory, "1Ti").Quota("trn", ResourceNeuron, "16").Obj()
	limit(a, 0, ResourceGPU, "", "4")
	limit(a, 0, corev1.ResourceMemory, "512Gi", "0")
	usage(a, "p5", ResourceGPU, "2", "0")
	b := kueuetest.MakeClusterQueue("b").Cohort("c").Quota("p5", ResourceGPU, "4").Quota("p5", corev1.ResourceMemory, "0").Obj()
	limit(b, 0, ResourceGPU, "8", "")
	usage(b, "p5", ResourceGPU, "7", "3")
	usage(b, "p5", corev1.ResourceMemory, "10Gi", "10Gi")
	alone := kueuetest.MakeClusterQueue("alone").Quota("p5", ResourceGPU, "2").Obj()
	usage(alone, "p5", ResourceGPU, "0", "0")

	got := map[string][]ResourceLimit{}
	for _, row := range queueRows(DefaultSettings, []*kueuev1beta2.ClusterQueue{a, b, alone}, nil, CohortForest{}) {
		got[row.Team] = row.Limits
	}
	want := map[string][]ResourceLimit{
		"a": {
			// Idle 6, of which it lends at most 4: all of b's 3 borrowed is from a.
			{Flavor: "p5", Resource: ResourceGPU, Nominal: 8, InUse: 2, LendingLimit: ptrTo[int64](4), Lent: 3},
			{Flavor: "p5", Resource: corev1.ResourceCPU, Nominal: 95500},
			// b borrows 10 GiB of memory beyond its 0, but a lends none: nobody's.
			{Flavor: "p5", Resource: corev1.ResourceMemory, Nominal: 1 << 20, BorrowingLimit: ptrTo[int64](512 << 10), LendingLimit: ptrTo[int64](0)},
			{Flavor: "trn", Resource: ResourceNeuron, Nominal: 16},
		},
		"b": {
			{Flavor: "p5", Resource: ResourceGPU, Nominal: 4, InUse: 7, BorrowingLimit: ptrTo[int64](8), Borrowed: 3},
			{Flavor: "p5", Resource: corev1.ResourceMemory, InUse: 10 << 10, Borrowed: 10 << 10},
		},
		"alone": {{Flavor: "p5", Resource: ResourceGPU, Nominal: 2}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("limits (-want +got):\n%s", diff)
	}
}

// In a tree of cohorts (Kueue's hierarchical cohorts), a queue borrows
// from queues of sibling cohorts too: they are credited with lending it.
func TestLendingIsSharedOverTheCohortTree(t *testing.T) {
	q := resource.MustParse
	usage := func(cq *kueuev1beta2.ClusterQueue, total, borrowed string) *kueuev1beta2.ClusterQueue {
		cq.Status.FlavorsUsage = []kueuev1beta2.FlavorUsage{{Name: "a100",
			Resources: []kueuev1beta2.ResourceUsage{{Name: ResourceGPU, Total: q(total), Borrowed: q(borrowed)}}}}
		return cq
	}
	// a1 (in important) holds 4 of a nominal 2: the 2 it borrows are b1's
	// (in regular, idle), the only idle quota of the tree.
	a1 := usage(kueuetest.MakeClusterQueue("a1").Cohort("important").Quota("a100", ResourceGPU, "2").Obj(), "4", "2")
	b1 := usage(kueuetest.MakeClusterQueue("b1").Cohort("regular").Quota("a100", ResourceGPU, "2").Obj(), "0", "0")
	forest := CohortForestOf([]*kueuev1beta2.Cohort{kueuetest.MakeCohort("root", "", 0), kueuetest.MakeCohort("important", "root", 0), kueuetest.MakeCohort("regular", "root", 0)})
	lent := map[string]int64{}
	for _, row := range queueRows(DefaultSettings, []*kueuev1beta2.ClusterQueue{a1, b1}, nil, forest) {
		lent[row.Team] = row.Lent.GPUs
	}
	if diff := cmp.Diff(map[string]int64{"a1": 0, "b1": 2}, lent); diff != "" {
		t.Errorf("GPUs lent (-want +got):\n%s", diff)
	}
}

// The read model takes the Cohort objects' tree: a sibling cohort's queue
// is credited with what it lends.
func TestTheReadModelSharesLendingOverTheCohortTree(t *testing.T) {
	a1 := kueuetest.MakeClusterQueue("a1").Cohort("important").Quota("a100", ResourceGPU, "2").UsageOf("a100", ResourceGPU, "4", "2").Obj()
	b1 := kueuetest.MakeClusterQueue("b1").Cohort("regular").Quota("a100", ResourceGPU, "2").Obj()
	cohorts := []*kueuev1beta2.Cohort{kueuetest.MakeCohort("root", "", 0), kueuetest.MakeCohort("important", "root", 0), kueuetest.MakeCohort("regular", "root", 0)}
	snap := BuildSnapshot(SnapshotInput{Settings: DefaultSettings, ClusterQueues: []*kueuev1beta2.ClusterQueue{a1, b1}, Cohorts: cohorts}, time.Now())
	lent := map[string]int64{}
	for _, row := range snap.Teams {
		lent[row.Team] = row.Lent.GPUs
	}
	if diff := cmp.Diff(map[string]int64{"a1": 0, "b1": 2}, lent); diff != "" {
		t.Errorf("GPUs lent (-want +got):\n%s", diff)
	}
}

// Memory counts in MiB to the nearest: a task of 1G on one flavor and 3G
// on another (4e9 bytes, 3814.7 MiB) is 3815 MiB, 3.73 GiB as shown, not
// the 3814 (3.72 GiB) that cutting each flavor's share would make.
func TestMemoryUnitsAreTheNearestMiB(t *testing.T) {
	sum := units(corev1.ResourceMemory, resource.MustParse("1G")) + units(corev1.ResourceMemory, resource.MustParse("3G"))
	if sum != 3815 {
		t.Errorf("1G + 3G = %d MiB, want 3815", sum)
	}
	if got := units(corev1.ResourceMemory, resource.MustParse("512Gi")); got != 512*1024 {
		t.Errorf("512Gi = %d MiB", got)
	}
}

// Kueue's hierarchical cohorts, as its documentation makes them: a queue
// borrows from its own cohort first, then up the tree, and a cohort's
// lending limit caps what its subtree lends out of it. cq-b (org-x)
// borrows 4 a100 GPUs: 2 from cq-a (its lending limit) in org-x, the rest
// from above, where org-y lends what its limit lets it (none, then 1) and
// the root's own quota the rest.
func TestLendingFollowsTheCohortTreeAndItsLimits(t *testing.T) {
	cohort := func(name, parent string, nominal string, lendingLimit *string) *kueuev1beta2.Cohort {
		co := kueuetest.MakeCohort(name, parent, 0)
		if nominal != "" {
			rq := kueuev1beta2.ResourceQuota{Name: ResourceGPU, NominalQuota: resource.MustParse(nominal)}
			if lendingLimit != nil {
				rq.LendingLimit = ptrTo(resource.MustParse(*lendingLimit))
			}
			co.Spec.ResourceGroups = []kueuev1beta2.ResourceGroup{{CoveredResources: []corev1.ResourceName{ResourceGPU},
				Flavors: []kueuev1beta2.FlavorQuotas{{Name: "a100", Resources: []kueuev1beta2.ResourceQuota{rq}}}}}
		}
		return co
	}
	cqA := kueuetest.MakeClusterQueue("cq-a").Cohort("org-x").Quota("a100", ResourceGPU, "4").Obj()
	cqA.Spec.ResourceGroups[0].Flavors[0].Resources[0].LendingLimit = ptrTo(resource.MustParse("2"))
	cqB := kueuetest.MakeClusterQueue("cq-b").Cohort("org-x").Quota("a100", ResourceGPU, "2").UsageOf("a100", ResourceGPU, "6", "4").Obj()
	cqC := kueuetest.MakeClusterQueue("cq-c").Cohort("org-y").Quota("a100", ResourceGPU, "4").Obj()
	for _, tc := range []struct {
		orgYLends string
		want      map[string]int64
	}{
		{"0", map[string]int64{"cq-a": 2, "cq-b": 0, "cq-c": 0}},
		{"1", map[string]int64{"cq-a": 2, "cq-b": 0, "cq-c": 1}},
	} {
		forest := CohortForestOf([]*kueuev1beta2.Cohort{cohort("root", "", "2", nil), cohort("org-x", "root", "", nil),
			cohort("org-y", "root", "0", &tc.orgYLends)})
		lent := map[string]int64{}
		for _, row := range queueRows(DefaultSettings, []*kueuev1beta2.ClusterQueue{cqA, cqB, cqC}, nil, forest) {
			lent[row.Team] = row.Lent.GPUs
		}
		if diff := cmp.Diff(tc.want, lent); diff != "" {
			t.Errorf("org-y lends at most %s: GPUs lent (-want +got):\n%s", tc.orgYLends, diff)
		}
	}
}
