package main

import (
	"fmt"
	"io"
	"math"
	"sort"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// durationMetric is the console's request-duration histogram, by route.
const durationMetric = "quota_console_http_request_duration_seconds"

// histogram is one cumulative Prometheus histogram.
type histogram struct {
	Bounds []float64 // bucket upper bounds, ascending; the last is +Inf
	Counts []float64 // cumulative counts per bucket
	Count  float64
	Sum    float64
}

// routeHistograms is the request-duration histogram of each route.
type routeHistograms map[string]*histogram

// parseRouteHistograms reads one histogram family from a /metrics answer
// (text format), adding up the series of each route (other labels, such as
// method or code, are merged).
func parseRouteHistograms(r io.Reader, name string) (routeHistograms, error) {
	families, err := parseFamilies(r)
	if err != nil {
		return nil, err
	}
	return histogramsBy(families, name, "route"), nil
}

func parseFamilies(r io.Reader) (map[string]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("reading /metrics: %w", err)
	}
	return families, nil
}

// histogramsBy is the histogram family name by the value of label (""
// for a family without it).
func histogramsBy(families map[string]*dto.MetricFamily, name, label string) routeHistograms {
	out := routeHistograms{}
	fam := families[name]
	if fam == nil {
		return out
	}
	for _, m := range fam.GetMetric() {
		hm := m.GetHistogram()
		if hm == nil {
			continue
		}
		route := ""
		for _, l := range m.GetLabel() {
			if l.GetName() == label {
				route = l.GetValue()
			}
		}
		h := &histogram{Count: float64(hm.GetSampleCount()), Sum: hm.GetSampleSum()}
		for _, b := range hm.GetBucket() {
			h.Bounds = append(h.Bounds, b.GetUpperBound())
			h.Counts = append(h.Counts, float64(b.GetCumulativeCount()))
		}
		if len(h.Bounds) == 0 || !math.IsInf(h.Bounds[len(h.Bounds)-1], 1) {
			h.Bounds = append(h.Bounds, math.Inf(1))
			h.Counts = append(h.Counts, h.Count)
		}
		if prev := out[route]; prev != nil {
			h = prev.plus(h, 1)
		}
		out[route] = h
	}
	return out
}

// plus returns h + sign×o; both must have the same buckets (a console
// never changes them while running).
func (h *histogram) plus(o *histogram, sign float64) *histogram {
	out := &histogram{Bounds: h.Bounds, Counts: make([]float64, len(h.Counts)), Count: h.Count + sign*o.Count, Sum: h.Sum + sign*o.Sum}
	copy(out.Counts, h.Counts)
	if len(o.Bounds) != len(h.Bounds) {
		return out
	}
	for i := range out.Counts {
		out.Counts[i] += sign * o.Counts[i]
	}
	return out
}

// since returns what was observed between before and h.
func (h routeHistograms) since(before routeHistograms) routeHistograms {
	out := routeHistograms{}
	for route, after := range h {
		d := after
		if b := before[route]; b != nil {
			d = after.plus(b, -1)
		}
		if d.Count > 0 {
			out[route] = d
		}
	}
	return out
}

// pagesOnly drops the routes that are not pages: the event stream, health
// checks and /metrics itself.
func (h routeHistograms) pagesOnly() routeHistograms {
	out := routeHistograms{}
	for route, hist := range h {
		switch route {
		case "/events", "/metrics", "/healthz", "/readyz", "/static/*", "/static*":
			continue
		}
		out[route] = hist
	}
	return out
}

// routes lists the routes, most requests first.
func (h routeHistograms) routes() []string {
	out := make([]string, 0, len(h))
	for r := range h {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		if h[out[i]].Count != h[out[j]].Count {
			return h[out[i]].Count > h[out[j]].Count
		}
		return out[i] < out[j]
	})
	return out
}

// merged adds up every route.
func (h routeHistograms) merged() *histogram {
	var out *histogram
	for _, r := range h.routes() {
		if out == nil {
			out = h[r]
			continue
		}
		out = out.plus(h[r], 1)
	}
	return out
}

// quantile estimates the q-quantile as Prometheus's histogram_quantile does
// (linear within the bucket). above is true when it falls in the +Inf
// bucket: the answer is then the largest finite bound, a lower limit.
func (h *histogram) quantile(q float64) (seconds float64, above bool) {
	if h == nil || h.Count <= 0 || len(h.Bounds) == 0 {
		return math.NaN(), false
	}
	rank := q * h.Count
	for i, cum := range h.Counts {
		if cum < rank {
			continue
		}
		if math.IsInf(h.Bounds[i], 1) {
			if i == 0 {
				return math.NaN(), true
			}
			return h.Bounds[i-1], true
		}
		lower, prev := 0.0, 0.0
		if i > 0 {
			lower, prev = h.Bounds[i-1], h.Counts[i-1]
		}
		inBucket := cum - prev
		if inBucket <= 0 {
			return h.Bounds[i], false
		}
		return lower + (h.Bounds[i]-lower)*(rank-prev)/inBucket, false
	}
	return h.Bounds[len(h.Bounds)-1], false
}
