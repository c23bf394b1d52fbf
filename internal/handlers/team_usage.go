package handlers

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/metrics"
	"github.com/openquota/console/internal/taskhistory"
	"github.com/openquota/console/web/templates"
)

func (d Deps) teamUsage(c echo.Context) error {
	snap := d.Live.Snapshot()
	name := c.Param("team")
	if _, found := teamRow(snap, name); !found {
		return echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("There is no team %q.", name))
	}
	visible, _ := d.scopeOf(c)
	view, _ := viewOf("/usage/"+url.PathEscape(name), visible)
	parts, err := d.renderer.render(d, c.Request().Context(), view, snap)
	if err != nil {
		return err
	}
	links := usageRowOf(domain.TeamUsage{Team: name}, resourceOf("gpu"), nil, false)
	rangeName, r := chartRange(c, time.Now())
	page := templates.TeamUsageView{
		Page:        templates.Page{Title: "Team " + name, Active: "usage", Problem: d.problem(), Snapshot: snap.Version},
		RunningLink: links.RunningLink, PendingLink: links.PendingLink,
		Live:   parts,
		Ranges: rangeChoices("/usage/"+url.PathEscape(name)+"?", rangeName),
		Edit:   teamURL(name, "edit"),
	}
	var tc metrics.TeamCharts
	if d.Prom != nil {
		tc, err = d.Prom.TeamSeries(c.Request().Context(), d.Settings, name, r)
	}
	unavailable := d.promNote(err)
	page.Charts = []templates.ChartModel{
		chart("usage-vs-quota", "GPUs in use vs quota", "GPUs", 0, unavailable, tc.Quota, tc.InUse),
		chart("borrowed", "Borrowed GPUs", "GPUs", 0, unavailable, tc.Borrowed),
		chart("utilization", "Hardware GPU utilization", "%", 100, unavailable, tc.Utilization),
	}
	page.Preemptions = d.teamPreemptions(c.Request().Context(), name)
	return render(c, http.StatusOK, templates.TeamUsage(page))
}

// preemptedBy is a team's preemptions by preempting team, and the gaps of
// their record.
type preemptedBy struct {
	by   []taskhistory.PreemptedBy
	gaps []taskhistory.Period
}

// teamPreemptions says how often the team's tasks were preempted in the
// last 7 days, and by which teams; nil without a task history.
func (d Deps) teamPreemptions(ctx context.Context, team string) *templates.TeamPreemptions {
	if d.History == nil {
		return nil
	}
	v := &templates.TeamPreemptions{Title: "Preempted in the last 7 days",
		Link: preemptionFilter{Window: "7d", Team: team}.query()}
	store, err := d.historyStore()
	if err != nil {
		v.Unavailable = d.historyNote(err)
		return v
	}
	now := time.Now()
	counted, err := d.teamPreempted.Get(ctx, team, func(ctx context.Context) (preemptedBy, error) {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		by, gaps, err := store.PreemptionsByTeam(ctx, taskhistory.LiveWindow(now.Add(-7*24*time.Hour), now), team)
		return preemptedBy{by, gaps}, err
	})
	by, gaps := counted.by, counted.gaps
	if err != nil {
		v.Unavailable = d.historyNote(err)
		return v
	}
	v.Gaps = gapNotes(gaps)
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

// teamUsageParts renders a team's usage now.
func (d Deps) teamUsageParts(ctx context.Context, v liveView, snap *domain.Snapshot) ([]templates.LivePart, error) {
	u, found := teamRow(snap, v.team)
	if !found {
		p, err := part("team-live", templates.Message("Team "+v.team+" no longer exists."))
		return []templates.LivePart{p}, err
	}
	util, note := d.hardwareUtil(ctx)
	row := usageRowOf(u, resourceOf("gpu"), util, false)
	if _, ok := util[u.Team]; !ok && note != "" {
		row.HardwareUtil = "unavailable"
	}
	p, err := part("team-live", templates.TeamSummary(row))
	return []templates.LivePart{p}, err
}
