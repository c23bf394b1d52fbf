package handlers

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/openquota/console/internal/auth"
	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/write"
	"github.com/openquota/console/web/templates"
)

// revisionPages are the revisions admins saved, of a team and of the
// policy, with rollbacks (and the policy's re-apply over hand edits).
type revisionPages struct {
	frame
	teams interface {
		teamLookup
		fleet
	}
	revisions Revisions
	policy    Policy
	writes    revisionWrites
}

func (p revisionPages) teamRevisions(c echo.Context) error {
	team := c.Param("team")
	if _, _, ok := p.teams.Team(team); !ok {
		return noTeam(team)
	}
	return p.renderTeamRevisions(c, http.StatusOK, team, auth.TakeFlashOf(c), "")
}

func (p revisionPages) renderTeamRevisions(c echo.Context, status int, team, flash, applyErr string) error {
	view := templates.RevisionsView{
		Page:       templates.Page{Title: "History of team " + team, Active: "teams", Problem: p.problem()},
		Flash:      flash,
		ApplyError: applyErr,
		Links: []templates.Link{{Href: "/teams", Label: "All teams"}, {Href: teamURL(team, "edit"), Label: "Edit", ID: "edit-link"},
			{Href: teamURL(team, "drift"), Label: "Drift", ID: "drift-link"}},
		Storage: fmt.Sprintf("The last %d revisions are kept in the ConfigMap %s/%s, in the console's own namespace, so they outlive the console; deleting the team deletes them.",
			domain.RevisionLimit, p.settings.State(), domain.TeamRevisionsName(p.settings, team)),
		ReadOnly: p.readOnly(c, mayEditTeams),
	}
	revs, err := p.revisions.TeamRevisions(c.Request().Context(), team)
	if err != nil {
		view.ApplyError, view.Unread = joinProblems(view.ApplyError, p.revisionsReadError(err)), true
	}
	shapes, _ := p.teams.Fleet()
	cq, _, _ := p.teams.Team(team)
	view.Revisions = revisionRows(revs, domain.DiffTeams, domain.DescribeTeam, func(t domain.Team) string {
		return write.TeamProblem(team, t, cq, shapes)
	}, teamURL(team, "history"))
	if hidden := p.membersHidden(c, team); hidden != "" {
		for i := range view.Revisions {
			view.Revisions[i].Changes = withoutMembers(view.Revisions[i].Changes)
		}
		view.MembersHidden = hidden
	}
	return render(c, status, templates.Revisions(view))
}

// withoutMembers are a revision's changes with those naming members said
// without their names.
func withoutMembers(changes []string) []string {
	var out []string
	named := false
	for _, ch := range changes {
		if domain.NamesMembers(ch) {
			named = true
			continue
		}
		out = append(out, ch)
	}
	if named {
		out = append(out, "members changed (not shown)")
	}
	return out
}

// revisionsReadError explains why the revisions could not be read.
func (p revisionPages) revisionsReadError(err error) string {
	p.log.Error("reading revisions", "err", err)
	return write.RevisionsProblem(p.settings, err)
}

func joinProblems(a, b string) string {
	if a == "" {
		return b
	}
	return a + " " + b
}

// revisionRows turns revisions (newest first) into rows, each with what
// changed since the one before, and why it cannot be applied (problem; ""
// when it can); rollback forms post to base/<rev>/rollback.
func revisionRows[T any](revs []domain.Revision[T], diff func(a, b T) []string, describe func(T) []string, problem func(T) string, base string) []templates.RevisionRow {
	rows := make([]templates.RevisionRow, 0, len(revs))
	for i, r := range revs {
		row := templates.RevisionRow{
			Revision: r.Revision, At: r.At.UTC().Format("2006-01-02 15:04:05 UTC"), AtISO: r.At.UTC().Format(time.RFC3339),
			By: r.By, Action: string(r.Action), Note: r.Note, Current: i == 0,
		}
		if r.Action == domain.ActionRollback {
			row.Action = fmt.Sprintf("rollback to revision %d", r.RolledBackTo)
		}
		if i+1 < len(revs) {
			row.Changes = diff(revs[i+1].Allocation, r.Allocation)
			row.NoChanges = len(row.Changes) == 0
		} else {
			row.Changes, row.Earliest = describe(r.Allocation), r.Action != domain.ActionCreate
		}
		if i > 0 {
			row.Rollback = fmt.Sprintf("%s/%d/rollback", base, r.Revision)
			row.Invalid = problem(r.Allocation)
		}
		rows = append(rows, row)
	}
	return rows
}

// revisionParam reads :rev, or answers 404.
func revisionParam(c echo.Context) (int, error) {
	n, err := strconv.Atoi(c.Param("rev"))
	if err != nil || n <= 0 {
		return 0, echo.NewHTTPError(http.StatusNotFound, "There is no such revision.")
	}
	return n, nil
}

// rollbackTeam applies an earlier revision's allocation through the write
// path, which records it as a new revision with action rollback.
func (p revisionPages) rollbackTeam(c echo.Context) error {
	team := c.Param("team")
	n, err := revisionParam(c)
	if err != nil {
		return err
	}
	out := p.writes.RollbackTeam(c.Request().Context(), p.identity(c), team, n)
	return respond(c, out, fmt.Sprintf("%s?rolledback=%d", teamURL(team, "history"), n), func(status int) error {
		return p.renderTeamRevisions(c, status, team, "", out.Message)
	})
}

func (p revisionPages) policyRevisions(c echo.Context) error {
	return p.renderPolicyRevisions(c, http.StatusOK, auth.TakeFlashOf(c), "")
}

func (p revisionPages) renderPolicyRevisions(c echo.Context, status int, flash, applyErr string) error {
	view := templates.RevisionsView{
		Page:       templates.Page{Title: "History of the cluster policy", Active: "policy", Problem: p.problem()},
		Flash:      flash,
		ApplyError: applyErr,
		Links:      []templates.Link{{Href: "/policy", Label: "Cluster policy", ID: "policy-link"}},
		Storage: fmt.Sprintf("The last %d revisions are kept in the ConfigMap %s/%s, in the console's own namespace, so they outlive the console.",
			domain.RevisionLimit, p.settings.State(), domain.PolicyRevisionsName(p.settings)),
		DriftReapply: "/policy/drift/reapply",
		ReadOnly:     p.readOnly(c, mayEditPolicy),
	}
	revs, err := p.revisions.PolicyRevisions(c.Request().Context())
	if err != nil {
		view.ApplyError, view.Unread = joinProblems(view.ApplyError, p.revisionsReadError(err)), true
	}
	view.Revisions = revisionRows(revs, domain.DiffPolicies, domain.DescribePolicy, write.PolicyProblem, "/policy/history")
	drift, err := p.policy.PolicyDrift()
	if err != nil {
		return err
	}
	for _, dr := range drift {
		view.Drift = append(view.Drift, dr.String())
	}
	return render(c, status, templates.Revisions(view))
}

func (p revisionPages) rollbackPolicy(c echo.Context) error {
	n, err := revisionParam(c)
	if err != nil {
		return err
	}
	out := p.writes.RollbackPolicy(c.Request().Context(), p.identity(c), n)
	return respond(c, out, fmt.Sprintf("/policy/history?rolledback=%d", n), func(status int) error {
		return p.renderPolicyRevisions(c, status, "", out.Message)
	})
}

// reapplyPolicy writes the stored policy again over hand edits of its
// priority classes.
func (p revisionPages) reapplyPolicy(c echo.Context) error {
	out := p.writes.ReapplyPolicy(c.Request().Context(), p.identity(c))
	return respond(c, out, "/policy/history?reapplied=1", func(status int) error {
		return p.renderPolicyRevisions(c, status, "", out.Message)
	})
}
