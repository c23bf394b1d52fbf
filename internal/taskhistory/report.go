package taskhistory

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/openquota/console/internal/domain"
)

// ReportRow is one task of the detailed usage report.
type ReportRow struct {
	Task TaskRef
	// Requests are what it asks for, all pod sets together.
	Requests Resources
	// Labels are its Workload's labels in words ("" for none, and for
	// tasks recorded before the history kept them).
	Labels string
	// Start is its first admission (zero: never admitted); End its finish or
	// deletion (zero: not ended yet).
	Start, End time.Time
	// Use is what it held on each instance type within the report's window,
	// by instance type; none for a task that held nothing in it.
	Use []InstanceUse
	// Partitions are the MIG partitions it asks for, in words.
	Partitions     string
	TimesPreempted int
	State          domain.TaskState
	Outcome        Outcome // empty while not ended
}

// InstanceUse is what a task held on one instance type (flavor) within a
// window, counted as the usage summary counts: only the time the history
// has a record of, up to now for an admission still held. A team's tasks'
// GPU-hours therefore add up to its summary's GPU-hours used.
type InstanceUse struct {
	InstanceType string
	// From and To are the first and last moments it held the type.
	From, To time.Time
	// Held is how long it held the type; GPUHours its GPUs times that.
	Held     time.Duration
	GPUHours float64
	// Holds is the most it held of the type at once.
	Holds Resources
	// Partitions are the MIG partitions it held on the type, in words;
	// PartitionHours their partition-hours, PartitionGPUHours those in
	// whole-GPU equivalent (domain.PartitionHours).
	Partitions                        string
	PartitionHours, PartitionGPUHours float64
	// Borrowed: one of its admissions took its ClusterQueue past the
	// nominal quota of the type.
	Borrowed bool
}

// GPUHours are its GPU-hours on every instance type.
func (r ReportRow) GPUHours() float64 {
	var h float64
	for _, u := range r.Use {
		h += u.GPUHours
	}
	return h
}

// PartitionHours are its partition-hours on every instance type, and
// their whole-GPU equivalent.
func (r ReportRow) PartitionHours() (hours, gpuEquivalent float64) {
	for _, u := range r.Use {
		hours += u.PartitionHours
		gpuEquivalent += u.PartitionGPUHours
	}
	return hours, gpuEquivalent
}

// Borrowed reports whether it borrowed on any instance type in the window.
func (r ReportRow) Borrowed() bool {
	for _, u := range r.Use {
		if u.Borrowed {
			return true
		}
	}
	return false
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
	if gaps, err = s.gaps(ctx, s.db, rq.Window, now); err != nil {
		return fail(err)
	}
	r := reporter{s: s, now: ms(now), from: ceilMS(rq.Window.From), to: ceilMS(rq.Window.To), team: rq.Team, teams: rq.Teams}
	if end := min(r.to, r.now); r.from < end {
		r.recorded = subtract(span{r.from, end}, spans(gaps))
	}
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

// ValidReportCursor reports whether c is a page cursor of the per-task
// report ("" is the first page).
func ValidReportCursor(c string) bool {
	_, err := parseReportCursor(c)
	return err == nil
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
	// recorded are the parts of the window up to now the history has a
	// record of: the time a task's use counts in.
	recorded []span
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
		if err == nil {
			err = r.addUse(ctx, rows)
		}
		if err != nil || len(rows) == n {
			return rows, err
		}
		out, pos = rows, reportPos{open: true}
	}
	// By the open tasks' index, in UID order: SQLite would otherwise sort
	// every open task for each batch.
	rows, err := r.read(ctx, "tasks_not_ended", `t.ended_ms IS NULL AND t.created_ms < ? AND t.uid > ?`, `t.uid`,
		[]any{r.to, pos.uid}, n-len(out), func(row ReportRow) reportPos { return reportPos{open: true, uid: row.Task.UID} })
	if err == nil {
		err = r.addUse(ctx, rows)
	}
	return append(out, rows...), err
}

// addUse reads the admissions of rows' tasks and sets each task's use per
// instance type: each admission's time within the recorded parts of the
// window, as the usage summary counts it.
func (r *reporter) addUse(ctx context.Context, rows []reportRow) error {
	if len(rows) == 0 || len(r.recorded) == 0 {
		return nil
	}
	at := make(map[string]*ReportRow, len(rows))
	uids := make([]string, len(rows))
	for i := range rows {
		uids[i] = rows[i].Task.UID
		at[uids[i]] = &rows[i].ReportRow
	}
	in, args := inList(uids)
	res, err := r.s.db.QueryContext(ctx, r.s.q(`SELECT uid, flavor, admitted_ms, ended_ms, gpus, neuron, cpu_milli, memory_mib, partitions, borrowed
		FROM admissions WHERE uid`+in+` AND admitted_ms < ? AND (ended_ms IS NULL OR ended_ms > ?) ORDER BY uid, flavor, admitted_ms`),
		append(args, r.recorded[len(r.recorded)-1].to, r.recorded[0].from)...)
	if err != nil {
		return err
	}
	defer res.Close()
	for res.Next() {
		var uid, flavor, partitions string
		var admitted, borrowed int64
		var ended sql.NullInt64
		var holds Resources
		if err := res.Scan(&uid, &flavor, &admitted, &ended, &holds.GPUs, &holds.Neuron, &holds.CPUMilli, &holds.MemoryMiB, &partitions, &borrowed); err != nil {
			return err
		}
		stop := r.now
		if ended.Valid {
			stop = ended.Int64
		}
		held, first, last := overlap(span{admitted, stop}, r.recorded)
		row := at[uid]
		if held == 0 || flavor == "" || row == nil {
			continue // outside the recorded window, or holding nothing the report counts
		}
		i := slices.IndexFunc(row.Use, func(u InstanceUse) bool { return u.InstanceType == flavor })
		if i < 0 {
			row.Use = append(row.Use, InstanceUse{InstanceType: flavor, From: fromMS(first)})
			i = len(row.Use) - 1
		}
		u := &row.Use[i]
		d := time.Duration(held) * time.Millisecond
		u.To = fromMS(last)
		u.Held += d
		u.GPUHours += float64(holds.GPUs) * d.Hours()
		u.Holds = Resources{GPUs: max(u.Holds.GPUs, holds.GPUs), Neuron: max(u.Holds.Neuron, holds.Neuron),
			CPUMilli: max(u.Holds.CPUMilli, holds.CPUMilli), MemoryMiB: max(u.Holds.MemoryMiB, holds.MemoryMiB)}
		if partitions != "" {
			hours, whole := domain.PartitionHours(partitions, d)
			u.Partitions, u.PartitionHours, u.PartitionGPUHours = partitions, u.PartitionHours+hours, u.PartitionGPUHours+whole
		}
		u.Borrowed = u.Borrowed || borrowed != 0
	}
	return res.Err()
}

// overlap is how much of a lies within the sorted, disjoint spans, and the
// first and last moments of it that do.
func overlap(a span, within []span) (total, first, last int64) {
	for _, w := range within {
		lo, hi := max(a.from, w.from), min(a.to, w.to)
		if hi <= lo {
			continue
		}
		if total == 0 {
			first = lo
		}
		total += hi - lo
		last = hi
	}
	return total, first, last
}

// read returns up to limit rows matching where, in order, read by index
// when one is named (SQLite; PostgreSQL's planner finds it); the
// connection is back in the pool when it returns.
func (r *reporter) read(ctx context.Context, index, where, order string, args []any, limit int, posOf func(ReportRow) reportPos) ([]reportRow, error) {
	from := "tasks t"
	if index != "" && !r.s.postgres {
		from += " INDEXED BY " + index
	}
	query := `SELECT t.uid, t.namespace, t.name, t.owner_kind, t.owner_name, t.team, t.class, t.first_admitted_ms, t.ended_ms,
		t.preempted, t.state, t.outcome, t.partitions, t.gpus, t.neuron, t.cpu_milli, t.memory_mib, t.labels
		FROM ` + from + ` WHERE ` + where
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
		var state, outcome string
		var first, ended sql.NullInt64
		if err := rows.Scan(&row.Task.UID, &row.Task.Namespace, &row.Task.Name, &row.Task.OwnerKind, &row.Task.OwnerName, &row.Task.Team, &row.Task.Class, &first, &ended,
			&row.TimesPreempted, &state, &outcome, &row.Partitions,
			&row.Requests.GPUs, &row.Requests.Neuron, &row.Requests.CPUMilli, &row.Requests.MemoryMiB, &row.Labels); err != nil {
			return nil, err
		}
		row.Start, row.End = fromNullMS(first), fromNullMS(ended)
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
