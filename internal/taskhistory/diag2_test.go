package taskhistory

import (
	"context"
	"os"
	"testing"
	"time"
)

func TestDiag2(t *testing.T) {
	path := os.Getenv("DIAG_DB")
	if path == "" {
		t.Skip()
	}
	s := openSQLite(t, path)
	var last int64
	s.db.QueryRow(`SELECT MAX(heartbeat_ms) FROM runs`).Scan(&last)
	now := fromMS(last)
	get := func(team, class string) *GroupStats { return &GroupStats{} }
	ctx := context.Background()
	for i := range 5 {
		end := now.Add(-time.Duration(i*7) * time.Minute)
		w := LiveWindow(end.Add(-30*24*time.Hour), end)
		from, to := ceilMS(w.From), ceilMS(w.To)
		d0, d1 := ceilDay(from), dayOf(to)
		add := func(teamClass, facts) {}
		t0 := time.Now()
		s.readRollup(ctx, dayMS, d0, d1, add)
		t1 := time.Now()
		h0, h1 := ceilTo(from, hourMS), floorTo(d0, hourMS)
		s.readRollup(ctx, hourMS, h0, h1, add)
		s.readRollup(ctx, hourMS, d1, floorTo(to, hourMS), add)
		t2 := time.Now()
		s.rawStats(ctx, span{from, h0}, get)
		s.rawStats(ctx, span{floorTo(to, hourMS), to}, get)
		t3 := time.Now()
		s.spanningRuns(ctx, span{from, to}, get)
		t4 := time.Now()
		s.gaps(ctx, s.db, w, now)
		t5 := time.Now()
		t.Logf("days %v hours %v raw %v spanning %v gaps %v", t1.Sub(t0), t2.Sub(t1), t3.Sub(t2), t4.Sub(t3), t5.Sub(t4))
	}
}
