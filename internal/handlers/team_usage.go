package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"
	corev1 "k8s.io/api/core/v1"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/memo"
	"github.com/openquota/console/internal/metrics"
	"github.com/openquota/console/internal/taskhistory"
	"github.com/openquota/console/web/templates"
)

func (p usagePages) teamUsage(c echo.Context) error {
	ctx := c.Request().Context()
	snap := p.model.Snapshot()
	name := c.Param("team")
	row, found := teamRow(snap, name)
	if !found {
		return echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("There is no team %q.", name))
	}
	visible, _ := p.scopeOf(c)
	view, _ := viewOf("/usage/"+url.PathEscape(name), visible)
	rangeName, _ := chartRange(c, time.Now())
	var page templates.TeamUsageView
	page.Charts, page.ChartsPending = p.teamCharts(ctx, snap, row, rangeName)
	page.Preemptions = p.preemptions.of(ctx, p.frame, name)
	var insights []domain.Insight
	if p.insights != nil {
		insights, _ = p.insights.current(ctx)
	}
	body := func(parts []templates.LivePart, shown *domain.Snapshot) templ.Component {
		v := page
		v.Live, v.Edit = parts, teamURL(name, "edit")
		if r, _ := teamRow(shown, name); r.Manager != "" {
			v.Manager, v.Import = r.Manager, importURL(r.ClusterQueue)
		}
		v.RunningLink, v.PendingLink = stateLink(name, "Admitted"), stateLink(name, "Queued")
		v.Ranges = rangeChoices("/usage/"+url.PathEscape(name)+"?", rangeName)
		v.Insights = insightRows(shownInsights(insights, visible), name)
		return templates.TeamUsageBody(v)
	}
	frame := func(shown *domain.Snapshot, body templ.Component) error {
		return render(c, http.StatusOK, templates.Framed(templates.Page{Title: "Team " + name, Active: "usage",
			Problem: p.problem(), Snapshot: shown.Version}, body))
	}
	if row.RecentUseOrder && p.recentUse != nil {
		// Kueue's recent use moves with its every sample: this page is
		// rendered whole.
		parts, shown, err := p.live.render(ctx, view, snap)
		if err != nil {
			return err
		}
		page.RecentUse = recentUseView(p.recentUse.LocalQueueUses(ctx, row.ClusterQueue))
		return frame(shown, body(parts, shown))
	}
	// The body is kept while the answers it was drawn from are the same.
	with := teamPageFigures{rangeName: rangeName, charts: first(page.Charts), chartsPending: page.ChartsPending,
		preemptions: preemptionsAnswer(page.Preemptions), insights: first(insights), insightCount: len(insights)}
	kept, shown, err := p.live.page(ctx, view, snap, with, body)
	if err != nil {
		return err
	}
	return frame(shown, kept)
}

// teamPageFigures name what a team page's body shows besides its live
// parts: its chart range and the answers of the charts, the task history
// and the insights it was drawn from (each kept until the next answer).
type teamPageFigures struct {
	rangeName     string
	charts        *templ.Component
	chartsPending bool
	preemptions   any // preemptionsAnswer
	insights      *domain.Insight
	insightCount  int
}

// preemptionsAnswer names the task history's answer a team page shows: the
// kept count, or (made anew for each request) the words while it is
// pending or unavailable.
func preemptionsAnswer(p *templates.TeamPreemptions) any {
	if p != nil && (p.Pending || p.Unavailable != "") {
		return [2]string{strconv.FormatBool(p.Pending), p.Unavailable}
	}
	return p
}

// first is the address of s's first element: the same while s is the same
// kept answer; nil when s is empty.
func first[T any](s []T) *T {
	if len(s) == 0 {
		return nil
	}
	return &s[0]
}

// teamCharts are a team page's charts of the named range, drawn once for
// each answer of the chart feed (asked again every chartsEvery), not for
// every request; pending is true while the first answer is asked. They
// chart the team's first resource (its GPUs, else its Neuron devices,
// vCPU or memory) and, for GPUs, the hardware utilization of the
// namespaces whose pods count for the team alone.
func (p usagePages) teamCharts(ctx context.Context, snap *domain.Snapshot, row domain.TeamUsage, rangeName string) (charts []templ.Component, pending bool) {
	res := chartedResource(row)
	queue := metrics.TeamQueue{ClusterQueue: row.ClusterQueue, Resource: res.kube.String()}
	if res.key == "gpu" {
		queue.Namespaces = domain.TeamNamespaces(snap.Teams, row.Team)
	}
	tc, pending, err := p.charts.teamSeries(ctx, queue, rangeName)
	key := queue.Key() + "\x00" + rangeName
	p.drawn.mu.Lock()
	d, ok := p.drawn.charts[key]
	p.drawn.mu.Unlock()
	if ok && d.err == err && sameTeamCharts(d.from, tc) {
		return d.charts, pending
	}
	unavailable := p.chartNote(err)
	label, borrowed := res.label, "Borrowed "+res.label
	if res.unit == "GiB" {
		label, borrowed = res.label+" (GiB)", "Borrowed memory (GiB)"
	}
	d = drawnTeamCharts{from: tc, err: err, charts: []templ.Component{
		p.pieces.chart(chart("usage-vs-quota", label+" in use vs quota", res.unit, 0, unavailable, tc.Quota, tc.InUse)),
		p.pieces.chart(chart("borrowed", borrowed, res.unit, 0, unavailable, tc.Borrowed)),
	}}
	if res.key == "gpu" {
		d.charts = append(d.charts, p.pieces.chart(chart("utilization", "Hardware GPU utilization", "%", 100, unavailable, tc.Utilization)))
	}
	p.drawn.mu.Lock()
	if p.drawn.charts == nil || len(p.drawn.charts) >= maxDrawnCharts {
		p.drawn.charts = map[string]drawnTeamCharts{}
	}
	p.drawn.charts[key] = d
	p.drawn.mu.Unlock()
	return d.charts, pending
}

// drawnCharts are the team pages' charts by team and range.
type drawnCharts struct {
	mu     sync.Mutex
	charts map[string]drawnTeamCharts
}

// drawnTeamCharts are a team's charts and the answer they were drawn from.
type drawnTeamCharts struct {
	from   metrics.TeamCharts
	err    error
	charts []templ.Component
}

// maxDrawnCharts bounds the teams' charts kept (teams × ranges).
const maxDrawnCharts = 2048

// sameTeamCharts reports whether a and b are the same answer of the feed:
// the same series, not merely equal ones.
func sameTeamCharts(a, b metrics.TeamCharts) bool {
	same := func(x, y metrics.Series) bool {
		return x.Name == y.Name && len(x.Points) == len(y.Points) && (len(x.Points) == 0 || &x.Points[0] == &y.Points[0])
	}
	return same(a.Quota, b.Quota) && same(a.InUse, b.InUse) && same(a.Borrowed, b.Borrowed) && same(a.Utilization, b.Utilization)
}

// teamPreemptions are the team pages' preemption counts, each shared, as
// the page shows them, for taskHistoryTTL.
type teamPreemptions struct {
	taskHistory interface {
		taskhistoryAvailability
		teamPreemptionCounts
	}
	counted *memo.Memo[*templates.TeamPreemptions]
}

func newTeamPreemptions(h TaskHistory) *teamPreemptions {
	return &teamPreemptions{taskHistory: h, counted: &memo.Memo[*templates.TeamPreemptions]{TTL: taskHistoryTTL, FailureTTL: taskHistoryTTL}}
}

// of says how often the team's tasks were preempted in the last 7 days,
// and by which teams; nil when the console has no task history at all.
func (tp *teamPreemptions) of(ctx context.Context, f frame, team string) *templates.TeamPreemptions {
	err := tp.taskHistory.Available()
	if errors.Is(err, errTaskHistoryOff) {
		return nil
	}
	unavailable := func(err error) *templates.TeamPreemptions {
		return &templates.TeamPreemptions{Title: preemptionsTitle, Link: preemptionsLink(team), Unavailable: f.taskHistoryNote(err)}
	}
	if err != nil {
		return unavailable(err)
	}
	now := time.Now()
	// A page never waits for the history: the first count is filled in
	// when it comes.
	counted, pending, err := tp.counted.Peek(ctx, team, firstAnswerGrace, func(ctx context.Context) (*templates.TeamPreemptions, error) {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		by, gaps, err := tp.taskHistory.PreemptionsByTeam(ctx, taskhistory.LiveWindow(now.Add(-7*24*time.Hour), now), team)
		if err != nil {
			return nil, err
		}
		return preemptionsView(team, by, gaps), nil
	})
	switch {
	case pending:
		return &templates.TeamPreemptions{Title: preemptionsTitle, Link: preemptionsLink(team), Pending: true}
	case err != nil:
		return unavailable(err)
	}
	return counted
}

const preemptionsTitle = "Preempted in the last 7 days"

func preemptionsLink(team string) string { return preemptionFilter{Window: "7d", Team: team}.query() }

// preemptionsView is a team's preemptions by preempting team as its page
// shows them.
func preemptionsView(team string, by []taskhistory.PreemptedBy, gaps []taskhistory.Period) *templates.TeamPreemptions {
	v := &templates.TeamPreemptions{Title: preemptionsTitle, Link: preemptionsLink(team), Gaps: gapNotes(gaps)}
	var times int64
	var lost float64
	for _, b := range by {
		times += b.Count
		lost += b.GPUHoursLost
		who := b.PreemptorTeam
		if who == "" {
			who = "not known"
		}
		v.By = append(v.By, templates.PreemptedByRow{Team: who, Count: strconv.FormatInt(b.Count, 10), Lost: domain.FormatHours(b.GPUHoursLost)})
	}
	switch times {
	case 0:
		v.Summary = "Team " + team + "'s tasks were not preempted in the last 7 days."
	case 1:
		v.Summary = fmt.Sprintf("Team %s's tasks were preempted once, losing %s GPU-hours of work.", team, domain.FormatHours(lost))
	default:
		v.Summary = fmt.Sprintf("Team %s's tasks were preempted %d times, losing %s GPU-hours of work.", team, times, domain.FormatHours(lost))
	}
	return v
}

func teamRow(snap *domain.Snapshot, team string) (domain.TeamUsage, bool) {
	for _, u := range snap.Teams {
		if u.Team == team {
			return u, true
		}
	}
	return domain.TeamUsage{}, false
}

// teamUsageAffects: a team's page shows its row and its hardware
// utilization.
func (p usagePages) teamUsageAffects(v liveView, c liveChange) bool {
	return c.utilization || c.model.Team(v.team)
}

// teamUsageParts renders a team's usage now.
func (p usagePages) teamUsageParts(r *liveRender) ([]templates.LivePart, error) {
	u, found := teamRow(r.snap, r.view.team)
	if !found {
		gone, err := part("team-live", templates.Message("Team "+r.view.team+" no longer exists."))
		return []templates.LivePart{gone}, err
	}
	v := templates.TeamSummaryView{Team: u.Team, Pending: u.Pending + u.Preempted, Inactive: u.Inactive, Stop: u.Stop, StoppedLocalQueues: u.StoppedLocalQueues}
	profiles := domain.UsedProfiles([]domain.TeamUsage{u})
	for _, res := range teamResources(u, profiles) {
		label := res.label
		switch {
		case res.profile != "":
			label += " partitions"
		case res.unit == "GiB": // the other resources are counted in themselves
			label += " (GiB)"
		}
		var util map[string]float64 // hardware utilization is the GPUs' alone
		var note string
		if res.key == "gpu" {
			util, note = p.hardwareUtil(r.ctx, r.snap, res)
		}
		row := usageRowOf(u, res, util, false)
		v.Columns = append(v.Columns, templates.SummaryColumn{Key: res.key, Label: label, Row: row})
		if res.key == "gpu" {
			v.HardwareUtil = row.HardwareUtil
			if _, ok := util[u.Team]; !ok && note != "" {
				v.HardwareUtil = "unavailable"
			}
		}
	}
	for _, profile := range profiles {
		util, _ := p.hardwareUtil(r.ctx, r.snap, profileResource(profile))
		v.ProfileUtil = append(v.ProfileUtil, templates.ProfileFigure{Profile: profile, Value: shownPercent(hardwareOf(u.Team, util))})
	}
	summary, err := part("team-live", templates.TeamSummary(v))
	if err != nil {
		return nil, err
	}
	limits, err := part("team-limits", templates.TeamLimitsTable(teamLimits(u)))
	return []templates.LivePart{summary, limits}, err
}

// chartedResource is the resource a team's charts draw: the first the
// queue has quota of or holds, not one its waiting tasks alone ask for (a
// queue of vCPU, asked for a GPU it has no quota of, charts its vCPU).
func chartedResource(u domain.TeamUsage) usageResource {
	all := teamResources(u, nil)
	for _, res := range all {
		if f := res.figures(u); f.allocated > 0 || f.inUse > 0 {
			return res
		}
	}
	return all[0]
}

// teamResources are the resources a team's page shows its figures in:
// those it has quota of, uses or waits for, GPUs first (and GPUs alone for
// a team with none of them), then its MIG profiles.
func teamResources(u domain.TeamUsage, profiles []string) []usageResource {
	var out []usageResource
	for _, res := range usageResources {
		if res.key == "gpu" || res.figures(u) != (usageFigures{}) {
			out = append(out, res)
		}
	}
	if len(out) > 1 && out[0].figures(u) == (usageFigures{}) {
		out = out[1:] // no GPUs at all: a queue of other resources
	}
	for _, profile := range profiles {
		out = append(out, profileResource(profile))
	}
	return out
}

// teamLimits is the team's quota and limits per flavor and resource, each
// resource in the units of the usage page.
func teamLimits(u domain.TeamUsage) templates.TeamLimits {
	v := templates.TeamLimits{Team: u.Team, NoCohort: u.Cohort == ""}
	for _, l := range u.Limits {
		word, format := limitUnits(l.Resource)
		limit := func(v *int64) string {
			if v == nil {
				return "none"
			}
			return format(*v)
		}
		v.Rows = append(v.Rows, templates.LimitRow{Flavor: l.Flavor, Resource: word, Nominal: format(l.Nominal), InUse: format(l.InUse),
			BorrowingLimit: limit(l.BorrowingLimit), LendingLimit: limit(l.LendingLimit), Borrowed: format(l.Borrowed), Lent: format(l.Lent)})
	}
	return v
}

// limitUnits names a resource with its unit, and formats its figures, as
// the usage page does; other resources are counts.
func limitUnits(r corev1.ResourceName) (string, func(int64) string) {
	switch r {
	case domain.ResourceGPU:
		return "GPUs", itoa
	case domain.ResourceNeuron:
		return "Neuron devices", itoa
	case corev1.ResourceCPU:
		return "vCPU", domain.FormatVCPU
	case corev1.ResourceMemory:
		return "Memory (GiB)", domain.FormatGiB
	case corev1.ResourceEphemeralStorage:
		return "Ephemeral storage (GiB)", domain.FormatGiB
	case corev1.ResourceStorage:
		return "Storage (GiB)", domain.FormatGiB
	}
	return domain.ResourceWord(r), itoa
}

// recentUseView shows a team's LocalQueues in the order Kueue gives them.
func recentUseView(uses []domain.LocalQueueUse, cfg *domain.RecentUseConfig, known bool) *templates.RecentUseView {
	v := &templates.RecentUseView{Meaning: domain.RecentUseMeaning(cfg, known)}
	for i, u := range uses {
		row := templates.RecentUseRow{Order: strconv.Itoa(i + 1), Namespace: u.Namespace, LocalQueue: u.Name,
			Weight: strconv.FormatFloat(u.Weight, 'g', 4, 64), Sampled: "not yet"}
		if u.Counted {
			oneDecimal := func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
			row.GPUs, row.VCPU, row.MemoryGiB = oneDecimal(u.Consumed.GPUs), oneDecimal(u.Consumed.VCPU), oneDecimal(u.Consumed.MemoryGiB)
			row.Sampled = u.LastUpdate.UTC().Format("2006-01-02 15:04:05 UTC")
		}
		v.Rows = append(v.Rows, row)
	}
	return v
}
