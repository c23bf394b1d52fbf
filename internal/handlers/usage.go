package handlers

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/web/templates"
)

// usageResource is a resource the usage dashboard can show.
type usageResource struct {
	key, label, unit string
	of               func(domain.Amount) int64
	format           func(int64) string
}

var usageResources = []usageResource{
	{"gpu", "GPUs", "GPUs", func(a domain.Amount) int64 { return a.GPUs }, itoa},
	{"neuron", "Neuron devices", "devices", func(a domain.Amount) int64 { return a.Neuron }, itoa},
	{"cpu", "vCPU", "vCPU", func(a domain.Amount) int64 { return a.CPUMilli }, domain.FormatVCPU},
	{"memory", "Memory", "GiB", func(a domain.Amount) int64 { return a.MemoryMiB }, domain.FormatGiB},
}

func resourceOf(key string) usageResource {
	for _, r := range usageResources {
		if r.key == key {
			return r
		}
	}
	return usageResources[0]
}

// shownPercent is a percentage as a page shows it: "73 %", or "—".
func shownPercent(v string, ok bool) string {
	if !ok {
		return "—"
	}
	return v + " %"
}

func tasksLink(params ...string) string {
	q := url.Values{}
	for i := 0; i+1 < len(params); i += 2 {
		q.Set(params[i], params[i+1])
	}
	return "/tasks?" + q.Encode()
}

// usagePages are the team usage dashboard and each team's usage page.
type usagePages struct {
	frame
	model ReadModel
	live  *liveViews
	// charts are Prometheus's figures (utilization comes from the live
	// feeds); preemptions the task history's counts for a team's page.
	charts      *chartFeeds
	preemptions *teamPreemptions
	pieces      *pieces
	trees       *cohortTrees
	// recentUse is the LocalQueues' recent use, for a team ordered by it.
	recentUse RecentUse
	// insights are what needs attention, a team's on its page.
	insights *insightRules
}

// hardwareUtil is each team's GPU utilization, from the utilization feed;
// the note says why there is none.
func (p usagePages) hardwareUtil(ctx context.Context) (map[string]float64, string) {
	return p.live.feeds.utilization.current(ctx)
}

func (p usagePages) usage(c echo.Context) error {
	snap := p.model.Snapshot()
	res := resourceOf(c.QueryParam("resource"))
	visible, _ := p.scopeOf(c)
	if _, ok := csvTable(c); ok {
		util, _ := p.hardwareUtil(c.Request().Context())
		return usageCSV(c, res, visibleRows(snap, visible), domain.Totals(snap.Teams), util)
	}
	view, _ := viewOf(c.Request().URL.RequestURI(), visible)
	parts, snap, err := p.live.render(c.Request().Context(), view, snap)
	if err != nil {
		return err
	}
	page := templates.UsageView{
		Page:    templates.Page{Title: "Team usage", Active: "usage", Problem: p.problem(), Snapshot: snap.Version},
		CSVHref: csvHref(c, "", "resource"),
		Live:    parts,
		AsOf:    snap.Taken.Format(time.TimeOnly),
	}
	for _, r := range usageResources {
		page.Resources = append(page.Resources, templates.ResourceChoice{Key: r.key, Label: r.label, Href: "/usage?resource=" + r.key, Current: r.key == res.key})
	}
	page.CohortTree = p.trees.table(visible)
	return render(c, http.StatusOK, templates.Usage(page))
}

// visibleRows are the team rows a viewer may see.
func visibleRows(snap *domain.Snapshot, visible scope) []domain.TeamUsage {
	var shown []domain.TeamUsage
	for _, u := range snap.Teams {
		if visible.sees(u.Team) {
			shown = append(shown, u)
		}
	}
	return shown
}

// usageAffects: the usage table shows every visible team's row and the
// cluster's totals, and the teams' hardware utilization.
func (p usagePages) usageAffects(_ liveView, c liveChange) bool {
	return c.utilization || c.model.AnyTeam(nil)
}

// usageParts renders the usage table: every team the viewer may see, a row
// each (rendered again when the team changed), and the cluster's totals.
func (p usagePages) usageParts(r *liveRender) ([]templates.LivePart, error) {
	res := resourceOf(r.view.query.Get("resource"))
	util, note := p.hardwareUtil(r.ctx)
	var rows []templates.LivePart
	for _, u := range visibleRows(r.snap, r.view.scope) {
		id := "usage-queue-" + u.ClusterQueue
		row, ok := r.reuse(id, r.change.utilization || r.change.model.Team(u.Team))
		if !ok {
			var err error
			if row, err = part(id, templates.UsageRowCells(usageRowOf(u, res, util, false), false)); err != nil {
				return nil, err
			}
			row.Team = u.Team
		}
		rows = append(rows, row)
	}
	total, err := part("usage-total", templates.UsageRowCells(usageRowOf(domain.Totals(r.snap.Teams), res, util, true), true))
	if err != nil {
		return nil, err
	}
	usage, err := r.table("usage-live", r.change.utilization, append(rows, total), func(rows []templates.LivePart) templ.Component {
		return templates.UsageTable(templates.UsageTablePart{Unit: res.unit, PromNote: note, Rows: rows[:len(rows)-1], Total: rows[len(rows)-1]})
	})
	return []templates.LivePart{usage}, err
}

// hardwareOf is a team's hardware GPU utilization (whole percent), or, for
// the totals, the mean of the teams'.
func hardwareOf(team string, util map[string]float64, total bool) (string, bool) {
	if !total {
		v, ok := util[team]
		return domain.FormatPercentValue(v), ok
	}
	if len(util) == 0 {
		return "", false
	}
	var sum float64
	for _, v := range util {
		sum += v
	}
	return domain.FormatPercentValue(sum / float64(len(util))), true
}

// usageRowOf formats one team's usage (or the totals) in the chosen
// resource, each figure linked to the tasks it is made of.
func usageRowOf(u domain.TeamUsage, res usageResource, util map[string]float64, total bool) templates.UsageRow {
	r := templates.UsageRow{
		Team: u.Team, Namespace: u.Namespace, Enabled: u.Enabled,
		Allocated: res.format(res.of(u.Allocated)), InUse: res.format(res.of(u.InUse)),
		Borrowed: res.format(res.of(u.Borrowed)), Lent: res.format(res.of(u.Lent)), Wants: res.format(res.of(u.PendingDemand)),
		AllocUtil: shownPercent(domain.FormatPercent(res.of(u.InUse), res.of(u.Allocated))),
		Running:   u.Running, Pending: u.Pending + u.Preempted, Preempted: u.Preempted,
		HardwareUtil: "—",
	}
	team := []string{}
	if !total {
		r.Link = "/usage/" + url.PathEscape(u.Team)
		team = []string{"team", u.Team}
	}
	r.InUseLink = tasksLink(append(team, "state", "Admitted")...)
	r.RunningLink = r.InUseLink
	r.BorrowedLink = tasksLink(append(team, "state", "Admitted", "borrowing", "1")...)
	r.LentLink = tasksLink("state", "Admitted", "borrowing", "1")
	r.WantsLink = tasksLink(append(team, "state", "Queued")...)
	r.PendingLink = r.WantsLink
	if v, ok := hardwareOf(u.Team, util, total); ok {
		r.HardwareUtil = v + " %"
		if total {
			r.HardwareUtil += " (mean of teams)"
		}
	}
	return r
}

func usageCSV(c echo.Context, res usageResource, teams []domain.TeamUsage, total domain.TeamUsage, util map[string]float64) error {
	u := " (" + res.unit + ")"
	w, err := startCSV(c, "team-usage-"+res.key+".csv", "Team", "Namespace", "Enabled", "Allocated"+u, "In use by tasks"+u,
		"Borrowed"+u, "Lent"+u, "Pending demand"+u, "Allocation utilization (%)", "Hardware GPU utilization (%)",
		"Running tasks (count)", "Pending tasks, preempted included (count)")
	if err != nil {
		return err
	}
	row := func(t domain.TeamUsage, isTotal bool) error {
		enabled := strconv.FormatBool(t.Enabled)
		if isTotal {
			enabled = ""
		}
		alloc, _ := domain.FormatPercent(res.of(t.InUse), res.of(t.Allocated))
		hw, _ := hardwareOf(t.Team, util, isTotal)
		return w.Row(t.Team, t.Namespace, enabled, res.format(res.of(t.Allocated)), res.format(res.of(t.InUse)), res.format(res.of(t.Borrowed)),
			res.format(res.of(t.Lent)), res.format(res.of(t.PendingDemand)), alloc, hw, strconv.Itoa(t.Running), strconv.Itoa(t.Pending+t.Preempted))
	}
	for _, t := range teams {
		if err := row(t, false); err != nil {
			return err
		}
	}
	if err := row(total, true); err != nil {
		return err
	}
	return w.Close()
}
