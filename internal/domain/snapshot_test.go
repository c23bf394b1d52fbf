package domain

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// cqWrapper builds test ClusterQueues with one GPU flavor.
type cqWrapper struct{ kueuev1beta2.ClusterQueue }

func testCQ(team string) *cqWrapper {
	return &cqWrapper{kueuev1beta2.ClusterQueue{
		ObjectMeta: metav1.ObjectMeta{Name: DefaultSettings.ClusterQueue(team)},
		Spec:       kueuev1beta2.ClusterQueueSpec{CohortName: "shared-pool"},
	}}
}

func (w *cqWrapper) nominal(gpus int64, lendingLimit *int64) *cqWrapper {
	rq := kueuev1beta2.ResourceQuota{Name: ResourceGPU, NominalQuota: *resource.NewQuantity(gpus, resource.DecimalSI)}
	if lendingLimit != nil {
		rq.LendingLimit = resource.NewQuantity(*lendingLimit, resource.DecimalSI)
	}
	w.Spec.ResourceGroups = []kueuev1beta2.ResourceGroup{{CoveredResources: []corev1.ResourceName{ResourceGPU},
		Flavors: []kueuev1beta2.FlavorQuotas{{Name: "ml.p5.48xlarge", Resources: []kueuev1beta2.ResourceQuota{rq}}}}}
	return w
}

func (w *cqWrapper) usage(total, borrowed int64) *cqWrapper {
	w.Status.FlavorsUsage = []kueuev1beta2.FlavorUsage{{Name: "ml.p5.48xlarge", Resources: []kueuev1beta2.ResourceUsage{{
		Name: ResourceGPU, Total: *resource.NewQuantity(total, resource.DecimalSI), Borrowed: *resource.NewQuantity(borrowed, resource.DecimalSI),
	}}}}
	return w
}

func (w *cqWrapper) stopped() *cqWrapper {
	w.Spec.StopPolicy = ptr.To(kueuev1beta2.Hold)
	return w
}

func (w *cqWrapper) obj() *kueuev1beta2.ClusterQueue { return &w.ClusterQueue }

func TestTeamUsageAndLending(t *testing.T) {
	cqs := []*kueuev1beta2.ClusterQueue{
		testCQ("a").nominal(8, nil).usage(2, 0).obj(),
		testCQ("b").nominal(4, nil).usage(10, 6).obj(),
		testCQ("c").nominal(4, nil).usage(0, 0).stopped().obj(),
		testCQ("d").nominal(4, ptr.To[int64](0)).usage(0, 0).obj(), // DontLend: lends nothing
	}
	now := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	pending := newWorkload(DefaultSettings.Namespace("c"), "wait").queue("lq").gpus(4, 1).created(now.Add(-time.Minute)).obj()
	snap := BuildSnapshot(SnapshotInput{Settings: DefaultSettings, ClusterQueues: cqs, Workloads: []*kueuev1beta2.Workload{pending}}, now)

	type row struct {
		Team                                   string
		Enabled                                bool
		Allocated, InUse, Borrowed, Lent, Want int64
		Pending                                int
	}
	var got []row
	for _, r := range snap.Teams {
		got = append(got, row{r.Team, r.Enabled, r.Allocated.GPUs, r.InUse.GPUs, r.Borrowed.GPUs, r.Lent.GPUs, r.PendingDemand.GPUs, r.Pending})
	}
	// b borrows 6; a has 6 idle, c has 4 idle: a lent 3.6 → 4, c 2.4 → 2; d lends nothing.
	want := []row{
		{"a", true, 8, 2, 0, 4, 0, 0},
		{"b", true, 4, 10, 6, 0, 0, 0},
		{"c", false, 4, 0, 0, 2, 4, 1},
		{"d", true, 4, 0, 0, 0, 0, 0},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("team usage (-want +got):\n%s", diff)
	}
	total := Totals(snap.Teams)
	if total.Allocated.GPUs != 20 || total.Borrowed.GPUs != 6 || total.Lent.GPUs != 6 {
		t.Errorf("totals: %+v", total)
	}
}

func TestClassOrder(t *testing.T) {
	p := Policy{Classes: []PriorityClass{{Name: "low", Weight: 10}, {Name: "high", Weight: 90}}}
	other := &kueuev1beta2.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "theirs"}, Value: 50}
	if diff := cmp.Diff([]string{"high", "theirs", "low"}, classOrder(p, []*kueuev1beta2.WorkloadPriorityClass{other})); diff != "" {
		t.Errorf("class order (-want +got):\n%s", diff)
	}
}
