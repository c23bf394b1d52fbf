package taskhistory

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"
)

// HeartbeatEvery is how often a running recorder says it is alive. A run
// whose heartbeats stopped (its process died) covers until one missed
// heartbeat after the last.
const HeartbeatEvery = 30 * time.Second

// StartRun records that a recorder started at at; it returns the run's id.
func (s *Store) StartRun(ctx context.Context, identity string, at time.Time) (int64, error) {
	var id int64
	err := s.rec.QueryRowContext(ctx, s.q(`INSERT INTO runs (identity, started_ms, heartbeat_ms) VALUES (?, ?, ?) RETURNING id`),
		identity, ms(at), ms(at)).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("task history store %s: start run: %w", s.name, err)
	}
	return id, nil
}

// Heartbeat records that run id was alive at at.
func (s *Store) Heartbeat(ctx context.Context, id int64, at time.Time) error {
	if _, err := s.rec.ExecContext(ctx, s.q(`UPDATE runs SET heartbeat_ms = ? WHERE id = ? AND heartbeat_ms < ?`), ms(at), id, ms(at)); err != nil {
		return fmt.Errorf("task history store %s: heartbeat: %w", s.name, err)
	}
	return nil
}

// EndRun records that run id stopped at at.
func (s *Store) EndRun(ctx context.Context, id int64, at time.Time) error {
	if _, err := s.rec.ExecContext(ctx, s.q(`UPDATE runs SET heartbeat_ms = ?, ended_ms = ? WHERE id = ?`), ms(at), ms(at), id); err != nil {
		return fmt.Errorf("task history store %s: end run: %w", s.name, err)
	}
	return nil
}

// RecordLost records a period in which events were dropped.
func (s *Store) RecordLost(ctx context.Context, p Period, reason string) error {
	if _, err := s.rec.ExecContext(ctx, s.q(`INSERT INTO lost (from_ms, to_ms, reason) VALUES (?, ?, ?)`), ms(p.From), ms(p.To), reason); err != nil {
		return fmt.Errorf("task history store %s: record lost events: %w", s.name, err)
	}
	return nil
}

// LastCoverage is when the recorder runs other than run id last covered
// (zero if none ever did): where a gap before run id begins.
func (s *Store) LastCoverage(ctx context.Context, id int64) (time.Time, error) {
	var last sql.NullInt64
	err := s.rec.QueryRowContext(ctx, s.q(`SELECT MAX(COALESCE(ended_ms, heartbeat_ms)) FROM runs WHERE id <> ?`), id).Scan(&last)
	if err != nil {
		return time.Time{}, fmt.Errorf("task history store %s: %w", s.name, err)
	}
	return fromNullMS(last), nil
}

// Gaps are the parts of w, up to now, without a record: before the
// retention horizon, when no recorder ran, and when one dropped events.
func (s *Store) Gaps(ctx context.Context, w Window) ([]Period, error) {
	gaps, err := s.gaps(ctx, s.db, w, s.clock())
	if err != nil {
		return nil, fmt.Errorf("task history store %s: gaps: %w", s.name, err)
	}
	return gaps, nil
}

type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func (s *Store) gaps(ctx context.Context, db querier, w Window, now time.Time) ([]Period, error) {
	to := w.To
	if to.After(now) {
		to = now
	}
	if !w.From.Before(to) {
		return nil, nil
	}
	from, end := ms(w.From), ms(to)
	slack := (2 * HeartbeatEvery).Milliseconds()
	var covered []span
	rows, err := db.QueryContext(ctx, s.q(`SELECT started_ms, heartbeat_ms, ended_ms FROM runs
		WHERE started_ms < ? AND COALESCE(ended_ms, heartbeat_ms + ?) > ?`), end, slack, from)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var started, beat int64
		var ended sql.NullInt64
		if err := rows.Scan(&started, &beat, &ended); err != nil {
			rows.Close()
			return nil, err
		}
		stop := min(beat+slack, ms(now))
		if ended.Valid {
			stop = ended.Int64
		}
		covered = append(covered, span{started, stop})
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	missing := subtract(span{from, end}, covered)
	rows, err = db.QueryContext(ctx, s.q(`SELECT from_ms, to_ms FROM lost WHERE from_ms < ? AND to_ms > ?`), end, from)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var sp span
		if err := rows.Scan(&sp.from, &sp.to); err != nil {
			rows.Close()
			return nil, err
		}
		missing = append(missing, span{max(sp.from, from), min(sp.to, end)})
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if horizon := ms(now.Add(-s.retention)); horizon > from {
		missing = append(missing, span{from, min(horizon, end)})
	}
	return periods(union(missing)), nil
}

// span is [from, to) in Unix milliseconds.
type span struct{ from, to int64 }

// union merges overlapping or touching spans, sorted.
func union(ss []span) []span {
	ss = slices.DeleteFunc(slices.Clone(ss), func(s span) bool { return s.to <= s.from })
	slices.SortFunc(ss, func(a, b span) int { return cmp.Compare(a.from, b.from) })
	var out []span
	for _, s := range ss {
		if n := len(out); n > 0 && s.from <= out[n-1].to {
			out[n-1].to = max(out[n-1].to, s.to)
			continue
		}
		out = append(out, s)
	}
	return out
}

// subtract is what of w the spans do not cover.
func subtract(w span, cover []span) []span {
	var out []span
	at := w.from
	for _, c := range union(cover) {
		if c.to <= at || c.from >= w.to {
			continue
		}
		if c.from > at {
			out = append(out, span{at, c.from})
		}
		at = max(at, c.to)
	}
	if at < w.to {
		out = append(out, span{at, w.to})
	}
	return out
}

// intersect is the parts of ss within w.
func intersect(ss []span, w span) []span {
	var out []span
	for _, s := range ss {
		if f, t := max(s.from, w.from), min(s.to, w.to); f < t {
			out = append(out, span{f, t})
		}
	}
	return out
}

func periods(ss []span) []Period {
	if len(ss) == 0 {
		return nil
	}
	out := make([]Period, len(ss))
	for i, s := range ss {
		out[i] = Period{fromMS(s.from), fromMS(s.to)}
	}
	return out
}

func spans(ps []Period) []span {
	out := make([]span, len(ps))
	for i, p := range ps {
		out[i] = span{ms(p.From), ms(p.To)}
	}
	return out
}

// MarkVanished ends the recorded tasks that are still open (not deleted)
// and not among present, the Workloads that exist now: they were deleted
// while no recorder ran. Their outcome is vanished, deleted at at; their
// admissions end at lastSeen, where the record of them stops.
func (s *Store) MarkVanished(ctx context.Context, present map[string]bool, at, lastSeen time.Time) (int, error) {
	rows, err := s.rec.QueryContext(ctx, `SELECT uid FROM tasks WHERE deleted_ms IS NULL`)
	if err != nil {
		return 0, fmt.Errorf("task history store %s: %w", s.name, err)
	}
	var gone []string
	for rows.Next() {
		var uid string
		if err := rows.Scan(&uid); err != nil {
			rows.Close()
			return 0, fmt.Errorf("task history store %s: %w", s.name, err)
		}
		if !present[uid] {
			gone = append(gone, uid)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("task history store %s: %w", s.name, err)
	}
	if lastSeen.IsZero() || lastSeen.After(at) {
		lastSeen = at
	}
	for chunk := range slices.Chunk(gone, 500) {
		err := s.inTx(ctx, func(t *txn) error {
			for _, uid := range chunk {
				if _, err := t.closeAdmissions(uid, ms(lastSeen)); err != nil {
					return err
				}
				if _, err := t.exec(`INSERT INTO events (uid, kind, at_ms, cluster_queue, class, flavors, borrowed, reason, message)
					VALUES (?, ?, ?, '', '', '', 0, 'Vanished', 'deleted while no recorder ran') ON CONFLICT DO NOTHING`,
					uid, string(EventDeleted), ms(at)); err != nil {
					return err
				}
				row, exists, err := t.readTask(uid)
				if err != nil || !exists {
					return err
				}
				if err := t.denormalize(&row); err != nil {
					return err
				}
				row.deletedMS = sql.NullInt64{Int64: ms(at), Valid: true}
				if !row.finishedMS.Valid {
					row.outcome = string(OutcomeVanished)
				}
				if !row.endedMS.Valid {
					row.endedMS = row.deletedMS
				}
				if err := t.upsertTask(&row); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return 0, fmt.Errorf("task history store %s: mark vanished: %w", s.name, err)
		}
	}
	return len(gone), nil
}

// CloseQueuesExcept ends, at at, the quotas of ClusterQueues not among
// present: they were deleted while no recorder ran.
func (s *Store) CloseQueuesExcept(ctx context.Context, present map[string]bool, at time.Time) error {
	rows, err := s.rec.QueryContext(ctx, `SELECT DISTINCT cluster_queue FROM quotas WHERE to_ms IS NULL`)
	if err != nil {
		return fmt.Errorf("task history store %s: %w", s.name, err)
	}
	var gone []string
	for rows.Next() {
		var cq string
		if err := rows.Scan(&cq); err != nil {
			rows.Close()
			return fmt.Errorf("task history store %s: %w", s.name, err)
		}
		if !present[cq] {
			gone = append(gone, cq)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("task history store %s: %w", s.name, err)
	}
	if len(gone) == 0 {
		return nil
	}
	b := Batch{}
	for _, cq := range gone {
		b.Queues = append(b.Queues, QueueState{ClusterQueue: cq, At: at, Deleted: true})
	}
	_, err = s.Write(ctx, b)
	return err
}
