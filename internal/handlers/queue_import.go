package handlers

import (
	"context"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/kueue"
	"github.com/openquota/console/internal/write"
	"github.com/openquota/console/web/templates"
)

// queueImportPages import a ClusterQueue the console did not create, and
// release one it imported, each after a preview of exactly what is written.
type queueImportPages struct {
	frame
	writes importWrites
}

type importWrites interface {
	ImportPlan(queue string) (domain.QueueImport, write.Outcome)
	ImportQueue(ctx context.Context, who kueue.Identity, queue, fingerprint string) write.Outcome
	ReleasePlan(queue string) (team string, writes []domain.FieldWrite, o write.Outcome)
	ReleaseQueue(ctx context.Context, who kueue.Identity, queue string) write.Outcome
}

// platformOnly refuses the pages to team members: a queue outside their
// team is not theirs to see.
func (p queueImportPages) platformOnly(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if s, _ := p.scopeOf(c); !s.all {
			return echo.NewHTTPError(http.StatusForbidden, "Importing and releasing ClusterQueues is for platform admins; your account sees only its teams.")
		}
		return next(c)
	}
}

func (p queueImportPages) showImport(c echo.Context) error {
	return p.renderImport(c, http.StatusOK, c.Param("queue"), "")
}

func (p queueImportPages) renderImport(c echo.Context, status int, queue, applyErr string) error {
	plan, out := p.writes.ImportPlan(queue)
	if out.Kind == write.NotFound {
		return echo.NewHTTPError(http.StatusNotFound, out.Message)
	}
	view := templates.QueueImportView{
		Page:         templates.Page{Title: "Import ClusterQueue " + queue, Active: "teams", Problem: p.problem()},
		ClusterQueue: queue, Team: plan.Team.Name, Allocation: domain.DescribeTeam(plan.Team),
		Namespaces: strings.Join(plan.Namespaces, ", "), Cohort: plan.Cohort, Kept: plan.Kept,
		Writes: writeRows(plan.Writes), Reconciler: plan.Reconciler, Problem: plan.Problem,
		Fingerprint: plan.Fingerprint, ReadOnly: p.readOnly(c, mayEditTeams), ApplyError: applyErr,
	}
	return render(c, status, templates.QueueImport(view))
}

func (p queueImportPages) importQueue(c echo.Context) error {
	queue := c.Param("queue")
	out := p.writes.ImportQueue(c.Request().Context(), p.identity(c), queue, c.FormValue("fingerprint"))
	return respond(c, out, "/teams", func(status int) error { return p.renderImport(c, status, queue, out.Message) })
}

func (p queueImportPages) showRelease(c echo.Context) error {
	return p.renderRelease(c, http.StatusOK, c.Param("queue"), "")
}

func (p queueImportPages) renderRelease(c echo.Context, status int, queue, applyErr string) error {
	team, writes, out := p.writes.ReleasePlan(queue)
	if out.Kind == write.NotFound {
		return echo.NewHTTPError(http.StatusNotFound, out.Message)
	}
	view := templates.QueueImportView{
		Page:         templates.Page{Title: "Release ClusterQueue " + queue, Active: "teams", Problem: p.problem()},
		ClusterQueue: queue, Team: team, Release: true, Writes: writeRows(writes),
		ReadOnly: p.readOnly(c, mayEditTeams), ApplyError: applyErr,
	}
	return render(c, status, templates.QueueImport(view))
}

func (p queueImportPages) releaseQueue(c echo.Context) error {
	queue := c.Param("queue")
	out := p.writes.ReleaseQueue(c.Request().Context(), p.identity(c), queue)
	return respond(c, out, "/teams", func(status int) error { return p.renderRelease(c, status, queue, out.Message) })
}

func writeRows(ws []domain.FieldWrite) []templates.FieldWriteRow {
	out := make([]templates.FieldWriteRow, len(ws))
	for i, w := range ws {
		out[i] = templates.FieldWriteRow{Object: w.Object, Field: w.Field, Before: w.Before, After: w.After}
	}
	return out
}
