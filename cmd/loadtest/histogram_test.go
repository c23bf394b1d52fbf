package main

import (
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const metricsBefore = `# HELP quota_console_http_request_duration_seconds HTTP request latency by route.
# TYPE quota_console_http_request_duration_seconds histogram
quota_console_http_request_duration_seconds_bucket{route="/tasks",le="0.01"} 10
quota_console_http_request_duration_seconds_bucket{route="/tasks",le="0.1"} 10
quota_console_http_request_duration_seconds_bucket{route="/tasks",le="1"} 10
quota_console_http_request_duration_seconds_bucket{route="/tasks",le="+Inf"} 10
quota_console_http_request_duration_seconds_sum{route="/tasks"} 0.05
quota_console_http_request_duration_seconds_count{route="/tasks"} 10
quota_console_http_request_duration_seconds_bucket{route="/events",le="0.01"} 0
quota_console_http_request_duration_seconds_bucket{route="/events",le="0.1"} 0
quota_console_http_request_duration_seconds_bucket{route="/events",le="1"} 0
quota_console_http_request_duration_seconds_bucket{route="/events",le="+Inf"} 1
quota_console_http_request_duration_seconds_sum{route="/events"} 60
quota_console_http_request_duration_seconds_count{route="/events"} 1
# TYPE go_goroutines gauge
go_goroutines 12
`

// After: /tasks got 100 more requests (50 under 10 ms, 40 under 100 ms,
// 10 under 1 s), with a second series of the same route (another label).
const metricsAfter = `# TYPE quota_console_http_request_duration_seconds histogram
quota_console_http_request_duration_seconds_bucket{route="/tasks",le="0.01"} 50
quota_console_http_request_duration_seconds_bucket{route="/tasks",le="0.1"} 80
quota_console_http_request_duration_seconds_bucket{route="/tasks",le="1"} 90
quota_console_http_request_duration_seconds_bucket{route="/tasks",le="+Inf"} 90
quota_console_http_request_duration_seconds_sum{route="/tasks"} 2.05
quota_console_http_request_duration_seconds_count{route="/tasks"} 90
quota_console_http_request_duration_seconds_bucket{route="/tasks",code="500",le="0.01"} 10
quota_console_http_request_duration_seconds_bucket{route="/tasks",code="500",le="0.1"} 20
quota_console_http_request_duration_seconds_bucket{route="/tasks",code="500",le="1"} 20
quota_console_http_request_duration_seconds_bucket{route="/tasks",code="500",le="+Inf"} 20
quota_console_http_request_duration_seconds_sum{route="/tasks",code="500"} 1
quota_console_http_request_duration_seconds_count{route="/tasks",code="500"} 20
quota_console_http_request_duration_seconds_bucket{route="/events",le="0.01"} 0
quota_console_http_request_duration_seconds_bucket{route="/events",le="0.1"} 0
quota_console_http_request_duration_seconds_bucket{route="/events",le="1"} 0
quota_console_http_request_duration_seconds_bucket{route="/events",le="+Inf"} 5
quota_console_http_request_duration_seconds_sum{route="/events"} 300
quota_console_http_request_duration_seconds_count{route="/events"} 5
`

func TestServerTimeFromHistogramDeltas(t *testing.T) {
	before, err := parseRouteHistograms(strings.NewReader(metricsBefore), durationMetric)
	if err != nil {
		t.Fatal(err)
	}
	after, err := parseRouteHistograms(strings.NewReader(metricsAfter), durationMetric)
	if err != nil {
		t.Fatal(err)
	}
	delta := after.since(before)
	if diff := cmp.Diff([]string{"/tasks", "/events"}, delta.routes()); diff != "" {
		t.Errorf("routes (-want +got):\n%s", diff)
	}
	got := serverTimeOf(delta.pagesOnly())
	// 100 requests: 50 ≤ 10 ms, 40 in (10 ms, 100 ms], 10 in (100 ms, 1 s].
	// p50 is the 50th: the top of the first bucket; p99 the 99th: 9/10 into
	// the last finite bucket.
	want := serverTime{Routes: []string{"/tasks"}, Count: 100, P50Seconds: 0.01, P99Seconds: 0.1 + 0.9*0.9, MeanSeconds: (2.05 + 1 - 0.05) / 100}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b float64) bool { return math.Abs(a-b) < 1e-9 })); diff != "" {
		t.Errorf("server time (-want +got):\n%s", diff)
	}
}

func TestQuantile(t *testing.T) {
	h := &histogram{Bounds: []float64{0.1, 1, math.Inf(1)}, Counts: []float64{0, 4, 10}, Count: 10}
	for _, tc := range []struct {
		q         float64
		want      float64
		wantAbove bool
	}{
		{0.2, 0.1 + 0.9*0.5, false}, // rank 2 of the 4 in (0.1, 1]
		{0.4, 1, false},
		{0.5, 1, true}, // beyond the largest finite bucket: a lower limit
	} {
		got, above := h.quantile(tc.q)
		if math.Abs(got-tc.want) > 1e-9 || above != tc.wantAbove {
			t.Errorf("quantile(%v) = %v, %v; want %v, %v", tc.q, got, above, tc.want, tc.wantAbove)
		}
	}
	if v, _ := (&histogram{}).quantile(0.5); !math.IsNaN(v) {
		t.Errorf("empty histogram: quantile = %v, want NaN", v)
	}
	if st := serverTimeOf(routeHistograms{}); st.Unavailable == "" {
		t.Error("no requests: serverTimeOf should say the figure is unavailable")
	}
}

func TestMissingMetricIsEmptyNotAnError(t *testing.T) {
	h, err := parseRouteHistograms(strings.NewReader("# TYPE go_goroutines gauge\ngo_goroutines 3\n"), durationMetric)
	if err != nil || len(h) != 0 {
		t.Errorf("got %v, %v; want no routes and no error", h, err)
	}
	if _, err := parseRouteHistograms(strings.NewReader("not metrics {{{\n"), durationMetric); err == nil {
		t.Error("garbage: want an error")
	}
}
