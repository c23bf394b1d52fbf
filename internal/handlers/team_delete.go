package handlers

import (
	"net/http"
	"net/url"
	"sort"
	"time"

	"github.com/labstack/echo/v4"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/web/templates"
)

func (d Deps) confirmDeleteTeam(c echo.Context) error {
	if _, _, ok := d.Cache.Team(d.Settings, c.Param("team")); !ok {
		return noTeam(c.Param("team"))
	}
	return d.renderDelete(c, http.StatusOK, c.Param("team"), "")
}

func (d Deps) deleteTeam(c echo.Context) error {
	team := c.Param("team")
	out := d.writes.DeleteTeam(c.Request().Context(), d.identity(c), team)
	return respond(c, out, "/teams?deleted="+url.QueryEscape(team), func(status int) error {
		return d.renderDelete(c, status, team, out.Message)
	})
}

func (d Deps) renderDelete(c echo.Context, status int, team, applyErr string) error {
	ns := d.Settings.Namespace(team)
	wls, err := d.Cache.Workloads.Workloads(ns).List(labels.Everything())
	if err != nil {
		return err
	}
	var tasks []templates.TaskLine
	now := time.Now()
	for _, wl := range wls {
		t := domain.TaskOf(wl, d.Settings, "", now)
		if t.State == domain.TaskFinished {
			continue
		}
		tasks = append(tasks, templates.TaskLine{Name: wl.Name, State: stateLabel(&t), GPUs: t.GPUs})
	}
	sort.Slice(tasks, func(i, j int) bool { return tasks[i].Name < tasks[j].Name })
	return render(c, status, templates.TeamDelete(templates.TeamDeleteView{
		Page:       templates.Page{Title: "Delete team " + team, Active: "teams", Problem: d.problem()},
		Team:       team,
		Namespace:  ns,
		Tasks:      tasks,
		ApplyError: applyErr,
		ReadOnly:   d.readOnly(c, mayDeleteTeams),
	}))
}
