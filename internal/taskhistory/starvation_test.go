package taskhistory

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// A CSV export of the per-task report hands every row to a writer that
// sends it to the client; a client that stops reading stops the writer. As
// many stalled exports as the store has connections must leave the pages'
// queries and the recorder's writes working: the report holds no connection
// while its rows are being written.
func TestStalledReportReadersStarveNeitherPagesNorTheRecorder(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second)
	forEachStore(t, now, func(t *testing.T, s *Store) {
		created := now.Add(-time.Hour)
		var lives [][]stateAt
		for i := range 1200 { // several pages of the report
			w := newWL("stall", fmt.Sprintf("task-%04d", i), created).class("low", 10).pods(1, 1)
			lives = append(lives, []stateAt{{wl: w.pending(created).snap()}})
		}
		record(t, s, lives...)
		covered(t, s, now.Add(-2*time.Hour), now)

		// More stalled exports than either store has connections.
		const stalled = 10
		stall := make(chan struct{})
		var wg sync.WaitGroup
		defer wg.Wait()
		defer close(stall)
		started := make(chan struct{}, stalled)
		for range stalled {
			wg.Add(1)
			go func() {
				defer wg.Done()
				first := true
				_, _, _ = s.TaskReport(context.Background(), ReportQuery{Window: Window{From: now.Add(-24 * time.Hour), To: now.Add(time.Hour)}},
					func(ReportRow) error {
						if first {
							first = false
							started <- struct{}{}
							<-stall // the client stopped reading
						}
						return nil
					})
			}()
		}
		n := 0
		timeout := time.After(5 * time.Second)
	waiting:
		for n < stalled {
			select {
			case <-started:
				n++
			case <-timeout:
				break waiting
			}
		}
		t.Logf("%d of %d exports are writing their first row to a client that stopped reading", n, stalled)

		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := s.Preemptions(ctx, PreemptionQuery{Window: Window{From: now.Add(-24 * time.Hour), To: now}}); err != nil {
			t.Errorf("the preemption page's query while exports stall: %v", err)
		}
		ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		w := newWL("stall", "recorded-meanwhile", now).class("low", 10).pods(1, 1)
		c, _ := Diff(nil, w.pending(now).snap(), teamPrefix)
		if _, err := s.Write(ctx, Batch{Changes: []Change{c}}); err != nil {
			t.Errorf("the recorder's write while exports stall: %v", err)
		}
	})
}
