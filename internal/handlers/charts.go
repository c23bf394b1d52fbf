package handlers

import (
	"context"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/openquota/console/internal/memo"
	"github.com/openquota/console/internal/metrics"
	"github.com/openquota/console/web/templates"
)

// chartRange reads the page's range choice ("1h", "6h", "24h", "7d").
func chartRange(c echo.Context, now time.Time) (string, metrics.Range) {
	name := c.QueryParam("range")
	r, ok := metrics.RangeFor(name, now)
	if !ok {
		name = "6h"
		r, _ = metrics.RangeFor(name, now)
	}
	return name, r
}

func rangeChoices(base, current string) []templates.ResourceChoice {
	var out []templates.ResourceChoice
	for _, n := range metrics.RangeNames() {
		out = append(out, templates.ResourceChoice{Key: n, Label: n, Href: base + "range=" + n, Current: n == current})
	}
	return out
}

// chart turns Prometheus series into a chart model; unavailable explains a
// Prometheus failure instead of drawing.
func chart(id, title, unit string, yMax float64, unavailable string, series ...metrics.Series) templates.ChartModel {
	m := templates.ChartModel{ID: id, Title: title, Unit: unit, YMax: yMax, Unavailable: unavailable}
	for _, s := range series {
		cs := templates.ChartSeries{Name: s.Name}
		for _, p := range s.Points {
			cs.Points = append(cs.Points, templates.ChartPoint{T: p.T, V: p.V})
		}
		m.Series = append(m.Series, cs)
	}
	return m
}

// chartsEvery is how often the charts' series are asked again: pages show
// the series they have at once and a newer one from the next request on,
// never waiting for Prometheus once a range was asked.
const chartsEvery = 30 * time.Second

// firstAnswerGrace is how long a page waits for a source's first answer
// (Prometheus, the task history) before it shows the part as coming: a
// source that is down fails within it.
const firstAnswerGrace = 5 * time.Millisecond

// chartFeeds keep the charts' series by range name (the range ends now,
// so its times move), asked again in the background.
type chartFeeds struct {
	cluster clusterCharts
	team    teamCharts
	c       *memo.Memo[metrics.Charts]
	t       *memo.Memo[metrics.TeamCharts]
}

func newChartFeeds(p Prometheus) *chartFeeds {
	return &chartFeeds{cluster: p, team: p,
		c: &memo.Memo[metrics.Charts]{TTL: chartsEvery, FailureTTL: 5 * time.Second, Max: 16},
		t: &memo.Memo[metrics.TeamCharts]{TTL: chartsEvery, FailureTTL: 5 * time.Second, Max: 1024}}
}

// clusterSeries are the cluster's utilization series of the named range.
func (f *chartFeeds) clusterSeries(ctx context.Context, rangeName string, vcpuCapacity float64) (metrics.Charts, error) {
	return f.c.Recent(ctx, rangeName+"\x00"+strconv.FormatFloat(vcpuCapacity, 'g', -1, 64), func(ctx context.Context) (metrics.Charts, error) {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		r, _ := metrics.RangeFor(rangeName, time.Now())
		return f.cluster.ClusterUtilization(ctx, r, vcpuCapacity)
	})
}

// teamSeries are a team's series of the named range, as they are now: a
// page never waits for Prometheus; pending is true while the first answer
// is asked (the page fills the charts in when it comes).
func (f *chartFeeds) teamSeries(ctx context.Context, queue metrics.TeamQueue, rangeName string) (charts metrics.TeamCharts, pending bool, err error) {
	return f.t.Peek(ctx, queue.Key()+"\x00"+rangeName, firstAnswerGrace, func(ctx context.Context) (metrics.TeamCharts, error) {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		r, _ := metrics.RangeFor(rangeName, time.Now())
		return f.team.TeamSeries(ctx, queue, r)
	})
}
