package handlers

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"
	corev1 "k8s.io/api/core/v1"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/web/templates"
)

// usageResource is a resource the usage dashboard can show: one of the
// four every team has, or a MIG profile some team has quota of.
type usageResource struct {
	key, label, unit string
	// kube is the resource as Kubernetes and Kueue name it.
	kube    corev1.ResourceName
	figures func(domain.TeamUsage) usageFigures
	format  func(int64) string
	// profile is the MIG profile shown; "" for the four.
	profile string
}

// usageFigures are a team's figures in one resource.
// reserved is the quota held for tasks, admitted or waiting for admission
// checks (0 where not known).
type usageFigures struct{ allocated, inUse, borrowed, lent, wants, reserved int64 }

func (f *usageFigures) add(g usageFigures) {
	f.allocated += g.allocated
	f.inUse += g.inUse
	f.borrowed += g.borrowed
	f.lent += g.lent
	f.wants += g.wants
	f.reserved += g.reserved
}

// amountResource is a resource the usage rows keep as an Amount.
func amountResource(key, label, unit string, kube corev1.ResourceName, of func(domain.Amount) int64, format func(int64) string) usageResource {
	return usageResource{key: key, label: label, unit: unit, kube: kube, format: format, figures: func(u domain.TeamUsage) usageFigures {
		return usageFigures{of(u.Allocated), of(u.InUse), of(u.Borrowed), of(u.Lent), of(u.PendingDemand), of(u.Reserved)}
	}}
}

var usageResources = []usageResource{
	amountResource("gpu", "GPUs", "GPUs", domain.ResourceGPU, func(a domain.Amount) int64 { return a.GPUs }, itoa),
	amountResource("neuron", "Neuron devices", "devices", domain.ResourceNeuron, func(a domain.Amount) int64 { return a.Neuron }, itoa),
	amountResource("cpu", "vCPU", "vCPU", corev1.ResourceCPU, func(a domain.Amount) int64 { return a.CPUMilli }, domain.FormatVCPU),
	amountResource("memory", "Memory", "GiB", corev1.ResourceMemory, func(a domain.Amount) int64 { return a.MemoryMiB }, domain.FormatGiB),
}

// quotaWords names a quota briefly: its GPUs and Neuron devices, else
// (a queue of other resources, as Kueue's own examples are) its vCPU and
// memory; "none" for none.
func quotaWords(a domain.Amount) string {
	var parts []string
	if a.GPUs > 0 {
		parts = append(parts, domain.CountOf(a.GPUs, "GPU"))
	}
	if a.Neuron > 0 {
		parts = append(parts, itoa(a.Neuron)+" Neuron devices")
	}
	if len(parts) == 0 {
		if a.CPUMilli > 0 {
			parts = append(parts, domain.FormatVCPU(a.CPUMilli)+" vCPU")
		}
		if a.MemoryMiB > 0 {
			parts = append(parts, domain.FormatGiB(a.MemoryMiB)+" GiB")
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " · ")
}

// profileResource is a MIG profile's partitions.
func profileResource(profile string) usageResource {
	return usageResource{key: profile, label: profile, unit: "partitions", kube: domain.PartitionResource(profile), format: itoa, profile: profile,
		figures: func(u domain.TeamUsage) usageFigures {
			p := u.Partition(profile)
			return usageFigures{allocated: p.Allocated, inUse: p.InUse, borrowed: p.Borrowed, lent: p.Lent, wants: p.Pending}
		}}
}

// resourcesOf are the resources the dashboard offers: the four, then each
// MIG profile some team has quota of or waits for.
func resourcesOf(teams []domain.TeamUsage) []usageResource {
	out := slices.Clone(usageResources)
	for _, p := range domain.UsedProfiles(teams) {
		out = append(out, profileResource(p))
	}
	return out
}

// resourceOf is the resource key names, GPUs when it names none.
func resourceOf(key string) usageResource {
	for _, r := range usageResources {
		if r.key == key {
			return r
		}
	}
	if _, ok := domain.PartitionSlices(key); ok {
		return profileResource(key)
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

// stateLink is the Tasks page of team's tasks ("": every team's) in
// state, with more parameters.
func stateLink(team, state string, more ...string) string {
	params := append([]string{"state", state}, more...)
	if team != "" {
		params = append(params, "team", team)
	}
	return tasksLink(params...)
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
	// drawn are the team pages' charts, drawn once per answer.
	drawn *drawnCharts
}

// hardwareUtil is each team of snap's hardware utilization in res, from
// the utilization feed: its GPUs', or its partitions' of res's MIG
// profile; the note says why there is none.
func (p usagePages) hardwareUtil(ctx context.Context, snap *domain.Snapshot, res usageResource) (map[string]float64, string) {
	feed := p.live.feeds.utilization
	util, note := feed.current(ctx, snap)
	if res.profile == "" {
		return util, note
	}
	byProfile := map[string]float64{}
	for team, profiles := range feed.currentPartitions(ctx, snap) {
		if v, ok := profiles[res.profile]; ok {
			byProfile[team] = v
		}
	}
	return byProfile, note
}

func (p usagePages) usage(c echo.Context) error {
	snap := p.model.Snapshot()
	res := resourceOf(c.QueryParam("resource"))
	visible, _ := p.scopeOf(c)
	if _, ok := csvTable(c); ok {
		util, _ := p.hardwareUtil(c.Request().Context(), snap, res)
		return usageCSV(c, res, visibleRows(snap, visible), snap.Teams, util)
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
	for _, r := range resourcesOf(snap.Teams) {
		page.Resources = append(page.Resources, templates.ResourceChoice{Key: r.key, Label: r.label, Href: "/usage?resource=" + url.QueryEscape(r.key), Current: r.key == res.key})
	}
	page.CohortTree = p.trees.table(visible, res.key)
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
	util, note := p.hardwareUtil(r.ctx, r.snap, res)
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
	total, err := part("usage-total", templates.UsageRowCells(totalRowOf(r.snap.Teams, res, util), true))
	if err != nil {
		return nil, err
	}
	usage, err := r.table("usage-live", r.change.utilization, append(rows, total), func(rows []templates.LivePart) templ.Component {
		return templates.UsageTable(templates.UsageTablePart{Unit: res.unit, PromNote: note, Rows: rows[:len(rows)-1], Total: rows[len(rows)-1]})
	})
	return []templates.LivePart{usage}, err
}

// hardwareOf is a team's hardware GPU utilization (whole percent); the
// totals' is totalHardware.
func hardwareOf(team string, util map[string]float64) (string, bool) {
	v, ok := util[team]
	return domain.FormatPercentValue(v), ok
}

// totalHardware is the teams' hardware utilization together: each team's
// weighted by the devices it holds (a team of 17 GPUs counts 17 times one of
// 1), or their plain mean while none holds any. The devices are the GPUs
// whatever resource the page shows (its column is their utilization), or
// the partitions of the MIG profile shown.
func totalHardware(teams []domain.TeamUsage, res usageResource, util map[string]float64) (string, bool) {
	var sum, weights, plain float64
	n := 0
	for _, t := range teams {
		v, ok := util[t.Team]
		if !ok {
			continue
		}
		w := float64(t.InUse.GPUs)
		if res.profile != "" {
			w = float64(res.figures(t).inUse)
		}
		sum, weights, plain, n = sum+v*w, weights+w, plain+v, n+1
	}
	switch {
	case n == 0:
		return "", false
	case weights == 0:
		return domain.FormatPercentValue(plain / float64(n)), true
	}
	return domain.FormatPercentValue(sum / weights), true
}

// usageRowOf formats one team's usage in the chosen resource, each figure
// linked to the tasks it is made of.
func usageRowOf(u domain.TeamUsage, res usageResource, util map[string]float64, total bool) templates.UsageRow {
	return usageRowWith(u, res.figures(u), res, util, total)
}

// totalRowOf is the totals row of teams in the chosen resource.
func totalRowOf(teams []domain.TeamUsage, res usageResource, util map[string]float64) templates.UsageRow {
	f := totalFigures(teams, res)
	r := usageRowWith(domain.Totals(teams), f, res, util, true)
	// Quota a cohort holds itself is lent by no team (domain.LentShares):
	// the totals say how much of the teams' borrowing came from it.
	if given := f.borrowed - f.lent; given > 0 {
		r.Lent += " + " + res.format(given) + " from cohorts' own quota"
	}
	if v, ok := totalHardware(teams, res, util); ok {
		r.HardwareUtil = v + " % (teams weighted by use)"
	}
	return r
}

// totalFigures sums the teams' figures in res.
func totalFigures(teams []domain.TeamUsage, res usageResource) usageFigures {
	var f usageFigures
	for _, u := range teams {
		f.add(res.figures(u))
	}
	return f
}

func usageRowWith(u domain.TeamUsage, f usageFigures, res usageResource, util map[string]float64, total bool) templates.UsageRow {
	r := templates.UsageRow{
		Team: u.Team, Namespace: u.Namespace, Enabled: u.Enabled, Stop: u.Stop, Drained: u.Drained, RecentUseOrder: u.RecentUseOrder, Manager: u.Manager,
		Inactive:  u.Inactive,
		Allocated: res.format(f.allocated), InUse: res.format(f.inUse),
		Borrowed: res.format(f.borrowed), Lent: res.format(f.lent), Wants: res.format(f.wants),
		AllocUtil: shownPercent(domain.FormatPercent(f.inUse, f.allocated)),
		Running:   u.Running, Pending: u.Pending + u.Preempted, Preempted: u.Preempted,
		HardwareUtil: "—",
	}
	// Quota held for tasks that wait for admission checks is no one's to
	// borrow, although none of their pods runs.
	if waiting := f.reserved - f.inUse; waiting > 0 {
		r.InUse += " (+" + res.format(waiting) + " reserved for tasks waiting for admission checks)"
	}
	team := ""
	if !total {
		r.Link = "/usage/" + url.PathEscape(u.Team)
		team = u.Team
	}
	r.InUseLink = stateLink(team, "Admitted")
	r.RunningLink = r.InUseLink
	r.BorrowedLink = stateLink(team, "Admitted", "borrowing", "1")
	r.LentLink = stateLink("", "Admitted", "borrowing", "1")
	r.WantsLink = stateLink(team, "Queued")
	r.PendingLink = r.WantsLink
	if v, ok := hardwareOf(u.Team, util); ok && !total {
		r.HardwareUtil = v + " %"
	}
	return r
}

func usageCSV(c echo.Context, res usageResource, teams, all []domain.TeamUsage, util map[string]float64) error {
	u := " (" + res.unit + ")"
	hwHeader := "Hardware GPU utilization (%)"
	if res.profile != "" {
		hwHeader = "Hardware utilization of the " + res.profile + " partitions (%)"
	}
	w, err := startCSV(c, "team-usage-"+res.key+".csv", "Team", "Namespace", "Enabled", "Allocated"+u, "In use by tasks"+u,
		"Borrowed"+u, "Lent"+u, "Pending demand"+u, "Allocation utilization (%)", hwHeader,
		"Running tasks (count)", "Pending tasks, preempted included (count)", "Why Kueue admits nothing")
	if err != nil {
		return err
	}
	row := func(t domain.TeamUsage, f usageFigures, isTotal bool) error {
		enabled, halted := strconv.FormatBool(t.Enabled), t.Halted()
		if isTotal {
			enabled, halted = "", ""
		}
		alloc, _ := domain.FormatPercent(f.inUse, f.allocated)
		hw, known := hardwareOf(t.Team, util)
		if isTotal {
			hw, known = totalHardware(all, res, util)
		}
		if !known { // unknown is no reading, not 0 %
			hw = ""
		}
		return w.Row(t.Team, t.Namespace, enabled, res.format(f.allocated), res.format(f.inUse), res.format(f.borrowed),
			res.format(f.lent), res.format(f.wants), alloc, hw, strconv.Itoa(t.Running), strconv.Itoa(t.Pending+t.Preempted), halted)
	}
	for _, t := range teams {
		if err := row(t, res.figures(t), false); err != nil {
			return err
		}
	}
	if err := row(domain.Totals(all), totalFigures(all, res), true); err != nil {
		return err
	}
	return w.Close()
}
