package handlers

import (
	"context"
	"net/http"
	"strconv"
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
	// model finds the queues of a cohort to import together.
	model ReadModel
	// bindings are the members a queue's namespaces bind.
	bindings TeamBindings
}

type importWrites interface {
	ImportPlan(queue string) (domain.QueueImport, write.Outcome)
	ImportQueues(ctx context.Context, who kueue.Identity, queues []write.QueuePreviewed) write.Outcome
	ReleasePlan(queue string) (team string, writes []domain.FieldWrite, o write.Outcome)
	ReleaseQueue(ctx context.Context, who kueue.Identity, queue string) write.Outcome
}

// showImport previews importing one queue (/queues/:queue/import), or
// several (/queues/import?queue=a&queue=b), or every queue of a cohort the
// console does not manage (/queues/import?cohort=x).
func (p queueImportPages) showImport(c echo.Context) error {
	queues := c.QueryParams()["queue"]
	if q := c.Param("queue"); q != "" {
		queues = []string{q}
	}
	if cohort := c.QueryParam("cohort"); cohort != "" {
		for _, r := range p.model.Snapshot().Teams {
			if r.Cohort == cohort && r.Manager != "" {
				queues = append(queues, r.ClusterQueue)
			}
		}
	}
	if len(queues) == 0 {
		return echo.NewHTTPError(http.StatusNotFound, "No ClusterQueue to import was chosen.")
	}
	return p.renderImport(c, http.StatusOK, queues, "")
}

func (p queueImportPages) renderImport(c echo.Context, status int, queues []string, applyErr string) error {
	view := templates.QueueImportView{
		Page:     templates.Page{Title: "Import ClusterQueues", Active: "teams", Problem: p.problem()},
		ReadOnly: p.readOnly(c, mayEditTeams), ApplyError: applyErr,
	}
	var teams []string
	for _, queue := range queues {
		plan, out := p.writes.ImportPlan(queue)
		if out.Kind == write.NotFound {
			return echo.NewHTTPError(http.StatusNotFound, out.Message)
		}
		view.Plans = append(view.Plans, templates.QueuePlanView{
			ClusterQueue: queue, Team: plan.Team.Name, Allocation: domain.DescribeTeam(plan.Team),
			Namespaces: strings.Join(plan.Namespaces, ", "), Cohort: plan.Cohort, Kept: plan.Kept,
			Writes: writeRows(plan.Writes), Reconciler: plan.Reconciler, Problem: plan.Problem, Fingerprint: plan.Fingerprint,
			Members: p.boundMembers(c, p.bindings, plan.Namespaces),
		})
		if plan.Problem == "" {
			teams = append(teams, plan.Team.Name)
		}
	}
	view.Importable = len(teams)
	switch len(teams) {
	case 1:
		view.Title, view.ImportLabel = "Import ClusterQueue "+queues[0], "Import as team "+teams[0]
	default:
		view.ImportLabel = "Import " + strconv.Itoa(len(teams)) + " queues as teams " + strings.Join(teams, ", ")
	}
	return render(c, status, templates.QueueImport(view))
}

func (p queueImportPages) importQueues(c echo.Context) error {
	values, err := c.FormParams()
	if err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, "The form could not be read.")
	}
	queues, fingerprints := values["queue"], values["fingerprint"]
	if len(queues) != len(fingerprints) {
		return echo.NewHTTPError(http.StatusBadRequest, "Each ClusterQueue needs the fingerprint of its preview.")
	}
	previewed := make([]write.QueuePreviewed, len(queues))
	for i := range queues {
		previewed[i] = write.QueuePreviewed{Queue: queues[i], Fingerprint: fingerprints[i]}
	}
	out := p.writes.ImportQueues(c.Request().Context(), p.identity(c), previewed)
	return respond(c, out, "/teams", func(status int) error {
		if len(queues) == 0 {
			return echo.NewHTTPError(status, out.Message)
		}
		return p.renderImport(c, status, queues, out.Message)
	})
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
		Page:    templates.Page{Title: "Release ClusterQueue " + queue, Active: "teams", Problem: p.problem()},
		Release: true, Plans: []templates.QueuePlanView{{ClusterQueue: queue, Team: team, Writes: writeRows(writes)}},
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
