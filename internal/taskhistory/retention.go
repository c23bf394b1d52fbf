package taskhistory

import (
	"context"
	"fmt"
	"time"
)

// pruneBatch bounds one delete statement, so that pruning never holds the
// database (SQLite's single writer above all) for long.
const pruneBatch = 2000

// prunes delete, per table, the rows older than the horizon (a Unix ms),
// pruneBatch at a time. Tasks go once they ended before the horizon; those
// still open stay whatever their age.
var prunes = []struct {
	stmt string
	// byDay: the table is per UTC day; it keeps the horizon's day.
	byDay bool
}{
	{stmt: `DELETE FROM events WHERE (uid, kind, at_ms) IN (SELECT uid, kind, at_ms FROM events WHERE at_ms < ? LIMIT ?)`},
	{stmt: `DELETE FROM preemptions WHERE (uid, at_ms) IN (SELECT uid, at_ms FROM preemptions WHERE at_ms < ? LIMIT ?)`},
	{stmt: `DELETE FROM admissions WHERE (uid, admitted_ms, flavor) IN (SELECT uid, admitted_ms, flavor FROM admissions WHERE ended_ms < ? LIMIT ?)`},
	{stmt: `DELETE FROM tasks WHERE uid IN (SELECT uid FROM tasks WHERE ended_ms < ? LIMIT ?)`},
	{stmt: `DELETE FROM quotas WHERE (cluster_queue, flavor, resource, from_ms) IN (SELECT cluster_queue, flavor, resource, from_ms FROM quotas WHERE to_ms < ? LIMIT ?)`},
	{byDay: true, stmt: `DELETE FROM stats_daily WHERE (day_ms, team, class) IN (SELECT day_ms, team, class FROM stats_daily WHERE day_ms < ? LIMIT ?)`},
	{stmt: `DELETE FROM runs WHERE id IN (SELECT id FROM runs WHERE COALESCE(ended_ms, heartbeat_ms) < ? LIMIT ?)`},
	{stmt: `DELETE FROM lost WHERE id IN (SELECT id FROM lost WHERE to_ms < ? LIMIT ?)`},
}

// Prune deletes what is older than the retention, in bounded batches, and
// returns how many rows it deleted. The daily rollup keeps the day the
// horizon falls in.
func (s *Store) Prune(ctx context.Context) (int64, error) {
	horizon := ms(s.clock().Add(-s.retention))
	var total int64
	for _, p := range prunes {
		h := horizon
		if p.byDay {
			h = dayOf(horizon)
		}
		for {
			res, err := s.db.ExecContext(ctx, s.q(p.stmt), h, pruneBatch)
			if err != nil {
				return total, fmt.Errorf("task history store %s: prune: %w", s.name, err)
			}
			n, _ := res.RowsAffected()
			total += n
			if n < pruneBatch {
				break
			}
			select {
			case <-ctx.Done():
				return total, ctx.Err()
			case <-time.After(10 * time.Millisecond): // let the recorder's writes in
			}
		}
	}
	return total, nil
}
