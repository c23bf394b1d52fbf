package domain_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/kueuetest"
)

func TestBuildImpact(t *testing.T) {
	s := domain.DefaultSettings
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	cq := func(team string, quota, used, borrowed int64) *kueuev1beta2.ClusterQueue {
		return kueuetest.MakeClusterQueue(s.ClusterQueue(team)).Labels(domain.TeamLabel, team).Cohort(s.Cohort).Nominal(quota, nil).Usage(used, borrowed).Obj()
	}
	running := kueuetest.MakeWorkload(s, s.Namespace("nlp"), "train").Class("training").GPUs(8, 1).Created(now.Add(-3*time.Hour)).
		Admitted(now.Add(-2*time.Hour), "ml.p5.48xlarge").Obj()
	waiting := kueuetest.MakeWorkload(s, s.Namespace("vision"), "tune").Class("inference").GPUs(8, 1).Created(now.Add(-time.Hour)).Obj()
	facts := func(wl *kueuev1beta2.Workload) *domain.TaskFacts { return domain.FactsOf(wl, s, "") }

	tests := map[string]struct {
		fates      []domain.FateChange
		now, after []*kueuev1beta2.ClusterQueue
		want       domain.Impact
		summary    string
	}{
		"a preemption and an admission": {
			fates: []domain.FateChange{
				{Task: facts(running), Now: domain.FateStaysAdmitted, After: domain.FatePreempted, Reason: kueuev1beta2.InCohortReclamationReason, Preemptor: facts(waiting)},
				{Task: facts(waiting), Now: domain.FateStaysPending, After: domain.FateAdmitted, PositionNow: 1},
			},
			now:   []*kueuev1beta2.ClusterQueue{cq("nlp", 8, 16, 8), cq("vision", 0, 0, 0)},
			after: []*kueuev1beta2.ClusterQueue{cq("nlp", 8, 8, 0), cq("vision", 8, 8, 0)},
			want: domain.Impact{What: "test",
				Preempted: []domain.ImpactTask{{Namespace: "hyperpod-ns-nlp", Name: "train", Team: "nlp", Class: "training", GPUs: 8, Ran: 2 * time.Hour, GPUHours: 16,
					Why: "A team reclaims the quota it lent for hyperpod-ns-vision/tune (team vision, 8 GPUs)."}},
				Admitted: []domain.ImpactTask{{Namespace: "hyperpod-ns-vision", Name: "tune", Team: "vision", Class: "inference", GPUs: 8, PositionNow: 1,
					Why: "Its queue has room after the change."}},
				Teams: []domain.TeamImpact{{Team: "nlp", Resource: domain.ResourceGPU, QuotaNow: 8, QuotaAfter: 8, InUseNow: 16, InUseAfter: 8, BorrowedNow: 8},
					{Team: "vision", Resource: domain.ResourceGPU, QuotaAfter: 8, InUseAfter: 8, LentNow: 0}},
				GPUsPreempted: 8, GPUHoursAtRisk: 16, GPUsAdmitted: 8},
			summary: "1 task preempted (8 GPUs, 16.0 GPU-hours of work); 1 pending task admitted (8 GPUs).",
		},
		"a quota cut preempts nothing and says so": {
			fates: []domain.FateChange{{Task: facts(running), Now: domain.FateStaysAdmitted, After: domain.FateStaysAdmitted}},
			now:   []*kueuev1beta2.ClusterQueue{cq("nlp", 16, 16, 0)},
			after: []*kueuev1beta2.ClusterQueue{cq("nlp", 8, 16, 8)},
			want: domain.Impact{What: "test",
				Teams: []domain.TeamImpact{{Team: "nlp", Resource: domain.ResourceGPU, QuotaNow: 16, QuotaAfter: 8, InUseNow: 16, InUseAfter: 16, BorrowedAfter: 8}},
				Notes: []string{"Team nlp will hold 16 GPUs against a quota of 8 GPUs: Kueue does not stop tasks when a quota falls, but it now borrows 8 GPUs, which other teams may reclaim when they need them."}},
			summary: "No task is preempted or admitted.",
		},
		"a queue of vCPU, as Kueue's examples are, is told in vCPU": {
			fates: []domain.FateChange{{Task: facts(running), Now: domain.FateStaysAdmitted, After: domain.FateStaysAdmitted}},
			now: []*kueuev1beta2.ClusterQueue{kueuetest.MakeClusterQueue(s.ClusterQueue("cpu")).Labels(domain.TeamLabel, "cpu").Cohort(s.Cohort).
				Quota("default-flavor", "cpu", "8").UsageOf("default-flavor", "cpu", "6", "0").Obj()},
			after: []*kueuev1beta2.ClusterQueue{kueuetest.MakeClusterQueue(s.ClusterQueue("cpu")).Labels(domain.TeamLabel, "cpu").Cohort(s.Cohort).
				Quota("default-flavor", "cpu", "4").UsageOf("default-flavor", "cpu", "6", "2").Obj()},
			want: domain.Impact{What: "test",
				Teams: []domain.TeamImpact{{Team: "cpu", Resource: "cpu", QuotaNow: 8000, QuotaAfter: 4000, InUseNow: 6000, InUseAfter: 6000, BorrowedAfter: 2000}},
				Notes: []string{"Team cpu will hold 6 vCPU against a quota of 4 vCPU: Kueue does not stop tasks when a quota falls, but it now borrows 2 vCPU, which other teams may reclaim when they need them."}},
			summary: "No task is preempted or admitted.",
		},
		"an admission by borrowing, quota unchanged, is no quota falling": {
			fates: []domain.FateChange{{Task: facts(waiting), Now: domain.FateStaysPending, After: domain.FateAdmitted, PositionNow: 1}},
			now:   []*kueuev1beta2.ClusterQueue{cq("vision", 8, 8, 0), cq("nlp", 8, 0, 0)},
			after: []*kueuev1beta2.ClusterQueue{cq("vision", 8, 16, 8), cq("nlp", 8, 0, 0)},
			want: domain.Impact{What: "test",
				Admitted: []domain.ImpactTask{{Namespace: "hyperpod-ns-vision", Name: "tune", Team: "vision", Class: "inference", GPUs: 8, PositionNow: 1,
					Why: "Its queue has room after the change."}},
				Teams: []domain.TeamImpact{{Team: "nlp", Resource: domain.ResourceGPU, QuotaNow: 8, QuotaAfter: 8, LentAfter: 8},
					{Team: "vision", Resource: domain.ResourceGPU, QuotaNow: 8, QuotaAfter: 8, InUseNow: 8, InUseAfter: 16, BorrowedAfter: 8}},
				GPUsAdmitted: 8},
			summary: "1 pending task admitted (8 GPUs).",
		},
		"Kueue's next step is no effect of the change": {
			fates: []domain.FateChange{{Task: facts(waiting), Now: domain.FateAdmitted, After: domain.FateAdmitted}},
			now:   []*kueuev1beta2.ClusterQueue{cq("vision", 8, 8, 0)},
			after: []*kueuev1beta2.ClusterQueue{cq("vision", 8, 8, 0)},
			want: domain.Impact{What: "test", Anyway: []domain.ImpactTask{{Namespace: "hyperpod-ns-vision", Name: "tune", Team: "vision", Class: "inference", GPUs: 8,
				Why: "Kueue admits it in its next cycle, with or without this change."}}},
			summary: "No task is preempted or admitted.",
		},
		"a deleted team's tasks": {
			fates: []domain.FateChange{{Task: facts(running), Now: domain.FateStaysAdmitted, After: domain.FateDeleted}},
			now:   []*kueuev1beta2.ClusterQueue{cq("nlp", 8, 8, 0)},
			after: nil,
			want: domain.Impact{What: "test", Deleted: []domain.ImpactTask{{Namespace: "hyperpod-ns-nlp", Name: "train", Team: "nlp", Class: "training", GPUs: 8,
				Ran: 2 * time.Hour, GPUHours: 16, Why: "Stopped and deleted with its team's namespace."}},
				Teams:       []domain.TeamImpact{{Team: "nlp", Resource: domain.ResourceGPU, QuotaNow: 8, InUseNow: 8, Deleted: true}},
				GPUsDeleted: 8, GPUHoursAtRisk: 16},
			summary: "1 task deleted (8 GPUs running).",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := domain.BuildImpact(s, now, "test", tc.fates, tc.now, tc.after, nil)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("impact (-want +got):\n%s", diff)
			}
			if got.Summary() != tc.summary {
				t.Errorf("summary %q, want %q", got.Summary(), tc.summary)
			}
		})
	}
}
