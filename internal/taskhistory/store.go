package taskhistory

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	"modernc.org/sqlite"               // database/sql driver "sqlite", pure Go
	sqlite3 "modernc.org/sqlite/lib"
)

// DefaultRetention is how long the history keeps what it records.
const DefaultRetention = 90 * 24 * time.Hour

// ErrOff is why there is no task history when the console runs without
// one (--history-store none, or no place for its file): not a failure.
var ErrOff = errors.New("the console runs without a task history")

// Drivers of Config.Driver.
const (
	DriverSQLite   = "sqlite"
	DriverPostgres = "postgres"
)

// Config selects and opens a store.
type Config struct {
	// Driver is DriverSQLite (an embedded file, Path) or DriverPostgres
	// (a server, DSN).
	Driver string
	Path   string
	// DSN is a PostgreSQL connection string (URL or key=value form).
	DSN string
	// Retention is how long records are kept (DefaultRetention when zero).
	Retention time.Duration
}

// Store is the task history in a SQL database. Its methods are safe for
// concurrent use; they return errors, never panic, when the database is
// unreachable, full or broken.
type Store struct {
	// db serves the pages' queries and exports; rec is the recorder's own
	// (its writes, runs, backfill and pruning), so that readers holding
	// every connection of db never keep the recorder from writing.
	db, rec   *sql.DB
	postgres  bool
	name      string // the file, or the server and database, for messages
	retention time.Duration
	clock     func() time.Time
}

// Shared reports whether several consoles may write the store: a
// PostgreSQL database is shared by the replicas, which elect one recorder; a
// SQLite file is one process's.
func (s *Store) Shared() bool { return s.postgres }

// Open opens (creating it if needed) and migrates the store. A file that is
// not a SQLite database, or a store written by a newer console (a schema
// version this one does not know), fails with an error naming it.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	s := &Store{retention: cfg.Retention, clock: time.Now}
	if s.retention <= 0 {
		s.retention = DefaultRetention
	}
	var err error
	switch cfg.Driver {
	case DriverSQLite, "":
		if cfg.Path == "" {
			return nil, errors.New("task history: the SQLite store needs a file path")
		}
		s.name = cfg.Path
		if err := os.MkdirAll(filepath.Dir(cfg.Path), 0o755); err != nil {
			return nil, fmt.Errorf("task history store %s: %w", s.name, err)
		}
		// One writer at a time in SQLite; a few readers beside it (WAL).
		s.db, s.rec, err = openPools("sqlite", sqliteDSN(cfg.Path), 4, 2)
	case DriverPostgres:
		if cfg.DSN == "" {
			return nil, errors.New("task history: the PostgreSQL store needs a DSN")
		}
		s.postgres, s.name = true, describeDSN(cfg.DSN)
		s.db, s.rec, err = openPools("pgx", cfg.DSN, 8, 2)
	default:
		return nil, fmt.Errorf("task history: unknown store driver %q (sqlite or postgres)", cfg.Driver)
	}
	if err != nil {
		return nil, fmt.Errorf("task history store %s: %w", s.name, err)
	}
	if err := s.migrate(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// openPools opens the readers' pool and the recorder's, of at most readers
// and recorder connections.
func openPools(driver, dsn string, readers, recorder int) (db, rec *sql.DB, err error) {
	if db, err = sql.Open(driver, dsn); err != nil {
		return nil, nil, err
	}
	if rec, err = sql.Open(driver, dsn); err != nil {
		db.Close()
		return nil, nil, err
	}
	db.SetMaxOpenConns(readers)
	rec.SetMaxOpenConns(recorder)
	for _, p := range []*sql.DB{db, rec} {
		p.SetConnMaxIdleTime(5 * time.Minute)
	}
	return db, rec, nil
}

// Close releases the database.
func (s *Store) Close() error { return errors.Join(s.db.Close(), s.rec.Close()) }

// Name is the store's file, or its server and database, for messages.
func (s *Store) Name() string { return s.name }

// sqliteDSN opens the file without memory-mapped reads: the pages a query
// reads through a mapping count in the console's resident memory (26 MiB
// of it at 200 teams x 50 000 Workloads, growing with the file), while read
// through the kernel's page cache they do not, and the queries read the
// history's hourly rollups, not whole tables.
func sqliteDSN(path string) string {
	q := url.Values{}
	for _, p := range []string{"busy_timeout(10000)", "journal_mode(WAL)", "synchronous(NORMAL)"} {
		q.Add("_pragma", p)
	}
	// Write transactions take the write lock at BEGIN: two writers never
	// deadlock upgrading a read lock.
	q.Set("_txlock", "immediate")
	return "file:" + path + "?" + q.Encode()
}

// describeDSN names a PostgreSQL server and database without its password.
func describeDSN(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.Host != "" {
		return "postgres://" + u.Host + u.Path
	}
	var host, db string
	for _, f := range strings.Fields(dsn) {
		if v, ok := strings.CutPrefix(f, "host="); ok {
			host = v
		}
		if v, ok := strings.CutPrefix(f, "dbname="); ok {
			db = v
		}
	}
	return "postgres://" + host + "/" + db
}

func (s *Store) migrate(ctx context.Context) error {
	fail := func(err error) error { return fmt.Errorf("task history store %s: %w", s.name, err) }
	if _, err := s.rec.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT PRIMARY KEY, applied_ms BIGINT NOT NULL)`); err != nil {
		if !s.postgres && isNotADatabase(err) {
			return fail(fmt.Errorf("not a SQLite database, or a corrupt one: %w", err))
		}
		return fail(err)
	}
	tx, err := s.rec.BeginTx(ctx, nil)
	if err != nil {
		return fail(err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit, a no-op
	if s.postgres {
		// Replicas starting together migrate one at a time.
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(731640)`); err != nil {
			return fail(err)
		}
	}
	var version int
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&version); err != nil {
		return fail(err)
	}
	if version > len(migrations) {
		return fail(fmt.Errorf("schema version %d is newer than this console knows (%d): it was written by a newer console; run that version, or point this one at another store", version, len(migrations)))
	}
	for v := version + 1; v <= len(migrations); v++ {
		for _, stmt := range statements(s.dialectSQL(migrations[v-1])) {
			if _, err := tx.ExecContext(ctx, stmt); err != nil {
				return fail(fmt.Errorf("migration %d: %w", v, err))
			}
		}
		if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO schema_migrations (version, applied_ms) VALUES (?, ?)`), v, time.Now().UnixMilli()); err != nil {
			return fail(err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fail(err)
	}
	return nil
}

// storeTrouble tells a failure of the store itself (unreachable, full,
// busy, read-only, out of resources), which retrying later can cure, from a
// refusal of what was written (a constraint, a value out of range).
func storeTrouble(err error) bool {
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		switch pg.Code[:2] {
		case "22", "23", "42", "44": // data, integrity, syntax or access rule, check option
			return false
		}
		return true
	}
	var lite *sqlite.Error
	if errors.As(err, &lite) {
		switch lite.Code() & 0xff {
		case sqlite3.SQLITE_CONSTRAINT, sqlite3.SQLITE_MISMATCH, sqlite3.SQLITE_TOOBIG, sqlite3.SQLITE_RANGE:
			return false
		}
		return true
	}
	return true // a network error, a closed pool, a cancelled context
}

func isNotADatabase(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "file is not a database") || strings.Contains(msg, "malformed") || strings.Contains(msg, "SQLITE_NOTADB") || strings.Contains(msg, "SQLITE_CORRUPT")
}

func (s *Store) dialectSQL(schema string) string {
	serial, blob, clustered := "INTEGER PRIMARY KEY AUTOINCREMENT", "BLOB", " WITHOUT ROWID"
	if s.postgres {
		serial, blob, clustered = "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY", "BYTEA", ""
	}
	return strings.NewReplacer("{{serial}}", serial, "{{blob}}", blob, "{{clustered}}", clustered).Replace(schema)
}

// statements splits a script at semicolons ending a line, dropping comments.
func statements(script string) []string {
	var out []string
	var b strings.Builder
	for _, line := range strings.Split(script, "\n") {
		if t := strings.TrimSpace(line); t == "" || strings.HasPrefix(t, "--") {
			continue
		}
		b.WriteString(line)
		b.WriteByte('\n')
		if strings.HasSuffix(strings.TrimSpace(line), ";") {
			out = append(out, strings.TrimSuffix(strings.TrimSpace(b.String()), ";"))
			b.Reset()
		}
	}
	if strings.TrimSpace(b.String()) != "" {
		out = append(out, b.String())
	}
	return out
}

// q adapts a query written with ? placeholders to the dialect ($1, $2 … for
// PostgreSQL). Queries never hold a literal question mark.
func (s *Store) q(query string) string {
	if !s.postgres {
		return query
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// ms is t in Unix milliseconds; nullMS is NULL for the zero time.
func ms(t time.Time) int64 { return t.UnixMilli() }

func nullMS(t time.Time) sql.NullInt64 {
	if t.IsZero() {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: t.UnixMilli(), Valid: true}
}

func fromMS(v int64) time.Time { return time.UnixMilli(v).UTC() }

func fromNullMS(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return fromMS(v.Int64)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
