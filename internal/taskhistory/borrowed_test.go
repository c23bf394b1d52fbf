package taskhistory

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/kueuetest"
)

// borrowedView is what the three places that speak of borrowing say of one
// team's task: the Tasks page while it runs, the per-task usage report and
// the usage summary's borrowed GPU-hours.
type borrowedView struct {
	TasksPage, Report bool
	SummaryHours      float64
}

// A 2-pod task of 16 GPUs in a team with 8 GPUs of quota in a cohort
// borrows 8 GPUs for two minutes: the Tasks page, the per-task report and
// the summary say so alike, and alike say nothing of a task that fits, nor
// of one beyond the quota of a queue in no cohort, which borrows from no one.
func TestBorrowedIsOneFact(t *testing.T) {
	s := domain.Settings{NamespacePrefix: teamPrefix}
	now := min_(120)
	cases := []struct {
		team, cohort string
		pods         int32
		gpusPerPod   int64
		want         borrowedView
	}{
		{"solo", "pool", 2, 8, borrowedView{TasksPage: true, Report: true, SummaryHours: 8 * 2.0 / 60}},
		{"fits", "pool", 1, 8, borrowedView{}},
		{"alone", "", 2, 8, borrowedView{}},
	}
	forEachStore(t, now, func(t *testing.T, st *Store) {
		ctx := context.Background()
		got := map[string]borrowedView{}
		for _, tc := range cases {
			cq := kueuetest.MakeClusterQueue(s.ClusterQueue(tc.team)).Cohort(tc.cohort).Nominal(8, nil).Obj()
			if _, err := st.Write(ctx, Batch{Queues: []QueueState{QueueOf(cq, teamPrefix, t0)}}); err != nil {
				t.Fatal(err)
			}
			w := kueuetest.MakeWorkload(s, s.Namespace(tc.team), "train").Queue(s.LocalQueue(tc.team)).Class("training").
				GPUs(tc.gpusPerPod, tc.pods).Created(min_(1)).WithUID("uid-" + tc.team)
			pending := w.Clone().Obj()
			running := w.Admitted(min_(10), "ml.p5.48xlarge").Clone().Obj()
			done := w.Finished(min_(12), kueuev1beta2.WorkloadFinishedReasonSucceeded).Obj()
			record(t, st, []stateAt{{wl: pending}, {wl: running}, {wl: done}})

			snap := domain.BuildSnapshot(domain.SnapshotInput{Settings: s, Workloads: []*kueuev1beta2.Workload{running},
				ClusterQueues: []*kueuev1beta2.ClusterQueue{cq}}, min_(11))
			f := snap.Find(running.Namespace, running.Name)
			got[tc.team] = borrowedView{TasksPage: f != nil && snap.Borrowing(f)}
		}
		covered(t, st, t0, now)

		if _, _, err := st.TaskReport(ctx, ReportQuery{Window: Window{From: t0, To: now}}, func(r ReportRow) error {
			v := got[r.Task.Team]
			v.Report = r.Borrowed()
			got[r.Task.Team] = v
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		sum, err := st.UsageSummary(ctx, Window{From: t0, To: now})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range sum.Rows {
			v := got[r.Team]
			v.SummaryHours += r.GPU.Borrowed
			got[r.Team] = v
		}

		want := map[string]borrowedView{}
		for _, tc := range cases {
			want[tc.team] = tc.want
		}
		if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
			t.Errorf("Tasks page, per-task report and summary disagree (-want +got):\n%s", diff)
		}
	})
}

// Whether a task borrowed depends on what happened, not on the order the
// store learned it: written as it happened, or task by task newest first
// (as a backfill may), the same tasks borrowed.
func TestBorrowedDoesNotDependOnWriteOrder(t *testing.T) {
	s := domain.Settings{NamespacePrefix: teamPrefix}
	now := min_(120)
	type life struct {
		name             string
		admitted, finish int // minutes; finish 0: still running
		borrowed         bool
	}
	lives := []life{
		{"a", 10, 30, false},
		{"b", 20, 50, true},  // a held the quota
		{"c", 40, 60, true},  // a had ended, b still held it
		{"d", 70, 75, false}, // alone
		{"e", 80, 0, false},  // the same second as f: e first, by name
		{"f", 80, 0, true},
	}
	type timedChange struct {
		at time.Time
		c  Change
	}
	var happened []timedChange
	var perTask [][]Change
	for _, l := range lives {
		w := kueuetest.MakeWorkload(s, s.Namespace("seq"), l.name).WithUID("uid-"+l.name).Queue(s.LocalQueue("seq")).GPUs(8, 1).Created(min_(1))
		states := []*kueuev1beta2.Workload{w.Clone().Obj(), w.Admitted(min_(l.admitted), "ml.p5.48xlarge").Clone().Obj()}
		times := []time.Time{min_(1), min_(l.admitted)}
		if l.finish > 0 {
			states = append(states, w.Finished(min_(l.finish), kueuev1beta2.WorkloadFinishedReasonSucceeded).Obj())
			times = append(times, min_(l.finish))
		}
		var mine []Change
		for i, st := range states {
			var prev *kueuev1beta2.Workload
			if i > 0 {
				prev = states[i-1]
			}
			c, _ := Diff(prev, st, teamPrefix)
			happened = append(happened, timedChange{times[i], c})
			mine = append(mine, c)
		}
		perTask = append([][]Change{mine}, perTask...) // newest first
	}
	slices.SortStableFunc(happened, func(a, b timedChange) int { return a.at.Compare(b.at) })

	cq := kueuetest.MakeClusterQueue(s.ClusterQueue("seq")).Cohort("pool").Nominal(8, nil).Obj() // borrowing needs a cohort
	orders := map[string][]Batch{}
	for _, h := range happened {
		orders["as it happened"] = append(orders["as it happened"], Batch{Changes: []Change{h.c}})
	}
	for _, changes := range perTask {
		orders["task by task, newest first"] = append(orders["task by task, newest first"], Batch{Changes: changes})
	}
	want := map[string]bool{}
	for _, l := range lives {
		want[l.name] = l.borrowed
	}
	for name, batches := range orders {
		t.Run(name, func(t *testing.T) {
			forEachStore(t, now, func(t *testing.T, st *Store) {
				ctx := context.Background()
				for _, b := range append([]Batch{{Queues: []QueueState{QueueOf(cq, teamPrefix, t0)}}}, batches...) {
					if _, err := st.Write(ctx, b); err != nil {
						t.Fatal(err)
					}
				}
				covered(t, st, t0, now)
				got := map[string]bool{}
				if _, _, err := st.TaskReport(ctx, ReportQuery{Window: Window{From: t0, To: now}}, func(r ReportRow) error {
					got[r.Task.Name] = r.Borrowed()
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("borrowed (-want +got):\n%s", diff)
				}
				sum, err := st.UsageSummary(ctx, Window{From: t0, To: now})
				if err != nil {
					t.Fatal(err)
				}
				var hours float64
				for _, r := range sum.Rows {
					hours += r.GPU.Borrowed
				}
				// 8 GPUs over a's and b's overlap, b's and c's, and e's and f's.
				if want := 8 * (10 + 10 + 40) / 60.0; math.Abs(hours-want) > 1e-9 {
					t.Errorf("summary: %v borrowed GPU-hours, want %v", hours, want)
				}
			})
		})
	}
}
