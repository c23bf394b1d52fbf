package taskhistory

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/openquota/console/internal/domain"
)

// ReportRow is one task of the detailed usage report.
type ReportRow struct {
	Task TaskRef
	// InstanceTypes are the flavors of its last admission.
	InstanceTypes []string
	// Requests are what it asks for, all pod sets together.
	Requests Resources
	// Labels are its Workload's labels in words ("" for none, and for
	// tasks recorded before the history kept them).
	Labels string
	// Start is its first admission (zero: never admitted); End its finish or
	// deletion (zero: not ended yet).
	Start, End time.Time
	// GPUHours are its admissions' GPUs × time held (up to now for one
	// still held).
	GPUHours float64
	// Partitions are the MIG partitions it asks for, in words; Held how
	// long its admissions held them (up to now for one still held).
	Partitions     string
	Held           time.Duration
	Borrowed       bool
	TimesPreempted int
	State          domain.TaskState
	Outcome        Outcome // empty while not ended
}

// ReportQuery selects the tasks of the report: those that existed during
// the window (created before its end, not ended before its start). Empty
// Team: every team.
type ReportQuery struct {
	Window Window
	Team   string
	// Teams, when not nil, limits the report to these teams (an empty list
	// selects none).
	Teams []string
	// Limit is the page size (0: every row, for a CSV export); After is the
	// Next of the previous page.
	Limit int
	After string
}

// reportBatch is how many rows the report reads at once. The rows are read
// and the connection released before they are handed to each: a caller
// that writes them to a client that stopped reading holds no connection.
const reportBatch = 500

// TaskReport calls each for the report's tasks, by end time (still open
// ones last), and returns the cursor of the next page (empty when done) and
// the window's gaps. An error of each stops it and is returned. It reads
// the store reportBatch rows at a time and calls each between the reads.
func (s *Store) TaskReport(ctx context.Context, rq ReportQuery, each func(ReportRow) error) (next string, gaps []Period, err error) {
	fail := func(err error) (string, []Period, error) {
		return "", nil, fmt.Errorf("task history store %s: task report: %w", s.name, err)
	}
	now := s.clock()
	pos, err := parseReportCursor(rq.After)
	if err != nil {
		return fail(err)
	}
	r := reporter{s: s, now: ms(now), from: ceilMS(rq.Window.From), to: ceilMS(rq.Window.To), team: rq.Team, teams: rq.Teams}
	for emitted := 0; ; {
		want, last := reportBatch, false
		if rq.Limit > 0 && rq.Limit-emitted <= reportBatch {
			want, last = rq.Limit-emitted, true
		}
		rows, err := r.batch(ctx, pos, want+1) // one more: is there a next page?
		if err != nil {
			return fail(err)
		}
		more := len(rows) > want
		if more {
			rows = rows[:want]
		}
		for _, row := range rows {
			if err := each(row.ReportRow); err != nil {
				return fail(err)
			}
			pos = row.pos
		}
		emitted += len(rows)
		if !more {
			break
		}
		if last {
			next = pos.cursor()
			break
		}
	}
	if gaps, err = s.gaps(ctx, s.db, rq.Window, now); err != nil {
		return fail(err)
	}
	return next, gaps, nil
}

// reportPos is a row's place in the report's order: ended tasks by end and
// UID, then open ones by UID.
type reportPos struct {
	open  bool
	ended int64
	uid   string
}

// A cursor is "<ended_ms>.<uid>", or "open.<uid>" among tasks not ended.
func (p reportPos) cursor() string {
	if p.open {
		return "open." + p.uid
	}
	return cursor(p.ended, p.uid)
}

func parseReportCursor(c string) (reportPos, error) {
	if c == "" {
		return reportPos{ended: math.MinInt64}, nil
	}
	a, uid, ok := strings.Cut(c, ".")
	if ok && a == "open" {
		return reportPos{open: true, uid: uid}, nil
	}
	v, err := strconv.ParseInt(a, 10, 64)
	if !ok || err != nil {
		return reportPos{}, fmt.Errorf("not a page cursor: %q", c)
	}
	return reportPos{ended: v, uid: uid}, nil
}

// reporter reads the report's rows of a window and teams.
type reporter struct {
	s        *Store
	now      int64
	from, to int64
	team     string
	teams    []string
}

type reportRow struct {
	ReportRow
	pos reportPos
}

// batch reads up to n rows after pos: the ended tasks that follow it, then
// the open ones.
func (r *reporter) batch(ctx context.Context, pos reportPos, n int) ([]reportRow, error) {
	var out []reportRow
	if !pos.open {
		rows, err := r.read(ctx, "", `t.ended_ms >= ? AND t.created_ms < ? AND (t.ended_ms > ? OR t.uid > ?)`, `t.ended_ms, t.uid`,
			[]any{max(r.from, pos.ended), r.to, pos.ended, pos.uid}, n, func(row ReportRow) reportPos { return reportPos{ended: ms(row.End), uid: row.Task.UID} })
		if err != nil || len(rows) == n {
			return rows, err
		}
		out, pos = rows, reportPos{open: true}
	}
	// By the open tasks' index, in UID order: SQLite would otherwise sort
	// every open task for each batch.
	rows, err := r.read(ctx, "tasks_not_ended", `t.ended_ms IS NULL AND t.created_ms < ? AND t.uid > ?`, `t.uid`,
		[]any{r.to, pos.uid}, n-len(out), func(row ReportRow) reportPos { return reportPos{open: true, uid: row.Task.UID} })
	return append(out, rows...), err
}

// read returns up to limit rows matching where, in order, read by index
// when one is named (SQLite; PostgreSQL's planner finds it); the
// connection is back in the pool when it returns.
func (r *reporter) read(ctx context.Context, index, where, order string, args []any, limit int, posOf func(ReportRow) reportPos) ([]reportRow, error) {
	from := "tasks t"
	if index != "" && !r.s.postgres {
		from += " INDEXED BY " + index
	}
	query := `SELECT t.uid, t.namespace, t.name, t.owner_kind, t.owner_name, t.team, t.class, t.flavors, t.first_admitted_ms, t.ended_ms, t.gpu_ms,
		COALESCE((SELECT SUM(a.gpus * (? - a.admitted_ms)) FROM admissions a WHERE a.uid = t.uid AND a.ended_ms IS NULL), 0),
		t.borrowed, t.preempted, t.state, t.outcome, t.partitions,
		t.held_ms + COALESCE((SELECT ? - MIN(a.admitted_ms) FROM admissions a WHERE a.uid = t.uid AND a.ended_ms IS NULL), 0),
		t.gpus, t.neuron, t.cpu_milli, t.memory_mib, t.labels
		FROM ` + from + ` WHERE ` + where
	args = append([]any{r.now, r.now}, args...)
	if r.team != "" {
		query += ` AND t.team = ?`
		args = append(args, r.team)
	}
	if r.teams != nil {
		in, teamArgs := inList(r.teams)
		query += ` AND t.team` + in
		args = append(args, teamArgs...)
	}
	query += ` ORDER BY ` + order + ` LIMIT ?`
	args = append(args, limit)
	rows, err := r.s.db.QueryContext(ctx, r.s.q(query), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []reportRow
	for rows.Next() {
		var row ReportRow
		var flavors, state, outcome string
		var first, ended sql.NullInt64
		var gpuMS, openGPUMS, borrowed, heldMS int64
		if err := rows.Scan(&row.Task.UID, &row.Task.Namespace, &row.Task.Name, &row.Task.OwnerKind, &row.Task.OwnerName, &row.Task.Team, &row.Task.Class, &flavors, &first, &ended,
			&gpuMS, &openGPUMS, &borrowed, &row.TimesPreempted, &state, &outcome, &row.Partitions, &heldMS,
			&row.Requests.GPUs, &row.Requests.Neuron, &row.Requests.CPUMilli, &row.Requests.MemoryMiB, &row.Labels); err != nil {
			return nil, err
		}
		if flavors != "" {
			row.InstanceTypes = strings.Split(flavors, ",")
		}
		row.Start, row.End = fromNullMS(first), fromNullMS(ended)
		row.GPUHours = gpuHours(gpuMS + openGPUMS)
		row.Held = time.Duration(heldMS) * time.Millisecond
		row.Borrowed = borrowed != 0
		row.State, row.Outcome = domain.TaskState(state), Outcome(outcome)
		out = append(out, reportRow{ReportRow: row, pos: posOf(row)})
	}
	return out, rows.Err()
}

// AdmissionRate is how many tasks of a ClusterQueue (and class) Kueue
// admitted over the recorded part of a window.
type AdmissionRate struct {
	ClusterQueue, Class string
	Window              Window
	// Tasks counts the tasks admitted in the recorded part, each once
	// however often it was admitted again after a preemption: a task that
	// borrows, is preempted and is admitted again, over and over, does not
	// move the queue. A backfill also brings admissions of times no
	// recorder ran, but not those of the tasks gone since, so they would
	// skew the rate.
	Tasks int64
	// Recorded is the part of the window with a record; Gaps the rest.
	Recorded time.Duration
	Gaps     []Period
}

// PerHour is tasks admitted per recorded hour (0 with no recorded time).
func (r AdmissionRate) PerHour() float64 {
	if r.Recorded <= 0 {
		return 0
	}
	return float64(r.Tasks) / r.Recorded.Hours()
}

// AdmissionRate counts the tasks admitted into clusterQueue (any when
// empty) of class (any class when empty) in w, for estimated waits.
func (s *Store) AdmissionRate(ctx context.Context, clusterQueue, class string, w Window) (AdmissionRate, error) {
	rates, err := s.AdmissionRates(ctx, w)
	if err != nil {
		return AdmissionRate{}, err
	}
	return rates.Of(clusterQueue, class), nil
}

// AdmissionRates are the tasks every ClusterQueue admitted, per class,
// over the recorded part of a window: one query for every estimate of a
// page.
type AdmissionRates struct {
	Window   Window
	Recorded time.Duration
	Gaps     []Period
	counts   map[[2]string]int64 // by ClusterQueue and class
	byQueue  map[string]int64
}

// Of is the rate of clusterQueue and class; empty matches any. (A task has
// one ClusterQueue and one class, so the counts add up.)
func (r AdmissionRates) Of(clusterQueue, class string) AdmissionRate {
	out := AdmissionRate{ClusterQueue: clusterQueue, Class: class, Window: r.Window, Recorded: r.Recorded, Gaps: r.Gaps}
	switch {
	case clusterQueue != "" && class != "":
		out.Tasks = r.counts[[2]string{clusterQueue, class}]
	case clusterQueue != "":
		out.Tasks = r.byQueue[clusterQueue]
	default:
		for k, n := range r.counts {
			if class == "" || k[1] == class {
				out.Tasks += n
			}
		}
	}
	return out
}

// OfClass is the rate of clusterQueue ("": every queue) and one class,
// the tasks recorded without a class counted in lowestClass (they count
// there on every page).
func (r AdmissionRates) OfClass(clusterQueue, class, lowestClass string) AdmissionRate {
	out := r.Of(clusterQueue, class)
	if class == "" || class != lowestClass {
		return out
	}
	for k, n := range r.counts {
		if k[1] == "" && (clusterQueue == "" || k[0] == clusterQueue) {
			out.Tasks += n
		}
	}
	return out
}

// AdmissionRates counts the tasks admitted in the recorded part of w per
// ClusterQueue and class (AdmissionRate.Tasks).
func (s *Store) AdmissionRates(ctx context.Context, w Window) (AdmissionRates, error) {
	r := AdmissionRates{Window: w, counts: map[[2]string]int64{}, byQueue: map[string]int64{}}
	fail := func(err error) (AdmissionRates, error) {
		return AdmissionRates{}, fmt.Errorf("task history store %s: admission rate: %w", s.name, err)
	}
	now := s.clock()
	gaps, err := s.gaps(ctx, s.db, w, now)
	if err != nil {
		return fail(err)
	}
	r.Gaps = gaps
	to := ceilMS(w.To)
	if n := ms(now) + 1; n < to {
		to = n
	}
	// The recorded parts of the window, in one query so that a task
	// admitted in two of them counts once. kind is literal: it selects the
	// partial index of admissions.
	var ranges []string
	var args []any
	for _, c := range subtract(span{ceilMS(w.From), to}, spans(gaps)) {
		ranges = append(ranges, "(at_ms >= ? AND at_ms < ?)")
		args = append(args, c.from, c.to)
	}
	if len(ranges) > 0 {
		query := `SELECT cluster_queue, class, COUNT(DISTINCT uid) FROM events WHERE kind = 'admitted' AND (` +
			strings.Join(ranges, " OR ") + `) GROUP BY cluster_queue, class`
		if err := func() error {
			rows, err := s.db.QueryContext(ctx, s.q(query), args...)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var cq, class sql.NullString
				var n int64
				if err := rows.Scan(&cq, &class, &n); err != nil {
					return err
				}
				r.counts[[2]string{cq.String, class.String}] += n
				r.byQueue[cq.String] += n
			}
			return rows.Err()
		}(); err != nil {
			return fail(err)
		}
	}
	end := w.To
	if end.After(now) {
		end = now
	}
	r.Recorded = end.Sub(w.From)
	for _, g := range gaps {
		r.Recorded -= g.Duration()
	}
	r.Recorded = max(r.Recorded, 0)
	return r, nil
}

// inList is " IN (?, ?, …)" for values and its arguments; for no values, a
// condition no row meets.
func inList(values []string) (string, []any) {
	if len(values) == 0 {
		return " IS NULL AND 1 = 0", nil
	}
	args := make([]any, len(values))
	for i, v := range values {
		args[i] = v
	}
	return " IN (" + strings.TrimSuffix(strings.Repeat("?, ", len(values)), ", ") + ")", args
}
