package main

import (
	"strings"
	"testing"
	"time"
)

func TestLatencyQuantileCountsMissesAsLongerThanTheTimeout(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var out []time.Duration
		for _, x := range v {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	for _, tc := range []struct {
		name       string
		lat        []time.Duration
		missed     int
		q          float64
		want       float64
		wantBeyond bool
	}{
		{"no misses", ms(400, 100, 300, 200), 0, 0.5, 0.2, false},
		{"misses push the median up", ms(100, 200), 2, 0.5, 0.2, false},
		{"the p95 is a miss", ms(100, 200), 2, 0.95, 30, true},
		{"all missed", nil, 3, 0.5, 30, true},
		{"nothing to measure", nil, 0, 0.5, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, beyond := latencyQuantile(tc.lat, tc.missed, tc.q, 30*time.Second)
			if got != tc.want || beyond != tc.wantBeyond {
				t.Errorf("latencyQuantile = %v, %v; want %v, %v", got, beyond, tc.want, tc.wantBeyond)
			}
		})
	}
}

// A run's table must carry every figure the issue asks for, and say what
// is missing rather than print zeros.
func TestMarkdownShowsEveryFigure(t *testing.T) {
	idle, churn := 12.5, 30.0
	r := &result{Command: "bin/loadtest", Workloads: 50000, Teams: 200, CPUs: 2,
		Kubectl: &kubectlResult{Seconds: 40, Bytes: 95e6},
		Pages: []pageResult{{Page: "/tasks", Requests: 10, P50Seconds: 4.6, P99Seconds: 6.3, ReqPerSec: 6.4, KubectlRatio: 40 / 4.6,
			Server: serverTime{Count: 10, P99Seconds: 2.5, P99Above: true, MeanSeconds: 4.2}, ConsoleCores: 0.8, SandboxCores: 1.4}},
		CSV: &csvResult{Rows: 50000, Seconds: 0.5, RowsPerSec: 100000, RSSGrowthMiB: 12},
		Watch: &watchResult{Watchers: 100, Streams: 83, NoLiveParts: 17, Modes: map[string]int{modeRefetch: 83}, Probes: 300, CreatedPerSec: 5,
			All:   kindResult{Page: "all watchers whose page must change", Watchers: 83, Pairs: 100, P50Seconds: 18, P95Seconds: 30, P95Beyond: true, Missed: 10, WatchersMissing: 3},
			Kinds: []kindResult{{Page: "/", Watchers: 17}}, CPUPercent: 66},
		RSSIdleMiB: 420, RSSWatchersMiB: 616, RSSPeakMiB: 672, CPUIdlePercent: &idle, CPUChurnPercent: &churn,
		LoadAverage: map[string]string{"idle": "1.00 2.00 3.00"},
	}
	md := r.markdown()
	for _, want := range []string{
		"| `/tasks` | 4.60 s | 6.30 s | 6.4 | > 2.50 s (mean 4.20 s) | 9× | 0.80 / 1.40 |",
		"50000 rows", "100000 rows/s", "RSS +12 MiB",
		"kubectl way", "| 40.00 s |",
		"83 streams, 17 on pages without live parts, protocol: 83 refetch",
		"| all watchers whose page must change | 83 | 18.00 s | > 30.00 s (missed) | 10 of 100 (3 watchers) |",
		"| `/` | 17 | — | — | — (page shows no probe)",
		"| RSS (MiB) | 420 | — | 616 | 672 (VmHWM) |",
		"| CPU (% of a core) | 12.5 % | 30.0 % | 66 % |",
		"idle 1.00 2.00 3.00",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("table lacks %q:\n%s", want, md)
		}
	}
}

// The median push is what a browser parses for a typical change; a few
// large pushes (a page's first, the clock's) move the average, not it.
func TestMedianPushSize(t *testing.T) {
	for _, tc := range []struct {
		sizes []int
		want  int
	}{
		{nil, 0},
		{[]int{700}, 700},
		{[]int{900, 300_000, 800, 1000}, 900},
		{[]int{500, 400, 268_000}, 500},
	} {
		if got := medianSize(tc.sizes); got != tc.want {
			t.Errorf("medianSize(%v) = %d, want %d", tc.sizes, got, tc.want)
		}
	}
}
