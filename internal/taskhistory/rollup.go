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

// The statistics rollup: for each UTC hour, day and week, one row whose
// data holds, per team and class, the completed facts of that period (the
// waits of tasks admitted in it, the runs of tasks that finished in it).
// One row per period, not per team and class: a 30-day window reads at most
// 4 week, 12 day and 46 hour rows, however many teams and classes there
// are. Every write recomputes the hours it can change from the task rows
// (an hour holds some hundreds of tasks), their days from the hours and
// their weeks from the days, so the rollup stays exact.

const (
	hourMS = int64(time.Hour / time.Millisecond)
	dayMS  = 24 * hourMS
	weekMS = 7 * dayMS
)

// rollupSpans are the rollup's period lengths, finest first; each is a
// whole number of the one before (UTC hours, days, and 7-day periods from
// the Unix epoch).
var rollupSpans = []int64{hourMS, dayMS, weekMS}

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

// decodeFacts calls fn for each entry of a period's data. names, if not
// nil, interns the teams' and classes' names across calls: a 30-day window
// repeats each some thirty times.
func decodeFacts(b []byte, names map[string]string, fn func(teamClass, facts)) error {
	str := func() (string, bool) {
		n, w := binary.Uvarint(b)
		if w <= 0 || uint64(len(b)-w) < n {
			return "", false
		}
		raw := b[w : w+int(n)]
		b = b[w+int(n):]
		if names == nil {
			return string(raw), true
		}
		s, ok := names[string(raw)]
		if !ok {
			s = string(raw)
			names[s] = s
		}
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

// markHours marks the rollup hours whose facts the change of a task row can
// move: before and after, its admission's and its finish's hour.
func markHours(dirty map[int64]bool, old taskRow, exists bool, row taskRow) {
	if exists && old.team == row.team && old.class == row.class && old.admittedMS == row.admittedMS &&
		old.waitMS == row.waitMS && old.finishedMS == row.finishedMS && old.runMS == row.runMS {
		return
	}
	for _, r := range []*taskRow{&old, &row} {
		if r == &old && !exists {
			continue
		}
		for _, at := range []sql.NullInt64{r.admittedMS, r.finishedMS} {
			if at.Valid {
				dirty[floorTo(at.Int64, hourMS)] = true
			}
		}
	}
}

// rollup recomputes the marked hours from the task rows, then each coarser
// period containing one of them from its finer periods.
func (t *txn) rollup(dirty map[int64]bool) error {
	for level, span := range rollupSpans {
		parents := map[int64]bool{}
		for _, start := range slices.Sorted(maps.Keys(dirty)) {
			var entries map[teamClass]facts
			var err error
			if level == 0 {
				entries, err = t.hourFacts(start)
			} else {
				entries, err = t.mergeRollup(rollupSpans[level-1], start, start+span)
			}
			if err != nil {
				return err
			}
			if err := t.putRollup(span, start, entries); err != nil {
				return err
			}
			if level+1 < len(rollupSpans) {
				parents[floorTo(start, rollupSpans[level+1])] = true
			}
		}
		dirty = parents
	}
	return nil
}

// mergeRollup merges the periods of span starting in [from, to).
func (t *txn) mergeRollup(span, from, to int64) (map[teamClass]facts, error) {
	entries := map[teamClass]facts{}
	rows, err := t.tx.QueryContext(t.ctx, t.s.q(`SELECT data FROM stats_rollup WHERE span_ms = ? AND start_ms >= ? AND start_ms < ?`), span, from, to)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var data []byte
		if err := rows.Scan(&data); err != nil {
			return nil, err
		}
		if err := decodeFacts(data, nil, func(k teamClass, f facts) {
			e := entries[k]
			e.merge(f)
			entries[k] = e
		}); err != nil {
			return nil, err
		}
	}
	return entries, rows.Err()
}

func (t *txn) putRollup(span, start int64, entries map[teamClass]facts) error {
	if len(entries) == 0 {
		_, err := t.exec(`DELETE FROM stats_rollup WHERE span_ms = ? AND start_ms = ?`, span, start)
		return err
	}
	_, err := t.exec(`INSERT INTO stats_rollup (span_ms, start_ms, data) VALUES (?, ?, ?)
		ON CONFLICT (span_ms, start_ms) DO UPDATE SET data = excluded.data`, span, start, encodeFacts(entries))
	return err
}

// hourFacts counts every team's facts of one hour from the task rows.
func (t *txn) hourFacts(h int64) (map[teamClass]facts, error) {
	entries := map[teamClass]facts{}
	st, err := t.stmt(`SELECT team, class, COUNT(*), COALESCE(SUM(wait_ms), 0), COALESCE(MAX(wait_ms), 0) FROM tasks
		WHERE admitted_ms >= ? AND admitted_ms < ? GROUP BY team, class`)
	if err != nil {
		return nil, err
	}
	rows, err := st.QueryContext(t.ctx, h, h+hourMS)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var k teamClass
		var f facts
		if err := rows.Scan(&k.team, &k.class, &f.waitN, &f.waitSum, &f.waitMax); err != nil {
			rows.Close()
			return nil, err
		}
		entries[k] = f
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	st, err = t.stmt(`SELECT team, class, COUNT(*), COALESCE(SUM(run_ms), 0), COALESCE(MAX(run_ms), 0),
		COALESCE(SUM(CASE WHEN admitted_ms IS NULL THEN 1 ELSE 0 END), 0) FROM tasks
		WHERE finished_ms >= ? AND finished_ms < ? AND run_ms IS NOT NULL GROUP BY team, class`)
	if err != nil {
		return nil, err
	}
	rows, err = st.QueryContext(t.ctx, h, h+hourMS)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var k teamClass
		var f facts
		if err := rows.Scan(&k.team, &k.class, &f.runN, &f.runSum, &f.runMax, &f.runUnadmitted); err != nil {
			return nil, err
		}
		e := entries[k]
		e.merge(f)
		entries[k] = e
	}
	return entries, rows.Err()
}

// readRollup merges the entries of the periods of span starting in
// [from, to) into fn.
func (s *Store) readRollup(ctx context.Context, span, from, to int64, fn func(teamClass, facts)) error {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT data FROM stats_rollup WHERE span_ms = ? AND start_ms >= ? AND start_ms < ?`), span, from, to)
	if err != nil {
		return err
	}
	defer rows.Close()
	names := map[string]string{}
	var data []byte
	for rows.Next() {
		if err := rows.Scan(&data); err != nil {
			return err
		}
		if err := decodeFacts(data, names, fn); err != nil {
			return err
		}
	}
	return rows.Err()
}
