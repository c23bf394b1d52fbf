package handlers

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openquota/console/internal/memo"
	"github.com/openquota/console/internal/taskhistory"
)

// daySummaries answer a summary per day asked, one row each, and count the
// days asked; gap is a day with a period of no record.
type daySummaries struct {
	gap   time.Time
	mu    sync.Mutex
	asked map[time.Time]int
}

func (d *daySummaries) UsageSummary(_ context.Context, w taskhistory.Window) (*taskhistory.UsageSummary, error) {
	d.mu.Lock()
	d.asked[w.From]++
	d.mu.Unlock()
	day := taskhistory.UsageDay{Day: w.From}
	if w.From.Equal(d.gap) {
		day.Missing = []taskhistory.Period{{From: w.From, To: w.From.Add(time.Hour)}}
	}
	return &taskhistory.UsageSummary{Rows: []taskhistory.UsageRow{{Day: w.From, Team: "team-000"}},
		Days: []taskhistory.UsageDay{day}, UpTo: w.To}, nil
}

func (d *daySummaries) times() map[time.Time]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[time.Time]int{}
	for k, v := range d.asked {
		out[k] = v
	}
	return out
}

// The usage report's figures of a closed day the history recorded whole
// never change: they are computed once and kept, and only the open day
// (and a day with periods of no record) is computed again.
func TestUsageSummaryKeepsClosedDays(t *testing.T) {
	today := time.Now().UTC().Truncate(24 * time.Hour)
	from := today.AddDate(0, 0, -6)
	src := &daySummaries{gap: today.AddDate(0, 0, -2), asked: map[time.Time]int{}}
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	u := &usageSummaries{taskHistory: src, slots: make(summarySlots, summaryConcurrency), closed: map[time.Time]*taskhistory.UsageSummary{},
		shared: &memo.Memo[*taskhistory.UsageSummary]{TTL: reportTTL, FailureTTL: taskHistoryTTL, Max: 64,
			Now: func() time.Time { return time.Unix(0, clock.Load()) }}}
	days := taskhistory.Window{From: from, To: today.AddDate(0, 0, 1)}

	sum, err := u.of(context.Background(), days)
	if err != nil {
		t.Fatal(err)
	}
	var got []time.Time
	for _, r := range sum.Rows {
		got = append(got, r.Day)
	}
	var want []time.Time
	once := map[time.Time]int{}
	for d := from; !d.After(today); d = d.AddDate(0, 0, 1) {
		want = append(want, d)
		once[d] = 1
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the summary's days (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(once, src.times()); diff != "" {
		t.Errorf("days asked (-want +got):\n%s", diff)
	}
	// Asked again while its days stay the same, the range is the summary
	// already joined: the same key and rows, nothing copied.
	same, err := u.of(context.Background(), days)
	if err != nil {
		t.Fatal(err)
	}
	if same.key != sum.key || len(same.Rows) != len(sum.Rows) || &same.Rows[0] != &sum.Rows[0] {
		t.Errorf("the same days were joined again: key %q and %q", sum.key, same.key)
	}

	// Later than the shared answers last: the open day and the day with a
	// gap are asked again, the closed days are not.
	clock.Add(int64(2 * reportTTL))
	if _, err := u.of(context.Background(), days); err != nil {
		t.Fatal(err)
	}
	again := map[time.Time]int{}
	for d, n := range once {
		again[d] = n
	}
	again[today], again[src.gap] = 2, 2
	if time.Since(today) < closedAfter { // yesterday is not closed yet
		again[today.AddDate(0, 0, -1)] = 2
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && cmp.Diff(again, src.times()) != "" {
		time.Sleep(10 * time.Millisecond) // stale answers are refreshed in the background
	}
	time.Sleep(50 * time.Millisecond)
	if diff := cmp.Diff(again, src.times()); diff != "" {
		t.Errorf("days asked after a while (-want +got):\n%s", diff)
	}
}
