package handlers

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/openquota/console/internal/auth"
	"github.com/openquota/console/internal/write"
	"github.com/openquota/console/web/templates"
)

func (d Deps) teamDrift(c echo.Context) error {
	return d.renderDrift(c, http.StatusOK, c.Param("team"), auth.TakeFlashOf(c), "")
}

func (d Deps) renderDrift(c echo.Context, status int, team, flash, applyErr string) error {
	ad, out := d.writes.Adoption(team)
	switch out.Kind {
	case write.NotFound:
		return echo.NewHTTPError(http.StatusNotFound, out.Message)
	case write.Saved:
	default:
		applyErr = joinProblems(applyErr, out.Message)
	}
	view := templates.DriftView{
		Page:       templates.Page{Title: "Drift of team " + team, Active: "teams", Problem: d.problem()},
		Team:       team,
		Flash:      flash,
		ApplyError: applyErr,
		Links: []templates.Link{{Href: "/teams", Label: "All teams"}, {Href: teamURL(team, "edit"), Label: "Edit", ID: "edit-link"},
			{Href: teamURL(team, "history"), Label: "History", ID: "history-link"}},
		ReadOnly: d.readOnly(c, mayEditTeams),
	}
	for _, dr := range ad.Report.Differences {
		view.Rows = append(view.Rows, templates.DriftRow{Object: dr.Object, Field: dr.Field, Want: dr.Want, Got: dr.Got})
	}
	if ad.Drifted {
		view.AdoptChanges, view.AdoptNotes = ad.Changes, ad.Notes
		view.AdoptRemaining = ad.Remaining
		if ad.Problem != "" {
			view.AdoptBlocked = "The hand edits cannot be adopted as they are, because " + ad.Problem + " Re-apply the allocation, or edit the team."
		}
		view.Fingerprint = ad.Fingerprint
	}
	return render(c, status, templates.Drift(view))
}

// reapplyTeam writes the stored allocation again, setting hand edits back.
func (d Deps) reapplyTeam(c echo.Context) error {
	team := c.Param("team")
	out := d.writes.ReapplyTeam(c.Request().Context(), d.identity(c), team)
	return respond(c, out, teamURL(team, "drift")+"?reapplied=1", func(status int) error {
		return d.renderDrift(c, status, team, "", out.Message)
	})
}

// adoptTeam makes the allocation the hand-edited ClusterQueue gives the
// team's allocation, through the write path.
func (d Deps) adoptTeam(c echo.Context) error {
	team := c.Param("team")
	out := d.writes.AdoptTeam(c.Request().Context(), d.identity(c), team, c.FormValue("adopt"))
	next := teamURL(team, "drift")
	if out.Message != "" {
		next += "?adopted=1"
	}
	return respond(c, out, next, func(status int) error {
		return d.renderDrift(c, status, team, "", out.Message)
	})
}

// driftedTeams names the teams whose Kueue objects someone changed by hand,
// for a "drifted" badge on the teams list (from the cache: no apiserver
// request).
//
// Comparing every team's objects takes a while at hundreds of teams, so the
// answer is shared for a few seconds (a team's own drift page compares it
// afresh).
func (d Deps) driftedTeams(ctx context.Context) map[string]bool {
	drifted, _ := d.drifted.Get(ctx, "", func(context.Context) (map[string]bool, error) {
		shapes, _ := d.Cache.Fleet()
		return d.Cache.DriftedTeams(d.Settings, shapes), nil
	})
	return drifted
}
