package domain

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/openquota/console/internal/kueuetest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// testCQ starts a team's ClusterQueue in the default cohort.
func testCQ(team string) *kueuetest.ClusterQueueWrapper {
	return kueuetest.MakeClusterQueue(DefaultSettings.ClusterQueue(team)).Cohort(DefaultSettings.Cohort)
}

func TestTeamUsageAndLending(t *testing.T) {
	cqs := []*kueuev1beta2.ClusterQueue{
		testCQ("a").Nominal(8, nil).Usage(2, 0).Obj(),
		testCQ("b").Nominal(4, nil).Usage(10, 6).Obj(),
		testCQ("c").Nominal(4, nil).Usage(0, 0).Stopped().Obj(),
		testCQ("d").Nominal(4, ptr.To[int64](0)).Usage(0, 0).Obj(), // DontLend: lends nothing
	}
	now := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	pending := newWorkload(DefaultSettings.Namespace("c"), "wait").Queue("lq").GPUs(4, 1).Created(now.Add(-time.Minute)).Obj()
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
