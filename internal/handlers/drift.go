package handlers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/openquota/console/internal/auth"
	"github.com/openquota/console/internal/cluster"
	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/form"
	"github.com/openquota/console/web/templates"
)

func teamDriftURL(team string) string { return "/teams/" + team + "/drift" }

func teamDrift(d Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		team, err := d.storedTeam(c.Param("team"))
		if err != nil {
			return err
		}
		return d.renderDrift(c, http.StatusOK, team.Name, auth.TakeFlashOf(c), "")
	}
}

// driftOf compares a team's stored allocation with its live objects.
func (d Deps) driftOf(team string) (domain.DriftReport, domain.ShapeLookup, error) {
	shapes, _, err := d.fleet()
	if err != nil {
		return domain.DriftReport{}, nil, err
	}
	rep, err := cluster.TeamDrift(d.Settings, d.Cache, team, shapes)
	if apierrors.IsNotFound(err) {
		return rep, shapes, echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("There is no team %q managed by this console.", team))
	}
	return rep, shapes, err
}

func (d Deps) renderDrift(c echo.Context, status int, team, flash, applyErr string) error {
	view := templates.DriftView{
		Page:       templates.Page{Title: "Drift of team " + team, Active: "teams", Problem: problem(d.Cache)},
		Team:       team,
		Flash:      flash,
		ApplyError: applyErr,
		Links: []templates.Link{{Href: "/teams", Label: "All teams"}, {Href: "/teams/" + team + "/edit", Label: "Edit", ID: "edit-link"},
			{Href: teamHistoryURL(team), Label: "History", ID: "history-link"}},
		ReadOnly: d.readOnly(c, mayEditTeams),
	}
	rep, shapes, err := d.driftOf(team)
	var httpErr *echo.HTTPError
	switch {
	case asHTTPError(err, &httpErr):
		return err
	case err != nil:
		view.ApplyError = joinProblems(view.ApplyError, fmt.Sprintf("The allocation of team %s cannot be compared with the cluster: %v.", team, err))
		return render(c, status, templates.Drift(view))
	}
	for _, dr := range rep.Differences {
		view.Rows = append(view.Rows, templates.DriftRow{Object: dr.Object, Field: dr.Field, Want: dr.Want, Got: dr.Got})
	}
	if rep.Drifted() && rep.Live.ClusterQueue != nil {
		adopted, notes := domain.AdoptTeam(rep.Team, rep.Live.ClusterQueue, shapes)
		view.AdoptChanges, view.AdoptNotes = domain.DiffTeams(rep.Team, adopted), notes
		if objs, err := domain.BuildTeam(d.Settings, adopted, shapes); err == nil {
			remaining, err := domain.DriftOf(objs, rep.Live)
			if err != nil {
				return err
			}
			for _, r := range remaining {
				view.AdoptRemaining = append(view.AdoptRemaining, r.String())
			}
		}
		view.AdoptBlocked = adoptProblem(adopted, shapes)
		view.Fingerprint = fingerprint(adopted)
	}
	return render(c, status, templates.Drift(view))
}

func asHTTPError(err error, target **echo.HTTPError) bool {
	he, ok := err.(*echo.HTTPError)
	if ok {
		*target = he
	}
	return ok
}

// adoptProblem says why an adopted allocation breaks the console's own rules
// for allocations (the form's validation), or "".
func adoptProblem(t domain.Team, shapes domain.ShapeLookup) string {
	_, errs := form.FromTeam(t).Validate(shapes)
	if msg := fieldErrorsProblem(errs); msg != "" {
		return "The hand edits cannot be adopted as they are, because " + msg + " Re-apply the allocation, or edit the team."
	}
	return ""
}

// fingerprint identifies an allocation, so that adopting applies exactly
// what the page showed.
func fingerprint(t domain.Team) string {
	data, _ := json.Marshal(t)
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:12])
}

// reapplyTeam writes the stored allocation again, setting hand edits back.
func reapplyTeam(d Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		rep, _, err := d.driftOf(c.Param("team"))
		if err != nil {
			return err
		}
		team := rep.Team
		applier, ctx, err := d.writer(c)
		if err != nil {
			return err
		}
		if status, msg := d.applyTeam(cluster.WithNote(ctx, "re-applied the allocation over hand edits"), c, applier, team,
			"the allocation of team "+team.Name); msg != "" {
			return d.renderDrift(c, status, team.Name, "", msg)
		}
		d.Log.Info("team re-applied over drift", "team", team.Name, "differences", len(rep.Differences), "user", auth.From(c).Name)
		d.waitForNoDrift(ctx, team.Name)
		auth.SetFlashOf(c, "The allocation of team "+team.Name+" was re-applied.")
		return c.Redirect(http.StatusSeeOther, teamDriftURL(team.Name)+"?reapplied=1")
	}
}

// adoptTeam writes the allocation derived from the hand-edited ClusterQueue
// through the normal apply path, so that the stored allocation and the
// objects agree again.
func adoptTeam(d Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		rep, shapes, err := d.driftOf(c.Param("team"))
		if err != nil {
			return err
		}
		name := rep.Team.Name
		if !rep.Drifted() || rep.Live.ClusterQueue == nil {
			return c.Redirect(http.StatusSeeOther, teamDriftURL(name))
		}
		adopted, _ := domain.AdoptTeam(rep.Team, rep.Live.ClusterQueue, shapes)
		if fingerprint(adopted) != c.FormValue("adopt") {
			return d.renderDrift(c, http.StatusConflict, name, "",
				"The team's objects changed since the page was loaded, so nothing was adopted: review the hand edits below and adopt them again.")
		}
		if msg := adoptProblem(adopted, shapes); msg != "" {
			return d.renderDrift(c, http.StatusUnprocessableEntity, name, "", msg)
		}
		applier, ctx, err := d.writer(c)
		if err != nil {
			return err
		}
		if status, msg := d.applyTeam(cluster.WithNote(ctx, "adopted hand edits of the ClusterQueue"), c, applier, adopted,
			"the adopted allocation of team "+name); msg != "" {
			return d.renderDrift(c, status, name, "", msg)
		}
		d.Log.Info("hand edits adopted", "team", name, "changes", domain.DiffTeams(rep.Team, adopted), "user", auth.From(c).Name)
		d.waitForTeam(ctx, adopted)
		d.waitForNoDrift(ctx, name)
		auth.SetFlashOf(c, "The hand edits were adopted into the allocation of team "+name+".")
		return c.Redirect(http.StatusSeeOther, teamDriftURL(name)+"?adopted=1")
	}
}

// waitForNoDrift lets the informers catch up after a write, so the page after
// the redirect shows the result; it gives up quietly after 3 s.
func (d Deps) waitForNoDrift(ctx context.Context, team string) {
	_ = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 3*time.Second, true, func(context.Context) (bool, error) {
		rep, _, err := d.driftOf(team)
		return err == nil && !rep.Drifted(), nil
	})
}

// driftedTeams names the teams whose Kueue objects someone changed by hand,
// for a "drifted" badge on the teams list (from the cache: no apiserver
// request). Errors leave the badges off.
func (d Deps) driftedTeams() map[string]bool {
	shapes, _, err := d.fleet()
	if err != nil {
		return nil
	}
	drifted, err := cluster.DriftedTeams(d.Settings, d.Cache, shapes)
	if err != nil {
		return nil
	}
	return drifted
}
