package handlers

import (
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
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, missingNotes(tc.days)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
