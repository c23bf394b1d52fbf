package handlers

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/metrics"
	"github.com/openquota/console/web/templates"
)

const dateLayout = "2006-01-02"

// usageReport shows (or exports) GPU-hours per team and day for a date range.
func (d Deps) usageReport(c echo.Context) error {
	today := time.Now().UTC().Truncate(24 * time.Hour)
	view := templates.ReportView{
		Page: templates.Page{Title: "Usage report", Active: "reports", Problem: d.problem()},
		From: c.QueryParam("from"), To: c.QueryParam("to"),
	}
	if view.From == "" {
		view.From = today.AddDate(0, 0, -6).Format(dateLayout)
	}
	if view.To == "" {
		view.To = today.Format(dateLayout)
	}
	from, errFrom := time.Parse(dateLayout, view.From)
	to, errTo := time.Parse(dateLayout, view.To)
	switch {
	case errFrom != nil:
		view.FromError = "Enter a date as YYYY-MM-DD."
	case errTo != nil:
		view.ToError = "Enter a date as YYYY-MM-DD."
	case to.Before(from):
		view.ToError = "The end date is before the start date."
	case to.Sub(from) > 366*24*time.Hour:
		view.ToError = "Choose at most a year."
	}
	view.CSVHref = csvHref(c, "", "from", "to")
	if view.FromError != "" || view.ToError != "" {
		return render(c, http.StatusUnprocessableEntity, templates.Report(view))
	}
	var rows []metrics.UsageRow
	var err error
	if d.Reports == nil {
		view.Unavailable = "The usage report needs Prometheus: start the console with --prometheus-url."
	} else if rows, err = d.Reports.UsageReport(c.Request().Context(), d.Settings, from, to); err != nil {
		d.Log.Warn("usage report", "err", err)
		view.Unavailable = "Prometheus is unavailable, so the usage report cannot be computed now."
	}
	if visible, _ := d.scopeOf(c); !visible.all {
		mine := rows[:0]
		for _, r := range rows {
			if visible.sees(r.Team) {
				mine = append(mine, r)
			}
		}
		rows = mine
	}
	if _, ok := csvTable(c); ok {
		if view.Unavailable != "" {
			return echo.NewHTTPError(http.StatusServiceUnavailable, view.Unavailable)
		}
		return reportCSV(c, rows)
	}
	for _, r := range rows {
		row := templates.ReportRow{Day: r.Day.Format(dateLayout), Team: r.Team,
			Allocated: domain.FormatHours(r.GPUHoursAllocated), Used: domain.FormatHours(r.GPUHoursUsed),
			Borrowed: domain.FormatHours(r.GPUHoursBorrowed), Lent: domain.FormatHours(r.GPUHoursLent), HardwareUtil: "—"}
		if r.HardwareUtilKnown {
			row.HardwareUtil = domain.FormatPercentTenths(r.AvgHardwareUtil) + " %"
		}
		view.Rows = append(view.Rows, row)
	}
	return render(c, http.StatusOK, templates.Report(view))
}

func reportCSV(c echo.Context, rows []metrics.UsageRow) error {
	s, err := startCSV(c, "gpu-usage-report.csv", "Day (UTC)", "Team", "GPU-hours allocated (h)", "GPU-hours used by tasks (h)",
		"GPU-hours borrowed (h)", "GPU-hours lent (h)", "Average hardware GPU utilization (%)")
	if err != nil {
		return err
	}
	for _, r := range rows {
		util := ""
		if r.HardwareUtilKnown {
			util = domain.FormatPercentTenths(r.AvgHardwareUtil)
		}
		if err := s.Row(r.Day.Format(dateLayout), r.Team, domain.FormatHours(r.GPUHoursAllocated), domain.FormatHours(r.GPUHoursUsed),
			domain.FormatHours(r.GPUHoursBorrowed), domain.FormatHours(r.GPUHoursLent), util); err != nil {
			return err
		}
	}
	return s.Close()
}
