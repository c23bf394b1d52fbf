package handlers

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/openquota/console/internal/auth"
	"github.com/openquota/console/internal/write"
	"github.com/openquota/console/web/templates"
)

// driftPages are a team's drift: how its Kueue objects differ from its
// allocation, with re-apply and adopt.
type driftPages struct {
	frame
	writes driftWrites
}

func (p driftPages) show(c echo.Context) error {
	return p.render(c, http.StatusOK, c.Param("team"), auth.TakeFlashOf(c), "")
}

func (p driftPages) render(c echo.Context, status int, team, flash, applyErr string) error {
	ad, out := p.writes.Adoption(team)
	switch out.Kind {
	case write.NotFound:
		return echo.NewHTTPError(http.StatusNotFound, out.Message)
	case write.Saved:
	default:
		applyErr = joinProblems(applyErr, out.Message)
	}
	view := templates.DriftView{
		Page:       templates.Page{Title: "Drift of team " + team, Active: "teams", Problem: p.problem()},
		Team:       team,
		Flash:      flash,
		ApplyError: applyErr,
		Links: []templates.Link{{Href: "/teams", Label: "All teams"}, {Href: teamURL(team, "edit"), Label: "Edit", ID: "edit-link"},
			{Href: teamURL(team, "history"), Label: "History", ID: "history-link"}},
		ReadOnly: p.readOnly(c, mayEditTeams),
	}
	hidden := p.membersHidden(c, team)
	for _, dr := range ad.Report.Differences {
		row := templates.DriftRow{Object: dr.Object, Field: dr.Field, Want: dr.Want, Got: dr.Got}
		if hidden != "" && strings.HasPrefix(dr.Field, "members") {
			row.Want, row.Got = "(not shown)", "(not shown)"
		}
		view.Rows = append(view.Rows, row)
	}
	if ad.Drifted {
		view.AdoptChanges, view.AdoptNotes = ad.Changes, ad.Notes
		if hidden != "" {
			view.AdoptChanges = withoutMembers(ad.Changes)
		}
		view.AdoptRemaining = ad.Remaining
		if ad.Problem != "" {
			view.AdoptBlocked = "The hand edits cannot be adopted as they are, because " + ad.Problem + " Re-apply the allocation, or edit the team."
		}
		view.Fingerprint = ad.Fingerprint
	}
	return render(c, status, templates.Drift(view))
}

// reapplyTeam writes the stored allocation again, setting hand edits back.
func (p driftPages) reapply(c echo.Context) error {
	team := c.Param("team")
	out := p.writes.ReapplyTeam(c.Request().Context(), p.identity(c), team)
	return respond(c, out, teamURL(team, "drift")+"?reapplied=1", func(status int) error {
		return p.render(c, status, team, "", out.Message)
	})
}

// adoptTeam makes the allocation the hand-edited ClusterQueue gives the
// team's allocation, through the write path.
func (p driftPages) adopt(c echo.Context) error {
	team := c.Param("team")
	out := p.writes.AdoptTeam(c.Request().Context(), p.identity(c), team, c.FormValue("adopt"))
	next := teamURL(team, "drift")
	if out.Message != "" {
		next += "?adopted=1"
	}
	return respond(c, out, next, func(status int) error {
		return p.render(c, status, team, "", out.Message)
	})
}
