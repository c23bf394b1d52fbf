package domain

import "testing"

func TestFormatPercent(t *testing.T) {
	for _, tc := range []struct {
		part, whole int64
		want        string
	}{
		{1, 8, "13"}, // 12.5: halves round up
		{3, 8, "38"}, // 37.5
		{2, 3, "67"},
		{0, 5, "0"},
		{16, 12, "133"},
	} {
		if got, ok := FormatPercent(tc.part, tc.whole); !ok || got != tc.want {
			t.Errorf("FormatPercent(%d, %d) = %q, want %q", tc.part, tc.whole, got, tc.want)
		}
	}
	if _, ok := FormatPercent(1, 0); ok {
		t.Error("a percentage of nothing is shown")
	}
}
