package taskhistory

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/sandbox/sandboxtest"
)

// Benchmarks at size (make bench-history): a store of HISTORY_BENCH_TASKS
// tasks (default 1 000 000) over 90 days, 200 teams using 4 to 10 of 10
// priority classes, 5 % preempted once, on SQLite and on the sandbox's
// PostgreSQL. They report p50/p99 of the 30-day statistics and of the
// preemption history, the recorder's events per second, and the store's
// size per million tasks.

func benchTasks() int {
	if n, err := strconv.Atoi(os.Getenv("HISTORY_BENCH_TASKS")); err == nil && n > 0 {
		return n
	}
	return 1_000_000
}

var (
	benchMu     sync.Mutex
	benchStores = map[string]*Store{}
)

// filledStore returns the filled store of a driver, filling it once: the
// SQLite file (in $HISTORY_BENCH_CACHE, else a temporary folder) and the
// PostgreSQL database stay for later runs. A reused store is queried as of
// when it was filled.
func filledStore(b *testing.B, driver string) *Store {
	benchMu.Lock()
	defer benchMu.Unlock()
	if s := benchStores[driver]; s != nil {
		return s
	}
	n := benchTasks()
	name := fmt.Sprintf("history_bench_%d_v%d", n, len(migrations))
	var cfg Config
	reuse := false
	switch driver {
	case DriverSQLite:
		dir := os.Getenv("HISTORY_BENCH_CACHE")
		if dir == "" {
			dir = os.TempDir()
		}
		cfg = Config{Driver: DriverSQLite, Path: filepath.Join(dir, name+".db")}
		_, err := os.Stat(cfg.Path)
		reuse = err == nil
	default:
		var dsn string
		dsn, reuse = benchDatabase(b, name)
		cfg = Config{Driver: DriverPostgres, DSN: dsn}
	}
	start := time.Now()
	if !reuse {
		if err := fillNew(cfg, n); err != nil {
			b.Fatal(err)
		}
		b.Logf("%s: filled with %d tasks in %s", driver, n, time.Since(start).Round(time.Second))
	}
	s, err := Open(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	var last int64
	if err := s.db.QueryRow(`SELECT MAX(heartbeat_ms) FROM runs`).Scan(&last); err != nil {
		b.Fatal(err)
	}
	made := fromMS(last)
	s.clock = func() time.Time { return made }
	b.Logf("%s: %s, %d tasks, %.0f MB per million tasks", driver, s.name, n, float64(storeSize(b, s))/1e6*1e6/float64(n))
	benchStores[driver] = s
	return s
}

// fillNew fills the store cfg names; a SQLite file is filled aside and
// moved in place when complete.
func fillNew(cfg Config, n int) error {
	final := cfg.Path
	if cfg.Driver == DriverSQLite {
		cfg.Path += ".filling"
		for _, suffix := range []string{"", "-wal", "-shm"} {
			_ = os.Remove(cfg.Path + suffix)
		}
	}
	s, err := Open(context.Background(), cfg)
	if err != nil {
		return err
	}
	if err := fill(s, time.Now().UTC().Truncate(time.Second), n); err != nil {
		s.Close()
		return err
	}
	if cfg.Driver == DriverSQLite {
		if _, err := s.db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
			s.Close()
			return err
		}
	}
	if err := s.Close(); err != nil {
		return err
	}
	if cfg.Driver == DriverSQLite {
		return os.Rename(cfg.Path, final)
	}
	return nil
}

// benchDatabase returns the DSN of the named database on the sandbox's
// PostgreSQL, creating it if needed; existed: it was already there (and
// complete: an unfinished fill is dropped).
func benchDatabase(b *testing.B, name string) (dsn string, existed bool) {
	admin := sandboxtest.Env(b).PostgresDSN
	db, err := sql.Open("pgx", admin)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	u, err := url.Parse(admin)
	if err != nil {
		b.Fatal(err)
	}
	u.Path = "/" + name
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM pg_database WHERE datname = $1`, name).Scan(&n); err != nil {
		b.Fatal(err)
	}
	if n == 1 {
		complete := false
		if s, err := Open(context.Background(), Config{Driver: DriverPostgres, DSN: u.String()}); err == nil {
			var runs int
			complete = s.db.QueryRow(`SELECT COUNT(*) FROM runs WHERE identity = 'bench'`).Scan(&runs) == nil && runs > 0
			s.Close()
		}
		if complete {
			return u.String(), true
		}
		if _, err := db.Exec(`DROP DATABASE ` + name + ` WITH (FORCE)`); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := db.Exec(`CREATE DATABASE ` + name); err != nil {
		b.Fatal(err)
	}
	return u.String(), false
}

func storeSize(b *testing.B, s *Store) int64 {
	if s.postgres {
		var n int64
		if err := s.db.QueryRow(`SELECT pg_database_size(current_database())`).Scan(&n); err != nil {
			b.Fatal(err)
		}
		return n
	}
	if _, err := s.db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		b.Fatal(err)
	}
	var pages, size int64
	if err := s.db.QueryRow(`PRAGMA page_count`).Scan(&pages); err != nil {
		b.Fatal(err)
	}
	if err := s.db.QueryRow(`PRAGMA page_size`).Scan(&size); err != nil {
		b.Fatal(err)
	}
	return pages * size
}

// fill writes n generated tasks straight into the tables, in the shapes the
// recorder writes them, then rebuilds the rollup.
func fill(s *Store, now time.Time, n int) error {
	ctx := context.Background()
	g := newGenerator(now)
	if err := bulk(ctx, s, "queues", []string{"cluster_queue", "team", "cohort"}, g.queueRows()); err != nil {
		return err
	}
	if err := bulk(ctx, s, "quotas", []string{"cluster_queue", "flavor", "resource", "from_ms", "to_ms", "team", "cohort", "nominal", "borrowing_limit", "lending_limit"}, g.quotaRows()); err != nil {
		return err
	}
	taskCols := strings.Split(strings.Join(strings.Fields(taskColumns), ""), ",")
	for from := 0; from < n; from += 20000 {
		var tasks, events, admissions, preemptions [][]any
		for i := from; i < min(from+20000, n); i++ {
			t := layout(g.life(i))
			tasks = append(tasks, t.row.values())
			events = append(events, t.events...)
			admissions = append(admissions, t.admissions...)
			if t.preemption != nil {
				preemptions = append(preemptions, t.preemption)
			}
		}
		for _, w := range []struct {
			table string
			cols  []string
			rows  [][]any
		}{
			{"tasks", taskCols, tasks},
			{"events", []string{"uid", "kind", "at_ms", "cluster_queue", "class", "flavors", "borrowed", "reason", "message"}, events},
			{"admissions", []string{"uid", "admitted_ms", "flavor", "cluster_queue", "team", "borrowed", "gpus", "neuron", "cpu_milli", "memory_mib", "ended_ms"}, admissions},
			{"preemptions", []string{"uid", "at_ms", "team", "class", "cluster_queue", "gpus", "admitted_ms", "lost_gpu_ms", "reason", "reason_words",
				"message", "preemptor_uid", "preemptor_job_uid", "preemptor_cluster_queue"}, preemptions},
		} {
			if err := bulk(ctx, s, w.table, w.cols, w.rows); err != nil {
				return fmt.Errorf("%s: %w", w.table, err)
			}
		}
	}
	if err := s.rebuildRollups(ctx); err != nil {
		return err
	}
	id, err := s.StartRun(ctx, "bench", now.Add(-91*24*time.Hour))
	if err != nil {
		return err
	}
	if err := s.Heartbeat(ctx, id, now); err != nil {
		return err
	}
	if s.postgres {
		// As autovacuum would; SQLite runs without statistics, as in the console.
		_, err = s.db.Exec(`ANALYZE`)
	}
	return err
}

// bulk inserts rows with multi-row INSERTs in one transaction.
func bulk(ctx context.Context, s *Store, table string, cols []string, rows [][]any) error {
	if len(rows) == 0 {
		return nil
	}
	per := 30000 / len(cols)
	return s.inTx(ctx, func(t *txn) error {
		for chunk := range slices.Chunk(rows, per) {
			one := "(" + strings.TrimSuffix(strings.Repeat("?, ", len(cols)), ", ") + ")"
			query := `INSERT INTO ` + table + ` (` + strings.Join(cols, ", ") + `) VALUES ` + strings.TrimSuffix(strings.Repeat(one+", ", len(chunk)), ", ")
			args := make([]any, 0, len(chunk)*len(cols))
			for _, r := range chunk {
				args = append(args, r...)
			}
			if _, err := t.tx.ExecContext(ctx, s.q(query), args...); err != nil {
				return err
			}
		}
		return nil
	})
}

type generator struct {
	now         time.Time
	rng         *rand.Rand
	teamClasses [][]string
	uids        []string // of the tasks so far: preemptors
}

var benchClasses = []string{"critical", "inference", "interactive", "training-high", "training", "tuning", "eval", "batch", "research", "scavenger"}

const benchTeams = 200

func newGenerator(now time.Time) *generator {
	g := &generator{now: now, rng: rand.New(rand.NewPCG(2026, 12))}
	for range benchTeams {
		k := 4 + g.rng.IntN(7)
		perm := g.rng.Perm(len(benchClasses))[:k]
		slices.Sort(perm)
		var cs []string
		for _, i := range perm {
			cs = append(cs, benchClasses[i])
		}
		g.teamClasses = append(g.teamClasses, cs)
	}
	return g
}

func benchTeam(i int) string { return fmt.Sprintf("team-%03d", i) }

func (g *generator) queueRows() [][]any {
	var rows [][]any
	for i := range benchTeams {
		rows = append(rows, []any{teamPrefix + benchTeam(i) + "-clusterqueue", benchTeam(i), "shared-pool"})
	}
	return rows
}

func (g *generator) quotaRows() [][]any {
	var rows [][]any
	from := ms(g.now.Add(-91 * 24 * time.Hour))
	for i := range benchTeams {
		cq := teamPrefix + benchTeam(i) + "-clusterqueue"
		rows = append(rows,
			[]any{cq, "ml.p5.48xlarge", "nvidia.com/gpu", from, nil, benchTeam(i), "shared-pool", int64(16), nil, nil},
			[]any{cq, "ml.p5.48xlarge", "cpu", from, nil, benchTeam(i), "shared-pool", int64(384000), nil, nil})
	}
	return rows
}

// genTask is one generated task as the store's rows.
type genTask struct {
	row                taskRow
	events, admissions [][]any
	preemption         []any
}

// life generates task i as the recorder sees it, change by change: created
// uniformly over 90 days, it waits about 15 minutes and runs about 40 (log-
// normal, up to 10 days); 5 % are preempted once and run again; 60 % of the
// finished ones are then deleted.
func (g *generator) life(i int) []Change {
	rng := g.rng
	team := rng.IntN(benchTeams)
	classes := g.teamClasses[team]
	sec := func(d float64) time.Duration { return time.Duration(d) * time.Second }
	created := g.now.Add(-sec(rng.Float64() * 90 * 86400))
	w := newWL(benchTeam(team), fmt.Sprintf("job-%07d", i), created).class(classes[rng.IntN(len(classes))], 10).pods(1, []int64{1, 2, 4, 8}[rng.IntN(4)])
	g.uids = append(g.uids, string(w.UID))
	const flavor = "ml.p5.48xlarge"
	states := []*kueuev1beta2.Workload{w.snap()}
	at := created.Add(sec(rng.ExpFloat64() * 900))
	run := sec(math.Min(math.Exp(math.Log(2400)+1.2*rng.NormFloat64()), 10*86400)) + time.Second
	if at.Before(g.now) {
		w.admit(at, flavor)
		states = append(states, w.snap())
		end := at.Add(run)
		if rng.IntN(20) == 0 && at.Add(run/2).Before(g.now) {
			p := at.Add(run / 2)
			preemptor := g.uids[rng.IntN(len(g.uids))]
			w.preempt(p, kueuev1beta2.InCohortReclamationReason, preemptionMsg(preemptor, "reclamation within the cohort", w.clusterQueue(), w.clusterQueue()))
			states = append(states, w.snap())
			w.release(p.Add(30 * time.Second))
			states = append(states, w.snap())
			w.requeue(p.Add(time.Minute))
			states = append(states, w.snap())
			a2 := p.Add(time.Minute + sec(rng.ExpFloat64()*600))
			end = a2.Add(run / 2)
			if a2.Before(g.now) {
				w.admit(a2, flavor)
				states = append(states, w.snap())
			}
		}
		if end.Before(g.now) {
			w.finish(end, []string{"Succeeded", "Succeeded", "Succeeded", "Failed"}[rng.IntN(4)])
			states = append(states, w.snap())
		}
	}
	var changes []Change
	for k, st := range states {
		var prev *kueuev1beta2.Workload
		if k > 0 {
			prev = states[k-1]
		}
		if c, ok := Diff(prev, st, teamPrefix); ok {
			changes = append(changes, c)
		}
	}
	last := states[len(states)-1]
	if f := changes[len(changes)-1].Task.FinishedAt; !f.IsZero() && rng.IntN(10) < 6 {
		if d := f.Add(sec(rng.Float64() * 600)); d.Before(g.now) {
			changes = append(changes, Gone(last, teamPrefix, d))
		}
	}
	return changes
}

// layout turns a task's changes into the rows Store.Write would leave (a
// test checks that it does).
func layout(changes []Change) genTask {
	var out genTask
	final := changes[len(changes)-1].Task
	out.row = rowOf(&final)
	seen := map[eventKey]bool{}
	var open []any // the admission row still open
	closeAt := func(at int64) {
		if open != nil && open[10] == nil && open[1].(int64) <= at {
			open[10] = at
			out.row.gpuMS += open[6].(int64) * (at - open[1].(int64))
			out.row.heldMS += at - open[1].(int64)
		}
	}
	for _, c := range changes {
		for _, e := range c.Events {
			if seen[keyOf(e)] {
				continue
			}
			seen[keyOf(e)] = true
			out.events = append(out.events, eventRow(&out.row, e))
			switch e.Kind {
			case EventAdmitted:
				closeAt(ms(e.At))
				if !out.row.firstAdmittedMS.Valid {
					out.row.firstAdmittedMS = sql.NullInt64{Int64: ms(e.At), Valid: true}
				}
				u := e.Usage[0]
				open = []any{final.UID, ms(e.At), u.Flavor, e.ClusterQueue, final.Team, 0, u.GPUs, u.Neuron, u.CPUMilli, u.MemoryMiB, nil}
				out.admissions = append(out.admissions, open)
			case EventPreempted:
				adm, gpus := open[1].(int64), open[6].(int64)
				out.preemption = []any{final.UID, ms(e.At), final.Team, final.Class, e.ClusterQueue, gpus, adm, (ms(e.At) - adm) * gpus,
					e.Reason, e.ReasonWords, e.Message, e.Preemptor.UID, e.Preemptor.JobUID, e.Preemptor.ClusterQueue}
				out.row.preempted++
			case EventFinished, EventDeleted:
				closeAt(ms(e.At))
			}
		}
		if c.Task.AdmittedAt.IsZero() && !c.Task.ReleasedAt.IsZero() {
			closeAt(ms(c.Task.ReleasedAt))
		}
	}
	return out
}

// BenchmarkHistory measures the pages' queries and the recorder at size.
// Filling the stores takes minutes: it runs only with HISTORY_BENCH=1 (make
// bench-history), not in make bench.
func BenchmarkHistory(b *testing.B) {
	if os.Getenv("HISTORY_BENCH") != "1" {
		b.Skip("set HISTORY_BENCH=1 (make bench-history)")
	}
	for _, driver := range []string{DriverSQLite, DriverPostgres} {
		b.Run(driver, func(b *testing.B) {
			s := filledStore(b, driver)
			now := s.clock()
			rng := rand.New(rand.NewPCG(1, 2))
			b.Run("stats-30d", func(b *testing.B) {
				latencies(b, func() error {
					end := now.Add(-time.Duration(rng.Int64N(int64(time.Hour))))
					_, err := s.TaskStats(context.Background(), LiveWindow(end.Add(-30*24*time.Hour), end))
					return err
				})
			})
			b.Run("preemptions-30d", func(b *testing.B) {
				i := 0
				latencies(b, func() error {
					i++
					q := PreemptionQuery{Window: Window{From: now.Add(-30 * 24 * time.Hour), To: now}, Limit: 50}
					switch i % 3 {
					case 1:
						q.Team = benchTeam(rng.IntN(benchTeams))
					case 2:
						q.Class = benchClasses[rng.IntN(len(benchClasses))]
					}
					_, err := s.Preemptions(context.Background(), q)
					return err
				})
			})
			b.Run("preempted-by-team-30d", func(b *testing.B) {
				latencies(b, func() error {
					_, _, err := s.PreemptionsByTeam(context.Background(), Window{From: now.Add(-30 * 24 * time.Hour), To: now}, benchTeam(rng.IntN(benchTeams)))
					return err
				})
			})
			// The usage report's first page of tasks, and a day's per-task
			// CSV (every row).
			b.Run("task-report-page-30d", func(b *testing.B) {
				latencies(b, func() error {
					_, _, err := s.TaskReport(context.Background(), ReportQuery{Window: Window{From: now.Add(-30 * 24 * time.Hour), To: now}, Limit: 100},
						func(ReportRow) error { return nil })
					return err
				})
			})
			for _, days := range []int{1, 30} {
				b.Run(fmt.Sprintf("task-report-all-%dd", days), func(b *testing.B) {
					rows := 0
					latencies(b, func() error {
						rows = 0
						_, _, err := s.TaskReport(context.Background(), ReportQuery{Window: Window{From: now.Add(-time.Duration(days) * 24 * time.Hour), To: now}},
							func(ReportRow) error { rows++; return nil })
						return err
					})
					b.ReportMetric(float64(rows), "rows")
				})
			}
			b.Run("record", func(b *testing.B) { benchRecord(b, s) })
		})
	}
}

// latencies runs query b.N times and reports its p50 and p99.
func latencies(b *testing.B, query func() error) {
	durations := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if err := query(); err != nil {
			b.Fatal(err)
		}
		durations = append(durations, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(durations)
	at := func(q float64) float64 {
		return float64(durations[min(len(durations)-1, int(q*float64(len(durations))))].Microseconds()) / 1000
	}
	b.ReportMetric(at(0.5), "p50-ms")
	b.ReportMetric(at(0.99), "p99-ms")
}

// benchRecord feeds the recorder informer events as fast as it takes them
// (lives of new tasks: created, admitted, finished, deleted; at least 5 000
// of them) and reports the events written per second, on top of the filled
// store.
func benchRecord(b *testing.B, s *Store) {
	lives := max(b.N, 5000)
	r := NewRecorder(s, RecorderConfig{TeamPrefix: teamPrefix, Identity: "bench", QueueSize: 1 << 20})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	for r.Stats().Backfills == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	// A month after the filled data: the recorded tasks stay out of the
	// windows the other benchmarks query, now and in later runs.
	now := s.clock().Add(30 * 24 * time.Hour).Truncate(time.Second)
	prefix := fmt.Sprintf("rec-%d-", time.Now().UnixNano())
	type obs struct{ old, new *kueuev1beta2.Workload }
	var events []obs
	var gone []*kueuev1beta2.Workload
	for i := range lives {
		w := newWL(benchTeam(i%benchTeams), fmt.Sprintf("%s%07d", prefix, i), now.Add(-time.Hour)).class(benchClasses[i%len(benchClasses)], 10).pods(1, 2)
		s0 := w.snap()
		s1 := w.admit(now.Add(-50*time.Minute), "ml.p5.48xlarge").snap()
		s2 := w.finish(now.Add(-time.Duration(i%50)*time.Minute), "Succeeded").snap()
		events = append(events, obs{nil, s0}, obs{s0, s1}, obs{s1, s2})
		gone = append(gone, s2)
	}
	b.ResetTimer()
	start := time.Now()
	for i, e := range events {
		r.Observe(e.new)
		if i%3 == 2 {
			r.Deleted(gone[i/3])
		}
	}
	total := int64(len(events) + len(gone))
	for {
		var n int
		if err := s.db.QueryRow(s.q(`SELECT COUNT(*) FROM tasks WHERE name LIKE ? AND deleted_ms IS NOT NULL`), prefix+"%").Scan(&n); err != nil {
			b.Fatal(err)
		}
		if n == lives {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	cancel()
	<-done
	if d := r.Stats().Dropped; d > 0 {
		b.Errorf("dropped %d events", d)
	}
	b.ReportMetric(float64(total)/elapsed.Seconds(), "events/s")
}

// The bulk fill lays out rows exactly as Store.Write does from the same
// changes: the benchmarks measure the store the recorder builds.
func TestBenchLayoutMatchesWrite(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second)
	g := newGenerator(now)
	var lives [][]Change
	for i := range 400 {
		lives = append(lives, g.life(i))
	}
	forEachStore(t, now, func(t *testing.T, written *Store) {
		for _, life := range lives {
			if _, err := written.Write(context.Background(), Batch{Changes: life}); err != nil {
				t.Fatal(err)
			}
		}
		var filled *Store
		if written.postgres {
			filled = openPostgres(t)
		} else {
			filled = openSQLite(t, filepath.Join(t.TempDir(), "filled.db"))
		}
		taskCols := strings.Split(strings.Join(strings.Fields(taskColumns), ""), ",")
		for _, life := range lives {
			r := layout(life)
			if err := bulk(context.Background(), filled, "tasks", taskCols, [][]any{r.row.values()}); err != nil {
				t.Fatal(err)
			}
			if err := bulk(context.Background(), filled, "events", []string{"uid", "kind", "at_ms", "cluster_queue", "class", "flavors", "borrowed", "reason", "message"}, r.events); err != nil {
				t.Fatal(err)
			}
			if err := bulk(context.Background(), filled, "admissions", []string{"uid", "admitted_ms", "flavor", "cluster_queue", "team", "borrowed", "gpus", "neuron", "cpu_milli", "memory_mib", "ended_ms"}, r.admissions); err != nil {
				t.Fatal(err)
			}
			if r.preemption != nil {
				if err := bulk(context.Background(), filled, "preemptions", []string{"uid", "at_ms", "team", "class", "cluster_queue", "gpus", "admitted_ms", "lost_gpu_ms", "reason", "reason_words",
					"message", "preemptor_uid", "preemptor_job_uid", "preemptor_cluster_queue"}, [][]any{r.preemption}); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := filled.rebuildRollups(context.Background()); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(dump(t, written), dump(t, filled)); diff != "" {
			t.Errorf("bulk layout differs from Write (-written +filled):\n%s", diff)
		}
	})
}
