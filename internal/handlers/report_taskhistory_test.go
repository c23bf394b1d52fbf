package handlers

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openquota/console/internal/taskhistory"
)

func TestMissingNotes(t *testing.T) {
	day := func(d int) time.Time { return time.Date(2026, 11, d, 0, 0, 0, 0, time.UTC) }
	whole := func(d int) taskhistory.UsageDay {
		return taskhistory.UsageDay{Day: day(d), Missing: []taskhistory.Period{{From: day(d), To: day(d + 1)}}}
	}
	part := func(d int, from, to time.Duration) taskhistory.UsageDay {
		return taskhistory.UsageDay{Day: day(d), Missing: []taskhistory.Period{{From: day(d).Add(from), To: day(d).Add(to)}}}
	}
	recorded := func(d int) taskhistory.UsageDay { return taskhistory.UsageDay{Day: day(d)} }
	for _, tc := range []struct {
		name string
		days []taskhistory.UsageDay
		want []string
	}{
		{"all recorded", []taskhistory.UsageDay{recorded(1), recorded(2)}, nil},
		{"a run of unrecorded days, then the day the recorder started",
			[]taskhistory.UsageDay{whole(17), whole(18), whole(19), part(20, 0, 16*time.Hour+13*time.Minute)},
			[]string{
				"2026-11-17 to 2026-11-19: no record; those days' figures leave them out.",
				"2026-11-20: no record 00:00–16:13 UTC; that day's figures leave it out.",
			}},
		{"one unrecorded day alone", []taskhistory.UsageDay{recorded(1), whole(2), recorded(3)},
			[]string{"2026-11-02: no record; that day's figures leave it out."}},
		{"two runs apart", []taskhistory.UsageDay{whole(1), whole(2), recorded(3), whole(4), whole(5)},
			[]string{
				"2026-11-01 to 2026-11-02: no record; those days' figures leave them out.",
				"2026-11-04 to 2026-11-05: no record; those days' figures leave them out.",
			}},
		{"a part of a day ends a run", []taskhistory.UsageDay{whole(1), part(2, 22*time.Hour, 24*time.Hour), whole(3)},
			[]string{
				"2026-11-01: no record; that day's figures leave it out.",
				"2026-11-02: no record 22:00–24:00 UTC; that day's figures leave it out.",
				"2026-11-03: no record; that day's figures leave it out.",
			}},
		{"short periods to the second, with their sum", []taskhistory.UsageDay{{Day: day(6), Missing: []taskhistory.Period{
			{From: day(6).Add(time.Hour), To: day(6).Add(2 * time.Hour)}, {From: day(6).Add(2*time.Hour + time.Minute), To: day(6).Add(2*time.Hour + time.Minute + time.Second)}}}},
			[]string{"2026-11-06: no record 01:00–02:00, 02:01:00–02:01:01 UTC (1h 00m in all); that day's figures leave it out."}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, missingNotes(tc.days)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// The report's charts draw a line per team, the five that used the most
// first, and sum the others in one line; a day without a team's record is 0.
func TestDailySeriesTopTeamsAndTheRest(t *testing.T) {
	d1 := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	d2 := d1.AddDate(0, 0, 1)
	var rows []taskhistory.UsageRow
	for i, team := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		rows = append(rows, taskhistory.UsageRow{Day: d1, Team: team, InstanceType: "ml.g5.2xlarge",
			GPU: taskhistory.ResourceHours{Used: float64(10 - i), Borrowed: 1}})
	}
	rows = append(rows, taskhistory.UsageRow{Day: d2, Team: "a", InstanceType: "ml.p5.48xlarge", GPU: taskhistory.ResourceHours{Used: 2}},
		taskhistory.UsageRow{Day: d2, Team: "a", InstanceType: "ml.g5.2xlarge", GPU: taskhistory.ResourceHours{Used: 3}})
	used, borrowed := dailySeries(rows, func(r taskhistory.UsageRow) taskhistory.ResourceHours { return r.GPU })
	var names []string
	for _, s := range used {
		names = append(names, s.Name)
	}
	if want := []string{"a", "b", "c", "d", "e", "2 other teams"}; !slices.Equal(names, want) {
		t.Fatalf("series %v, want %v", names, want)
	}
	if a := used[0].Points; len(a) != 2 || a[0].V != 10 || a[1].V != 5 || !a[1].T.Equal(d2) {
		t.Errorf("team a used %v, want 10 on the first day and 2+3 on the second", a)
	}
	if b := used[1].Points; len(b) != 2 || b[1].V != 0 {
		t.Errorf("team b used %v, want 0 on the day it has no record", b)
	}
	if rest := used[5].Points; rest[0].V != 5+4 {
		t.Errorf("other teams used %v, want 9 (f and g) on the first day", rest)
	}
	if rest := borrowed[5].Points; rest[0].V != 2 {
		t.Errorf("other teams borrowed %v, want 2 on the first day", rest)
	}
	if u, b := dailySeries(nil, nil); u != nil || b != nil {
		t.Errorf("no rows: %v %v, want no series", u, b)
	}
}
