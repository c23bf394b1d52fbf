package handlers

import (
	"time"

	"github.com/labstack/echo/v4"

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
