package handlers

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/taskhistory"
	"github.com/openquota/console/web/templates"
)

// preemptionsPageSize is how many preemptions a page lists; the CSV has
// them all.
const preemptionsPageSize = 50

// preemptionFilter is the preemption history's query, as typed in its URL.
type preemptionFilter struct {
	Window, Team, Class string
	After               string // the page cursor
}

func parsePreemptionFilter(q url.Values) preemptionFilter {
	f := preemptionFilter{Window: q.Get("window"), Team: q.Get("team"), Class: q.Get("class"), After: q.Get("after")}
	if !taskhistory.ValidPreemptionCursor(f.After) && f.After != "" {
		f.After = "" // a link edited by hand: the first page
	}
	f.Window = knownWindow(f.Window, "7d")
	return f
}

func (f preemptionFilter) window() time.Duration { return taskFilter{Window: f.Window}.window() }

// query is the address of the filter's page, changed by extra (name, value
// pairs).
func (f preemptionFilter) query(extra ...string) string {
	return pageURL("/preemptions", map[string]string{"window": "7d"}, append([]string{"window", f.Window,
		"team", f.Team, "class", f.Class, "after", f.After}, extra...)...)
}

// storeQuery is what the viewer may see of the filter; tasks that name no
// class are in the lowest of classes, as on the Tasks page.
func (f preemptionFilter) storeQuery(visible scope, lowestClass string, now time.Time) taskhistory.PreemptionQuery {
	pq := taskhistory.PreemptionQuery{Window: taskhistory.LiveWindow(now.Add(-f.window()), now), Class: f.Class,
		LowestClass: lowestClass, Limit: preemptionsPageSize, After: f.After}
	switch {
	case f.Team != "" && visible.sees(f.Team):
		pq.Team = f.Team
	case f.Team != "":
		pq.Teams = []string{} // a team they may not see: nothing
	case !visible.all:
		pq.Teams = visible.list()
	}
	return pq
}

// preemptionsPage is the preemption history, from the task history.
type preemptionsPage struct {
	frame
	model       ReadModel
	taskHistory interface {
		taskhistoryAvailability
		preemptionHistory
	}
	exports exportGate
}

// show shows (or exports) the preemption history.
func (p preemptionsPage) show(c echo.Context) error {
	snap := p.model.Snapshot()
	f := parsePreemptionFilter(c.QueryParams())
	visible, _ := p.scopeOf(c)
	now := time.Now()
	pq := f.storeQuery(visible, snap.LowestClass(), now)
	err := p.taskHistory.Available()
	if _, ok := csvTable(c); ok {
		if err != nil {
			return echo.NewHTTPError(http.StatusServiceUnavailable, p.taskHistoryNote(err))
		}
		return p.exports.run(c, func() error { return p.preemptionsCSV(c, pq, visible) })
	}
	view := templates.PreemptionsView{
		Page: templates.Page{Title: "Preemptions", Active: "preemptions", Problem: p.problem()},
		CSV:  f.query("format", "csv", "after", ""),
	}
	for _, w := range taskWindows {
		view.Windows = append(view.Windows, templates.Choice{Value: w.key, Label: w.label, Selected: w.key == f.Window})
	}
	view.Teams = teamChoices(snap, visible, f.Team)
	view.Classes = classChoices(snap, f.Class)
	if err != nil {
		view.Unavailable = p.taskHistoryNote(err)
		return render(c, http.StatusOK, templates.Preemptions(view))
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), 10*time.Second)
	defer cancel()
	page, err := p.taskHistory.Preemptions(ctx, pq)
	if err != nil {
		view.Unavailable = p.taskHistoryNote(err)
		return render(c, http.StatusOK, templates.Preemptions(view))
	}
	view.Gaps = gapNotes(page.Gaps)
	switch {
	case page.Total == 0:
		view.Summary = "No preemptions in this window."
	case f.After == "":
		view.Summary = fmt.Sprintf("%d preemptions, newest first.", page.Total)
	default:
		view.Summary = fmt.Sprintf("%d preemptions, newest first; a later page.", page.Total)
		view.First = f.query("after", "")
	}
	if page.Next != "" {
		view.Next = f.query("after", page.Next)
	}
	for _, pr := range page.Preemptions {
		view.Rows = append(view.Rows, preemptionRow(pr, visible))
	}
	return render(c, http.StatusOK, templates.Preemptions(view))
}

// shownTo is what a viewer may see of a preemption: the preemptor task
// itself (namespace, name, UID, and the UIDs in Kueue's message) only when
// they may see its team; otherwise its team and class (shown is false).
func shownTo(p taskhistory.Preemption, visible scope) (_ taskhistory.Preemption, shown bool) {
	if visible.sees(p.Preemptor.Team) {
		return p, true
	}
	p.Preemptor = taskhistory.TaskRef{Team: p.Preemptor.Team, Class: p.Preemptor.Class}
	p.Message = kueueUIDs.ReplaceAllString(p.Message, "$1: (not shown)")
	return p, false
}

// kueueUIDs are the preemptor's UIDs in Kueue's Preempted message:
// "Preempted to accommodate a workload (UID: …, JobUID: …) due to …".
var kueueUIDs = regexp.MustCompile(`\b(UID|JobUID): [^,;)\s]+`)

// shownMessage is Kueue's message about a task as a viewer may see it: the
// UIDs it names (a preemptor's, of whichever team) only to a viewer of the
// whole cluster. The message does not say whose they are.
func shownMessage(msg string, visible scope) string {
	if visible.all {
		return msg
	}
	return kueueUIDs.ReplaceAllString(msg, "$1: (not shown)")
}

// preemptorNotShown stands for a preemptor task of a team the viewer may not see.
const preemptorNotShown = "another team's task"

func preemptionRow(p taskhistory.Preemption, visible scope) templates.PreemptionRow {
	p, shown := shownTo(p, visible)
	r := templates.PreemptionRow{
		When: recordedTime(p.At), Task: taskName(p.Task), TaskLabel: taskLabel(p.Task.Named()), Team: p.Task.Team, Class: p.Task.Class, GPUs: strconv.FormatInt(p.GPUs, 10),
		Preemptor: taskName(p.Preemptor), PreemptorTeam: p.Preemptor.Team, PreemptorClass: p.Preemptor.Class,
		Reason: p.ReasonWords, Message: p.Message, Lost: "unknown",
	}
	switch {
	case !shown:
		r.Preemptor = preemptorNotShown
	case r.Preemptor == "":
		r.Preemptor = "not recorded"
		if p.Preemptor.UID != "" {
			r.Preemptor += " (UID " + p.Preemptor.UID + ")"
		}
	default:
		r.PreemptorLabel = taskLabel(p.Preemptor.Named())
	}
	if r.PreemptorLabel.Text == "" {
		r.PreemptorLabel.Text = r.Preemptor
	}
	if r.Reason == "" {
		r.Reason = p.Reason
	}
	if p.LostKnown {
		r.Lost = domain.FormatHours(p.GPUHoursLost)
	}
	return r
}

// taskName is a recorded task's namespace/Workload name ("" when not
// recorded): what identifies it in a page's data attributes.
func taskName(t taskhistory.TaskRef) string {
	if t.Name == "" {
		return ""
	}
	return t.Namespace + "/" + t.Name
}

// preemptionsCSV streams every preemption of the query, page by page, as
// the viewer may see them.
func (p preemptionsPage) preemptionsCSV(c echo.Context, pq taskhistory.PreemptionQuery, visible scope) error {
	pq.Limit, pq.After = 1000, ""
	ctx := c.Request().Context()
	first, err := p.taskHistory.Preemptions(ctx, pq)
	if err != nil {
		return echo.NewHTTPError(http.StatusServiceUnavailable, p.taskHistoryNote(err))
	}
	header := append(append([]string{"When (UTC)", "Namespace", "Task"}, ownerColumns...), "Team", "Priority class", "GPUs (count)",
		"Preemptor namespace", "Preemptor task", "Preemptor owner kind", "Preemptor owner name", "Preemptor UID", "Preemptor team", "Preemptor class",
		"Reason", "Kueue reason", "GPU-hours lost (h)", "Kueue message")
	s, err := startCSV(c, "preemptions.csv", header...)
	if err != nil {
		return err
	}
	for page := first; ; {
		for _, pr := range page.Preemptions {
			pr, _ = shownTo(pr, visible)
			lost := ""
			if pr.LostKnown {
				lost = domain.FormatHours(pr.GPUHoursLost)
			}
			cells := append(append([]string{pr.At.UTC().Format(time.RFC3339), pr.Task.Namespace, pr.Task.Name}, ownerCells(pr.Task.Named())...),
				pr.Task.Team, pr.Task.Class, strconv.FormatInt(pr.GPUs, 10), pr.Preemptor.Namespace, pr.Preemptor.Name)
			cells = append(append(cells, ownerCells(pr.Preemptor.Named())...), pr.Preemptor.UID, pr.Preemptor.Team, pr.Preemptor.Class,
				pr.ReasonWords, pr.Reason, lost, pr.Message)
			if err := s.Row(cells...); err != nil {
				return err
			}
		}
		if page.Next == "" {
			return s.Close()
		}
		pq.After = page.Next
		if page, err = p.taskHistory.Preemptions(ctx, pq); err != nil {
			return err // the header is sent: the download ends short
		}
	}
}

// teamChoices are the team filter's options for a viewer.
func teamChoices(snap *domain.Snapshot, visible scope, selected string) []templates.Choice {
	out := []templates.Choice{{Value: "", Label: "All teams", Selected: selected == ""}}
	for _, t := range visibleTeams(snap, visible) {
		out = append(out, templates.Choice{Value: t, Label: t, Selected: t == selected})
	}
	if selected != "" && visible.sees(selected) && !slices.ContainsFunc(out, func(c templates.Choice) bool { return c.Value == selected }) {
		out = append(out, templates.Choice{Value: selected, Label: selected, Selected: true}) // a team gone from the cluster
	}
	return out
}

// classChoices are the priority class filter's options.
func classChoices(snap *domain.Snapshot, selected string) []templates.Choice {
	out := []templates.Choice{{Value: "", Label: "All classes", Selected: selected == ""}}
	for _, cl := range snap.Classes {
		out = append(out, templates.Choice{Value: cl, Label: cl, Selected: cl == selected})
	}
	return out
}
