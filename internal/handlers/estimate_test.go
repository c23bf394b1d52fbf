package handlers

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openquota/console/internal/taskhistory"
)

func TestEstimateWords(t *testing.T) {
	day := 24 * time.Hour
	for _, tc := range []struct {
		name         string
		ahead        int
		rate         taskhistory.AdmissionRate
		short, basis string
	}{
		{"the issue's example", 3, taskhistory.AdmissionRate{Tasks: 192, Recorded: day}, "about 30 min",
			"about 30 min: 3 ahead, 8.0 admitted per hour over the last day"},
		{"next in line", 0, taskhistory.AdmissionRate{Tasks: 48, Recorded: day}, "about 30 min",
			"about 30 min: 0 ahead, 2.0 admitted per hour over the last day"},
		{"hours", 40, taskhistory.AdmissionRate{Tasks: 24, Recorded: day}, "about 41 h",
			"about 41 h: 40 ahead, 1.0 admitted per hour over the last day"},
		{"days", 99, taskhistory.AdmissionRate{Tasks: 12, Recorded: day}, "about 8 days",
			"about 8 days: 99 ahead, 0.50 admitted per hour over the last day"},
		{"no admissions", 2, taskhistory.AdmissionRate{Recorded: day}, "unknown",
			"unknown: 2 ahead, no admissions recorded over the last day"},
		{"too little record", 2, taskhistory.AdmissionRate{Tasks: 5, Recorded: 5 * time.Minute}, "unknown",
			"unknown: 2 ahead; the task history has recorded only 5 min of the last day"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			short, basis := estimateWords(taskhistory.EstimateWait(tc.ahead, tc.rate), itoa(int64(tc.ahead))+" ahead")
			if diff := cmp.Diff([]string{tc.short, tc.basis}, []string{short, basis}); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
