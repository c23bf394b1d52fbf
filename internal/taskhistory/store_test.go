package taskhistory

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/jackc/pgx/v5/pgconn"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/domain"
)

func TestOpenRejectsNewerSchema(t *testing.T) {
	forEachStore(t, time.Now(), func(t *testing.T, s *Store) {
		if _, err := s.db.Exec(s.q(`INSERT INTO schema_migrations (version, applied_ms) VALUES (?, 0)`), len(migrations)+5); err != nil {
			t.Fatal(err)
		}
		cfg := Config{Driver: DriverSQLite, Path: s.name}
		if s.postgres {
			cfg = Config{Driver: DriverPostgres, DSN: dsnFor(s)}
		}
		_, err := Open(context.Background(), cfg)
		if err == nil {
			t.Fatal("a store of a newer schema opened")
		}
		if !strings.Contains(err.Error(), s.name) || !strings.Contains(err.Error(), "newer than this console knows") {
			t.Errorf("error does not name the store and the cause: %v", err)
		}
	})
}

func TestOpenMigratesOnceAndReopens(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "history.db")
	s := openSQLite(t, path)
	now := time.Now().UTC().Truncate(time.Second)
	lives, _ := randomLives(rand.New(rand.NewPCG(1, 1)), now, 20)
	record(t, s, lives...)
	s.Close()
	again := openSQLite(t, path)
	var n int
	if err := again.db.QueryRow(`SELECT COUNT(*) FROM tasks`).Scan(&n); err != nil || n != 20 {
		t.Errorf("after reopening: %d tasks (%v), want 20", n, err)
	}
	var versions int
	if err := again.db.QueryRow(`SELECT COUNT(*) FROM schema_migrations`).Scan(&versions); err != nil || versions != len(migrations) {
		t.Errorf("%d migrations recorded (%v), want %d", versions, err, len(migrations))
	}
}

func TestOpenRejectsACorruptFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.db")
	if err := os.WriteFile(path, []byte(strings.Repeat("this is not a database\n", 400)), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Open(context.Background(), Config{Driver: DriverSQLite, Path: path})
	if err == nil {
		t.Fatal("a corrupt file opened")
	}
	if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "not a SQLite database") {
		t.Errorf("error does not name the file and the cause: %v", err)
	}
}

func TestOpenFailsOnAnUnreachableServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := Open(ctx, Config{Driver: DriverPostgres, DSN: "postgres://nobody:secret@127.0.0.1:1/history?sslmode=disable&connect_timeout=2"})
	if err == nil {
		t.Fatal("opened a store on a closed port")
	}
	if !strings.Contains(err.Error(), "127.0.0.1:1/history") || strings.Contains(err.Error(), "secret") {
		t.Errorf("error should name the server, never the password: %v", err)
	}
	if _, err := Open(ctx, Config{Driver: "mysql"}); err == nil || !strings.Contains(err.Error(), "mysql") {
		t.Errorf("unknown driver: %v", err)
	}
}

// Writing again what the store holds (a resync, a restart's or another
// replica's backfill) changes nothing.
func TestRewritingChangesNothing(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second)
	lives, _ := randomLives(rand.New(rand.NewPCG(9, 9)), now, 150)
	forEachStore(t, now, func(t *testing.T, s *Store) {
		record(t, s, lives...)
		before := dump(t, s)
		var b Batch
		for _, life := range lives {
			if life[len(life)-1].gone {
				// A late sight of a deleted task changes nothing either.
				c, _ := Diff(nil, lastState(life), teamPrefix)
				b.Changes = append(b.Changes, c)
				continue
			}
			c, _ := Diff(nil, lastState(life), teamPrefix)
			b.Changes = append(b.Changes, c)
		}
		w, err := s.Write(context.Background(), b)
		if err != nil {
			t.Fatal(err)
		}
		if w != (Written{}) {
			t.Errorf("rewriting the same state wrote %+v", w)
		}
		if diff := cmp.Diff(before, dump(t, s)); diff != "" {
			t.Errorf("tables changed (-before +after):\n%s", diff)
		}
	})
}

// dump reads every table, for comparisons.
func dump(t *testing.T, s *Store) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, table := range []string{"tasks", "events", "admissions", "preemptions", "quotas", "stats_rollup"} {
		rows, err := s.db.Query(`SELECT * FROM ` + table)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			for _, v := range vals {
				fmt.Fprintf(&b, "%v|", v)
			}
			out[table] = append(out[table], b.String())
		}
		rows.Close()
		slices.Sort(out[table])
	}
	return out
}

// A preemption is recorded with its preemptor (a recorded task, or its
// ClusterQueue's team when the task is not recorded), the reason in words
// and the GPU-hours lost; pages of the history and the per-team counts
// follow.
func TestPreemptionHistory(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Hour).Add(-time.Hour)
	at := func(m int) time.Time { return now.Add(time.Duration(m-600) * time.Minute) }
	preemptor := newWL("cv", "urgent", at(0)).class("inference", 1000).pods(1, 8)
	preemptor.admit(at(95), "ml.p5.48xlarge")
	var lives [][]stateAt
	lives = append(lives, []stateAt{{wl: preemptor.snap()}})
	for i, victim := range []string{"a", "b", "c", "d"} {
		w := newWL("nlp", victim, at(0)).class("training", 100).pods(1, 8)
		life := []stateAt{{wl: w.snap()}}
		w.admit(at(10), "ml.p5.48xlarge")
		life = append(life, stateAt{wl: w.snap()})
		uid := "uid-cv-urgent"
		if i == 3 {
			uid = "uid-never-recorded"
		}
		w.preempt(at(100+i), kueuev1beta2.InCohortReclamationReason,
			preemptionMsg(uid, "reclamation within the cohort", "hyperpod-ns-cv-clusterqueue", "hyperpod-ns-nlp-clusterqueue"))
		life = append(life, stateAt{wl: w.snap()})
		w.release(at(101 + i))
		life = append(life, stateAt{wl: w.snap()})
		lives = append(lives, life)
	}
	// A preemption within team cv, of another class.
	w := newWL("cv", "low", at(0)).class("batch", 10).pods(1, 2)
	w.admit(at(30), "ml.g5.2xlarge")
	lifeLow := []stateAt{{wl: w.snap()}}
	w.preempt(at(200), kueuev1beta2.InClusterQueueReason,
		"Preempted to accommodate a workload (UID: uid-cv-urgent, JobUID: UNKNOWN) due to prioritization in the ClusterQueue; preemptor path: /shared-pool/hyperpod-ns-cv-clusterqueue; preemptee path: /shared-pool/hyperpod-ns-cv-clusterqueue")
	lifeLow = append(lifeLow, stateAt{wl: w.snap()})
	lives = append(lives, lifeLow)

	forEachStore(t, now, func(t *testing.T, s *Store) {
		ctx := context.Background()
		cq := &kueuev1beta2.ClusterQueue{}
		cq.Name, cq.Labels = "hyperpod-ns-cv-clusterqueue", map[string]string{domain.TeamLabel: "cv"}
		if _, err := s.Write(ctx, Batch{Queues: []QueueState{QueueOf(cq, teamPrefix, at(0))}}); err != nil {
			t.Fatal(err)
		}
		record(t, s, lives...)
		covered(t, s, at(0), now)
		window := Window{From: at(0), To: now}

		var got []Preemption
		var after string
		for page := 0; ; page++ {
			p, err := s.Preemptions(ctx, PreemptionQuery{Window: window, Limit: 2, After: after})
			if err != nil {
				t.Fatal(err)
			}
			if p.Total != 5 || len(p.Preemptions) > 2 {
				t.Fatalf("page %d: total %d, %d rows", page, p.Total, len(p.Preemptions))
			}
			got = append(got, p.Preemptions...)
			if after = p.Next; after == "" {
				break
			}
		}
		if len(got) != 5 || got[0].Task.Name != "low" || got[4].Task.Name != "a" {
			t.Fatalf("pages gave %d preemptions, newest first expected: %+v", len(got), got)
		}
		a := got[4]
		want := Preemption{At: at(100), Task: TaskRef{UID: "uid-nlp-a", Namespace: "hyperpod-ns-nlp", Name: "a", Team: "nlp", Class: "training",
			OwnerKind: "Job", OwnerName: "a"},
			GPUs: 8, ClusterQueue: "hyperpod-ns-nlp-clusterqueue",
			Preemptor:             TaskRef{UID: "uid-cv-urgent", Namespace: "hyperpod-ns-cv", Name: "urgent", Team: "cv", Class: "inference", OwnerKind: "Job", OwnerName: "urgent"},
			PreemptorClusterQueue: "hyperpod-ns-cv-clusterqueue",
			Reason:                kueuev1beta2.InCohortReclamationReason, ReasonWords: "Preempted: team cv reclaimed its lent quota",
			Message:      preemptionMsg("uid-cv-urgent", "reclamation within the cohort", "hyperpod-ns-cv-clusterqueue", "hyperpod-ns-nlp-clusterqueue"),
			GPUHoursLost: 8 * 90.0 / 60, LostKnown: true}
		if diff := cmp.Diff(want, a); diff != "" {
			t.Errorf("preemption (-want +got):\n%s", diff)
		}
		if d := got[1]; d.Preemptor.UID != "uid-never-recorded" || d.Preemptor.Team != "cv" || d.Preemptor.Name != "" {
			t.Errorf("unrecorded preemptor: %+v, want its ClusterQueue's team", d.Preemptor)
		}

		nlp, err := s.Preemptions(ctx, PreemptionQuery{Window: window, Team: "nlp", Class: "training"})
		if err != nil || nlp.Total != 4 || len(nlp.Preemptions) != 4 {
			t.Errorf("team nlp, class training: %+v, %v", nlp, err)
		}
		for _, teams := range [][]string{{"nlp", "speech"}, {}} {
			mine, err := s.Preemptions(ctx, PreemptionQuery{Window: window, Teams: teams})
			if want := int64(4 * len(teams) / 2); err != nil || mine.Total != want || len(mine.Preemptions) != int(want) {
				t.Errorf("teams %q: %+v, %v; want %d", teams, mine, err, want)
			}
		}
		none, err := s.Preemptions(ctx, PreemptionQuery{Window: Window{From: at(0), To: at(100)}})
		if err != nil || none.Total != 0 {
			t.Errorf("before the first preemption: %+v, %v", none, err)
		}
		if _, err := s.Preemptions(ctx, PreemptionQuery{Window: window, After: "garbage"}); err == nil {
			t.Error("a bad cursor was accepted")
		}

		by, gaps, err := s.PreemptionsByTeam(ctx, window, "")
		if err != nil {
			t.Fatal(err)
		}
		wantBy := []PreemptedBy{{Team: "cv", PreemptorTeam: "cv", Count: 1, GPUHoursLost: 2 * 170.0 / 60},
			{Team: "nlp", PreemptorTeam: "cv", Count: 4, GPUHoursLost: 8 * (90 + 91 + 92 + 93) / 60.0}}
		if diff := cmp.Diff(wantBy, by, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
			t.Errorf("by team (-want +got):\n%s", diff)
		}
		if len(gaps) != 0 {
			t.Errorf("gaps %v in a covered window", gaps)
		}
		var times int
		if err := s.db.QueryRow(s.q(`SELECT preempted FROM tasks WHERE uid = ?`), "uid-nlp-a").Scan(&times); err != nil || times != 1 {
			t.Errorf("times preempted %d (%v)", times, err)
		}
	})
}

// The usage summary integrates quotas and admissions exactly as computed
// by hand here: allocation, use, borrowing beyond nominal quota and the
// lender's share, per team, instance type and day, with the missing part
// of a day reported and not counted.
func TestUsageSummary(t *testing.T) {
	now := time.Now().UTC()
	day := time.UnixMilli(dayOf(now.UnixMilli())).UTC().Add(-3 * 24 * time.Hour)
	h := func(hours float64) time.Time { return day.Add(time.Duration(hours * float64(time.Hour))) }
	const p5 = "ml.p5.48xlarge"
	queue := func(team string, gpus, cpus int64, lending *int64) *kueuev1beta2.ClusterQueue {
		cq := &kueuev1beta2.ClusterQueue{}
		cq.Name, cq.Labels = teamPrefix+team+"-clusterqueue", map[string]string{domain.TeamLabel: team}
		cq.Spec.CohortName = "shared-pool"
		rq := []kueuev1beta2.ResourceQuota{{Name: domain.ResourceGPU, NominalQuota: qty(gpus)}, {Name: corev1.ResourceCPU, NominalQuota: qty(cpus)}}
		if lending != nil {
			rq[0].LendingLimit = ptr.To(qty(*lending))
		}
		cq.Spec.ResourceGroups = []kueuev1beta2.ResourceGroup{{Flavors: []kueuev1beta2.FlavorQuotas{{Name: p5, Resources: rq}}}}
		return cq
	}
	a8, b4, a16 := queue("a", 8, 32, nil), queue("b", 4, 16, ptr.To[int64](2)), queue("a", 16, 32, nil)

	taskA := newWL("a", "small", h(0)).pods(1, 2)
	lifeA := []stateAt{{wl: taskA.snap()}}
	taskA.admit(h(1), p5)
	lifeA = append(lifeA, stateAt{wl: taskA.snap()})
	taskA.finish(h(3), "Succeeded")
	lifeA = append(lifeA, stateAt{wl: taskA.snap()})
	taskB := newWL("b", "big", h(0)).pods(1, 6)
	lifeB := []stateAt{{wl: taskB.snap()}}
	taskB.admit(h(2), p5)
	lifeB = append(lifeB, stateAt{wl: taskB.snap()})
	lifeB = append(lifeB, stateAt{gone: true, at: h(6)}) // deleted while running

	forEachStore(t, now, func(t *testing.T, s *Store) {
		ctx := context.Background()
		write := func(qs ...QueueState) {
			if _, err := s.Write(ctx, Batch{Queues: qs}); err != nil {
				t.Fatal(err)
			}
		}
		write(QueueOf(a8, teamPrefix, day), QueueOf(b4, teamPrefix, day))
		write(QueueOf(a16, teamPrefix, h(12)))
		record(t, s, lifeA, lifeB)
		covered(t, s, day, h(36)) // the second day is missing from noon

		sum, err := s.UsageSummary(ctx, Window{From: day, To: h(48)})
		if err != nil {
			t.Fatal(err)
		}
		// Day 1. Team a: quota 8 GPUs for 12 h then 16; its task holds 2 GPUs
		// 1h-3h. Team b: quota 4 (lends at most 2); its task holds 6 GPUs
		// 2h-6h: 2 borrowed, all lent by a (b has nothing idle to lend).
		// vCPU: 4 per task, within quota.
		want := []UsageRow{
			{Day: day, Team: "a", InstanceType: p5,
				GPU:  ResourceHours{Allocated: 8*12 + 16*12, Used: 2 * 2, Lent: 2 * 4},
				VCPU: ResourceHours{Allocated: 32 * 24, Used: 4 * 2}},
			{Day: day, Team: "b", InstanceType: p5,
				GPU:  ResourceHours{Allocated: 4 * 24, Used: 6 * 4, Borrowed: 2 * 4},
				VCPU: ResourceHours{Allocated: 16 * 24, Used: 4 * 4}},
			// Day 2: recorded until noon only.
			{Day: day.Add(24 * time.Hour), Team: "a", InstanceType: p5, GPU: ResourceHours{Allocated: 16 * 12}, VCPU: ResourceHours{Allocated: 32 * 12}},
			{Day: day.Add(24 * time.Hour), Team: "b", InstanceType: p5, GPU: ResourceHours{Allocated: 4 * 12}, VCPU: ResourceHours{Allocated: 16 * 12}},
		}
		if diff := cmp.Diff(want, sum.Rows, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
			t.Errorf("rows (-want +got):\n%s", diff)
		}
		wantDays := []UsageDay{{Day: day}, {Day: day.Add(24 * time.Hour), Missing: []Period{{From: h(36), To: h(48)}}}}
		if diff := cmp.Diff(wantDays, sum.Days); diff != "" {
			t.Errorf("days (-want +got):\n%s", diff)
		}
	})
}

// Kubernetes gives Kueue's condition times in whole seconds, rounded down;
// the recorder sees a queue's quota some milliseconds after it changed. A
// task admitted the moment its queue is made, or the moment its quota is
// raised, is recorded in the second before the recorder saw the quota: it
// borrows nothing all the same.
func TestQuotaHoldsFromTheSecondItChanged(t *testing.T) {
	now := time.Now().UTC()
	day := time.UnixMilli(dayOf(now.UnixMilli())).UTC().Add(-2 * 24 * time.Hour)
	h := func(hours float64) time.Time { return day.Add(time.Duration(hours * float64(time.Hour))) }
	const p5 = "ml.p5.48xlarge"
	queue := func(gpus int64) *kueuev1beta2.ClusterQueue {
		cq := &kueuev1beta2.ClusterQueue{}
		cq.Name, cq.Labels = teamPrefix+"a-clusterqueue", map[string]string{domain.TeamLabel: "a"}
		cq.CreationTimestamp = metav1.NewTime(h(1)) // made at 1h + 300 ms, as Kubernetes rounds it
		cq.Spec.ResourceGroups = []kueuev1beta2.ResourceGroup{{Flavors: []kueuev1beta2.FlavorQuotas{{Name: p5,
			Resources: []kueuev1beta2.ResourceQuota{{Name: domain.ResourceGPU, NominalQuota: qty(gpus)}, {Name: corev1.ResourceCPU, NominalQuota: qty(16)}}}}}}
		return cq
	}
	// Admitted at 1h + 400 ms, and at 2h + 500 ms once the quota went from
	// 4 to 8 at 2h + 450 ms: Kueue says 1h and 2h.
	first := newWL("a", "first", h(1)).pods(1, 4)
	lifeFirst := []stateAt{{wl: first.snap()}}
	lifeFirst = append(lifeFirst, stateAt{wl: first.admit(h(1), p5).snap()}, stateAt{wl: first.finish(h(3), "Succeeded").snap()})
	second := newWL("a", "second", h(1)).pods(1, 4)
	lifeSecond := []stateAt{{wl: second.snap()}}
	lifeSecond = append(lifeSecond, stateAt{wl: second.admit(h(2), p5).snap()}, stateAt{wl: second.finish(h(3), "Succeeded").snap()})

	forEachStore(t, now, func(t *testing.T, s *Store) {
		ctx := context.Background()
		for _, q := range []QueueState{QueueOf(queue(4), teamPrefix, h(1).Add(700*time.Millisecond)), QueueOf(queue(8), teamPrefix, h(2).Add(900*time.Millisecond))} {
			if _, err := s.Write(ctx, Batch{Queues: []QueueState{q}}); err != nil {
				t.Fatal(err)
			}
		}
		record(t, s, lifeFirst, lifeSecond)
		covered(t, s, day, h(24))
		sum, err := s.UsageSummary(ctx, Window{From: day, To: h(24)})
		if err != nil {
			t.Fatal(err)
		}
		want := []UsageRow{{Day: day, Team: "a", InstanceType: p5,
			GPU:  ResourceHours{Allocated: 4*1 + 8*22, Used: 4*2 + 4*1},
			VCPU: ResourceHours{Allocated: 16 * 23, Used: 4*2 + 4*1}}}
		if diff := cmp.Diff(want, sum.Rows, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
			t.Errorf("rows (-want +got):\n%s", diff)
		}
	})
}

func qty(v int64) resource.Quantity { return *resource.NewQuantity(v, resource.DecimalSI) }

// The per-task report: every task that existed in the window, by end, with
// its GPU-hours (to now for one still running), borrowing, preemptions and
// outcome; pages of it add up to the whole.
func TestTaskReport(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second)
	at := func(m int) time.Time { return now.Add(time.Duration(m-300) * time.Minute) }
	var lives [][]stateAt
	for i, spec := range []struct {
		name     string
		admit    int // minutes; -1: never
		finish   int // -1: running
		gpus     int64
		deleteAt int // -1: kept
	}{
		{"done", 10, 70, 4, -1}, {"deleted", 20, 50, 2, 60}, {"running", 100, -1, 8, -1}, {"waiting", -1, -1, 1, -1}, {"early", 0, 5, 1, -1},
	} {
		w := newWL("nlp", spec.name, at(i)).pods(1, spec.gpus)
		life := []stateAt{{wl: w.snap()}}
		if spec.admit >= 0 {
			w.admit(at(spec.admit), "ml.p5.48xlarge")
			life = append(life, stateAt{wl: w.snap()})
		}
		if spec.finish >= 0 {
			w.finish(at(spec.finish), "Succeeded")
			life = append(life, stateAt{wl: w.snap()})
		}
		if spec.deleteAt >= 0 {
			life = append(life, stateAt{gone: true, at: at(spec.deleteAt)})
		}
		lives = append(lives, life)
	}
	forEachStore(t, now, func(t *testing.T, s *Store) {
		ctx := context.Background()
		record(t, s, lives...)
		covered(t, s, at(0), now)
		collect := func(q ReportQuery) ([]ReportRow, string) {
			var rows []ReportRow
			next, _, err := s.TaskReport(ctx, q, func(r ReportRow) error { rows = append(rows, r); return nil })
			if err != nil {
				t.Fatal(err)
			}
			return rows, next
		}
		all, next := collect(ReportQuery{Window: Window{From: at(6), To: now}})
		if next != "" {
			t.Errorf("an unpaged report has a next page %q", next)
		}
		var names []string
		for _, r := range all {
			names = append(names, r.Task.Name)
		}
		if diff := cmp.Diff([]string{"deleted", "done", "running", "waiting"}, names); diff != "" {
			t.Errorf("tasks of the window (-want +got):\n%s", diff)
		}
		byName := map[string]ReportRow{}
		for _, r := range all {
			byName[r.Task.Name] = r
		}
		if r := byName["done"]; r.GPUHours() != 4 || r.Start != at(10) || r.End != at(70) || r.Outcome != OutcomeSucceeded {
			t.Errorf("done: %+v", r)
		}
		if r := byName["deleted"]; math.Abs(r.GPUHours()-1) > 1e-9 || r.End != at(50) || r.Outcome != OutcomeSucceeded {
			t.Errorf("deleted after finishing: %+v", r)
		}
		if r := byName["running"]; math.Abs(r.GPUHours()-8*200.0/60) > 1e-9 || !r.End.IsZero() || r.Outcome != "" || r.State != domain.TaskAdmitted {
			t.Errorf("running: %+v, want 8 GPUs for 200 minutes so far", r)
		}
		if r := byName["waiting"]; r.GPUHours() != 0 || !r.Start.IsZero() {
			t.Errorf("waiting: %+v", r)
		}
		var paged []ReportRow
		after := ""
		for range 10 {
			rows, next := collect(ReportQuery{Window: Window{From: at(6), To: now}, Limit: 1, After: after})
			paged = append(paged, rows...)
			if after = next; after == "" {
				break
			}
		}
		if diff := cmp.Diff(all, paged); diff != "" {
			t.Errorf("pages of one (-whole +pages):\n%s", diff)
		}
		other, _ := collect(ReportQuery{Window: Window{From: at(6), To: now}, Team: "cv"})
		if len(other) != 0 {
			t.Errorf("team cv has %d rows", len(other))
		}
	})
}

// A task's use in the per-task report is what the usage summary counts of
// it: per instance type it held, only within the window and the time the
// history recorded. A team's tasks add up to its summary, per instance type.
func TestTaskReportCountsAsTheSummary(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second)
	at := func(m int) time.Time { return now.Add(time.Duration(m-300) * time.Minute) }
	moved := newWL("nlp", "moved", at(0)).pods(1, 4)
	movedLife := []stateAt{{wl: moved.snap()}, {wl: moved.admit(at(10), "ml.g6.12xlarge").snap()},
		{wl: moved.preempt(at(40), "InCohortReclamation", "preempted").release(at(40)).snap()},
		{wl: moved.requeue(at(41)).admit(at(50), "ml.p5.48xlarge").snap()},
		{wl: moved.finish(at(70), "Succeeded").snap()}}
	across := newWL("nlp", "across", at(0)).pods(1, 8)
	acrossLife := []stateAt{{wl: across.snap()}, {wl: across.admit(at(1), "ml.p5.48xlarge").snap()}}
	forEachStore(t, now, func(t *testing.T, s *Store) {
		ctx := context.Background()
		record(t, s, movedLife, acrossLife)
		// No record from 30 to 45.
		covered(t, s, at(0), at(30))
		covered(t, s, at(45), now)
		w := Window{From: at(20), To: now}
		type use struct {
			Type     string
			From, To time.Time
			Held     time.Duration
			GPUHours float64
		}
		got := map[string][]use{}
		byType := map[string]float64{}
		if _, _, err := s.TaskReport(ctx, ReportQuery{Window: w}, func(r ReportRow) error {
			for _, u := range r.Use {
				got[r.Task.Name] = append(got[r.Task.Name], use{u.InstanceType, u.From, u.To, u.Held, round6(u.GPUHours)})
				byType[u.InstanceType] += u.GPUHours
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		want := map[string][]use{
			// Held on g6 from 10 to 40, of which 20 to 30 is in the window
			// and recorded; then on p5 from 50 to 70.
			"moved": {{"ml.g6.12xlarge", at(20), at(30), 10 * time.Minute, round6(4 * 10 / 60.0)}, {"ml.p5.48xlarge", at(50), at(70), 20 * time.Minute, round6(4 * 20 / 60.0)}},
			// Running since before the window: 20 to 30, and 45 to now.
			"across": {{"ml.p5.48xlarge", at(20), now, 265 * time.Minute, round6(8 * 265 / 60.0)}},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("use per instance type (-want +got):\n%s", diff)
		}
		sum, err := s.UsageSummary(ctx, w)
		if err != nil {
			t.Fatal(err)
		}
		summary := map[string]float64{}
		for _, r := range sum.Rows {
			summary[r.InstanceType] += r.GPU.Used
		}
		for typ, h := range summary {
			if math.Abs(h-byType[typ]) > 1e-9 {
				t.Errorf("%s: the summary counts %v GPU-hours used, the tasks %v", typ, h, byType[typ])
			}
		}
		if len(summary) != len(byType) {
			t.Errorf("instance types: summary %v, tasks %v", summary, byType)
		}
	})
}

func round6(v float64) float64 { return math.Round(v*1e6) / 1e6 }

func TestAdmissionRate(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second)
	var lives [][]stateAt
	for i := range 12 {
		class := "training"
		if i%3 == 0 {
			class = "inference"
		}
		w := newWL("nlp", "job-"+string(rune('a'+i)), now.Add(-5*time.Hour)).class(class, 10).pods(1, 1)
		w.admit(now.Add(-time.Duration(i*20+10)*time.Minute), "ml.p5.48xlarge")
		lives = append(lives, []stateAt{{wl: w.snap()}})
	}
	// A task admitted, preempted and admitted again in the recorded hours
	// counts once: its re-admission does not move the queue.
	churn := newWL("nlp", "job-churn", now.Add(-5*time.Hour)).class("training", 10).pods(1, 1)
	first := churn.admit(now.Add(-100*time.Minute), "ml.p5.48xlarge").snap()
	preempted := churn.preempt(now.Add(-95*time.Minute), "InCohortFairSharing", "preempted").release(now.Add(-95 * time.Minute)).snap()
	again := churn.requeue(now.Add(-94*time.Minute)).admit(now.Add(-50*time.Minute), "ml.p5.48xlarge").snap()
	lives = append(lives, []stateAt{{wl: first}, {wl: preempted}, {wl: again}})
	forEachStore(t, now, func(t *testing.T, s *Store) {
		ctx := context.Background()
		record(t, s, lives...)
		covered(t, s, now.Add(-2*time.Hour), now)
		// Over the last 4 hours: 12 tasks admitted, but only the 2 recorded
		// hours count, with their 6, and the task admitted twice once.
		r, err := s.AdmissionRate(ctx, "hyperpod-ns-nlp-clusterqueue", "", Window{From: now.Add(-4 * time.Hour), To: now})
		if err != nil {
			t.Fatal(err)
		}
		if r.Tasks != 7 || r.Recorded != 2*time.Hour || r.PerHour() != 3.5 || len(r.Gaps) != 1 {
			t.Errorf("rate %+v, per hour %v", r, r.PerHour())
		}
		r, err = s.AdmissionRate(ctx, "hyperpod-ns-nlp-clusterqueue", "inference", Window{From: now.Add(-2 * time.Hour), To: now})
		if err != nil || r.Tasks != 2 || r.PerHour() != 1 {
			t.Errorf("inference over 2 hours: %+v (%v)", r, err)
		}
		r, err = s.AdmissionRate(ctx, "", "training", Window{From: now.Add(-2 * time.Hour), To: now})
		if err != nil || r.Tasks != 5 || r.PerHour() != 2.5 {
			t.Errorf("training in every queue over 2 hours: %+v (%v)", r, err)
		}
	})
}

// Coverage: what no run covered, what a dead run's stale heartbeat no
// longer covers, what was dropped, and what is past retention are gaps.
func TestGaps(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second)
	ago := func(m int) time.Time { return now.Add(-time.Duration(m) * time.Minute) }
	forEachStore(t, now, func(t *testing.T, s *Store) {
		ctx := context.Background()
		covered(t, s, ago(600), ago(300))
		id, err := s.StartRun(ctx, "replica-b", ago(200))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Heartbeat(ctx, id, ago(100)); err != nil { // then it died
			t.Fatal(err)
		}
		if err := s.RecordLost(ctx, Period{From: ago(150), To: ago(140)}, "overflow"); err != nil {
			t.Fatal(err)
		}
		gaps, err := s.Gaps(ctx, Window{From: ago(700), To: now.Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		stale := ago(100).Add(2 * HeartbeatEvery)
		want := []Period{{ago(700), ago(600)}, {ago(300), ago(200)}, {ago(150), ago(140)}, {stale, now}}
		if diff := cmp.Diff(want, gaps); diff != "" {
			t.Errorf("gaps (-want +got):\n%s", diff)
		}
		last, err := s.LastCoverage(ctx, 0)
		if err != nil || !last.Equal(ago(100)) {
			t.Errorf("last coverage %v (%v), want the dead run's last heartbeat", last, err)
		}
		s.retention = 8 * time.Hour
		gaps, err = s.Gaps(ctx, Window{From: ago(700), To: ago(400)})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]Period{{ago(700), ago(480)}}, gaps); diff != "" {
			t.Errorf("before the retention horizon (-want +got):\n%s", diff)
		}
	})
}

// Retention deletes what ended before the horizon, and keeps the rest.
func TestPrune(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second)
	old := newWL("nlp", "old", now.Add(-50*time.Hour)).pods(1, 1)
	oldLife := []stateAt{{wl: old.snap()}}
	old.admit(now.Add(-49*time.Hour), "ml.p5.48xlarge")
	oldLife = append(oldLife, stateAt{wl: old.snap()})
	old.finish(now.Add(-48*time.Hour), "Succeeded")
	oldLife = append(oldLife, stateAt{wl: old.snap()})
	longRunning := newWL("nlp", "long", now.Add(-50*time.Hour)).pods(1, 1)
	longRunning.admit(now.Add(-49*time.Hour), "ml.p5.48xlarge")
	recent := newWL("nlp", "recent", now.Add(-2*time.Hour)).pods(1, 1)
	recent.admit(now.Add(-time.Hour), "ml.p5.48xlarge")
	forEachStore(t, now, func(t *testing.T, s *Store) {
		record(t, s, oldLife, []stateAt{{wl: longRunning.snap()}}, []stateAt{{wl: recent.snap()}})
		s.retention = 24 * time.Hour
		n, err := s.Prune(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			t.Error("nothing pruned")
		}
		var names []string
		rows, err := s.db.Query(`SELECT name FROM tasks ORDER BY name`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var n string
			_ = rows.Scan(&n)
			names = append(names, n)
		}
		rows.Close()
		if diff := cmp.Diff([]string{"long", "recent"}, names); diff != "" {
			t.Errorf("tasks kept (-want +got):\n%s", diff)
		}
		var events int
		_ = s.db.QueryRow(s.q(`SELECT COUNT(*) FROM events WHERE uid = ?`), "uid-nlp-old").Scan(&events)
		if events != 0 {
			t.Errorf("%d events of the pruned task remain", events)
		}
	})
}

// Strings from the cluster are stored and read back as text, whatever
// they hold.
func TestHostileStringsAreText(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second)
	msg := "'); DROP TABLE tasks; -- <script>alert(1)</script> \u202e\x00 \xff ünïcødé 🚀 ?, $1"
	w := newWL("nlp", "hostile", now.Add(-time.Hour)).pods(1, 1)
	w.admit(now.Add(-50*time.Minute), "ml.p5.48xlarge")
	life := []stateAt{{wl: w.snap()}}
	w.preempt(now.Add(-10*time.Minute), kueuev1beta2.InClusterQueueReason, msg)
	life = append(life, stateAt{wl: w.snap()})
	forEachStore(t, now, func(t *testing.T, s *Store) {
		record(t, s, life)
		p, err := s.Preemptions(context.Background(), PreemptionQuery{Window: Window{From: now.Add(-time.Hour), To: now}})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Preemptions) != 1 {
			t.Fatalf("%d preemptions", len(p.Preemptions))
		}
		if want := text(msg); p.Preemptions[0].Message != want || !strings.Contains(want, "DROP TABLE") {
			t.Errorf("message %q, want %q", p.Preemptions[0].Message, want)
		}
	})
}

// Failures of the store itself are retried; refusals of what was written
// are not.
func TestStoreTrouble(t *testing.T) {
	s := openSQLite(t, filepath.Join(t.TempDir(), "h.db"))
	_, err := s.db.Exec(`INSERT INTO schema_migrations (version, applied_ms) VALUES (1, 0)`)
	if err == nil || storeTrouble(err) {
		t.Errorf("a constraint violation (%v) counts as store trouble", err)
	}
	s.db.SetMaxOpenConns(1)
	if _, err := s.db.Exec(`PRAGMA max_page_count = 1`); err != nil {
		t.Fatal(err)
	}
	_, err = s.db.Exec(`INSERT INTO lost (from_ms, to_ms, reason) VALUES (0, 0, ?)`, strings.Repeat("x", 100000))
	if err == nil || !storeTrouble(err) {
		t.Errorf("a full database (%v) is not store trouble", err)
	}
	for code, want := range map[string]bool{"23505": false, "22003": false, "53100": true, "08006": true, "57P01": true} {
		if got := storeTrouble(&pgconn.PgError{Code: code}); got != want {
			t.Errorf("PostgreSQL %s: store trouble %v, want %v", code, got, want)
		}
	}
	if !storeTrouble(context.DeadlineExceeded) {
		t.Error("a timeout is not store trouble")
	}
}

// The history keeps each task's owner and labels, for the report to name it
// as its owner knows it and to list its labels. Schema 5 adds the labels:
// a task recorded before has none, and keeps its owner.
func TestTaskReportNamesOwnersAndLabels(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second)
	labelled := newWL("nlp", "job-big-869d5", now.Add(-time.Hour)).pods(1, 8)
	labelled.OwnerReferences[0].Name = "big"
	labelled.Labels = map[string]string{"team": "nlp", "app": "bert"}
	labelled.admit(now.Add(-50*time.Minute), "ml.p5.48xlarge")
	bare := newWL("nlp", "solo", now.Add(-time.Hour)).pods(1, 1)
	bare.OwnerReferences = nil
	forEachStore(t, now, func(t *testing.T, s *Store) {
		report := func(s *Store) map[string][3]string {
			out := map[string][3]string{}
			_, _, err := s.TaskReport(context.Background(), ReportQuery{Window: Window{From: now.Add(-2 * time.Hour), To: now}},
				func(r ReportRow) error {
					out[r.Task.Name] = [3]string{r.Task.OwnerKind + " " + r.Task.OwnerName, r.Task.Named().Shown(), r.Labels}
					return nil
				})
			if err != nil {
				t.Fatal(err)
			}
			return out
		}
		record(t, s, []stateAt{{wl: labelled.snap()}}, []stateAt{{wl: bare.snap()}})
		want := map[string][3]string{
			"job-big-869d5": {"Job big", "Job big", "app=bert; team=nlp"},
			"solo":          {" ", "solo", ""},
		}
		if diff := cmp.Diff(want, report(s)); diff != "" {
			t.Errorf("owner, name shown and labels (-want +got):\n%s", diff)
		}

		// The same store as schema 4 left it, opened again: migration 5
		// adds the labels, empty for the tasks recorded before (and the
		// later ones what they add).
		for _, stmt := range []string{`ALTER TABLE tasks DROP COLUMN labels`, `ALTER TABLE admissions DROP COLUMN partitions`,
			`DELETE FROM schema_migrations WHERE version >= 5`} {
			if _, err := s.db.Exec(stmt); err != nil {
				t.Fatal(err)
			}
		}
		cfg := Config{Driver: DriverSQLite, Path: s.name}
		if s.postgres {
			cfg = Config{Driver: DriverPostgres, DSN: dsnFor(s)}
		}
		again, err := Open(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer again.Close()
		again.clock = s.clock
		want["job-big-869d5"] = [3]string{"Job big", "Job big", ""}
		if diff := cmp.Diff(want, report(again)); diff != "" {
			t.Errorf("after migrating from schema 4: owner, name shown and labels (-want +got):\n%s", diff)
		}
		var version int
		if err := again.db.QueryRow(`SELECT MAX(version) FROM schema_migrations`).Scan(&version); err != nil || version != len(migrations) {
			t.Errorf("schema version %d (%v), want %d", version, err, len(migrations))
		}
	})
}

// Under Kueue's concurrent admission the Variant holding a job's quota is
// preempted and the job's own Workload only evicted: the preemption is the
// job's task's, once it is recorded, and names it.
func TestAVariantsPreemptionIsItsJobs(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Hour).Add(-time.Hour)
	at := func(m int) time.Time { return now.Add(time.Duration(m-600) * time.Minute) }
	job := newWL("nlp", "big", at(0)).class("training", 100).pods(1, 8)
	variantOf := func(w *wl) *kueuev1beta2.Workload {
		v := w.snap()
		v.Name, v.UID = "big-variant-spot", "uid-nlp-big-variant-spot"
		v.OwnerReferences = []metav1.OwnerReference{{APIVersion: kueuev1beta2.SchemeGroupVersion.String(), Kind: "Workload", Name: "big", UID: "uid-nlp-big"}}
		return v
	}
	msg := preemptionMsg("uid-cv-urgent", "reclamation within the cohort", "hyperpod-ns-cv-clusterqueue", "hyperpod-ns-nlp-clusterqueue")
	job.admit(at(10), "ml.p5.48xlarge")
	admitted := job.snap()
	variant := variantOf(job.preempt(at(100), kueuev1beta2.InCohortReclamationReason, msg))
	if _, ok := VariantChange(variantOf(newWL("nlp", "big", at(0)).pods(1, 8))); ok {
		t.Error("a Variant not preempted adds to its job's history")
	}
	c, ok := VariantChange(variant)
	if !ok || !c.EventsOnly || c.Task.UID != "uid-nlp-big" {
		t.Fatalf("the Variant's change %+v (%v), want events of uid-nlp-big only", c, ok)
	}

	forEachStore(t, now, func(t *testing.T, s *Store) {
		ctx := context.Background()
		window := Window{From: at(0), To: now}
		// Before the job's task is recorded, nothing is.
		if _, err := s.Write(ctx, Batch{Changes: []Change{c}}); err != nil {
			t.Fatal(err)
		}
		if p, err := s.Preemptions(ctx, PreemptionQuery{Window: window}); err != nil || p.Total != 0 {
			t.Fatalf("preemptions of a task not recorded: %+v, %v", p, err)
		}
		record(t, s, []stateAt{{wl: admitted}})
		if _, err := s.Write(ctx, Batch{Changes: []Change{c}}); err != nil {
			t.Fatal(err)
		}
		p, err := s.Preemptions(ctx, PreemptionQuery{Window: window})
		if err != nil || p.Total != 1 {
			t.Fatalf("preemptions: %+v, %v; want the job's one", p, err)
		}
		got := p.Preemptions[0]
		if got.Task.Name != "big" || got.Task.Team != "nlp" || got.Task.Class != "training" || got.GPUs != 8 ||
			got.ClusterQueue != "hyperpod-ns-nlp-clusterqueue" || got.GPUHoursLost != 8*90.0/60 {
			t.Errorf("the preemption %+v; want job big's (team nlp, class training, 8 GPUs for 90 minutes, in its queue)", got)
		}
	})
}

// A preempted task that names no class is in the lowest class, as on the
// Tasks page: shown in it, and selected by it.
func TestAPreemptionWithoutAClassIsInTheLowest(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Hour).Add(-time.Hour)
	at := func(m int) time.Time { return now.Add(time.Duration(m-600) * time.Minute) }
	w := newWL("nlp", "plain", at(0)).pods(1, 2)
	w.admit(at(10), "ml.p5.48xlarge")
	life := []stateAt{{wl: w.snap()}}
	w.preempt(at(100), kueuev1beta2.InCohortReclamationReason,
		preemptionMsg("uid-never-recorded", "reclamation within the cohort", "hyperpod-ns-cv-clusterqueue", "hyperpod-ns-nlp-clusterqueue"))
	life = append(life, stateAt{wl: w.snap()})
	forEachStore(t, now, func(t *testing.T, s *Store) {
		record(t, s, life)
		window := Window{From: at(0), To: now}
		for _, tc := range []struct {
			class, lowest string
			want          []string // the classes shown
		}{
			{"", "batch", []string{"batch"}},
			{"batch", "batch", []string{"batch"}},
			{"training", "batch", nil},
			{"batch", "", nil}, // no lowest class known: none shown as one
		} {
			p, err := s.Preemptions(context.Background(), PreemptionQuery{Window: window, Class: tc.class, LowestClass: tc.lowest})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, pr := range p.Preemptions {
				got = append(got, pr.Task.Class)
			}
			if !slices.Equal(got, tc.want) || p.Total != int64(len(tc.want)) {
				t.Errorf("class %q, lowest %q: classes %q (total %d), want %q", tc.class, tc.lowest, got, p.Total, tc.want)
			}
		}
	})
}
