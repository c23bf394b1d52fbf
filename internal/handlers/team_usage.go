package handlers

import (
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/openquota/console/internal/metrics"
	"github.com/openquota/console/web/templates"
)

func (d Deps) teamUsage(c echo.Context) error {
	snap := d.Live.Snapshot()
	name := c.Param("team")
	util, note := d.hardwareUtil(c.Request().Context())
	var found bool
	var row templates.UsageRow
	for _, u := range snap.Teams {
		if u.Team == name {
			found = true
			row = usageRowOf(u, resourceOf("gpu"), util, false)
			if _, ok := util[u.Team]; !ok && note != "" {
				row.HardwareUtil = "unavailable"
			}
		}
	}
	if !found {
		return echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("There is no team %q.", name))
	}
	rangeName, r := chartRange(c, time.Now())
	view := templates.TeamUsageView{
		Page:   templates.Page{Title: "Team " + name, Active: "usage", Problem: d.problem(), Snapshot: snap.Version},
		Row:    row,
		Ranges: rangeChoices("/usage/"+url.PathEscape(name)+"?", rangeName),
		Edit:   teamURL(name, "edit"),
	}
	var tc metrics.TeamCharts
	var err error
	if d.Prom != nil {
		tc, err = d.Prom.TeamSeries(c.Request().Context(), d.Settings, name, r)
	}
	unavailable := d.promNote(err)
	view.Charts = []templates.ChartModel{
		chart("usage-vs-quota", "GPUs in use vs quota", "GPUs", 0, unavailable, tc.Quota, tc.InUse),
		chart("borrowed", "Borrowed GPUs", "GPUs", 0, unavailable, tc.Borrowed),
		chart("utilization", "Hardware GPU utilization", "%", 100, unavailable, tc.Utilization),
	}
	return render(c, http.StatusOK, templates.TeamUsage(view))
}
