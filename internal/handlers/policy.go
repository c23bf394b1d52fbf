package handlers

import (
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/labstack/echo/v4"

	"github.com/openquota/console/internal/auth"
	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/form"
	"github.com/openquota/console/internal/write"
	"github.com/openquota/console/web/templates"
)

// policyPage is the cluster policy's form.
type policyPage struct {
	frame
	policy Policy
	writes policyWrites
	orders *recentUseOrders
}

// recentUseOrders keep, for the newest snapshot, the teams each order of
// waiting tasks would change: a page names all of them, and finding them
// among hundreds of teams for every request was a quarter of its time.
type recentUseOrders struct {
	mu    sync.Mutex
	snap  *domain.Snapshot
	teams map[bool][]string
	named map[bool]string // the teams, as the page names them
}

func (p policyPage) show(c echo.Context) error {
	return p.render(c, http.StatusOK, form.FromPolicy(p.policy.Policy()), write.Outcome{Message: auth.TakeFlashOf(c)})
}

func (p policyPage) save(c echo.Context) error {
	values, err := c.FormParams()
	if err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, "The form could not be read.")
	}
	f := form.ParsePolicy(values)
	switch step(values, p.previewDenied(c, mayEditPolicy)) {
	case stepEdit:
		return p.render(c, http.StatusOK, f, write.Outcome{})
	case stepPreview:
		im, out := p.writes.PreviewPolicy(c.Request().Context(), f)
		if out.Kind == write.Rejected {
			return p.render(c, out.Status(), f, out)
		}
		return render(c, http.StatusOK, templates.Confirm(templates.ConfirmView{
			Page:   templates.Page{Title: "Cluster policy: what Kueue will do", Active: "policy", Problem: p.problem()},
			Impact: impactView(im, out), Action: "/policy", Hidden: carried(values), Apply: "Apply the policy",
			ReadOnly: p.readOnly(c, mayEditPolicy),
		}))
	}
	out := p.writes.SavePolicy(withPreviewNote(c, values), p.identity(c), f)
	return respond(c, out, "/policy?saved=1", func(status int) error { return p.render(c, status, f, out) })
}

// render shows the policy form; out is the outcome of a save (or a flash
// message when it is Saved).
func (p policyPage) render(c echo.Context, status int, f form.PolicyForm, out write.Outcome) error {
	view := templates.PolicyView{
		Page: templates.Page{Title: "Cluster policy", Active: "policy", Problem: p.problem()},
		Form: templates.PolicyFields{Prioritization: f.Prioritization, IdleAllocation: f.IdleAllocation,
			LongWait: f.LongWait, IdleUtilization: f.IdleUtilization, Borrowing: f.Borrowing,
			DefaultBorrowing:       strconv.Itoa(int(domain.DefaultInsightThresholds.SustainedBorrowing.Minutes())),
			DefaultLongWait:        strconv.Itoa(int(domain.DefaultInsightThresholds.LongWait.Minutes())),
			DefaultIdleUtilization: strconv.FormatFloat(domain.DefaultInsightThresholds.IdleUtilization, 'f', 0, 64)},
		Errors: fieldErrors(out.Fields), ReadOnly: p.readOnly(c, mayEditPolicy),
	}
	if out.Kind == write.Saved {
		view.Flash = out.Message
	} else {
		view.ApplyError = out.Message
	}
	for _, r := range f.Classes {
		view.Rows = append(view.Rows, templates.ClassFields(r))
	}
	for len(view.Rows) < form.MaxPriorityClasses {
		view.Rows = append(view.Rows, templates.ClassFields{})
	}
	// Warn against what is stored (not what was typed and refused); when
	// Kueue's configuration cannot be read, warn about nothing.
	cfg, err := p.policy.KueueRecentUse(c.Request().Context())
	view.RecentUse = domain.RecentUseMeaning(cfg, err == nil)
	// Names of teams only as the viewer may see them; the choices, which
	// name every team, only to who may make them.
	visible, _ := p.scopeOf(c)
	view.RecentUseTeams = p.recentUseTeams(visible)
	if view.ReadOnly == "" {
		view.RecentUseChoices = p.recentUseChoices()
	}
	if kueue, err := p.policy.KueueSettings(c.Request().Context()); err == nil {
		view.Mismatch = domain.FairSharingMismatch(p.policy.Policy(), kueue.FairSharing)
		view.UnqueuedJobs = domain.UnqueuedJobsWarning(kueue)
	} else {
		p.log.Debug("reading Kueue's configuration", "err", err)
	}
	return render(c, status, templates.Policy(view))
}

// recentUseChoices are the two ways to set every team's order of waiting
// tasks at once, each naming the teams it changes.
func (p policyPage) recentUseChoices() []templates.RecentUseChoice {
	var out []templates.RecentUseChoice
	all, named := p.recentUseChanges()
	for _, on := range []bool{true, false} {
		changes := all[on]
		if len(changes) == 0 {
			continue
		}
		c := templates.RecentUseChoice{Order: recentUseOrderValue[on], Teams: named[on], Count: len(changes)}
		if on {
			c.Label = "Order every team's waiting tasks by recent use"
		} else {
			c.Label = "Order every team's waiting tasks by priority and arrival"
		}
		out = append(out, c)
	}
	return out
}

// recentUseChanges are the console's teams each order would change, from
// the read model's rows (the page must not read every allocation):
// [true] those that would order by recent use, [false] the others; and
// each list as the page names it.
func (p policyPage) recentUseChanges() (teams map[bool][]string, named map[bool]string) {
	if p.queues == nil {
		return nil, nil
	}
	snap := p.queues.Snapshot()
	p.orders.mu.Lock()
	if p.orders.snap == snap {
		teams, named = p.orders.teams, p.orders.named
		p.orders.mu.Unlock()
		return teams, named
	}
	p.orders.mu.Unlock()
	teams, named = map[bool][]string{}, map[bool]string{}
	for _, r := range snap.Teams {
		// This console's teams, as kueue.Cache.Teams counts them: named
		// with its prefix, or imported.
		if r.Manager == "" && (r.Imported || r.ClusterQueue == p.settings.ClusterQueue(r.Team)) {
			teams[!r.RecentUseOrder] = append(teams[!r.RecentUseOrder], r.Team)
		}
	}
	for on, list := range teams {
		named[on] = strings.Join(list, ", ")
	}
	p.orders.mu.Lock()
	p.orders.snap, p.orders.teams, p.orders.named = snap, teams, named
	p.orders.mu.Unlock()
	return teams, named
}

// recentUseOrderValue is the posted value of each order.
var recentUseOrderValue = map[bool]string{true: "recent-use", false: "arrival"}

// setRecentUse sets every team's order of waiting tasks. The page named
// the teams it changes; when they are no longer the same, nothing is
// written and the page shows the new list.
func (p policyPage) setRecentUse(c echo.Context) error {
	if msg := p.readOnly(c, mayEditPolicy); msg != "" {
		return echo.NewHTTPError(http.StatusForbidden, msg)
	}
	order := c.FormValue("order")
	on := order == recentUseOrderValue[true]
	if !on && order != recentUseOrderValue[false] {
		return echo.NewHTTPError(http.StatusBadRequest, "Choose an order: recent-use or arrival.")
	}
	current := p.policy.Policy()
	if _, named := p.recentUseChanges(); named[on] != c.FormValue("previewed") {
		return p.render(c, http.StatusConflict, form.FromPolicy(current), write.Outcome{Kind: write.Conflict,
			Message: "The teams changed since the page was shown; nothing was changed. Review the list below and choose again."})
	}
	out := p.writes.SetRecentUseOrder(c.Request().Context(), p.identity(c), on)
	return respond(c, out, "/policy?saved=1", func(status int) error { return p.render(c, status, form.FromPolicy(current), out) })
}

// recentUseTeams names the teams whose queues order by recent use, of
// those visible.
func (p policyPage) recentUseTeams(visible scope) string {
	if p.queues == nil {
		return ""
	}
	var names []string
	for _, r := range p.queues.Snapshot().Teams {
		if r.RecentUseOrder && visible.sees(r.Team) {
			names = append(names, r.Team)
		}
	}
	return strings.Join(names, ", ")
}
