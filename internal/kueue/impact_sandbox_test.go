package kueue_test

import (
	"context"
	"testing"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	configv1beta2 "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/kueue"
	"github.com/openquota/console/internal/testenv"
)

// The preview through the console's own cache (the Workloads' shapes as
// the informer keeps them): switching to class ranking lets a waiting task
// of a high class preempt a running task of a low class in its team.
func TestCacheImpactOfAPolicySwitch(t *testing.T) {
	c := clients(t)
	s := isolated(t)
	ctx := context.Background()
	a := kueue.Applier{Kube: c.Kube, Kueue: c.Kueue}
	low, high := s.Cohort+"-low", s.Cohort+"-high"
	t.Cleanup(func() {
		for _, class := range []string{low, high} {
			_ = c.Kueue.KueueV1beta2().WorkloadPriorityClasses().Delete(context.Background(), class, metav1.DeleteOptions{})
		}
	})
	fcfs := domain.Policy{Prioritization: domain.FirstComeFirstServe, IdleAllocation: domain.IdleFirstComeFirstServe,
		Classes: []domain.PriorityClass{{Name: high, Weight: 90}, {Name: low, Weight: 10}}}
	if err := a.ApplyPolicy(ctx, s, fcfs); err != nil {
		t.Fatal(err)
	}
	gpus := int64(8)
	applyTeam(t, c, s, domain.Team{Name: "nlp", Enabled: true, FairShareWeight: 10, Preemption: domain.PreemptLowerPriority,
		Lending: domain.DontLend, Quota: []domain.QuotaInput{{InstanceType: "ml.p5.48xlarge", GPUs: &gpus}}})
	ns, lq := s.Namespace("nlp"), s.LocalQueue("nlp")
	batch := testenv.WorkloadOf(t, c.Kueue, testenv.Submit(t, c.Kube, testenv.Job{Namespace: ns, LocalQueue: lq, Name: "batch-1", Class: low, GPUs: 8}),
		"was admitted", testenv.CondTrue(kueuev1beta2.WorkloadQuotaReserved))
	urgent := testenv.WorkloadOf(t, c.Kueue, testenv.Submit(t, c.Kube, testenv.Job{Namespace: ns, LocalQueue: lq, Name: "urgent-1", Class: high, GPUs: 8}),
		"waited", func(w *kueuev1beta2.Workload) bool {
			return apimeta.IsStatusConditionFalse(w.Status.Conditions, kueuev1beta2.WorkloadQuotaReserved)
		})

	cache := startCache(t, c, s)
	ranking := fcfs
	ranking.Prioritization = domain.TaskRanking
	values := map[string]int32{}
	for _, pc := range domain.BuildPriorityClasses(s, ranking) {
		values[*pc.Name] = *pc.Value
	}
	cfg := kueue.SchedulerConfig{FairSharing: &configv1beta2.FairSharing{}}
	im, err := cache.Impact(ctx, s, cfg, kueue.ImpactChange{What: "policy", Priorities: values, Everything: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Preempted) != 1 || im.Preempted[0].Name != batch.Name || len(im.Admitted) != 1 || im.Admitted[0].Name != urgent.Name {
		t.Errorf("preview of the switch: preempted %+v, admitted %+v, uncertain %+v (%s)", im.Preempted, im.Admitted, im.Uncertain, im.Kueue)
	}
}
