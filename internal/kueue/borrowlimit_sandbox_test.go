package kueue_test

import (
	"context"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/domain"
)

// An absolute borrow limit (HyperPod's AbsoluteBorrowLimits) reaches Kueue
// as the resource's borrowingLimit, whatever the percentage says; Kueue
// admits up to it and keeps what goes beyond pending, saying why; the live
// queue reads back as the allocation that was written, with no drift.
func TestAbsoluteBorrowLimitIsEnforcedAndReadsBack(t *testing.T) {
	c := clients(t)
	s := isolated(t)
	ctx := context.Background()
	lender := domain.Team{Name: "lender", Enabled: true, Preemption: domain.PreemptLowerPriority, Lending: domain.LendAndBorrow,
		BorrowLimitPercent: 50, Quota: []domain.QuotaInput{{InstanceType: "ml.p5.48xlarge", GPUs: ptr.To[int64](8)}}}
	borrower := domain.Team{Name: "borrower", Enabled: true, Preemption: domain.PreemptLowerPriority, Lending: domain.LendAndBorrow,
		BorrowLimitPercent: 100, Quota: []domain.QuotaInput{{InstanceType: "ml.p5.48xlarge", GPUs: ptr.To[int64](2), BorrowGPUs: ptr.To[int64](1)}}}
	applyTeam(t, c, s, lender)
	applyTeam(t, c, s, borrower)

	cq, err := c.Kueue.KueueV1beta2().ClusterQueues().Get(ctx, s.ClusterQueue("borrower"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, rq := range cq.Spec.ResourceGroups[0].Flavors[0].Resources {
		if rq.Name == domain.ResourceGPU && (rq.BorrowingLimit == nil || rq.BorrowingLimit.Value() != 1) {
			t.Errorf("GPU borrowing limit in Kueue = %v, want 1 (the absolute limit, not 100 %% of 2)", rq.BorrowingLimit)
		}
	}

	// The live queue reads back as written: adopting it changes nothing,
	// and the cache's drift report is empty.
	adopted, notes := domain.AdoptTeam(s, borrower, cq, domain.LookupShape)
	if !domain.SameAllocation(adopted, borrower) || len(notes) > 0 {
		t.Errorf("the live queue adopts as %+v (%v), want %+v", adopted.Quota, notes, borrower.Quota)
	}
	cache := startCache(t, c, s)
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		_, _, ok := cache.Team(s, "borrower")
		return ok, nil
	}); err != nil {
		t.Fatal("the cache never showed the team")
	}
	if rep, _, err := cache.TeamDrift(s, "borrower", domain.LookupShape); err != nil || rep.Drifted() {
		t.Errorf("drift right after the write: %+v (%v)", rep, err)
	}

	// Its 2 GPUs and 1 borrowed are admitted; a third GPU more waits.
	submitAdmitted(t, c, s, "borrower", gpuJob("own", 2))
	submitAdmitted(t, c, s, "borrower", gpuJob("borrowed", 1))
	wl := submitPending(t, c, s, "borrower", gpuJob("beyond", 1))
	if reason := domain.FactsOf(wl, s, "").ReasonAt(time.Now(), false); !strings.Contains(reason, "Waiting for quota: needs 1 more") {
		t.Errorf("the reason in words does not say it waits for quota: %q", reason)
	}
}

// submitPending creates a job in the team's LocalQueue and waits until Kueue
// says why its Workload waits (QuotaReserved false, with a message); it
// fails the test if Kueue admits it.
func submitPending(t *testing.T, c testClients, s domain.Settings, team string, job *batchv1.Job) *kueuev1beta2.Workload {
	t.Helper()
	ctx := context.Background()
	ns := s.Namespace(team)
	job.Labels = map[string]string{"kueue.x-k8s.io/queue-name": s.LocalQueue(team)}
	if _, err := c.Kube.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pending *kueuev1beta2.Workload
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		wls, err := c.Kueue.KueueV1beta2().Workloads(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for i := range wls.Items {
			wl := &wls.Items[i]
			if !strings.Contains(wl.Name, job.Name) {
				continue
			}
			if wl.Status.Admission != nil {
				t.Fatalf("Kueue admitted %s beyond the limit", wl.Name)
			}
			for _, cond := range wl.Status.Conditions {
				if cond.Type == kueuev1beta2.WorkloadQuotaReserved && cond.Status == metav1.ConditionFalse && cond.Message != "" {
					pending = wl
					return true, nil
				}
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("job %s/%s never showed why it waits: %v", ns, job.Name, err)
	}
	return pending
}
