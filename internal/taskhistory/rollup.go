package taskhistory

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"maps"
	"slices"
	"time"
)

// The statistics rollup: for each UTC hour and each UTC day, one row whose
// data holds, per team and class, the completed facts of that period (the
// waits of tasks admitted in it, the runs of tasks that finished in it).
// One row per period, not per team and class: a 30-day window reads 30 day
// rows and at most 46 hour rows, however many teams and classes there are.
// Every write recomputes the entries it can change from the task rows, so
// the rollup stays exact.

const (
	hourMS = int64(time.Hour / time.Millisecond)
	dayMS  = 24 * hourMS
)

// rollupSpans are the rollup's period lengths, shortest first.
var rollupSpans = []int64{hourMS, dayMS}

// floorTo is v rounded down to a multiple of span (Unix ms, UTC periods).
func floorTo(v, span int64) int64 {
	d := v / span * span
	if v < 0 && v%span != 0 {
		d -= span
	}
	return d
}

func ceilTo(v, span int64) int64 {
	d := floorTo(v, span)
	if d < v {
		d += span
	}
	return d
}

func dayOf(v int64) int64   { return floorTo(v, dayMS) }
func ceilDay(v int64) int64 { return ceilTo(v, dayMS) }

// facts are one team's completed facts in one class and period.
type facts struct {
	waitN, waitSum, waitMax int64
	runN, runSum, runMax    int64
	runUnadmitted           int64 // runs of tasks that hold no admission
}

func (f *facts) merge(o facts) {
	f.waitN += o.waitN
	f.waitSum += o.waitSum
	f.waitMax = max(f.waitMax, o.waitMax)
	f.runN += o.runN
	f.runSum += o.runSum
	f.runMax = max(f.runMax, o.runMax)
	f.runUnadmitted += o.runUnadmitted
}

func (f facts) zero() bool { return f.waitN == 0 && f.runN == 0 }

// bucket is one rollup row: a period of span ms from start.
type bucket struct{ span, start int64 }

// encodeFacts lays out a period's entries, sorted by team and class.
func encodeFacts(m map[teamClass]facts) []byte {
	keys := slices.SortedFunc(maps.Keys(m), func(a, b teamClass) int {
		return cmp.Or(cmp.Compare(a.team, b.team), cmp.Compare(a.class, b.class))
	})
	var b []byte
	for _, k := range keys {
		f := m[k]
		b = binary.AppendUvarint(b, uint64(len(k.team)))
		b = append(b, k.team...)
		b = binary.AppendUvarint(b, uint64(len(k.class)))
		b = append(b, k.class...)
		for _, v := range []int64{f.waitN, f.waitSum, f.waitMax, f.runN, f.runSum, f.runMax, f.runUnadmitted} {
			b = binary.AppendUvarint(b, uint64(v))
		}
	}
	return b
}

var errCorruptRollup = errors.New("corrupt statistics rollup row")

// decodeFacts calls fn for each entry of a period's data.
func decodeFacts(b []byte, fn func(teamClass, facts)) error {
	str := func() (string, bool) {
		n, w := binary.Uvarint(b)
		if w <= 0 || uint64(len(b)-w) < n {
			return "", false
		}
		s := string(b[w : w+int(n)])
		b = b[w+int(n):]
		return s, true
	}
	num := func() (int64, bool) {
		v, w := binary.Uvarint(b)
		if w <= 0 {
			return 0, false
		}
		b = b[w:]
		return int64(v), true
	}
	for len(b) > 0 {
		var k teamClass
		var f facts
		var ok1, ok2 bool
		k.team, ok1 = str()
		k.class, ok2 = str()
		if !ok1 || !ok2 {
			return errCorruptRollup
		}
		for _, p := range []*int64{&f.waitN, &f.waitSum, &f.waitMax, &f.runN, &f.runSum, &f.runMax, &f.runUnadmitted} {
			v, ok := num()
			if !ok {
				return errCorruptRollup
			}
			*p = v
		}
		fn(k, f)
	}
	return nil
}

// markBuckets marks the rollup entries whose facts the change of a task row
// can move: before and after, its admission's and its finish's hour and day.
func markBuckets(dirty map[bucket]map[teamClass]bool, old taskRow, exists bool, row taskRow) {
	if exists && old.team == row.team && old.class == row.class && old.admittedMS == row.admittedMS &&
		old.waitMS == row.waitMS && old.finishedMS == row.finishedMS && old.runMS == row.runMS {
		return
	}
	mark := func(at sql.NullInt64, k teamClass) {
		if !at.Valid {
			return
		}
		for _, span := range rollupSpans {
			b := bucket{span, floorTo(at.Int64, span)}
			if dirty[b] == nil {
				dirty[b] = map[teamClass]bool{}
			}
			dirty[b][k] = true
		}
	}
	for _, r := range []*taskRow{&old, &row} {
		if r == &old && !exists {
			continue
		}
		mark(r.admittedMS, teamClass{r.team, r.class})
		mark(r.finishedMS, teamClass{r.team, r.class})
	}
}

// rollup recomputes the marked entries from the task rows.
func (t *txn) rollup(dirty map[bucket]map[teamClass]bool) error {
	buckets := slices.SortedFunc(maps.Keys(dirty), func(a, b bucket) int {
		return cmp.Or(cmp.Compare(a.span, b.span), cmp.Compare(a.start, b.start))
	})
	for _, b := range buckets {
		entries := map[teamClass]facts{}
		row, err := t.queryRow(`SELECT data FROM stats_rollup WHERE span_ms = ? AND start_ms = ?`, b.span, b.start)
		if err != nil {
			return err
		}
		var data []byte
		switch err := row.Scan(&data); {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return err
		default:
			// A corrupt row is rebuilt from what the task rows say.
			_ = decodeFacts(data, func(k teamClass, f facts) { entries[k] = f })
		}
		for k := range dirty[b] {
			f, err := t.factsOf(k, b)
			if err != nil {
				return err
			}
			if f.zero() {
				delete(entries, k)
			} else {
				entries[k] = f
			}
		}
		if len(entries) == 0 {
			if _, err := t.exec(`DELETE FROM stats_rollup WHERE span_ms = ? AND start_ms = ?`, b.span, b.start); err != nil {
				return err
			}
			continue
		}
		if _, err := t.exec(`INSERT INTO stats_rollup (span_ms, start_ms, data) VALUES (?, ?, ?)
			ON CONFLICT (span_ms, start_ms) DO UPDATE SET data = excluded.data`, b.span, b.start, encodeFacts(entries)); err != nil {
			return err
		}
	}
	return nil
}

// factsOf counts one team's facts in one class and period from the rows.
func (t *txn) factsOf(k teamClass, b bucket) (facts, error) {
	var f facts
	row, err := t.queryRow(`SELECT COUNT(*), COALESCE(SUM(wait_ms), 0), COALESCE(MAX(wait_ms), 0) FROM tasks
		WHERE team = ? AND class = ? AND admitted_ms >= ? AND admitted_ms < ?`, k.team, k.class, b.start, b.start+b.span)
	if err != nil {
		return f, err
	}
	if err := row.Scan(&f.waitN, &f.waitSum, &f.waitMax); err != nil {
		return f, err
	}
	row, err = t.queryRow(`SELECT COUNT(*), COALESCE(SUM(run_ms), 0), COALESCE(MAX(run_ms), 0),
		COALESCE(SUM(CASE WHEN admitted_ms IS NULL THEN 1 ELSE 0 END), 0) FROM tasks
		WHERE team = ? AND class = ? AND finished_ms >= ? AND finished_ms < ? AND run_ms IS NOT NULL`, k.team, k.class, b.start, b.start+b.span)
	if err != nil {
		return f, err
	}
	err = row.Scan(&f.runN, &f.runSum, &f.runMax, &f.runUnadmitted)
	return f, err
}

// rebuildRollups recomputes the whole rollup from the task rows, by the
// definition factsOf applies to one entry (for a store filled in bulk).
func (s *Store) rebuildRollups(ctx context.Context) error {
	return s.inTx(ctx, func(t *txn) error {
		if _, err := t.exec(`DELETE FROM stats_rollup`); err != nil {
			return err
		}
		for _, span := range rollupSpans {
			rows, err := t.tx.QueryContext(ctx, s.q(`SELECT bucket, team, class, CAST(SUM(wn) AS BIGINT), CAST(SUM(ws) AS BIGINT), MAX(wm),
				CAST(SUM(rn) AS BIGINT), CAST(SUM(rs) AS BIGINT), MAX(rm), CAST(SUM(ru) AS BIGINT)
				FROM (
					SELECT admitted_ms - admitted_ms % ? AS bucket, team, class, COUNT(*) AS wn, SUM(wait_ms) AS ws, MAX(wait_ms) AS wm,
						0 AS rn, 0 AS rs, 0 AS rm, 0 AS ru
					FROM tasks WHERE admitted_ms IS NOT NULL GROUP BY 1, 2, 3
					UNION ALL
					SELECT finished_ms - finished_ms % ?, team, class, 0, 0, 0, COUNT(*), SUM(run_ms), MAX(run_ms),
						SUM(CASE WHEN admitted_ms IS NULL THEN 1 ELSE 0 END)
					FROM tasks WHERE run_ms IS NOT NULL GROUP BY 1, 2, 3
				) f GROUP BY bucket, team, class ORDER BY bucket`), span, span)
			if err != nil {
				return err
			}
			type out struct {
				start int64
				data  []byte
			}
			var done []out
			cur, entries := int64(0), map[teamClass]facts{}
			flush := func() {
				if len(entries) > 0 {
					done = append(done, out{cur, encodeFacts(entries)})
				}
				entries = map[teamClass]facts{}
			}
			for rows.Next() {
				var start int64
				var k teamClass
				var f facts
				if err := rows.Scan(&start, &k.team, &k.class, &f.waitN, &f.waitSum, &f.waitMax, &f.runN, &f.runSum, &f.runMax, &f.runUnadmitted); err != nil {
					rows.Close()
					return err
				}
				if start != cur {
					flush()
					cur = start
				}
				entries[k] = f
			}
			flush()
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
			for _, o := range done {
				if _, err := t.exec(`INSERT INTO stats_rollup (span_ms, start_ms, data) VALUES (?, ?, ?)`, span, o.start, o.data); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// readRollup merges the entries of the periods of span starting in
// [from, to) into fn.
func (s *Store) readRollup(ctx context.Context, span, from, to int64, fn func(teamClass, facts)) error {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT data FROM stats_rollup WHERE span_ms = ? AND start_ms >= ? AND start_ms < ?`), span, from, to)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var data []byte
		if err := rows.Scan(&data); err != nil {
			return err
		}
		if err := decodeFacts(data, fn); err != nil {
			return err
		}
	}
	return rows.Err()
}
