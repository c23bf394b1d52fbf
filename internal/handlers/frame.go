package handlers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/openquota/console/internal/auth"
	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/kueue"
	"github.com/openquota/console/internal/metrics"
	"github.com/openquota/console/internal/taskhistory"
)

// frame is what every page needs around its own content: who asks and
// what they may see (the teams and the cluster's access reviews), whether
// the cluster's figures are current, and where to log.
type frame struct {
	settings domain.Settings
	log      *slog.Logger
	auth     *auth.Authenticator
	access   Access
	teams    teamList
	// queues are every team's ClusterQueue and the namespaces it serves:
	// a member sees the teams of the namespaces they may list Workloads in.
	queues ReadModel
	health Health
	// warnings keep a failing dependency from flooding the log.
	warnings *warnings
}

func (f frame) readyz(c echo.Context) error {
	if f.health == nil {
		return c.String(http.StatusServiceUnavailable, "the console reads no cluster")
	}
	if err := f.health.Ready(); err != nil {
		return c.String(http.StatusServiceUnavailable, err.Error())
	}
	return c.String(http.StatusOK, "ok")
}

// problem explains, in words, why live data is missing, incomplete or old.
// liveExport refuses a CSV export of the live figures until the console
// has read the whole cluster: a partial table (a header and no rows) reads
// as "no teams, no tasks" in a spreadsheet.
func (f frame) liveExport(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if _, csv := csvTable(c); csv && f.health != nil {
			if err := f.health.Ready(); err != nil {
				return c.String(http.StatusServiceUnavailable, "The console has not read the whole cluster yet ("+err.Error()+"), so this export would be incomplete. Try again in a moment.\n")
			}
		}
		return next(c)
	}
}

func (f frame) problem() string {
	if f.health == nil {
		return ""
	}
	ready := f.health.Ready()
	answers, since := f.health.Reachable()
	switch {
	case !answers && ready != nil:
		// Down before the console had read it (started while it was down):
		// the pages are empty or partial, not the cluster.
		return fmt.Sprintf("The cluster has not answered since %s, and the console has not read all of it yet: the pages show only part of it (%s).",
			since.Format(time.TimeOnly), ready.Error())
	case ready != nil:
		return "Live data is incomplete: " + ready.Error() + "."
	case !answers:
		return fmt.Sprintf("The cluster has not answered since %s: the figures are as they were then (%s old).",
			since.Format(time.TimeOnly), time.Since(since).Round(time.Second))
	}
	return ""
}

// identity is whom the request's changes and access checks are for: the
// signed-in user, as the authenticator named them, or the console itself in
// auth mode none. Handlers resolve it once per request.
func (f frame) identity(c echo.Context) kueue.Identity {
	if !f.auth.Impersonates() {
		return kueue.Identity{}
	}
	u := auth.From(c)
	return kueue.Identity{Name: u.Name, Groups: u.Groups, UID: u.UID, Extra: u.Extra}
}

// allowed asks whether the request's user may do p; known is false when
// the cluster could not say (or nobody can be asked).
func (f frame) allowed(ctx context.Context, id kueue.Identity, p kueue.Permission) (allowed, known bool) {
	if f.access == nil {
		return false, false
	}
	return f.access.Allowed(ctx, id, p)
}

// errTaskHistoryOff is why pages built on the task history are empty when
// the console runs without one.
var errTaskHistoryOff = taskhistory.ErrOff

// taskHistoryNote says, on a page, why it shows no task history: that the
// console runs without one, or, in a plain sentence, that it cannot be read
// now. The error itself (the database's address, its driver's words) goes
// to the log, never to a page every viewer may open.
func (f frame) taskHistoryNote(err error) string {
	if errors.Is(err, errTaskHistoryOff) {
		return "The task history is unavailable: " + errTaskHistoryOff.Error() + "."
	}
	if f.warnings.due(err.Error(), time.Now()) {
		f.log.Warn("the task history is unavailable", "err", err)
	}
	return "The task history is unavailable right now."
}

// noTaskHistory stands for the task history of a console that has none.
type noTaskHistory struct{}

func (noTaskHistory) Available() error { return errTaskHistoryOff }
func (noTaskHistory) Recording() error { return nil }
func (noTaskHistory) TaskStats(context.Context, taskhistory.Window) (*taskhistory.WindowStats, error) {
	return nil, errTaskHistoryOff
}
func (noTaskHistory) AdmissionRates(context.Context, taskhistory.Window) (taskhistory.AdmissionRates, error) {
	return taskhistory.AdmissionRates{}, errTaskHistoryOff
}
func (noTaskHistory) Preemptions(context.Context, taskhistory.PreemptionQuery) (*taskhistory.PreemptionPage, error) {
	return nil, errTaskHistoryOff
}
func (noTaskHistory) PreemptionsByTeam(context.Context, taskhistory.Window, string) ([]taskhistory.PreemptedBy, []taskhistory.Period, error) {
	return nil, nil, errTaskHistoryOff
}
func (noTaskHistory) UsageSummary(context.Context, taskhistory.Window) (*taskhistory.UsageSummary, error) {
	return nil, errTaskHistoryOff
}
func (noTaskHistory) TaskReport(context.Context, taskhistory.ReportQuery, func(taskhistory.ReportRow) error) (string, []taskhistory.Period, error) {
	return "", nil, errTaskHistoryOff
}

// errNoPrometheus is why Prometheus's panels are empty when the console
// runs without one.
var errNoPrometheus = errors.New("the console runs without Prometheus")

// noPrometheus stands for the Prometheus of a console started without
// --prometheus-url.
type noPrometheus struct{}

func (noPrometheus) ClusterUtilization(context.Context, metrics.Range, float64) (metrics.Charts, error) {
	return metrics.Charts{}, errNoPrometheus
}
func (noPrometheus) NamespaceGPUUtilization(context.Context) (map[string]domain.Readings, error) {
	return nil, errNoPrometheus
}
func (noPrometheus) NamespacePartitionUtilization(context.Context) (map[string]map[string]domain.Readings, error) {
	return nil, errNoPrometheus
}
func (noPrometheus) NamespaceGPUUtilizationOver(context.Context, time.Duration) (map[string][]float64, error) {
	return nil, errNoPrometheus
}
func (noPrometheus) TeamSeries(context.Context, metrics.TeamQueue, metrics.Range) (metrics.TeamCharts, error) {
	return metrics.TeamCharts{}, errNoPrometheus
}
func (noPrometheus) UsageReport(context.Context, domain.Settings, map[string]string, time.Time, time.Time) (metrics.Report, error) {
	return metrics.Report{}, errNoPrometheus
}

const promDown = "Prometheus is unavailable: this chart comes back when it answers."

// chartNote says why a chart has no data ("" when it has).
func (f frame) chartNote(err error) string {
	switch {
	case errors.Is(err, errNoPrometheus):
		return "Charts need Prometheus: start the console with --prometheus-url."
	case err != nil:
		f.log.Warn("prometheus", "err", err)
		return promDown
	}
	return ""
}
