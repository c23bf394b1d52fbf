package taskhistory

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// pruneBatch bounds one delete, so that pruning never holds the database
// (SQLite's single writer above all) for long.
const pruneBatch = 1000

// prunes delete the rows of the other tables older than the horizon (a
// Unix ms), pruneBatch at a time.
var prunes = []string{
	`DELETE FROM quotas WHERE (cluster_queue, flavor, resource, from_ms) IN (SELECT cluster_queue, flavor, resource, from_ms FROM quotas WHERE to_ms < ? LIMIT ?)`,
	`DELETE FROM stats_rollup WHERE (span_ms, start_ms) IN (SELECT span_ms, start_ms FROM stats_rollup WHERE start_ms + span_ms <= ? LIMIT ?)`,
	`DELETE FROM runs WHERE id IN (SELECT id FROM runs WHERE COALESCE(ended_ms, heartbeat_ms) < ? LIMIT ?)`,
	`DELETE FROM lost WHERE id IN (SELECT id FROM lost WHERE to_ms < ? LIMIT ?)`,
}

// Prune deletes what is older than the retention, in bounded batches, and
// returns how many rows it deleted. A task goes, with its events,
// admissions and preemptions, once it ended before the horizon; tasks
// still open stay whatever their age.
func (s *Store) Prune(ctx context.Context) (int64, error) {
	horizon := ms(s.clock().Add(-s.retention))
	fail := func(err error) error { return fmt.Errorf("task history store %s: prune: %w", s.name, err) }
	var total int64
	pause := func() error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond): // let the recorder's writes in
			return nil
		}
	}
	for {
		rows, err := s.rec.QueryContext(ctx, s.q(`SELECT uid FROM tasks WHERE ended_ms < ? LIMIT ?`), horizon, pruneBatch)
		if err != nil {
			return total, fail(err)
		}
		var uids []any
		for rows.Next() {
			var uid string
			if err := rows.Scan(&uid); err != nil {
				rows.Close()
				return total, fail(err)
			}
			uids = append(uids, uid)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return total, fail(err)
		}
		if len(uids) == 0 {
			break
		}
		in := "(" + strings.TrimSuffix(strings.Repeat("?, ", len(uids)), ", ") + ")"
		err = s.inTx(ctx, func(t *txn) error {
			for _, table := range []string{"events", "admissions", "preemptions", "tasks"} {
				n, err := t.exec(`DELETE FROM `+table+` WHERE uid IN `+in, uids...)
				if err != nil {
					return err
				}
				total += n
			}
			return nil
		})
		if err != nil {
			return total, fail(err)
		}
		if err := pause(); err != nil {
			return total, err
		}
	}
	for _, stmt := range prunes {
		for {
			res, err := s.rec.ExecContext(ctx, s.q(stmt), horizon, pruneBatch)
			if err != nil {
				return total, fail(err)
			}
			n, _ := res.RowsAffected()
			total += n
			if n < pruneBatch {
				break
			}
			if err := pause(); err != nil {
				return total, err
			}
		}
	}
	return total, nil
}
