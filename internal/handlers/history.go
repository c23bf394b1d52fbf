package handlers

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
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

// registerAudit adds the audit pages: each team's and the policy's revision
// history with one-click rollback, and each team's drift (hand edits of its
// Kueue objects) with re-apply and adopt. Every change goes through the normal
// apply path (build, dry run, apply as the signed-in user), which records it
// as a new revision.
func registerAudit(e *echo.Echo, d Deps) {
	e.GET("/teams/:team/history", teamHistory(d))
	e.POST("/teams/:team/history/:rev/rollback", rollbackTeam(d))
	e.GET("/policy/history", policyHistory(d))
	e.POST("/policy/history/:rev/rollback", rollbackPolicy(d))
	e.POST("/policy/drift/reapply", reapplyPolicy(d))
	e.GET("/teams/:team/drift", teamDrift(d))
	e.POST("/teams/:team/drift/reapply", reapplyTeam(d))
	e.POST("/teams/:team/drift/adopt", adoptTeam(d))
}

func teamHistoryURL(team string) string { return "/teams/" + team + "/history" }

func teamHistory(d Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		team, err := d.storedTeam(c.Param("team"))
		if err != nil {
			return err
		}
		return d.renderTeamHistory(c, http.StatusOK, team.Name, auth.TakeFlashOf(c), "")
	}
}

func (d Deps) renderTeamHistory(c echo.Context, status int, team, flash, applyErr string) error {
	view := templates.HistoryView{
		Page:       templates.Page{Title: "History of team " + team, Active: "teams", Problem: problem(d.Cache)},
		Flash:      flash,
		ApplyError: applyErr,
		Links: []templates.Link{{Href: "/teams", Label: "All teams"}, {Href: "/teams/" + team + "/edit", Label: "Edit", ID: "edit-link"},
			{Href: "/teams/" + team + "/drift", Label: "Drift", ID: "drift-link"}},
		Storage: fmt.Sprintf("The last %d revisions are kept in the ConfigMap %s/%s, in the console's own namespace, so they outlive the console; deleting the team deletes them.",
			domain.HistoryLimit, d.Settings.State(), domain.TeamHistoryName(d.Settings, team)),
	}
	revs, err := d.Applier.TeamHistory(c.Request().Context(), d.Settings, team)
	if err != nil {
		view.ApplyError = joinProblems(view.ApplyError, d.historyReadError(err))
	}
	shapes, _, err := d.fleet()
	if err != nil {
		return err
	}
	view.Revisions = revisionRows(revs, domain.DiffTeams, domain.DescribeTeam, func(t domain.Team) string {
		return d.teamRevisionProblem(team, t, shapes)
	}, teamHistoryURL(team))
	view.ReadOnly = d.readOnly(c, mayEditTeams)
	return render(c, status, templates.History(view))
}

// historyReadError explains why the history could not be read.
func (d Deps) historyReadError(err error) string {
	if apierrors.IsForbidden(err) {
		return "The console may not read its revision histories (ConfigMaps in its namespace " + d.Settings.State() +
			"), so they are not shown. Ask a cluster admin to apply the console's RBAC from deploy/rbac."
	}
	d.Log.Error("reading history", "err", err)
	return "The revision history could not be read from the cluster: " + explainWriteError(err)
}

func readErrorStatus(err error) int {
	if apierrors.IsForbidden(err) {
		return http.StatusForbidden
	}
	return http.StatusBadGateway
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

func missingRevision(n int) error {
	return echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("There is no revision %d: only the last %d revisions are kept.", n, domain.HistoryLimit))
}

// rollbackTeam re-applies an earlier revision's allocation through the normal
// apply path (build, dry run, apply as the signed-in user), which records it
// as a new revision with action rollback.
func rollbackTeam(d Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		stored, err := d.storedTeam(c.Param("team"))
		if err != nil {
			return err
		}
		n, err := revisionParam(c)
		if err != nil {
			return err
		}
		applier, ctx, err := d.writer(c)
		if err != nil {
			return err
		}
		revs, err := d.Applier.TeamHistory(ctx, d.Settings, stored.Name)
		if err != nil {
			return d.renderTeamHistory(c, readErrorStatus(err), stored.Name, "", d.historyReadError(err))
		}
		rev, ok := domain.FindRevision(revs, n)
		if !ok {
			return missingRevision(n)
		}
		team := rev.Allocation
		shapes, _, err := d.fleet()
		if err != nil {
			return err
		}
		if msg := d.teamRevisionProblem(stored.Name, team, shapes); msg != "" {
			return d.renderTeamHistory(c, http.StatusUnprocessableEntity, stored.Name, "", fmt.Sprintf("Revision %d cannot be applied: %s", n, msg))
		}
		if status, msg := d.applyTeam(cluster.WithRollback(ctx, n), c, applier, team, fmt.Sprintf("revision %d of team %s", n, team.Name)); msg != "" {
			return d.renderTeamHistory(c, status, team.Name, "", msg)
		}
		d.Log.Info("team rolled back", "team", team.Name, "revision", n, "user", auth.From(c).Name)
		d.waitForTeam(ctx, team)
		auth.SetFlashOf(c, fmt.Sprintf("Team %s rolled back to revision %d.", team.Name, n))
		return c.Redirect(http.StatusSeeOther, fmt.Sprintf("%s?rolledback=%d", teamHistoryURL(team.Name), n))
	}
}

// applyTeam is the normal apply path for a team allocation the console
// already holds (a revision, the stored allocation, an adopted one): build,
// dry run, apply. It answers the status and the words of a refusal, or "".
func (d Deps) applyTeam(ctx context.Context, c echo.Context, applier cluster.Applier, team domain.Team, what string) (int, string) {
	shapes, _, err := d.fleet()
	if err != nil {
		return http.StatusInternalServerError, "The cluster's nodes could not be read: " + err.Error()
	}
	objs, err := domain.BuildTeam(d.Settings, team, shapes)
	if err != nil {
		return http.StatusUnprocessableEntity, fmt.Sprintf("The console cannot apply %s: %v.", what, err)
	}
	if err := applier.CheckTeam(ctx, objs); err != nil {
		if msg, ok := d.forbidden(c, err, "team "+team.Name); ok {
			return http.StatusForbidden, msg
		}
		d.Log.Warn("rejected by the cluster", "what", what, "err", err)
		return http.StatusUnprocessableEntity, explainWriteError(err)
	}
	if err := applier.ApplyTeam(ctx, objs); err != nil {
		if msg, ok := d.forbidden(c, err, "team "+team.Name); ok {
			return http.StatusForbidden, msg
		}
		d.Log.Error("applying", "what", what, "err", err)
		return http.StatusBadGateway, explainWriteError(err)
	}
	return http.StatusOK, ""
}

func policyHistory(d Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		return d.renderPolicyHistory(c, http.StatusOK, auth.TakeFlashOf(c), "")
	}
}

func (d Deps) renderPolicyHistory(c echo.Context, status int, flash, applyErr string) error {
	view := templates.HistoryView{
		Page:       templates.Page{Title: "History of the cluster policy", Active: "policy", Problem: problem(d.Cache)},
		Flash:      flash,
		ApplyError: applyErr,
		Links:      []templates.Link{{Href: "/policy", Label: "Cluster policy", ID: "policy-link"}},
		Storage: fmt.Sprintf("The last %d revisions are kept in the ConfigMap %s/%s, in the console's own namespace, so they outlive the console.",
			domain.HistoryLimit, d.Settings.State(), domain.PolicyHistoryName(d.Settings)),
		DriftReapply: "/policy/drift/reapply",
	}
	revs, err := d.Applier.PolicyHistory(c.Request().Context(), d.Settings)
	if err != nil {
		view.ApplyError = joinProblems(view.ApplyError, d.historyReadError(err))
	}
	view.Revisions = revisionRows(revs, domain.DiffPolicies, domain.DescribePolicy, policyRevisionProblem, "/policy/history")
	if stored, err := d.storedPolicy(); err == nil {
		drift, err := cluster.PolicyDrift(stored, d.Cache)
		if err != nil {
			return err
		}
		for _, dr := range drift {
			view.Drift = append(view.Drift, dr.String())
		}
	}
	view.ReadOnly = d.readOnly(c, mayEditPolicy)
	return render(c, status, templates.History(view))
}

func rollbackPolicy(d Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		n, err := revisionParam(c)
		if err != nil {
			return err
		}
		applier, ctx, err := d.writer(c)
		if err != nil {
			return err
		}
		revs, err := d.Applier.PolicyHistory(ctx, d.Settings)
		if err != nil {
			return d.renderPolicyHistory(c, readErrorStatus(err), "", d.historyReadError(err))
		}
		rev, ok := domain.FindRevision(revs, n)
		if !ok {
			return missingRevision(n)
		}
		if msg := policyRevisionProblem(rev.Allocation); msg != "" {
			return d.renderPolicyHistory(c, http.StatusUnprocessableEntity, "", fmt.Sprintf("Revision %d cannot be applied: %s", n, msg))
		}
		if status, msg := d.applyPolicy(cluster.WithRollback(ctx, n), c, applier, rev.Allocation); msg != "" {
			return d.renderPolicyHistory(c, status, "", msg)
		}
		d.Log.Info("policy rolled back", "revision", n, "user", auth.From(c).Name)
		auth.SetFlashOf(c, fmt.Sprintf("Cluster policy rolled back to revision %d.", n))
		return c.Redirect(http.StatusSeeOther, fmt.Sprintf("/policy/history?rolledback=%d", n))
	}
}

// reapplyPolicy writes the stored policy again over hand edits of its
// priority classes.
func reapplyPolicy(d Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		p, err := d.storedPolicy()
		if err != nil {
			return err
		}
		applier, ctx, err := d.writer(c)
		if err != nil {
			return err
		}
		if status, msg := d.applyPolicy(cluster.WithNote(ctx, "re-applied over hand edits of the priority classes"), c, applier, p); msg != "" {
			return d.renderPolicyHistory(c, status, "", msg)
		}
		d.Log.Info("policy re-applied", "user", auth.From(c).Name)
		auth.SetFlashOf(c, "The stored cluster policy was re-applied.")
		return c.Redirect(http.StatusSeeOther, "/policy/history?reapplied=1")
	}
}

// applyPolicy applies a policy and waits until the cache shows it; it
// answers the status and the words of a refusal, or "".
func (d Deps) applyPolicy(ctx context.Context, c echo.Context, applier cluster.Applier, p domain.Policy) (int, string) {
	if err := applier.ApplyPolicy(ctx, d.Settings, p); err != nil {
		if msg, ok := d.forbidden(c, err, "the cluster policy"); ok {
			return http.StatusForbidden, msg
		}
		d.Log.Error("applying policy", "err", err)
		return http.StatusBadGateway, explainWriteError(err)
	}
	_ = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 3*time.Second, true, func(context.Context) (bool, error) {
		stored, err := d.storedPolicy()
		if err != nil {
			return false, nil
		}
		drift, err := cluster.PolicyDrift(p, d.Cache)
		return err == nil && len(drift) == 0 && len(domain.DiffPolicies(stored, p)) == 0, nil
	})
	return http.StatusOK, ""
}

// teamRevisionProblem says why a recorded allocation of team cannot be
// applied: a revision goes through the same validation as a saved form.
func (d Deps) teamRevisionProblem(team string, t domain.Team, shapes domain.ShapeLookup) string {
	if t.Name != team {
		return fmt.Sprintf("it is an allocation of team %q, not of team %s.", t.Name, team)
	}
	_, errs := form.FromTeam(t).Validate(shapes)
	return fieldErrorsProblem(errs)
}

// policyRevisionProblem is teamRevisionProblem for the policy.
func policyRevisionProblem(p domain.Policy) string {
	_, errs := form.FromPolicy(p).Validate()
	return fieldErrorsProblem(errs)
}

func fieldErrorsProblem(errs form.Errors) string {
	if !errs.Any() {
		return ""
	}
	var msgs []string
	for _, f := range errs.Fields() {
		msgs = append(msgs, f+": "+errs.Get(f))
	}
	return "it does not pass the form's validation (" + strings.Join(msgs, " ") + ")."
}
