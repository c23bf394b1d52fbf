package taskhistory

import (
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestWaitEstimateWords(t *testing.T) {
	day := 24 * time.Hour
	for _, tc := range []struct {
		name         string
		ahead        int
		rate         AdmissionRate
		short, basis string
	}{
		{"the issue's example", 3, AdmissionRate{Tasks: 192, Recorded: day}, "about 30 min",
			"about 30 min: 3 ahead, 8.0 admitted per hour over the last day"},
		{"next in line", 0, AdmissionRate{Tasks: 48, Recorded: day}, "about 30 min",
			"about 30 min: 0 ahead, 2.0 admitted per hour over the last day"},
		{"hours", 40, AdmissionRate{Tasks: 24, Recorded: day}, "about 41 h",
			"about 41 h: 40 ahead, 1.0 admitted per hour over the last day"},
		{"days", 99, AdmissionRate{Tasks: 12, Recorded: day}, "about 8 days",
			"about 8 days: 99 ahead, 0.50 admitted per hour over the last day"},
		{"no admissions", 2, AdmissionRate{Recorded: day}, "unknown",
			"unknown: 2 ahead, no admissions recorded over the last day"},
		{"too little record", 2, AdmissionRate{Tasks: 5, Recorded: 5 * time.Minute}, "unknown",
			"unknown: 2 ahead; the task history has recorded only 5 min of the last day"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			short, basis := EstimateWait(tc.ahead, tc.rate).Words(strconv.Itoa(tc.ahead) + " ahead")
			if diff := cmp.Diff([]string{tc.short, tc.basis}, []string{short, basis}); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
