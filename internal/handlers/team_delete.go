package handlers

import (
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/web/templates"
)

func (p teamPages) confirmDelete(c echo.Context) error {
	cq, _, ok := p.teams.Team(c.Param("team"))
	if !ok {
		return noTeam(c.Param("team"))
	}
	if domain.Imported(cq) { // its objects are not the console's to delete: it lets go of them
		return c.Redirect(http.StatusSeeOther, "/queues/"+url.PathEscape(cq.Name)+"/release")
	}
	return p.renderDelete(c, http.StatusOK, c.Param("team"), "")
}

func (p teamPages) deleteTeam(c echo.Context) error {
	team := c.Param("team")
	out := p.writes.DeleteTeam(c.Request().Context(), p.identity(c), team)
	return respond(c, out, "/teams?deleted="+url.QueryEscape(team), func(status int) error {
		return p.renderDelete(c, status, team, out.Message)
	})
}

func (p teamPages) renderDelete(c echo.Context, status int, team, applyErr string) error {
	ns := p.settings.Namespace(team)
	readOnly := p.readOnly(c, mayDeleteTeams)
	var view templates.ImpactView
	if p.previewDenied(c, mayDeleteTeams) == "" {
		view = impactView(p.writes.PreviewDeleteTeam(c.Request().Context(), team))
	}
	snap := p.model.Snapshot()
	var tasks []templates.TaskLine
	for _, f := range snap.Tasks(domain.TaskQuery{Selection: domain.Selection{Teams: []string{team}}, Sort: "name"}) {
		t := snap.Task(f)
		tasks = append(tasks, templates.TaskLine{Name: taskLabel(t.Named()), State: stateLabel(&t), GPUs: t.GPUs})
	}
	return render(c, status, templates.TeamDelete(templates.TeamDeleteView{
		Page:       templates.Page{Title: "Delete team " + team, Active: "teams", Problem: p.problem()},
		Team:       team,
		Namespace:  ns,
		Tasks:      tasks,
		ApplyError: applyErr,
		Impact:     view,
		ReadOnly:   readOnly,
	}))
}
