package taskhistory

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/domain"
)

var (
	statTeams   = []string{"nlp", "cv", "speech", "rl"}
	statClasses = []string{"inference", "training", "batch"}
)

const lowestClass = "batch"

// randomLives makes n Workload lives ending by now, over the 12 days before
// it, in every shape the statistics distinguish: waiting, running, being
// preempted, preempted and waiting again, re-admitted, finished after
// minutes, hours, days or weeks, finished without running again, finished
// (oddly) before its admission, deactivated; about half the finished ones
// are then deleted. It returns the lives and which of them end deleted.
func randomLives(rng *rand.Rand, now time.Time, n int) ([][]stateAt, []bool) {
	lives := make([][]stateAt, 0, n)
	deleted := make([]bool, 0, n)
	sec := func(d time.Duration) time.Duration { return d.Truncate(time.Second) }
	spans := []time.Duration{90 * time.Second, 40 * time.Minute, 5 * time.Hour, 30 * time.Hour, 9 * 24 * time.Hour}
	for i := range n {
		team := statTeams[rng.IntN(len(statTeams))]
		created := now.Add(-sec(time.Duration(rng.Int64N(int64(12 * 24 * time.Hour)))))
		w := newWL(team, fmt.Sprintf("job-%04d", i), created).pods(1, int64(1+rng.IntN(8)))
		if c := rng.IntN(len(statClasses) + 1); c < len(statClasses) {
			w.class(statClasses[c], int32(100-10*c))
		}
		life := []stateAt{{wl: w.snap()}}
		at := created
		// step moves the clock by up to d (whole seconds); false once past now.
		step := func(d time.Duration) bool {
			at = at.Add(sec(time.Duration(1+rng.Int64N(int64(d)))) + time.Second)
			return !at.After(now)
		}
		add := func() { life = append(life, stateAt{wl: w.snap()}) }
		finished := false
		w.pending(at)
		add()
		scenario := rng.IntN(9)
		switch {
		case scenario == 7:
			w.deactivate()
			add()
		case scenario == 0 || !step(3*time.Hour):
			// still waiting
		default:
			w.admit(at, "ml.p5.48xlarge")
			add()
			if scenario >= 3 && scenario <= 6 && step(spans[rng.IntN(3)]) {
				w.preempt(at, kueuev1beta2.InClusterQueueReason, preemptionMsg("uid-x", "prioritization in the ClusterQueue", w.clusterQueue(), w.clusterQueue()))
				add()
				if scenario >= 4 && step(time.Minute) {
					w.release(at)
					add()
					if step(10 * time.Minute) {
						w.requeue(at)
						add()
					}
					switch {
					case scenario == 5 && step(2*time.Hour):
						w.admit(at, "ml.p5.48xlarge")
						add()
						if step(spans[rng.IntN(len(spans))]) {
							w.finish(at, kueuev1beta2.WorkloadFinishedReasonSucceeded)
							add()
							finished = true
						}
					case scenario == 6 && step(time.Hour):
						w.finish(at, kueuev1beta2.WorkloadFinishedReasonOwnerNotFound)
						add()
						finished = true
					}
				}
			}
			if scenario == 2 && step(spans[rng.IntN(len(spans))]) {
				w.finish(at, kueuev1beta2.WorkloadFinishedReasonFailed)
				add()
				finished = true
			}
			if scenario == 8 && step(time.Hour) {
				// Finished, then (oddly) its Admitted condition moves later.
				admittedAt := at
				w.finish(at.Add(-30*time.Minute), kueuev1beta2.WorkloadFinishedReasonSucceeded)
				w.admit(admittedAt, "ml.p5.48xlarge")
				add()
				finished = true
			}
		}
		gone := finished && rng.IntN(2) == 0 && step(time.Hour)
		if gone {
			life = append(life, stateAt{gone: true, at: at})
		}
		lives = append(lives, life)
		deleted = append(deleted, gone)
	}
	return lives, deleted
}

// lastState is a life's last Workload state (before any deletion).
func lastState(life []stateAt) *kueuev1beta2.Workload {
	for i := len(life) - 1; i >= 0; i-- {
		if !life[i].gone {
			return life[i].wl
		}
	}
	return nil
}

// The page's statistics from history and the live read model (what still
// runs or waits, from a domain.Model holding the Workloads not deleted)
// equal kueue's computed on all the tasks, deleted ones included (as they
// were before deletion), for every window the page offers.
func TestMergedStatisticsEqualKueue(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second)
	lives, deleted := randomLives(rand.New(rand.NewPCG(7, 12)), now, 800)
	s := domain.Settings{NamespacePrefix: teamPrefix}
	model := domain.NewModel(s)
	var wpcs []*kueuev1beta2.WorkloadPriorityClass
	for i, c := range statClasses {
		wpcs = append(wpcs, &kueuev1beta2.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: c}, Value: int32(100 - 10*i)})
	}
	model.SetPolicyObjects(nil, wpcs)
	var all []domain.Task
	for i, life := range lives {
		all = append(all, domain.FactsOf(lastState(life), s, lowestClass).At(now, 0, false))
		if !deleted[i] {
			model.SetWorkload(lastState(life))
		}
	}
	snap := model.Snapshot(now)
	if diff := cmp.Diff(statClasses, snap.Classes); diff != "" {
		t.Fatalf("the model's classes (-want +got):\n%s", diff)
	}
	forEachStore(t, now, func(t *testing.T, st *Store) {
		record(t, st, lives...)
		covered(t, st, now.Add(-13*24*time.Hour), now)
		for _, window := range []time.Duration{time.Hour, 6 * time.Hour, 24 * time.Hour, 7 * 24 * time.Hour, 30 * 24 * time.Hour, 90 * 24 * time.Hour} {
			start := now.Add(-window)
			live := snap.Ongoing(domain.Selection{}, window, now)
			hist, err := st.TaskStats(context.Background(), LiveWindow(start, now))
			if err != nil {
				t.Fatal(err)
			}
			if len(hist.Gaps) != 0 && window < 13*24*time.Hour {
				t.Errorf("%v window: gaps %v in a covered window", window, hist.Gaps)
			}
			want := domain.StatsByClass(all, statClasses, start, now)
			got := ClassStats(hist, live, statClasses, lowestClass)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%v window, per class (-kueue +merged):\n%s", window, diff)
			}
			wantTeams := domain.StatsByTeamAndClass(all, statTeams, statClasses, start, now)
			gotTeams := TeamClassStats(hist, live, statTeams, statClasses, lowestClass)
			if diff := cmp.Diff(wantTeams, gotTeams); diff != "" {
				t.Errorf("%v window, per team and class (-kueue +merged):\n%s", window, diff)
			}
		}
	})
}

// The rollup is exact: windows whose edges fall at any time of day give the
// same figures as a plain count over the task rows.
func TestTaskStatsMatchTheRows(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second)
	lives, _ := randomLives(rand.New(rand.NewPCG(3, 4)), now, 400)
	forEachStore(t, now, func(t *testing.T, st *Store) {
		record(t, st, lives...)
		rng := rand.New(rand.NewPCG(5, 6))
		for range 12 {
			from := now.Add(-time.Duration(rng.Int64N(int64(12 * 24 * time.Hour))))
			to := from.Add(time.Duration(rng.Int64N(int64(5 * 24 * time.Hour))))
			w := Window{From: from, To: to}
			got, err := st.TaskStats(context.Background(), w)
			if err != nil {
				t.Fatal(err)
			}
			want := bruteForceStats(t, st, w)
			if diff := cmp.Diff(want, got.Groups, cmp.AllowUnexported(Durations{})); diff != "" {
				t.Errorf("window %v (-rows +rollup):\n%s", w, diff)
			}
		}
		// Rebuilt in bulk, the rollup is the one kept on every write.
		incremental := dump(t, st)["stats_rollup"]
		if err := st.rebuildRollups(context.Background()); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(incremental, dump(t, st)["stats_rollup"]); diff != "" {
			t.Errorf("rollup rebuilt in bulk (-kept +rebuilt):\n%s", diff)
		}
	})
}

// bruteForceStats counts the window straight from every task row.
func bruteForceStats(t *testing.T, st *Store, w Window) []GroupStats {
	t.Helper()
	rows, err := st.db.Query(`SELECT team, class, admitted_ms, wait_ms, finished_ms, run_ms FROM tasks ORDER BY team, class`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	from, to := ceilMS(w.From), ceilMS(w.To)
	in := func(v *int64) bool { return v != nil && *v >= from && *v < to }
	var out []GroupStats
	for rows.Next() {
		var team, class string
		var admitted, wait, finished, run *int64
		if err := rows.Scan(&team, &class, &admitted, &wait, &finished, &run); err != nil {
			t.Fatal(err)
		}
		waits, runs := in(admitted), in(finished) && run != nil
		if !waits && !runs {
			continue
		}
		if n := len(out); n == 0 || out[n-1].Team != team || out[n-1].Class != class {
			out = append(out, GroupStats{Team: team, Class: class})
		}
		g := &out[len(out)-1]
		if waits {
			g.Wait.Add(time.Duration(*wait) * time.Millisecond)
		}
		if runs {
			g.Run.Add(time.Duration(*run) * time.Millisecond)
		}
		g.Samples++
	}
	return out
}

func TestRollupCodec(t *testing.T) {
	in := map[teamClass]facts{
		{"nlp", "training"}: {waitN: 3, waitSum: 9000, waitMax: 5000, runN: 2, runSum: 1 << 40, runMax: 1 << 39, runUnadmitted: 1},
		{"cv", ""}:          {waitN: 1},
		{"", "batch"}:       {runN: 1, runSum: 7, runMax: 7},
	}
	b := encodeFacts(in)
	out := map[teamClass]facts{}
	if err := decodeFacts(b, map[string]string{}, func(k teamClass, f facts) { out[k] = f }); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(in, out, cmp.AllowUnexported(teamClass{}, facts{})); diff != "" {
		t.Errorf("round trip (-in +out):\n%s", diff)
	}
	if err := decodeFacts(b[:len(b)-3], nil, func(teamClass, facts) {}); err == nil {
		t.Error("a truncated row decoded")
	}
}
