package kueue_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/kueue"
)

// An absolute lend limit reaches Kueue as the resource's lendingLimit; the
// cohort borrows no more of the team's idle quota than that: a job that
// needs more stays pending, one within it is admitted. The live queue
// reads back with no drift, and a lending limit edited by hand is adopted
// as the lend limit, which a save then keeps.
func TestAbsoluteLendLimitIsEnforcedAndReadsBack(t *testing.T) {
	c := clients(t)
	s := isolated(t)
	ctx := context.Background()
	lender := domain.Team{Name: "lender", Enabled: true, Preemption: domain.PreemptLowerPriority, Lending: domain.Lend,
		BorrowLimitPercent: 50, Quota: []domain.QuotaInput{{InstanceType: "ml.p5.48xlarge", GPUs: ptr.To[int64](8), LendGPUs: ptr.To[int64](3)}}}
	borrower := domain.Team{Name: "borrower", Enabled: true, Preemption: domain.PreemptLowerPriority, Lending: domain.LendAndBorrow,
		BorrowLimitPercent: 500, Quota: []domain.QuotaInput{{InstanceType: "ml.p5.48xlarge", GPUs: ptr.To[int64](1), BorrowGPUs: ptr.To[int64](7)}}}
	applyTeam(t, c, s, lender)
	applyTeam(t, c, s, borrower)

	if got := gpuQuotaOf(t, c, s, "lender").LendingLimit; got == nil || got.Value() != 3 {
		t.Errorf("GPU lending limit in Kueue = %v, want 3", got)
	}

	// The live queue reads back as written: adopting it changes nothing,
	// and the cache's drift report is empty.
	cq, err := c.Kueue.KueueV1beta2().ClusterQueues().Get(ctx, s.ClusterQueue("lender"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if adopted, notes := domain.AdoptTeam(s, lender, cq, domain.LookupShape); !domain.SameAllocation(adopted, lender) || len(notes) > 0 {
		t.Errorf("the live queue adopts as %+v (%v), want %+v", adopted.Quota, notes, lender.Quota)
	}
	cache := startCache(t, c, s)
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		_, _, ok := cache.Team(s, "lender")
		return ok, nil
	}); err != nil {
		t.Fatal("the cache never showed the team")
	}
	if rep, _, err := cache.TeamDrift(s, "lender", domain.LookupShape); err != nil || rep.Drifted() {
		t.Errorf("drift right after the write: %+v (%v)", rep, err)
	}

	// The borrower's own GPU and the lender's 3 make 4: a 5-GPU job waits
	// (its own borrow limit of 7 would allow it), a 4-GPU one is admitted.
	wl := submitPending(t, c, s, "borrower", gpuJob("beyond", 5))
	if reason := domain.FactsOf(wl, s, "").ReasonAt(time.Now(), false); !strings.Contains(reason, "at most 4 can ever be available to the team") {
		t.Errorf("the reason in words does not say the cohort lends only 3: %q", reason)
	}
	submitAdmitted(t, c, s, "borrower", gpuJob("within", 4))

	// A lending limit edited by hand is the lend limit the allocation adopts.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cq, err := c.Kueue.KueueV1beta2().ClusterQueues().Get(ctx, s.ClusterQueue("lender"), metav1.GetOptions{})
		if err != nil {
			return err
		}
		for i, rq := range cq.Spec.ResourceGroups[0].Flavors[0].Resources {
			if rq.Name == domain.ResourceGPU {
				cq.Spec.ResourceGroups[0].Flavors[0].Resources[i].LendingLimit = resource.NewQuantity(2, resource.DecimalSI)
			}
		}
		_, err = c.Kueue.KueueV1beta2().ClusterQueues().Update(ctx, cq, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	cq, err = c.Kueue.KueueV1beta2().ClusterQueues().Get(ctx, s.ClusterQueue("lender"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	adopted, notes := domain.AdoptTeam(s, lender, cq, domain.LookupShape)
	want := lender
	want.Quota = []domain.QuotaInput{{InstanceType: "ml.p5.48xlarge", GPUs: ptr.To[int64](8), LendGPUs: ptr.To[int64](2)}}
	if diff := cmp.Diff(want, adopted); diff != "" || len(notes) > 0 {
		t.Errorf("adopting the hand edit (-want +got):\n%s\nnotes: %v", diff, notes)
	}

	// Saving the adopted allocation keeps the hand-set limit.
	objs, err := domain.BuildTeam(s, adopted, domain.LookupShape)
	if err != nil {
		t.Fatal(err)
	}
	if err := (kueue.Applier{Kube: c.Kube, Kueue: c.Kueue}).ApplyTeam(ctx, objs); err != nil {
		t.Fatal(err)
	}
	if got := gpuQuotaOf(t, c, s, "lender").LendingLimit; got == nil || got.Value() != 2 {
		t.Errorf("GPU lending limit after saving the adopted allocation = %v, want 2", got)
	}
}
