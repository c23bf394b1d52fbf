package handlers

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/web/templates"
)

// insightsCadence is how often the rules are evaluated again while the
// cluster does not change: waits grow with the clock.
const insightsCadence = 10 * time.Second

// insightRules evaluates the insight rules for the overview's headline and
// the insights page, at most once per snapshot and cadence.
type insightRules struct {
	model       ReadModel
	overview    ClusterOverview
	utilization *utilizationFeed
	history     taskhistoryAvailability
	thresholds  domain.InsightThresholds
	now         func() time.Time

	mu    sync.Mutex
	key   string
	found []domain.Insight
	head  domain.Headline
}

// current are the insights and the headline now.
func (r *insightRules) current(ctx context.Context) ([]domain.Insight, domain.Headline) {
	snap := r.model.Snapshot()
	now := r.now()
	key := strconv.FormatUint(snap.Version, 10) + "/" + strconv.FormatUint(r.overview.Changes(), 10) + "/" +
		strconv.FormatInt(now.Truncate(insightsCadence).Unix(), 10)
	r.mu.Lock()
	defer r.mu.Unlock()
	if key == r.key {
		return r.found, r.head
	}
	in := domain.InsightInput{Snapshot: snap, Thresholds: r.thresholds, Now: now}
	if ov, err := r.overview.Overview(); err == nil {
		in.Capacity = ov.InstanceTypes
	}
	util, note := r.utilization.current(ctx)
	if note != "" {
		in.Unavailable = append(in.Unavailable, "GPU utilization is unavailable: "+note)
	} else {
		in.Utilization = util
	}
	if err := r.history.Available(); err != nil && err != errTaskHistoryOff {
		in.Unavailable = append(in.Unavailable, "The task history cannot be read now: statistics and reports stop at its last record.")
	}
	r.key, r.found, r.head = key, domain.Insights(in), domain.HeadlineOf(in)
	return r.found, r.head
}

// insightsPage lists what needs attention.
type insightsPage struct {
	frame
	rules *insightRules
}

func (p insightsPage) show(c echo.Context) error {
	visible, _ := p.scopeOf(c)
	found, _ := p.rules.current(c.Request().Context())
	view := templates.InsightsView{Page: templates.Page{Title: "Insights", Active: "insights", Problem: p.problem()},
		Thresholds: "Long wait: over " + domain.FormatDuration(p.rules.thresholds.LongWait) + "; idle GPUs: under " +
			strconv.FormatFloat(p.rules.thresholds.IdleUtilization, 'f', 0, 64) + " % utilization."}
	for _, i := range shownInsights(found, visible) {
		view.Rows = append(view.Rows, templates.InsightRow{Severity: i.Severity.String(), Rule: i.Rule, Team: orDash(i.Team),
			Title: i.Title, Evidence: i.Evidence, Link: i.Link})
	}
	return render(c, http.StatusOK, templates.Insights(view))
}

// shownInsights are the insights a user may see: a team's only to who sees
// that team, the cluster's to everyone.
func shownInsights(all []domain.Insight, visible scope) []domain.Insight {
	var out []domain.Insight
	for _, i := range all {
		if i.Team == "" || visible.sees(i.Team) {
			out = append(out, i)
		}
	}
	return out
}

// headlineView is the overview's top row.
func headlineView(h domain.Headline, open int) templates.HeadlineView {
	v := templates.HeadlineView{Ready: itoa(h.Ready), Allocated: itoa(h.Allocated), InUse: itoa(h.InUse),
		Borrowed: itoa(h.Borrowed), Idle: "—", Waiting: strconv.Itoa(h.Waiting), LongestWait: "—", Open: strconv.Itoa(open)}
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
