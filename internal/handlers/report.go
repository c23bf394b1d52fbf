package handlers

import (
	"errors"
	"net/http"
	"time"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/metrics"
	"github.com/openquota/console/internal/taskhistory"
	"github.com/openquota/console/web/templates"
)

const dateLayout = "2006-01-02"

// Report sources: the task history (the default when the console has
// one) and Prometheus.
const (
	sourceTaskHistory = "history"
	sourcePrometheus  = "prometheus"
)

// reportFilter is the usage report's query, as typed in its URL.
type reportFilter struct {
	Source, From, To, Team, Resource, After string
	// Rows is the first row of the usage summary's page.
	Rows string
	// Layout is the CSV's layout: layoutConsole or layoutHyperPod.
	Layout string
}

func (f reportFilter) query(extra ...string) string {
	var room [24]string // the pairs stay on the stack: a page makes a dozen links
	pairs := append(room[:0], "source", f.Source, "from", f.From, "to", f.To,
		"team", f.Team, "resource", f.Resource, "after", f.After, "rows", f.Rows)
	return pageURL("/reports/usage", nil, append(pairs, extra...)...)
}

// reportPage is the usage report, from the task history or from
// Prometheus.
type reportPage struct {
	frame
	model       ReadModel
	taskHistory usageHistory
	prometheus  usageReports
	exports     exportGate
	summaries   *usageSummaries
	taskPages   *taskPages
	summaryRows *kept[[]templ.Component]
	// summaryFacts are kept per summary and teams like its rows.
	summaryFacts *kept[summaryFacts]
	pieces       *pieces
	teamFilters  *teamFilters
	// bodies are the history report's bodies per teams and query.
	bodies *bodies
}

// show shows (or exports) the usage per team and day for a date range:
// from the task history (per instance type, and per task) or from
// Prometheus.
func (p reportPage) show(c echo.Context) error {
	q := c.QueryParams()
	f := reportFilter{Source: q.Get("source"), From: q.Get("from"), To: q.Get("to"), Team: q.Get("team"),
		Resource: q.Get("resource"), After: q.Get("after"), Rows: q.Get("rows"), Layout: q.Get("layout")}
	if !taskhistory.ValidReportCursor(f.After) {
		f.After = "" // a link edited by hand: the first page
	}
	if f.Layout != layoutConsole && f.Layout != layoutHyperPod {
		return echo.NewHTTPError(http.StatusBadRequest, "Unknown layout "+quoteName(f.Layout)+`: leave it out for the console's, or choose "hyperpod".`)
	}
	if f.Layout == layoutHyperPod {
		f.Source = sourceTaskHistory // its tasks and instance types are the history's
	}
	if f.Source != sourceTaskHistory && f.Source != sourcePrometheus {
		f.Source = sourcePrometheus
		if p.taskHistory.Available() == nil {
			f.Source = sourceTaskHistory
		}
	}
	today := time.Now().UTC().Truncate(24 * time.Hour)
	view := templates.ReportView{
		Page: templates.Page{Title: "Usage report", Active: "reports", Problem: p.problem()},
		From: f.From, To: f.To, Source: f.Source,
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
	for _, s := range []struct{ key, label string }{{sourceTaskHistory, "From the task history"}, {sourcePrometheus, "From Prometheus"}} {
		g := f
		g.Source, g.After, g.Rows = s.key, "", ""
		view.Sources = append(view.Sources, templates.ResourceChoice{Key: s.key, Label: s.label, Href: g.query(), Current: s.key == f.Source})
	}
	view.CSVHref = f.query("format", "csv", "after", "", "rows", "")
	if view.FromError != "" || view.ToError != "" {
		return render(c, http.StatusUnprocessableEntity, templates.Report(view))
	}
	if f.Source == sourceTaskHistory {
		return p.taskHistoryReport(c, f, view, from, to.AddDate(0, 0, 1))
	}
	var namespaces map[string]string
	if p.model != nil {
		namespaces = domain.NamespaceTeams(p.model.Snapshot().Teams)
	}
	report, err := p.prometheus.UsageReport(c.Request().Context(), p.settings, namespaces, from, to)
	rows := report.Rows
	switch {
	case errors.Is(err, errNoPrometheus):
		view.Unavailable = "The usage report needs Prometheus: start the console with --prometheus-url."
	case err != nil:
		p.log.Warn("usage report", "err", err)
		view.Unavailable = "Prometheus is unavailable, so the usage report cannot be computed now."
	}
	if visible, _ := p.scopeOf(c); !visible.all {
		mine := make([]metrics.UsageRow, 0, len(rows)) // rows may be shared with other requests
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
	view.Missing = missingNotes(gapDays(report.Gaps))
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

// gapDays are the periods Prometheus has no sample for, as the days of the
// task history's report have their missing periods (missingNotes words
// both): split at midnight UTC, one entry a day.
func gapDays(gaps []metrics.Gap) []taskhistory.UsageDay {
	var out []taskhistory.UsageDay
	for _, g := range gaps {
		for from := g.From; from.Before(g.To); {
			day := from.UTC().Truncate(24 * time.Hour)
			to := day.Add(24 * time.Hour)
			if g.To.Before(to) {
				to = g.To
			}
			if n := len(out); n > 0 && out[n-1].Day.Equal(day) {
				out[n-1].Missing = append(out[n-1].Missing, taskhistory.Period{From: from, To: to})
			} else {
				out = append(out, taskhistory.UsageDay{Day: day, Missing: []taskhistory.Period{{From: from, To: to}}})
			}
			from = to
		}
	}
	return out
}
