package taskhistory

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/sandbox/sandboxtest"
)

// cacheOf stands in for the informer cache's listers.
type cacheOf struct {
	mu  sync.Mutex
	wls map[string]*kueuev1beta2.Workload
}

func newCache(wls ...*kueuev1beta2.Workload) *cacheOf {
	c := &cacheOf{wls: map[string]*kueuev1beta2.Workload{}}
	for _, w := range wls {
		c.set(w)
	}
	return c
}

func (c *cacheOf) set(w *kueuev1beta2.Workload) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.wls[string(w.UID)] = w
}

func (c *cacheOf) list() ([]*kueuev1beta2.Workload, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*kueuev1beta2.Workload
	for _, w := range c.wls {
		out = append(out, w)
	}
	return out, nil
}

// pages lists the cache a few Workloads at a time, as the apiserver's
// paginated LIST does.
func (c *cacheOf) pages(_ context.Context, fn func([]*kueuev1beta2.Workload) error) error {
	wls, _ := c.list()
	for len(wls) > 0 {
		n := min(len(wls), 7)
		if err := fn(wls[:n]); err != nil {
			return err
		}
		wls = wls[n:]
	}
	return nil
}

// running starts r until the test ends (or stop is called).
func running(t *testing.T, r *Recorder) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := r.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after 30 s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func count(t *testing.T, s *Store, query string, args ...any) int {
	t.Helper()
	var n int
	if err := s.db.QueryRow(s.q(query), args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func fleet(now time.Time, n int) []*kueuev1beta2.Workload {
	var out []*kueuev1beta2.Workload
	for i := range n {
		w := newWL("nlp", fmt.Sprintf("job-%03d", i), now.Add(-time.Hour)).class("training", 10).pods(1, 1)
		if i%2 == 0 {
			w.admit(now.Add(-30*time.Minute), "ml.p5.48xlarge")
		}
		out = append(out, w.snap())
	}
	return out
}

// At start the recorder backfills from the cache; informer events then
// follow; a second run on the same store (a restart, another replica)
// writes nothing new, and a Workload deleted in between is ended.
func TestRecorderBackfillsFollowsAndRestarts(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second)
	forEachStore(t, now, func(t *testing.T, s *Store) {
		wls := fleet(now, 20)
		cache := newCache(wls...)
		cfg := RecorderConfig{TeamPrefix: teamPrefix, Identity: "replica-a", Workloads: cache.pages}
		r := NewRecorder(s, cfg)
		stop := running(t, r)
		eventually(t, "backfill", func() bool { return r.Stats().Backfills == 1 })
		if n := count(t, s, `SELECT COUNT(*) FROM tasks`); n != 20 {
			t.Fatalf("%d tasks after the backfill, want 20", n)
		}

		// An update: job-001 is admitted, then finishes.
		w := &wl{*wls[1].DeepCopy()}
		w.admit(now.Add(-20*time.Minute), "ml.p5.48xlarge")
		admitted := w.snap()
		r.Observe(admitted)
		w.finish(now.Add(-10*time.Minute), "Succeeded")
		finished := w.snap()
		r.Observe(finished)
		cache.set(finished)
		r.Observe(finished) // a resync: nothing
		eventually(t, "the update", func() bool {
			return count(t, s, `SELECT COUNT(*) FROM tasks WHERE outcome = 'succeeded'`) == 1
		})
		stop()

		// job-002 goes while no recorder runs.
		cache.mu.Lock()
		delete(cache.wls, string(wls[2].UID))
		cache.mu.Unlock()
		before := dump(t, s)
		r2 := NewRecorder(s, RecorderConfig{TeamPrefix: teamPrefix, Identity: "replica-b", Workloads: cache.pages})
		running(t, r2)
		eventually(t, "second backfill", func() bool { return r2.Stats().Backfills == 1 })
		if st := r2.Stats(); st.Written != 0 {
			t.Errorf("the restart rewrote %d tasks", st.Written)
		}
		after := dump(t, s)
		if diff := cmp.Diff(before["admissions"], after["admissions"]); diff == "" {
			t.Error("the vanished task's admission was not ended")
		}
		var outcome string
		var deleted sql.NullInt64
		if err := s.db.QueryRow(s.q(`SELECT outcome, deleted_ms FROM tasks WHERE uid = ?`), string(wls[2].UID)).Scan(&outcome, &deleted); err != nil {
			t.Fatal(err)
		}
		if outcome != string(OutcomeVanished) || !deleted.Valid {
			t.Errorf("job-002, gone while no recorder ran: outcome %q, deleted %v", outcome, deleted)
		}
		// Its admission ends where the first run's record ends.
		var ended int64
		if err := s.db.QueryRow(s.q(`SELECT ended_ms FROM admissions WHERE uid = ?`), string(wls[2].UID)).Scan(&ended); err != nil {
			t.Fatal(err)
		}
		last, _ := s.LastCoverage(context.Background(), -1)
		if ended > ms(last) {
			t.Errorf("vanished task's admission ends %v, after the last coverage %v", fromMS(ended), last)
		}
		for _, table := range []string{"tasks", "admissions"} {
			if len(before[table]) != len(after[table]) {
				t.Errorf("%s: %d rows before, %d after: the restart duplicated rows", table, len(before[table]), len(after[table]))
			}
		}
		// One event more: job-002's deletion.
		if len(after["events"]) != len(before["events"])+1 || count(t, s, `SELECT COUNT(*) FROM events WHERE kind = 'deleted' AND uid = ?`, string(wls[2].UID)) != 1 {
			t.Errorf("events: %d before, %d after; want only job-002's deletion added", len(before["events"]), len(after["events"]))
		}
	})
}

// With the store unreachable (PostgreSQL) or full (SQLite), the recorder
// backs off, keeps what is queued, and writes it once the store is back.
func TestRecorderRidesOutAStoreOutage(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second)
	forEachStore(t, now, func(t *testing.T, s *Store) {
		r := NewRecorder(s, RecorderConfig{TeamPrefix: teamPrefix, Identity: "a"})
		running(t, r)
		eventually(t, "backfill", func() bool { return r.Stats().Backfills == 1 })
		restore := breakStore(t, s)
		wls := fleet(now, 30)
		for _, w := range wls {
			r.Observe(w)
		}
		eventually(t, "a failed write", func() bool { return r.Stats().WriteErrors > 0 })
		restore()
		eventually(t, "writes after the outage", func() bool { return count(t, s, `SELECT COUNT(*) FROM tasks`) == 30 })
		if st := r.Stats(); st.Dropped != 0 {
			t.Errorf("dropped %d events", st.Dropped)
		}
		if n := count(t, s, `SELECT COUNT(*) FROM lost`); n != 0 {
			t.Errorf("%d lost periods, want none: the queue held everything", n)
		}
	})
}

// breakStore makes writes fail until the returned function repairs it.
func breakStore(t *testing.T, s *Store) (restore func()) {
	t.Helper()
	if s.postgres {
		u, err := url.Parse(dsnFor(s))
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(u.Path, "/")
		admin, err := sql.Open("pgx", sandboxtest.Env(t).PostgresDSN)
		if err != nil {
			t.Fatal(err)
		}
		mustExec := func(q string) {
			if _, err := admin.Exec(q); err != nil {
				t.Fatal(err)
			}
		}
		mustExec(`ALTER DATABASE ` + name + ` WITH ALLOW_CONNECTIONS false`)
		mustExec(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '` + name + `'`)
		return func() {
			mustExec(`ALTER DATABASE ` + name + ` WITH ALLOW_CONNECTIONS true`)
			admin.Close()
		}
	}
	// SQLite: the recorder's one connection, limited to the pages it has: full.
	s.rec.SetMaxOpenConns(1)
	var pages int
	if err := s.rec.QueryRow(`PRAGMA page_count`).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if _, err := s.rec.Exec(fmt.Sprintf(`PRAGMA max_page_count = %d`, pages)); err != nil {
		t.Fatal(err)
	}
	return func() {
		if _, err := s.rec.Exec(`PRAGMA max_page_count = 1073741823`); err != nil {
			t.Fatal(err)
		}
	}
}

// When the queue overflows, the recorder drops events rather than block
// the informer or grow, then records the period as a gap and backfills,
// so that what is still in the cluster is recorded after all.
func TestRecorderOverflowRecordsAGap(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second)
	s := openSQLite(t, t.TempDir()+"/h.db")
	cache := newCache()
	r := NewRecorder(s, RecorderConfig{TeamPrefix: teamPrefix, Identity: "a", Workloads: cache.pages, QueueSize: 8})
	running(t, r)
	eventually(t, "backfill", func() bool { return r.Stats().Backfills == 1 })
	// The test holds the recorder's only connection: the writer waits for it,
	// as on a slow store.
	s.rec.SetMaxOpenConns(1)
	held, err := s.rec.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release := func() { once.Do(func() { held.Close() }) }
	t.Cleanup(release)
	waits := s.rec.Stats().WaitCount
	wls := fleet(now, 60)
	cache.set(wls[0])
	r.Observe(wls[0])
	eventually(t, "the writer waiting for the store", func() bool { return s.rec.Stats().WaitCount > waits })
	start := time.Now()
	for _, w := range wls[1:] {
		cache.set(w)
		r.Observe(w)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Observe blocked for %v", took)
	}
	if r.Stats().Dropped == 0 {
		t.Fatal("nothing dropped with a queue of 8 and a blocked writer")
	}
	release()
	eventually(t, "backfill after the overflow", func() bool { return r.Stats().Backfills == 2 })
	if n := count(t, s, `SELECT COUNT(*) FROM tasks`); n != 60 {
		t.Errorf("%d tasks recorded, want all 60 (the backfill recovers what was dropped)", n)
	}
	gaps, err := s.Gaps(context.Background(), Window{From: now.Add(-time.Minute), To: time.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if len(gaps) == 0 {
		t.Error("the overflow left no gap")
	}
}

// A replica that does not hold the lease (Run not running) records nothing.
func TestRecorderIdleWithoutRun(t *testing.T) {
	s := openSQLite(t, t.TempDir()+"/h.db")
	r := NewRecorder(s, RecorderConfig{TeamPrefix: teamPrefix})
	for _, w := range fleet(time.Now(), 5) {
		r.Observe(w)
	}
	if st := r.Stats(); st.Observed != 0 || st.Dropped != 0 {
		t.Errorf("an idle recorder queued %+v", st)
	}
}

// ClusterQueue status updates (usage, every admission) are not quota
// changes: only spec changes are queued.
func TestRecorderQueuesOnlyQuotaChanges(t *testing.T) {
	s := openSQLite(t, t.TempDir()+"/h.db")
	r := NewRecorder(s, RecorderConfig{TeamPrefix: teamPrefix})
	r.running.Store(true)
	cq := &kueuev1beta2.ClusterQueue{}
	cq.Name, cq.Spec.CohortName = "q", "pool"
	status := cq.DeepCopy()
	status.Status.AdmittedWorkloads = 3
	r.ObserveClusterQueue(cq, status)
	if n := len(r.queue); n != 0 {
		t.Errorf("a status update queued %d items", n)
	}
	moved := cq.DeepCopy()
	moved.Spec.CohortName = "other"
	r.ObserveClusterQueue(cq, moved)
	if n := len(r.queue); n != 1 {
		t.Errorf("a cohort change queued %d items, want 1", n)
	}
}

// A Workload deleted and known only by its UID (the console's cache keeps
// no Workloads) ends its recorded task exactly as Gone does with its last
// state: same rows in every table.
func TestGoneByUIDEqualsGone(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second)
	at := now.Add(-1500 * time.Millisecond).Add(123456 * time.Nanosecond)
	lives := map[string]func() *kueuev1beta2.Workload{
		"pending": func() *kueuev1beta2.Workload {
			return newWL("nlp", "p", now.Add(-time.Hour)).class("training", 10).pods(1, 2).pending(now.Add(-time.Hour)).snap()
		},
		"running": func() *kueuev1beta2.Workload {
			return newWL("nlp", "r", now.Add(-time.Hour)).class("training", 10).pods(2, 4).admit(now.Add(-40*time.Minute), "ml.p5.48xlarge").snap()
		},
		"finished": func() *kueuev1beta2.Workload {
			return newWL("nlp", "f", now.Add(-time.Hour)).pods(1, 1).admit(now.Add(-40*time.Minute), "ml.g5.2xlarge").
				finish(now.Add(-10*time.Minute), "Succeeded").snap()
		},
		"preempted and waiting": func() *kueuev1beta2.Workload {
			return newWL("vision", "w", now.Add(-time.Hour)).class("inference", 100).pods(1, 8).admit(now.Add(-50*time.Minute), "ml.p5.48xlarge").
				preempt(now.Add(-20*time.Minute), "InCohortReclamation", preemptionMsg("uid-x", "reclamation within the cohort", "cq-a", "cq-b")).
				release(now.Add(-19 * time.Minute)).requeue(now.Add(-18 * time.Minute)).snap()
		},
	}
	for name, life := range lives {
		t.Run(name, func(t *testing.T) {
			wl := life()
			c, _ := Diff(nil, wl, teamPrefix)
			ctx := context.Background()
			byState := openSQLite(t, t.TempDir()+"/a.db")
			byUID := openSQLite(t, t.TempDir()+"/b.db")
			for _, s := range []*Store{byState, byUID} {
				if _, err := s.Write(ctx, Batch{Changes: []Change{c}}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := byState.Write(ctx, Batch{Changes: []Change{Gone(wl, teamPrefix, at)}}); err != nil {
				t.Fatal(err)
			}
			if err := byUID.GoneByUID(ctx, string(wl.UID), at); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(dump(t, byState), dump(t, byUID)); diff != "" {
				t.Errorf("GoneByUID differs from Gone (-Gone +GoneByUID):\n%s", diff)
			}
			// A second deletion of the same UID changes nothing.
			before := dump(t, byUID)
			if err := byUID.GoneByUID(ctx, string(wl.UID), at.Add(time.Minute)); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(before, dump(t, byUID)); diff != "" {
				t.Errorf("a second deletion changed the record:\n%s", diff)
			}
		})
	}
}

// The informer hook sees every Workload again on each update and relist:
// the recorder queues a Workload only when what the history keeps of it
// changed.
func TestRecorderQueuesOnlyChangedWorkloads(t *testing.T) {
	s := openSQLite(t, t.TempDir()+"/h.db")
	r := NewRecorder(s, RecorderConfig{TeamPrefix: teamPrefix})
	r.running.Store(true)
	now := time.Now().UTC().Truncate(time.Second)
	w := newWL("nlp", "a", now.Add(-time.Hour)).class("training", 10).pods(1, 1)
	pending := w.snap()
	r.Observe(pending)
	again := pending.DeepCopy()
	again.ResourceVersion = "42" // a relist, or a status change history ignores
	r.Observe(again)
	if n := len(r.queue); n != 1 {
		t.Fatalf("the same state twice queued %d items, want 1", n)
	}
	r.Observe(w.admit(now, "ml.p5.48xlarge").snap())
	if n := len(r.queue); n != 2 {
		t.Fatalf("an admission queued %d items in all, want 2", n)
	}
	r.DeletedUID(string(pending.UID), now)
	r.Observe(pending) // a late copy after the deletion is news again, and harmless
	if n := len(r.queue); n != 4 {
		t.Fatalf("%d items queued in all, want 4", n)
	}
}

// Under Kueue's concurrent admission the recorder writes a job's task, not
// its Variants, and a preemption by or of a Variant as its job's: seen by
// the informers before the backfill, whatever order the list comes in.
func TestRecorderRecordsJobsNotTheirVariants(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second)
	variantOf := func(w *wl, flavor string) *kueuev1beta2.Workload {
		v := w.snap()
		v.Name, v.UID = w.Name+"-variant-"+flavor, w.UID+"-variant-"+types.UID(flavor)
		v.OwnerReferences = []metav1.OwnerReference{{APIVersion: kueuev1beta2.SchemeGroupVersion.String(), Kind: "Workload", Name: w.Name, UID: w.UID}}
		return v
	}
	urgent := newWL("cv", "urgent", now.Add(-time.Hour)).class("inference", 1000).pods(1, 8)
	urgent.admit(now.Add(-10*time.Minute), "spot")
	urgentVariant := variantOf(urgent, "spot")
	big := newWL("nlp", "big", now.Add(-2*time.Hour)).class("training", 100).pods(1, 8)
	big.admit(now.Add(-time.Hour), "spot")
	admittedBig := big.snap()
	big.preempt(now.Add(-10*time.Minute), kueuev1beta2.InClusterQueueReason,
		preemptionMsg(string(urgentVariant.UID), "prioritization in the ClusterQueue", "hyperpod-ns-cv-clusterqueue", "hyperpod-ns-nlp-clusterqueue"))
	bigVariant := variantOf(big, "spot")
	forEachStore(t, now, func(t *testing.T, s *Store) {
		cache := newCache(bigVariant, urgentVariant, admittedBig, urgent.snap())
		r := NewRecorder(s, RecorderConfig{TeamPrefix: teamPrefix, Identity: "a", Workloads: cache.pages})
		for _, wl := range []*kueuev1beta2.Workload{bigVariant, urgentVariant, admittedBig, urgent.snap()} {
			r.Observe(wl) // the informers' first list, before the recorder leads
		}
		running(t, r)
		eventually(t, "backfill", func() bool { return r.Stats().Backfills == 1 })
		if n := count(t, s, `SELECT COUNT(*) FROM tasks`); n != 2 {
			t.Errorf("%d tasks, want the two jobs'", n)
		}
		p, err := s.Preemptions(context.Background(), PreemptionQuery{Window: Window{From: now.Add(-3 * time.Hour), To: now.Add(time.Minute)}})
		if err != nil || p.Total != 1 {
			t.Fatalf("preemptions %+v, %v; want big's", p, err)
		}
		if got := p.Preemptions[0]; got.Task.Name != "big" || got.Preemptor.Name != "urgent" || got.Preemptor.Team != "cv" {
			t.Errorf("the preemption of %q by %q (team %q), want big's by urgent (team cv)", got.Task.Name, got.Preemptor.Name, got.Preemptor.Team)
		}
	})
}

// An elastic job that grew goes on in a new slice: the history keeps one
// task, from the first slice's creation and admission to the last slice's
// end, with each slice's admission held for as long as it was.
func TestRecorderRecordsAnElasticJobAsOneTask(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second)
	slice := func(name string, created time.Time, gpus int64) *wl {
		w := newWL("nlp", name, created).class("training", 10).pods(1, gpus)
		w.OwnerReferences[0].Name, w.OwnerReferences[0].UID = "elastic", "job-elastic"
		w.Annotations = map[string]string{"kueue.x-k8s.io/elastic-job": "true", kueuev1beta2.WorkloadSliceNameAnnotation: "job-elastic-1"}
		return w
	}
	t1, t2, t3 := now.Add(-time.Hour), now.Add(-30*time.Minute), now.Add(-10*time.Minute)
	first := slice("job-elastic-1", t1.Add(-time.Minute), 2)
	first.admit(t1, "ml.p5.48xlarge")
	first.finish(t2, kueuev1beta2.WorkloadSliceReplaced)
	grown := slice("job-elastic-2", t2.Add(-time.Minute), 4)
	grown.Annotations["kueue.x-k8s.io/workload-slice-replacement-for"] = "hyperpod-ns-nlp/job-elastic-1"
	waiting := grown.snap()
	grown.admit(t2, "ml.p5.48xlarge")
	forEachStore(t, now, func(t *testing.T, s *Store) {
		cache := newCache(first.snap(), grown.snap())
		r := NewRecorder(s, RecorderConfig{TeamPrefix: teamPrefix, Identity: "a", Workloads: cache.pages})
		r.Observe(first.snap()) // the informers' first list
		r.Observe(waiting)
		running(t, r)
		eventually(t, "backfill", func() bool { return r.Stats().Backfills == 1 })
		// A resize given up before Kueue admitted it does not end the job.
		givenUp := slice("job-elastic-3", t3.Add(-5*time.Minute), 6)
		givenUp.Annotations["kueue.x-k8s.io/workload-slice-replacement-for"] = "hyperpod-ns-nlp/job-elastic-2"
		givenUp.finish(t3.Add(-4*time.Minute), kueuev1beta2.WorkloadFinishedReasonOutOfSync)
		if c, ok := r.changeOf(givenUp.snap()); ok {
			t.Errorf("a resize never admitted is written: %+v", c.Task)
		}
		w := &wl{*grown.snap()}
		w.finish(t3, "Succeeded")
		r.Observe(w.snap())
		eventually(t, "the end", func() bool { return count(t, s, `SELECT COUNT(*) FROM tasks WHERE outcome = 'succeeded'`) == 1 })

		var uid, name string
		var created, admitted, finished, run int64
		if err := s.db.QueryRow(s.q(`SELECT uid, name, created_ms, admitted_ms, finished_ms, run_ms FROM tasks`)).
			Scan(&uid, &name, &created, &admitted, &finished, &run); err != nil {
			t.Fatal(err)
		}
		got := fmt.Sprintf("%s %s created %s, admitted %s, finished %s, ran %s", uid, name, fromMS(created).Sub(now), fromMS(admitted).Sub(now),
			fromMS(finished).Sub(now), time.Duration(run)*time.Millisecond)
		if want := "uid-nlp-job-elastic-1 job-elastic-1 created -1h1m0s, admitted -1h0m0s, finished -10m0s, ran 50m0s"; got != want {
			t.Errorf("the task: %s\nwant %s", got, want)
		}
		rows, err := s.db.Query(s.q(`SELECT admitted_ms, ended_ms, gpus FROM admissions ORDER BY admitted_ms`))
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var held []string
		for rows.Next() {
			var from, to, gpus int64
			if err := rows.Scan(&from, &to, &gpus); err != nil {
				t.Fatal(err)
			}
			held = append(held, fmt.Sprintf("%d GPUs %s to %s", gpus, fromMS(from).Sub(now), fromMS(to).Sub(now)))
		}
		if diff := cmp.Diff([]string{"2 GPUs -1h0m0s to -30m0s", "4 GPUs -30m0s to -10m0s"}, held); diff != "" {
			t.Errorf("the admissions (-want +got):\n%s", diff)
		}
	})
}

// Queues of Kueue's hierarchical cohorts borrow from anywhere in their
// tree: the history records each queue's tree (its root cohort), so that
// the usage report shares lending out over the tree, and records a queue
// again when its tree changes.
func TestRecorderRecordsEachQueuesCohortTree(t *testing.T) {
	s := openSQLite(t, t.TempDir()+"/h.db")
	parents := map[string]string{"important": "org", "regular": "org"}
	a1 := &kueuev1beta2.ClusterQueue{}
	a1.Name, a1.Spec.CohortName = "a1", "important"
	b1 := &kueuev1beta2.ClusterQueue{}
	b1.Name, b1.Spec.CohortName = "b1", "regular"
	r := NewRecorder(s, RecorderConfig{TeamPrefix: teamPrefix,
		ClusterQueues: func() ([]*kueuev1beta2.ClusterQueue, error) { return []*kueuev1beta2.ClusterQueue{a1, b1}, nil },
		CohortTree: func(c string) string {
			if p := parents[c]; p != "" {
				return p
			}
			return c
		}})
	r.running.Store(true)
	recorded := func() map[string]string {
		out := map[string]string{}
		for len(r.queue) > 0 {
			if it := <-r.queue; it.queue != nil {
				out[it.queue.ClusterQueue] = it.queue.Cohort
			}
		}
		return out
	}
	r.ObserveClusterQueue(nil, a1)
	r.ObserveClusterQueue(nil, b1)
	if diff := cmp.Diff(map[string]string{"a1": "org", "b1": "org"}, recorded()); diff != "" {
		t.Errorf("cohorts recorded (-want +got):\n%s", diff)
	}
	// regular becomes a tree of its own: b1 is recorded again, a1 is not.
	delete(parents, "regular")
	r.ObserveCohorts()
	if diff := cmp.Diff(map[string]string{"b1": "regular"}, recorded()); diff != "" {
		t.Errorf("cohorts recorded after regular left org (-want +got):\n%s", diff)
	}
}

// A store that accepts connections but does not answer held the recorder,
// and with it the Lease, for as long as the connection lived, and nothing
// said so. Each attempt now has its time; a cut attempt counts as a
// failed write, the recorder says it is failing until one succeeds.
func TestAnAttemptThatHangsIsCutRetriedAndReported(t *testing.T) {
	r := &Recorder{cfg: RecorderConfig{Log: slog.New(slog.DiscardHandler)}}
	attempts := 0
	var failingDuringRetry bool
	err := r.retry(context.Background(), "write", 50*time.Millisecond, func(ctx context.Context) error {
		attempts++
		if attempts == 1 {
			<-ctx.Done() // the store does not answer
			return ctx.Err()
		}
		failingDuringRetry = r.Stats().Failing
		return nil
	})
	st := r.Stats()
	if err != nil || attempts != 2 || st.WriteErrors != 1 || !failingDuringRetry || st.Failing {
		t.Errorf("err %v, %d attempts, %d write errors, failing during the retry %v and after it %v; want nil, 2, 1, true, false",
			err, attempts, st.WriteErrors, failingDuringRetry, st.Failing)
	}
}
