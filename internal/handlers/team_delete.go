package handlers

import (
	"context"
	"net/http"
	"net/url"
	"sort"
	"time"

	"github.com/labstack/echo/v4"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/openquota/console/internal/auth"
	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/web/templates"
)

func confirmDeleteTeam(d Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		team, err := d.storedTeam(c.Param("team"))
		if err != nil {
			return err
		}
		return d.renderDelete(c, http.StatusOK, team.Name, "")
	}
}

func deleteTeam(d Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		team, err := d.storedTeam(c.Param("team"))
		if err != nil {
			return err
		}
		applier, ctx, err := d.writer(c)
		if err != nil {
			return err
		}
		if err := applier.DeleteTeam(ctx, d.Settings, team.Name); err != nil {
			if msg, ok := d.forbidden(c, err, "team "+team.Name); ok {
				d.Log.Info("team deletion forbidden", "team", team.Name, "user", auth.From(c).Name, "err", err)
				return d.renderDelete(c, http.StatusForbidden, team.Name, msg)
			}
			d.Log.Error("deleting team", "team", team.Name, "err", err)
			return d.renderDelete(c, http.StatusBadGateway, team.Name, explainWriteError(err))
		}
		d.Log.Info("team deleted", "team", team.Name, "user", auth.From(c).Name)
		// The list after the redirect should no longer show the team.
		_ = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 3*time.Second, true, func(context.Context) (bool, error) {
			cq, err := d.Cache.ClusterQueues.Get(d.Settings.ClusterQueue(team.Name))
			return err != nil || cq.DeletionTimestamp != nil, nil
		})
		auth.SetFlashOf(c, "Team "+team.Name+" deleted.")
		return c.Redirect(http.StatusSeeOther, "/teams?deleted="+url.QueryEscape(team.Name))
	}
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
		Page:       templates.Page{Title: "Delete team " + team, Active: "teams", Problem: problem(d.Cache)},
		Team:       team,
		Namespace:  ns,
		Tasks:      tasks,
		ApplyError: applyErr,
		ReadOnly:   d.readOnly(c, mayDeleteTeams),
	}))
}
