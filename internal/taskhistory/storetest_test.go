package taskhistory

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/openquota/console/internal/testenv"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// forEachStore runs fn on each kind of store, the same test cases on both:
// SQLite in a temporary file, and a fresh database on the test sandbox's
// PostgreSQL (skipped with SANDBOX_SKIP=1). The store's clock is now.
func forEachStore(t *testing.T, now time.Time, fn func(t *testing.T, s *Store)) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		s := openSQLite(t, filepath.Join(t.TempDir(), "history.db"))
		s.clock = func() time.Time { return now }
		fn(t, s)
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		s := openPostgres(t)
		s.clock = func() time.Time { return now }
		fn(t, s)
	})
}

func openSQLite(t testing.TB, path string) *Store {
	t.Helper()
	s, err := Open(context.Background(), Config{Driver: DriverSQLite, Path: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// dsnOf remembers the DSN of each PostgreSQL test store, to open it again.
var (
	dsnMu sync.Mutex
	dsnOf = map[*Store]string{}
)

func dsnFor(s *Store) string {
	dsnMu.Lock()
	defer dsnMu.Unlock()
	return dsnOf[s]
}

func openPostgres(t testing.TB) *Store {
	t.Helper()
	dsn := testenv.FreshPostgres(t)
	s, err := Open(context.Background(), Config{Driver: DriverPostgres, DSN: dsn})
	if err != nil {
		t.Fatal(err)
	}
	dsnMu.Lock()
	dsnOf[s] = dsn
	dsnMu.Unlock()
	t.Cleanup(func() { s.Close() })
	return s
}

// record writes the lives of Workloads as the recorder would: each state
// against the one before, in batches.
func record(t testing.TB, s *Store, lives ...[]stateAt) {
	t.Helper()
	var batch []Change
	flush := func() {
		if _, err := s.Write(context.Background(), Batch{Changes: batch}); err != nil {
			t.Fatal(err)
		}
		batch = batch[:0]
	}
	for _, life := range lives {
		for i, st := range life {
			var c Change
			switch {
			case st.gone:
				c = Gone(life[i-1].wl, teamPrefix, st.at)
			case i == 0:
				c, _ = Diff(nil, st.wl, teamPrefix)
			default:
				var ok bool
				if c, ok = Diff(life[i-1].wl, st.wl, teamPrefix); !ok {
					continue
				}
			}
			if batch = append(batch, c); len(batch) == 200 {
				flush()
			}
		}
	}
	flush()
}

// stateAt is one state of a Workload's life, or (gone) its deletion at at.
type stateAt struct {
	wl   *kueuev1beta2.Workload
	gone bool
	at   time.Time
}

// covered records a recorder run over [from, to), so that queries see no gap.
func covered(t testing.TB, s *Store, from, to time.Time) {
	t.Helper()
	ctx := context.Background()
	id, err := s.StartRun(ctx, "test", from)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.EndRun(ctx, id, to); err != nil {
		t.Fatal(err)
	}
}

// rebuildRollups recomputes the whole rollup from the task rows, every
// hour then every day as rollup does (for a store filled in bulk).
func (s *Store) rebuildRollups(ctx context.Context) error {
	return s.inTx(ctx, func(t *txn) error {
		if _, err := t.exec(`DELETE FROM stats_rollup`); err != nil {
			return err
		}
		hours := map[int64]bool{}
		for _, col := range []string{"admitted_ms", "finished_ms"} {
			rows, err := t.tx.QueryContext(ctx, s.q(`SELECT DISTINCT `+col+` - `+col+` % ? FROM tasks WHERE `+col+` IS NOT NULL`), hourMS)
			if err != nil {
				return err
			}
			for rows.Next() {
				var h int64
				if err := rows.Scan(&h); err != nil {
					rows.Close()
					return err
				}
				hours[h] = true
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
		}
		return t.rollup(hours)
	})
}
