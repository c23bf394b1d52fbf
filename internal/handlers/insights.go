package handlers

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/web/templates"
)

// insightsCadence is how often the rules are evaluated again: the headline
// and the insights may be that old, so that no request waits for them
// while the cluster churns.
const insightsCadence = time.Second

// insightRules evaluates the insight rules for the overview's headline and
// the insights page, at most once per cadence, in the background once a
// first answer is known.
type insightRules struct {
	model       ReadModel
	overview    ClusterOverview
	utilization *utilizationFeed
	history     taskhistoryAvailability
	// policy holds the thresholds; nil takes the defaults.
	policy storedPolicy
	now    func() time.Time
	// latest is what the rules found last: the pages and the insights
	// page's live list read the same evaluation.
	latest *insightsFeed
}

type evaluatedInsights struct {
	found []domain.Insight
	head  domain.Headline
}

// storedPolicy is the cluster policy as stored: the insights' thresholds.
type storedPolicy interface {
	Policy() domain.Policy
}

func newInsightRules(model ReadModel, overview ClusterOverview, utilization *utilizationFeed, history taskhistoryAvailability, policy storedPolicy) *insightRules {
	r := &insightRules{model: model, overview: overview, utilization: utilization, history: history,
		policy: policy, now: time.Now}
	r.latest = &insightsFeed{rules: r}
	return r
}

// current are the insights and the headline, at most insightsCadence old.
func (r *insightRules) current(ctx context.Context) ([]domain.Insight, domain.Headline) {
	e := r.latest.current(ctx)
	return e.found, e.head
}

func (r *insightRules) evaluate(ctx context.Context) evaluatedInsights {
	in := domain.InsightInput{Snapshot: r.model.Snapshot(), Thresholds: r.thresholds(), Now: r.now()}
	if ov, err := r.overview.Overview(); err == nil {
		in.Capacity = ov.InstanceTypes
	}
	// Never wait for Prometheus here: the figures a page already shows.
	switch util, note, asked := r.utilization.latest(in.Snapshot); {
	case !asked:
	case note != "":
		in.Unavailable = append(in.Unavailable, note)
	default:
		in.Utilization, in.GPUsOverWindow = util, r.utilization.latestOverIdleWindow(in.Snapshot)
		in.PartitionUtilization = r.utilization.latestPartitions(in.Snapshot)
	}
	in.Ongoing = in.Snapshot.Ongoing(domain.Selection{}, 0, in.Now)
	in.BorrowingSince = in.Snapshot.BorrowingSince
	if err := r.history.Available(); err != nil && !errors.Is(err, errTaskHistoryOff) {
		in.Unavailable = append(in.Unavailable, "The task history cannot be read now: statistics and reports stop at its last record.")
	} else if err := r.history.Recording(); err != nil {
		in.Unavailable = append(in.Unavailable, "The task history store refuses new records: statistics and reports stop at its last record until it takes them again.")
	}
	return evaluatedInsights{found: domain.Insights(in), head: domain.HeadlineOf(in)}
}

// thresholds are the policy's, the defaults where it sets none.
func (r *insightRules) thresholds() domain.InsightThresholds {
	if r.policy == nil {
		return domain.DefaultInsightThresholds
	}
	return r.policy.Policy().InsightThresholds()
}

// insightsPage lists what needs attention; the list is a live part, pushed
// to open pages as the rules find more or less.
type insightsPage struct {
	frame
	rules *insightRules
	model ReadModel
	live  *liveViews
}

func (p insightsPage) show(c echo.Context) error {
	visible, _ := p.scopeOf(c)
	if _, isCSV := csvTable(c); isCSV {
		return insightsCSV(c, insightRows(shownInsights(p.rules.latest.current(c.Request().Context()).found, visible), c.QueryParam("team")))
	}
	view, _ := viewOf(c.Request().URL.RequestURI(), visible)
	parts, snap, err := p.live.render(c.Request().Context(), view, p.model.Snapshot())
	if err != nil {
		return err
	}
	page := templates.InsightsView{Page: templates.Page{Title: "Insights", Active: "insights", Problem: p.problem(), Snapshot: snap.Version},
		Thresholds: thresholdsWord(p.rules.thresholds()), Live: parts, CSV: "/insights?format=csv"}
	if team := view.query.Get("team"); team != "" {
		page.Title = "Insights: team " + team
		page.CSV += "&team=" + url.QueryEscape(team)
	}
	return render(c, http.StatusOK, templates.Insights(page))
}

// insightsAffects: the list changes when the rules find something else.
func (p insightsPage) insightsAffects(_ liveView, c liveChange) bool { return c.insights }

// insightsParts renders the list of the insights the viewer may see (of
// the view's team, when it names one).
func (p insightsPage) insightsParts(r *liveRender) ([]templates.LivePart, error) {
	feed := r.feeds.insights
	feed.watched()
	found := feed.current(r.ctx).found
	list, err := part("insights-live", templates.InsightsList(insightRows(shownInsights(found, r.view.scope), r.view.query.Get("team"))))
	return []templates.LivePart{list}, err
}

// insightsCSV writes the insights the viewer may see, as the page lists
// them.
func insightsCSV(c echo.Context, rows []templates.InsightRow) error {
	w, err := startCSV(c, "insights.csv", "Severity", "Rule", "Team", "Title", "Evidence", "Link")
	if err != nil {
		return err
	}
	for _, r := range rows {
		if err := w.Row(r.Severity, r.Rule, r.Team, r.Title, r.Evidence, r.Link); err != nil {
			return err
		}
	}
	return w.Close()
}

// thresholdsWord says when the insights speak up.
func thresholdsWord(t domain.InsightThresholds) string {
	word := "Long wait: over " + domain.FormatDuration(t.LongWait)
	for _, class := range slices.Sorted(maps.Keys(t.ClassLongWait)) {
		word += " (class " + class + ": " + domain.FormatDuration(t.ClassLongWait[class]) + ")"
	}
	return word + "; idle GPUs: under " + strconv.FormatFloat(t.IdleUtilization, 'f', 0, 64) + " % utilization; sustained borrowing: over " +
		domain.FormatDuration(t.SustainedBorrowing) + ". The cluster policy sets them."
}

// insightRows are the insights ready to show: of team only when team is
// not "".
func insightRows(found []domain.Insight, team string) []templates.InsightRow {
	var out []templates.InsightRow
	for _, i := range found {
		if team != "" && i.Team != team {
			continue
		}
		out = append(out, templates.InsightRow{Severity: i.Severity.String(), Rule: i.Rule, Team: orDash(i.Team),
			Title: i.Title, Evidence: i.Evidence, Link: i.Link})
	}
	return out
}

// shownInsights are the insights a user may see: a team's only to who sees
// that team, and one naming other teams too (a lender) without them to who
// may not see them all.
func shownInsights(all []domain.Insight, visible scope) []domain.Insight {
	var out []domain.Insight
	for _, i := range all {
		if i.Team != "" && !visible.sees(i.Team) {
			continue
		}
		if !visible.all && i.Guarded != "" && slices.ContainsFunc(i.Others, func(t string) bool { return !visible.sees(t) }) {
			i.Title = i.Guarded
		}
		out = append(out, i)
	}
	return out
}

// countShown counts the insights a user may see, without copying them.
func countShown(all []domain.Insight, visible scope) int {
	if visible.all {
		return len(all)
	}
	n := 0
	for _, i := range all {
		if i.Team == "" || visible.sees(i.Team) {
			n++
		}
	}
	return n
}

// headlineView is the overview's top row.
func headlineView(h domain.Headline, open int) templates.HeadlineView {
	v := templates.HeadlineView{Ready: itoa(h.Ready), Allocated: itoa(h.Allocated), InUse: itoa(h.InUse),
		Borrowed: itoa(h.Borrowed), Idle: "—", Waiting: strconv.Itoa(h.Waiting), LongestWait: "—", Open: strconv.Itoa(open)}
	if !h.At.IsZero() {
		v.At = h.At.UTC().Format("15:04:05 UTC")
	}
	if h.IdleKnown {
		v.Idle = itoa(h.Idle)
	}
	if h.Waiting > 0 {
		v.LongestWait = domain.FormatDuration(h.LongestWait)
	}
	return v
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}
