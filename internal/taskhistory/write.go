package taskhistory

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/openquota/console/internal/domain"
)

// Batch is what the Recorder writes in one transaction.
type Batch struct {
	Changes []Change
	// Gone are Workloads deleted, known by UID only: written after Changes.
	Gone   []GoneUID
	Queues []QueueState
}

// GoneUID is a Workload deleted at At, known by its UID only.
type GoneUID struct {
	UID string
	At  time.Time
}

// Written counts what a write changed: re-writing what the store already
// holds changes nothing.
type Written struct {
	Tasks, Events, Quotas int
}

// Write records a batch in one transaction: all of it or none.
func (s *Store) Write(ctx context.Context, b Batch) (Written, error) {
	var w Written
	err := s.inTx(ctx, func(tx *txn) error {
		dirty := map[int64]bool{}
		for i := range b.Changes {
			changed, events, err := tx.writeChange(&b.Changes[i], dirty)
			if err != nil {
				return err
			}
			w.Events += events
			if changed {
				w.Tasks++
			}
		}
		for _, g := range b.Gone {
			changed, events, err := tx.goneByUID(g, dirty)
			if err != nil {
				return err
			}
			w.Events += events
			if changed {
				w.Tasks++
			}
		}
		for _, q := range b.Queues {
			n, err := tx.writeQueue(q)
			if err != nil {
				return err
			}
			w.Quotas += n
		}
		return tx.rollup(dirty)
	})
	if err != nil {
		return Written{}, fmt.Errorf("task history store %s: write: %w", s.name, err)
	}
	return w, nil
}

// txn is one write transaction with its prepared statements.
type txn struct {
	s     *Store
	ctx   context.Context
	tx    *sql.Tx
	stmts map[string]*sql.Stmt
}

func (s *Store) inTx(ctx context.Context, fn func(*txn) error) error {
	tx, err := s.rec.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	t := &txn{s: s, ctx: ctx, tx: tx, stmts: map[string]*sql.Stmt{}}
	defer func() {
		for _, st := range t.stmts {
			st.Close()
		}
	}()
	if err := fn(t); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

func (t *txn) stmt(query string) (*sql.Stmt, error) {
	if st, ok := t.stmts[query]; ok {
		return st, nil
	}
	st, err := t.tx.PrepareContext(t.ctx, t.s.q(query))
	if err != nil {
		return nil, err
	}
	t.stmts[query] = st
	return st, nil
}

func (t *txn) exec(query string, args ...any) (int64, error) {
	st, err := t.stmt(query)
	if err != nil {
		return 0, err
	}
	res, err := st.ExecContext(t.ctx, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (t *txn) queryRow(query string, args ...any) (*sql.Row, error) {
	st, err := t.stmt(query)
	if err != nil {
		return nil, err
	}
	return st.QueryRowContext(t.ctx, args...), nil
}

// taskRow is a row of the tasks table.
type taskRow struct {
	uid, namespace, name, ownerKind, ownerName, ownerUID string
	team, class                                          string
	priority                                             int64
	clusterQueue, localQueue                             string
	createdMS                                            int64
	gpus, neuron, cpuMilli, memoryMiB                    int64
	podSets, state                                       string
	waitStartMS                                          int64
	admittedMS, finishedMS, releasedMS                   sql.NullInt64
	pastMS                                               int64
	outcome, finishReason, flavors                       string
	deletedMS, waitMS, runMS, spanClass                  sql.NullInt64
	firstAdmittedMS, endedMS                             sql.NullInt64
	gpuMS, borrowed, preempted                           int64
	partitions                                           string
	heldMS                                               int64 // the ended admissions' time held
	labels                                               string
}

const taskColumns = `uid, namespace, name, owner_kind, owner_name, owner_uid, team, class, priority,
	cluster_queue, local_queue, created_ms, gpus, neuron, cpu_milli, memory_mib, pod_sets, state,
	wait_start_ms, admitted_ms, finished_ms, released_ms, past_ms, outcome, finish_reason, flavors,
	deleted_ms, wait_ms, run_ms, span_class, first_admitted_ms, ended_ms, gpu_ms, borrowed, preempted, partitions, held_ms, labels`

func (r *taskRow) fields() []any {
	return []any{&r.uid, &r.namespace, &r.name, &r.ownerKind, &r.ownerName, &r.ownerUID, &r.team, &r.class, &r.priority,
		&r.clusterQueue, &r.localQueue, &r.createdMS, &r.gpus, &r.neuron, &r.cpuMilli, &r.memoryMiB, &r.podSets, &r.state,
		&r.waitStartMS, &r.admittedMS, &r.finishedMS, &r.releasedMS, &r.pastMS, &r.outcome, &r.finishReason, &r.flavors,
		&r.deletedMS, &r.waitMS, &r.runMS, &r.spanClass, &r.firstAdmittedMS, &r.endedMS, &r.gpuMS, &r.borrowed, &r.preempted,
		&r.partitions, &r.heldMS, &r.labels}
}

func (r *taskRow) values() []any {
	var out []any
	for _, f := range r.fields() {
		switch p := f.(type) {
		case *string:
			out = append(out, *p)
		case *int64:
			out = append(out, *p)
		case *sql.NullInt64:
			out = append(out, *p)
		}
	}
	return out
}

// Span classes bound how long before a window a task that finished in it
// can have been admitted, so that the statistics find those tasks by index
// (see spanningRuns): class c ≥ 1 holds spans shorter than spanBounds[c-1],
// the last class the longer ones, class 0 the odd task admitted after it
// finished.
var spanBounds = []time.Duration{time.Hour, 24 * time.Hour, 7 * 24 * time.Hour}

func spanClass(admitted, finished, run sql.NullInt64) sql.NullInt64 {
	if !run.Valid || !admitted.Valid || !finished.Valid {
		return sql.NullInt64{}
	}
	span := time.Duration(finished.Int64-admitted.Int64) * time.Millisecond
	class := len(spanBounds) + 1
	for i, b := range spanBounds {
		if span < b {
			class = i + 1
			break
		}
	}
	if span < 0 {
		class = 0
	}
	return sql.NullInt64{Int64: int64(class), Valid: true}
}

// continued is row, a later slice of an elastic job, as its task's row old
// goes on: the task keeps its name, creation and wait, and while it runs
// on, the admission it began with.
func continued(row *taskRow, old taskRow) {
	row.name, row.createdMS, row.waitStartMS, row.waitMS = old.name, old.createdMS, old.waitStartMS, old.waitMS
	if row.admittedMS.Valid && old.admittedMS.Valid && old.admittedMS.Int64 < row.admittedMS.Int64 && old.state == string(domain.TaskAdmitted) {
		row.admittedMS = old.admittedMS
		if row.finishedMS.Valid {
			row.runMS = sql.NullInt64{Int64: row.finishedMS.Int64 - row.admittedMS.Int64 + row.pastMS, Valid: true}
		}
		row.spanClass = spanClass(row.admittedMS, row.finishedMS, row.runMS)
	}
}

func rowOf(t *Task) taskRow {
	podSets, _ := json.Marshal(t.PodSets)
	r := taskRow{
		uid: t.UID, namespace: t.Namespace, name: t.Name,
		ownerKind: t.OwnerKind, ownerName: t.OwnerName, ownerUID: t.OwnerUID,
		team: t.Team, class: t.Class, priority: int64(t.Priority),
		clusterQueue: t.ClusterQueue, localQueue: t.LocalQueue, createdMS: ms(t.Created),
		gpus: t.Requests.GPUs, neuron: t.Requests.Neuron, cpuMilli: t.Requests.CPUMilli, memoryMiB: t.Requests.MemoryMiB,
		podSets: string(podSets), state: string(t.State),
		waitStartMS: ms(t.WaitStart), admittedMS: nullMS(t.AdmittedAt), finishedMS: nullMS(t.FinishedAt), releasedMS: nullMS(t.ReleasedAt),
		pastMS: t.PastExecution.Milliseconds(), outcome: string(t.Outcome), finishReason: text(t.FinishReason),
		flavors: strings.Join(t.Flavors, ","), deletedMS: nullMS(t.DeletedAt), partitions: text(t.Partitions),
		labels: text(t.Labels),
	}
	if r.admittedMS.Valid {
		r.waitMS = sql.NullInt64{Int64: t.Wait.Milliseconds(), Valid: true}
	}
	// kueue's ClassStats: a finished task's run counts if it ran.
	if r.finishedMS.Valid && (r.admittedMS.Valid || t.Run > 0) {
		r.runMS = sql.NullInt64{Int64: t.Run.Milliseconds(), Valid: true}
	}
	r.spanClass = spanClass(r.admittedMS, r.finishedMS, r.runMS)
	r.endedMS = r.finishedMS
	if !r.endedMS.Valid {
		r.endedMS = r.deletedMS
	}
	return r
}

func (t *txn) readTask(uid string) (taskRow, bool, error) {
	var r taskRow
	row, err := t.queryRow(`SELECT `+taskColumns+` FROM tasks WHERE uid = ?`, uid)
	if err != nil {
		return r, false, err
	}
	if err := row.Scan(r.fields()...); err != nil {
		if err == sql.ErrNoRows {
			return r, false, nil
		}
		return r, false, err
	}
	return r, true, nil
}

// writeChange records one change; it reports whether the task's row changed
// and how many events were new, and marks the rollup hours to redo.
func (t *txn) writeChange(c *Change, dirty map[int64]bool) (bool, int, error) {
	if c.Task.UID == "" {
		return false, 0, nil
	}
	old, exists, err := t.readTask(c.Task.UID)
	if err != nil {
		return false, 0, err
	}
	if exists && old.deletedMS.Valid {
		return false, 0, nil // UIDs never come back: a late observation of a deleted task
	}
	if c.EventsOnly && !exists || c.IfAbsent && exists {
		return false, 0, nil
	}
	row := rowOf(&c.Task)
	if c.EventsOnly {
		row = old
		for i := range c.Events {
			c.Events[i].ClusterQueue = cmp.Or(c.Events[i].ClusterQueue, row.clusterQueue)
		}
	} else if c.Continues && exists {
		continued(&row, old)
	}
	if exists && !c.EventsOnly {
		row.firstAdmittedMS, row.gpuMS, row.borrowed, row.preempted = old.firstAdmittedMS, old.gpuMS, old.borrowed, old.preempted
		row.heldMS = old.heldMS
	}

	inserted := 0
	admissionsChanged := false
	for _, e := range c.Events {
		n, err := t.exec(`INSERT INTO events (uid, kind, at_ms, cluster_queue, class, flavors, borrowed, reason, message)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`, eventRow(&row, e)...)
		if err != nil {
			return false, 0, err
		}
		if n == 0 {
			continue
		}
		inserted++
		switch e.Kind {
		case EventAdmitted:
			admissionsChanged = true
			if err := t.admit(&row, e); err != nil {
				return false, 0, err
			}
		case EventPreempted:
			if err := t.preempt(&row, e); err != nil {
				return false, 0, err
			}
		case EventFinished, EventDeleted:
			n, err := t.closeAdmissions(row.uid, ms(e.At))
			if err != nil {
				return false, 0, err
			}
			admissionsChanged = admissionsChanged || n > 0
		}
	}
	// No admission holds any longer: the last one ended when Kueue said so.
	if !row.admittedMS.Valid && row.releasedMS.Valid {
		n, err := t.closeAdmissions(row.uid, row.releasedMS.Int64)
		if err != nil {
			return false, 0, err
		}
		admissionsChanged = admissionsChanged || n > 0
	}
	if admissionsChanged || inserted > 0 {
		if err := t.denormalize(&row); err != nil {
			return false, 0, err
		}
	}
	if exists && row == old {
		return false, inserted, nil
	}
	if err := t.upsertTask(&row); err != nil {
		return false, 0, err
	}
	markHours(dirty, old, exists, row)
	return true, inserted, nil
}

// GoneByUID ends the recorded task uid, deleted at at, from its record: as
// Gone does with the Workload's last state. A task not recorded, or
// already ended by a deletion, is left as it is.
func (s *Store) GoneByUID(ctx context.Context, uid string, at time.Time) error {
	_, err := s.Write(ctx, Batch{Gone: []GoneUID{{UID: uid, At: at}}})
	return err
}

func (t *txn) goneByUID(g GoneUID, dirty map[int64]bool) (bool, int, error) {
	row, exists, err := t.readTask(g.UID)
	if err != nil || !exists || row.deletedMS.Valid {
		return false, 0, err
	}
	task, err := taskOfRow(&row, g.At)
	if err != nil {
		return false, 0, err
	}
	c := ended(Change{Task: task}, g.At)
	return t.writeChange(&c, dirty)
}

// taskOfRow is the Task a row records, its run taken at at when it has
// not finished (as observe reads a Workload at the time it is gone).
func taskOfRow(r *taskRow, at time.Time) (Task, error) {
	t := Task{
		UID: r.uid, Namespace: r.namespace, Name: r.name, OwnerKind: r.ownerKind, OwnerName: r.ownerName, OwnerUID: r.ownerUID, Labels: r.labels,
		Team: r.team, Class: r.class, Priority: int32(r.priority), ClusterQueue: r.clusterQueue, LocalQueue: r.localQueue,
		Created:  fromMS(r.createdMS),
		Requests: Resources{GPUs: r.gpus, Neuron: r.neuron, CPUMilli: r.cpuMilli, MemoryMiB: r.memoryMiB},
		State:    domain.TaskState(r.state), WaitStart: fromMS(r.waitStartMS),
		AdmittedAt: fromNullMS(r.admittedMS), FinishedAt: fromNullMS(r.finishedMS), ReleasedAt: fromNullMS(r.releasedMS),
		PastExecution: time.Duration(r.pastMS) * time.Millisecond,
		Outcome:       Outcome(r.outcome), FinishReason: r.finishReason, Partitions: r.partitions,
	}
	if r.podSets != "" && r.podSets != "null" {
		if err := json.Unmarshal([]byte(r.podSets), &t.PodSets); err != nil {
			return t, fmt.Errorf("task %s: pod sets: %w", r.uid, err)
		}
	}
	if r.flavors != "" {
		t.Flavors = strings.Split(r.flavors, ",")
	}
	if r.waitMS.Valid {
		t.Wait = time.Duration(r.waitMS.Int64) * time.Millisecond
	}
	// domain.TaskFacts.RunAt: the past runs, plus since the admission up to
	// the finish (or at).
	end := fromNullMS(r.finishedMS)
	if end.IsZero() {
		end = at
	}
	t.Run = t.PastExecution
	if !t.AdmittedAt.IsZero() {
		t.Run += max(end.Sub(t.AdmittedAt), 0)
	}
	return t, nil
}

// eventRow is an event's columns. The queue and class, which the task row
// holds, are repeated only on admissions, for the admission rates.
func eventRow(r *taskRow, e Event) []any {
	queue, class := "", ""
	if e.Kind == EventAdmitted || e.Kind == EventQuotaReserved {
		queue = e.ClusterQueue
	}
	if e.Kind == EventAdmitted {
		class = r.class
	}
	// borrowed is decided once the admission is written (borrowed.go).
	return []any{r.uid, string(e.Kind), ms(e.At), queue, class, strings.Join(e.Flavors, ","), 0, text(e.Reason), text(e.Message)}
}

func (t *txn) upsertTask(r *taskRow) error {
	cols := strings.Split(strings.Join(strings.Fields(taskColumns), ""), ",")
	set := make([]string, 0, len(cols)-1)
	for _, c := range cols[1:] {
		set = append(set, c+" = excluded."+c)
	}
	_, err := t.exec(`INSERT INTO tasks (`+taskColumns+`) VALUES (`+strings.TrimSuffix(strings.Repeat("?, ", len(cols)), ", ")+`)
		ON CONFLICT (uid) DO UPDATE SET `+strings.Join(set, ", "), r.values()...)
	return err
}

// admit opens the admission's rows, one per flavor, ending any earlier
// admission the recorder did not see end.
func (t *txn) admit(r *taskRow, e Event) error {
	at := ms(e.At)
	_, held, err := t.endAdmissions(r.uid, at, false)
	if err != nil {
		return err
	}
	usage := e.Usage
	if len(usage) == 0 {
		usage = []FlavorUsage{{}} // an admission holding nothing we follow still ran
	}
	for _, u := range usage {
		if _, err := t.exec(`INSERT INTO admissions (uid, admitted_ms, flavor, cluster_queue, team, borrowed, gpus, neuron, cpu_milli, memory_mib, partitions)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
			r.uid, at, u.Flavor, e.ClusterQueue, r.team, 0, u.GPUs, u.Neuron, u.CPUMilli, u.MemoryMiB, text(domain.PartitionsWord(u.Partitions))); err != nil {
			return err
		}
		held = append(held, queueFlavor{e.ClusterQueue, u.Flavor})
	}
	return t.decideBorrowed(r, at, held)
}

// closeAdmissions ends the task's open admissions that began by at.
func (t *txn) closeAdmissions(uid string, at int64) (int64, error) {
	n, held, err := t.endAdmissions(uid, at, true)
	if err != nil {
		return 0, err
	}
	return n, t.decideBorrowed(nil, at, held)
}

// preempt records a preemption: the work lost is the run since the
// admission it ended, times that admission's GPUs.
func (t *txn) preempt(r *taskRow, e Event) error {
	at := ms(e.At)
	var admitted, gpus sql.NullInt64
	row, err := t.queryRow(`SELECT admitted_ms, SUM(gpus) FROM admissions WHERE uid = ? AND admitted_ms <= ?
		GROUP BY admitted_ms ORDER BY admitted_ms DESC LIMIT 1`, r.uid, at)
	if err != nil {
		return err
	}
	if err := row.Scan(&admitted, &gpus); err != nil && err != sql.ErrNoRows {
		return err
	}
	var lost sql.NullInt64
	g := r.gpus
	if admitted.Valid {
		g = gpus.Int64
		lost = sql.NullInt64{Int64: (at - admitted.Int64) * g, Valid: true}
	}
	_, err = t.exec(`INSERT INTO preemptions (uid, at_ms, team, class, cluster_queue, gpus, admitted_ms, lost_gpu_ms, reason, reason_words,
		message, preemptor_uid, preemptor_job_uid, preemptor_cluster_queue) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
		r.uid, at, r.team, r.class, e.ClusterQueue, g, admitted, lost, text(e.Reason), text(e.ReasonWords), text(e.Message),
		e.Preemptor.UID, e.Preemptor.JobUID, e.Preemptor.ClusterQueue)
	return err
}

// denormalize refreshes what the task row keeps from its admissions and
// preemptions, for the per-task report.
func (t *txn) denormalize(r *taskRow) error {
	row, err := t.queryRow(`SELECT
		(SELECT COALESCE(SUM(gpus * (ended_ms - admitted_ms)), 0) FROM admissions WHERE uid = ? AND ended_ms IS NOT NULL),
		(SELECT COALESCE(MAX(borrowed), 0) FROM admissions WHERE uid = ?),
		(SELECT MIN(admitted_ms) FROM admissions WHERE uid = ?),
		(SELECT COUNT(*) FROM preemptions WHERE uid = ?),
		(SELECT COALESCE(SUM(e - a), 0) FROM (SELECT DISTINCT admitted_ms AS a, ended_ms AS e FROM admissions WHERE uid = ? AND ended_ms IS NOT NULL) held)`,
		r.uid, r.uid, r.uid, r.uid, r.uid)
	if err != nil {
		return err
	}
	return row.Scan(&r.gpuMS, &r.borrowed, &r.firstAdmittedMS, &r.preempted, &r.heldMS)
}

// text is s as both databases store it: valid UTF-8 without NUL bytes
// (PostgreSQL refuses both). Messages come from the cluster and may hold
// anything.
func text(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}
