package handlers

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/memo"
	"github.com/openquota/console/internal/taskhistory"
	"github.com/openquota/console/web/templates"
)

// taskWindow is a window the task statistics can cover.
type taskWindow struct {
	key, label string
	d          time.Duration
}

// knownWindow is key when it is one of taskWindows, else fallback: the
// page shows the window it covers as chosen, and its exports name it.
func knownWindow(key, fallback string) string {
	if slices.ContainsFunc(taskWindows, func(w taskWindow) bool { return w.key == key }) {
		return key
	}
	return fallback
}

// Windows the task statistics can cover.
var taskWindows = []taskWindow{
	{"1h", "Last hour", time.Hour},
	{"6h", "Last 6 hours", 6 * time.Hour},
	{"24h", "Last 24 hours", 24 * time.Hour},
	{"7d", "Last 7 days", 7 * 24 * time.Hour},
	{"30d", "Last 30 days", 30 * 24 * time.Hour},
	{"90d", "Last 90 days", 90 * 24 * time.Hour},
}

var taskStates = []struct{ key, label string }{
	{"", "All unfinished"},
	{"Queued", "Pending or preempted"},
	{string(domain.TaskAdmitted), "Running"},
	{string(domain.TaskPending), "Pending"},
	{string(domain.TaskPreempted), "Preempted"},
	{string(domain.TaskFinished), "Finished"},
	{"all", "All"},
}

// stateKey is the state filter a URL names, by its key or its label in any
// case ("running" is Admitted); as typed when it names none.
func stateKey(typed string) string {
	for _, st := range taskStates {
		if strings.EqualFold(typed, st.key) || (typed != "" && strings.EqualFold(typed, st.label)) {
			return st.key
		}
	}
	return typed
}

// taskParams are the query parameters of the Tasks page, with their
// defaults.
var taskParams = map[string]string{"window": "24h", "team": "", "class": "", "state": "", "borrowing": "",
	"q": "", "sort": domain.TaskSorts[0], "desc": "", "page": "1"}

// taskFilter is the tasks page's query, as typed in its URL.
type taskFilter struct {
	Window, Team, Class, State string
	Borrowing                  bool
	Search, Sort               string
	Desc                       bool
	Page                       int
}

func parseTaskFilter(q url.Values) taskFilter {
	f := taskFilter{Window: q.Get("window"), Team: q.Get("team"), Class: q.Get("class"),
		State: q.Get("state"), Borrowing: q.Get("borrowing") == "1", Search: strings.TrimSpace(q.Get("q")),
		Sort: q.Get("sort"), Desc: q.Get("desc") == "1"}
	f.Window = knownWindow(f.Window, taskParams["window"])
	f.State = stateKey(f.State)
	if !slices.Contains(domain.TaskSorts, f.Sort) {
		f.Sort = domain.TaskSorts[0]
	}
	f.Page, _ = strconv.Atoi(q.Get("page"))
	// Past the last page shows the last; a number whose rows would
	// overflow is past every list.
	f.Page = min(max(f.Page, 1), maxTaskPage)
	return f
}

// maxTaskPage is more pages than any task list has.
const maxTaskPage = 1 << 24

func (f taskFilter) window() time.Duration {
	for _, w := range taskWindows {
		if w.key == f.Window {
			return w.d
		}
	}
	return 24 * time.Hour
}

// query is the address of the filter's page, defaults left out, changed by
// extra (name, value pairs).
func (f taskFilter) query(extra ...string) string {
	flag := func(b bool) string {
		if b {
			return "1"
		}
		return ""
	}
	return pageURL("/tasks", taskParams, append([]string{"window", f.Window, "team", f.Team, "class", f.Class,
		"state", f.State, "borrowing", flag(f.Borrowing), "q", f.Search, "sort", f.Sort, "desc", flag(f.Desc),
		"page", strconv.Itoa(f.Page)}, extra...)...)
}

// selection is what the filter's statistics and list cover for a viewer.
func (f taskFilter) selection(visible scope) domain.Selection {
	sel := domain.Selection{Class: f.Class}
	switch {
	case f.Team != "" && visible.sees(f.Team):
		sel.Teams = []string{f.Team}
	case f.Team != "":
		sel.Teams = []string{} // a team they may not see: nothing
	case !visible.all:
		sel.Teams = visible.list()
	}
	return sel
}

func (f taskFilter) taskQuery(visible scope) domain.TaskQuery {
	return domain.TaskQuery{Selection: f.selection(visible), State: f.State, Borrowing: f.Borrowing,
		Search: f.Search, Sort: f.Sort, Desc: f.Desc}
}

// tasksPageSize is how many tasks a page of the list shows; the CSV export
// has them all.
const tasksPageSize = 50

// visibleTeams are the teams a viewer may pick: those with tasks or a
// queue. The result may be shared: do not change it.
func visibleTeams(snap *domain.Snapshot, visible scope) []string {
	if visible.all {
		return snap.TeamNames()
	}
	var teams []string
	for _, t := range snap.TeamNames() {
		if visible.sees(t) {
			teams = append(teams, t)
		}
	}
	return teams
}

// tasksPage is the Tasks page: statistics by class and by team and class,
// and the task list with estimated waits.
type tasksPage struct {
	frame
	model ReadModel
	live  *liveViews
	// stats are the task history's completed facts and admission rates,
	// shared a while (facts, rates).
	stats taskStatistics
	facts *memo.Memo[*taskhistory.WindowStats]
	rates *admissionRates
	// teamFilters are the team filter as rendered for each scope and choice.
	teamFilters *teamFilters
}

func newTasksPage(f frame, model ReadModel, live *liveViews, stats taskStatistics) tasksPage {
	return tasksPage{frame: f, model: model, live: live, stats: stats, teamFilters: newTeamFilters("Team"),
		facts: &memo.Memo[*taskhistory.WindowStats]{TTL: taskHistoryTTL, FailureTTL: taskHistoryTTL}, rates: newAdmissionRates(stats)}
}

func (p tasksPage) show(c echo.Context) error {
	snap := p.model.Snapshot()
	f := parseTaskFilter(c.QueryParams())
	visible, _ := p.scopeOf(c)
	view, _ := viewOf(c.Request().URL.RequestURI(), visible)
	if table, ok := csvTable(c); ok {
		ctx := c.Request().Context()
		switch table {
		case "classes":
			return p.live.cachedCSV(c, view.key()+"\x00classes", snap, "task-stats-by-class-"+f.Window+".csv", statsHeader, func(s *csvStream) error {
				return statsRows(s, p.taskStatistics(ctx, f, visible, snap, false, nil).byClass)
			})
		case "breakdown":
			return p.live.cachedCSV(c, view.key()+"\x00breakdown", snap, "task-stats-by-team-and-class-"+f.Window+".csv", append([]string{"Team"}, statsHeader...), func(s *csvStream) error {
				return breakdownRows(s, p.taskStatistics(ctx, f, visible, snap, true, nil).byTeam)
			})
		}
		return tasksCSV(c, snap, snap.Tasks(f.taskQuery(visible)), p.waitEstimates(c.Request().Context(), snap), visible)
	}

	body, snap, err := p.live.page(c.Request().Context(), view, snap, nil, func(parts []templates.LivePart, shown *domain.Snapshot) templ.Component {
		// Of the view's query, as the parts are: requests of the same
		// view share the body.
		f := parseTaskFilter(view.query)
		teamFilter, _ := p.teamFilters.of(shown, visible, f.Team)
		return templates.TasksBody(tasksView(f, visible, teamFilter, parts, shown))
	})
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, templates.Framed(templates.Page{Title: "Tasks", Active: "tasks", Problem: p.problem(), Snapshot: snap.Version}, body))
}

// tasksView is the Tasks page around its live parts, at the snapshot they
// show.
func tasksView(f taskFilter, visible scope, teamFilter templ.Component, parts []templates.LivePart, snap *domain.Snapshot) templates.TasksView {
	page := templates.TasksView{
		Search:     f.Search,
		Live:       parts,
		AsOf:       snap.Taken.Format(time.TimeOnly),
		TeamFilter: teamFilter,
	}
	if f.Sort != taskParams["sort"] {
		page.Keep = append(page.Keep, templates.Hidden{Name: "sort", Value: f.Sort})
	}
	if f.Desc {
		page.Keep = append(page.Keep, templates.Hidden{Name: "desc", Value: "1"})
	}
	page.LowestClass = snap.LowestClass()
	page.Cadence = domain.FormatDuration(domain.ClockCadence)
	for _, w := range taskWindows {
		page.Windows = append(page.Windows, templates.Choice{Value: w.key, Label: w.label, Selected: w.key == f.Window})
	}
	if row, ok := teamRow(snap, f.Team); ok && row.RecentUseOrder && visible.sees(f.Team) {
		page.OrderNote = "Team " + f.Team + " orders its waiting tasks by each namespace's recent use (admission fair sharing): " +
			"the namespace that used the least lately goes first, so positions follow recent use before priority and arrival."
		page.OrderLink = "/usage/" + url.PathEscape(f.Team) + "#recent-use"
	}
	page.Classes = append(page.Classes, templates.Choice{Value: "", Label: "All classes", Selected: f.Class == ""})
	for _, cl := range snap.Classes {
		page.Classes = append(page.Classes, templates.Choice{Value: cl, Label: cl, Selected: cl == f.Class})
	}
	for _, s := range taskStates {
		page.States = append(page.States, templates.Choice{Value: s.key, Label: s.label, Selected: s.key == f.State})
	}
	return page
}

// sees tells which teams' tasks the filter shows a viewer ("" are the
// tasks outside team namespaces).
func (f taskFilter) sees(visible scope) func(team string) bool {
	sel := f.selection(visible)
	if sel.Teams == nil {
		return func(string) bool { return true }
	}
	return func(team string) bool { return slices.Contains(sel.Teams, team) }
}

// affects: the Tasks page's parts depend on the tasks of the teams and
// classes it shows, the clock (waits and runs so far) and Kueue's queue
// positions (estimated waits).
func (p tasksPage) affects(v liveView, c liveChange) bool {
	sees := parseTaskFilter(v.query).sees(v.scope)
	return c.positionsMoved(sees) || c.model.Clock || c.model.AnyTeam(sees)
}

// parts renders the Tasks page's live parts: the statistics by class and
// (without a team filter) by team and class, a row per team, and the page
// of the task list, a row per task. A change renders again what it
// reaches: the statistics of the classes it changed, the rows of the teams
// it changed, the list when a task it shows may have.
func (p tasksPage) parts(r *liveRender) ([]templates.LivePart, error) {
	f := parseTaskFilter(r.view.query)
	sees := f.sees(r.view.scope)
	change := r.change.model
	teams := change.AnyTeam(sees)
	csv := func(table string) string {
		return f.query("format", "csv", "table", table, "page", "")
	}
	var parts []templates.LivePart

	stats, ok := r.reuse("class-stats-live", teams && change.Class(f.Class) || change.Clock)
	if !ok {
		statistics := p.taskStatistics(r.ctx, f, r.view.scope, r.snap, false, nil)
		v := templates.TaskStatsPart{Title: "By priority class", TableID: "class-stats", CSV: csv("classes"), CSVID: "export-classes",
			TaskHistoryNote: statistics.note, Gaps: statistics.gaps, WithWait: statistics.history}
		for _, s := range statistics.byClass {
			row := statsRow(f, "", s)
			if statistics.history {
				row.EstWait, row.EstBasis = p.classWait(r.ctx, r.snap, s, f, r.view.scope)
			}
			v.Rows = append(v.Rows, row)
		}
		var err error
		if stats, err = part("class-stats-live", templates.TaskStats(v)); err != nil {
			return nil, err
		}
	}
	parts = append(parts, stats)

	if f.Team == "" {
		breakdown, err := p.breakdown(r, f, sees, csv("breakdown"))
		if err != nil {
			return nil, err
		}
		parts = append(parts, breakdown)
	}

	list, ok := r.reuse("task-list-live", teams || change.Clock || r.change.positionsMoved(sees))
	if !ok {
		var err error
		list, err = p.taskList(r, f, csv("tasks"))
		if err != nil {
			return nil, err
		}
	}
	return append(parts, list), nil
}

// breakdown is the statistics by team and class, a row per team: only the
// rows of the teams that changed are computed again, unless the clock's
// figures are due.
func (p tasksPage) breakdown(r *liveRender, f taskFilter, sees func(string) bool, csv string) (templates.LivePart, error) {
	const id = "team-class-stats-live"
	change := r.change.model
	prev, whole := r.prev[id], r.fresh || change.Everything || change.Clock
	if _, ok := r.prev[id]; !ok {
		whole = true
	}
	var only []string // the teams to compute again; nil: every team
	if !whole {
		only = []string{}
		for t := range change.Teams {
			if sees(t) {
				only = append(only, t)
			}
		}
		if len(only) == 0 {
			return prev, nil
		}
	}
	statistics := p.taskStatistics(r.ctx, f, r.view.scope, r.snap, true, only)
	rows := map[string]templates.LivePart{}
	if !whole {
		for _, row := range prev.Rows {
			rows[row.Team] = row
		}
		for _, t := range only {
			delete(rows, t)
		}
	}
	current := map[string]bool{}
	for i := range r.snap.Teams {
		current[r.snap.Teams[i].Team] = true
	}
	for _, tc := range statistics.byTeam {
		var stats []templates.StatsRow
		for _, s := range tc.Classes {
			if s.Running+s.Pending+s.Preempted+s.Samples > 0 {
				row := statsRow(f, tc.Team, s)
				if tc.Team != "" && !current[tc.Team] {
					row.TeamNote = "no longer a queue" // in the history only
				}
				stats = append(stats, row)
			}
		}
		if len(stats) == 0 {
			continue
		}
		rowID := "team-class-stats-" + tc.Team
		if tc.Team == "" {
			rowID = "team-class-stats-outside-teams"
		}
		row, err := part(rowID, templates.StatsRows(stats, true))
		if err != nil {
			return row, err
		}
		row.Team = tc.Team
		rows[tc.Team] = row
	}
	ordered := make([]templates.LivePart, 0, len(rows))
	for _, row := range rows {
		ordered = append(ordered, row)
	}
	// By team, the tasks outside team namespaces last.
	slices.SortFunc(ordered, func(a, b templates.LivePart) int {
		if (a.Team == "") != (b.Team == "") {
			if a.Team == "" {
				return 1
			}
			return -1
		}
		return strings.Compare(a.Team, b.Team)
	})
	frame := templates.TaskStatsPart{Title: "By team and priority class", TableID: "team-class-stats",
		CSV: csv, CSVID: "export-breakdown", WithTeam: true}
	frame.TaskHistoryNote, frame.Gaps = statistics.note, statistics.gaps
	// Present even without rows, so that live updates have where to put
	// the first.
	return r.table(id, whole, ordered, func(rows []templates.LivePart) templ.Component {
		b := frame
		b.Teams = rows
		return templates.TaskStats(b)
	})
}

// taskList is one page of the task list, a row per task, with the waits
// and runs so far at the snapshot's Clock: a row changes when its task
// does, or when the clock's figures are due.
func (p tasksPage) taskList(r *liveRender, f taskFilter, csv string) (templates.LivePart, error) {
	snap := r.snap
	q := f.taskQuery(r.view.scope)
	shown, total := snap.TasksPage(q, (f.Page-1)*tasksPageSize, f.Page*tasksPageSize)
	waits := p.waitEstimates(r.ctx, snap)
	pages := max(1, (total+tasksPageSize-1)/tasksPageSize)
	if f.Page > pages { // past the last page: the last
		f.Page = pages
		shown, _ = snap.TasksPage(q, (f.Page-1)*tasksPageSize, f.Page*tasksPageSize)
	}
	from := (f.Page - 1) * tasksPageSize
	to := from + len(shown)
	v := templates.TaskListPart{CSV: csv}
	summary := "No tasks match."
	if total > 0 {
		summary = fmt.Sprintf("Tasks %d–%d of %d (page %d of %d).", from+1, to, total, f.Page, pages)
	}
	var err error
	if v.Summary, err = part("task-list-summary", templates.TaskListSummary(summary)); err != nil {
		return v.Summary, err
	}
	if f.Page > 1 {
		v.Prev = f.query("page", strconv.Itoa(f.Page-1))
		if f.Page > 2 {
			v.First = f.query("page", "1")
		}
	}
	if f.Page < pages {
		v.Next = f.query("page", strconv.Itoa(f.Page+1))
	}
	for _, col := range taskColumns {
		c := templates.SortColumn{Label: col.label, Title: col.title, Numeric: col.numeric}
		if col.sort != "" {
			c.Current = col.sort == f.Sort
			c.Desc = c.Current && f.Desc
			desc := ""
			if c.Current && !f.Desc {
				desc = "1" // the current column again: the other way round
			}
			c.Href = f.query("sort", col.sort, "desc", desc, "page", "1")
		}
		v.Columns = append(v.Columns, c)
	}
	rows := []templates.LivePart{v.Summary}
	clock := snap.Clock()
	for i, t := range shown {
		task := snap.TaskAt(t, clock)
		task.Position = waits.position(t, task.Position)
		cells := taskRow(&task)
		cells.KueueMessage = shownMessage(cells.KueueMessage, r.view.scope)
		cells.EstWait, cells.EstBasis = waits.of(t)
		if cells.EstWait == "" {
			cells.EstWait = "—"
		}
		row, err := part("task-row-"+strconv.Itoa(i+1), templates.TaskRowCells(cells))
		if err != nil {
			return row, err
		}
		rows = append(rows, row)
	}
	return r.table("task-list-live", true, rows, func(rows []templates.LivePart) templ.Component {
		list := v
		list.Summary, list.Rows = rows[0], rows[1:]
		return templates.TaskList(list)
	})
}

// taskColumns are the task list's columns: label, the sort it offers ("" for
// none), a tooltip, and whether it holds numbers.
var taskColumns = []struct {
	label, sort, title string
	numeric            bool
}{
	{"Task", "name", "", false},
	{"Team", "team", "", false},
	{"Class", "class", "Highest priority first", false},
	{"State", "state", "", false},
	{"GPUs", "gpus", "", true},
	{"Waited", "waited", "From creation, or the last requeue, to admission (or now)", true},
	{"Ran", "ran", "From admission to finish (or now), plus earlier runs before an eviction", true},
	{"Queue position", "queue", "Place in its ClusterQueue: Kueue's, from its visibility API, else the console's estimate of Kueue's order (higher priority first, then arrival). Sorting by it lists what waits first, then what runs, then what finished.", true},
	{"Estimated wait", "", "For a queued task: the tasks ahead of it in its ClusterQueue (Kueue's own order when its visibility API answers), admitted at the rate its ClusterQueue admitted tasks (of every class, each task once) over the last day; \"past its estimate\" once it has waited three times as long (tasks behind it that fit go first)", true},
	{"Why", "", "", false},
}

func statsRow(f taskFilter, team string, s domain.ClassStats) templates.StatsRow {
	link := func(state string) string {
		g := f
		g.Class, g.State = s.Class, state
		if team != "" {
			g.Team = team
		}
		return g.query()
	}
	return templates.StatsRow{
		Team: team, Class: s.Class, Running: s.Running, Pending: s.Pending, Preempted: s.Preempted,
		RunningLink: link(string(domain.TaskAdmitted)), PendingLink: link(string(domain.TaskPending)), PreemptLink: link(string(domain.TaskPreempted)),
		AvgRun: duration(s.AvgRun, s.RunSamples), AvgWait: duration(s.AvgWait, s.WaitSamples),
		LongestRun: duration(s.LongestRun, s.RunSamples), LongestWait: duration(s.LongestWait, s.WaitSamples),
		AvgLongestRun: duration(s.AvgLongestRun, s.RunSamples), AvgLongestWait: duration(s.AvgLongestWait, s.WaitSamples),
	}
}

func taskRow(t *domain.Task) templates.TaskRow {
	row := templates.TaskRow{Namespace: t.Namespace, Name: t.Name, Label: taskLabel(t.Named()), Team: t.Team, Class: t.Class, State: stateLabel(t),
		GPUs: t.GPUs, Partitions: t.Partitions, Waited: duration(t.Wait, 1), Ran: "—", Position: "—", Reason: t.Reason, KueueMessage: t.KueueMessage,
		Borrowing: t.Borrowing, ClassAssumed: t.ClassAssumed}
	if t.Run > 0 || t.State == domain.TaskAdmitted {
		row.Ran = duration(t.Run, 1)
	}
	if t.Position > 0 {
		row.Position = strconv.Itoa(t.Position)
	}
	return row
}

func stateLabel(t *domain.Task) string {
	switch {
	case t.State == domain.TaskAdmitted:
		return "Running"
	case t.Deactivated:
		return "Deactivated"
	}
	return string(t.State)
}

// duration shows a duration briefly ("2h 05m", "45s"); "—" without samples.
func duration(d time.Duration, samples int) string {
	if samples == 0 {
		return "—"
	}
	return domain.FormatDuration(d)
}

func seconds(d time.Duration, samples int) string {
	if samples == 0 {
		return ""
	}
	return strconv.FormatInt(int64(d.Round(time.Second)/time.Second), 10)
}

var statsHeader = []string{"Priority class", "Running (count)", "Pending (count)", "Preempted (count)",
	"Average run (s)", "Average wait (s)", "Longest run (s)", "Longest wait (s)", "Average longest run (s)", "Average longest wait (s)"}

func statsCells(s domain.ClassStats) []string {
	return []string{s.Class, strconv.Itoa(s.Running), strconv.Itoa(s.Pending), strconv.Itoa(s.Preempted),
		seconds(s.AvgRun, s.RunSamples), seconds(s.AvgWait, s.WaitSamples), seconds(s.LongestRun, s.RunSamples),
		seconds(s.LongestWait, s.WaitSamples), seconds(s.AvgLongestRun, s.RunSamples), seconds(s.AvgLongestWait, s.WaitSamples)}
}

func statsRows(s *csvStream, stats []domain.ClassStats) error {
	for _, st := range stats {
		if err := s.Row(statsCells(st)...); err != nil {
			return err
		}
	}
	return nil
}

func breakdownRows(s *csvStream, rows []domain.TeamClassStats) error {
	for _, tc := range rows {
		for _, st := range tc.Classes {
			if err := s.Row(append([]string{tc.Team}, statsCells(st)...)...); err != nil {
				return err
			}
		}
	}
	return nil
}

// tasksCSV streams tasks as they are listed, one row at a time.
func tasksCSV(c echo.Context, snap *domain.Snapshot, tasks []*domain.TaskFacts, waits *waitEstimates, visible scope) error {
	header := append(append([]string{"Namespace", "Task"}, ownerColumns...), "Team", "Priority class", "State", "GPUs (count)", "GPU partitions (MIG)",
		"Waited (s)", "Ran (s)", "Queue position", "Borrowing", "Why", "Kueue message", "Estimated wait")
	s, err := startCSV(c, "tasks.csv", header...)
	if err != nil {
		return err
	}
	for _, f := range tasks {
		task := snap.Task(f)
		task.Position = waits.position(f, task.Position)
		t := &task
		pos := ""
		if t.Position > 0 {
			pos = strconv.Itoa(t.Position)
		}
		_, basis := waits.of(f)
		class := t.Class
		if t.ClassAssumed {
			class += " (none named)" // as the page says it
		}
		cells := append(append([]string{t.Namespace, t.Name}, ownerCells(t.Named())...), t.Team, class, stateLabel(t), strconv.FormatInt(t.GPUs, 10), t.Partitions,
			seconds(t.Wait, 1), seconds(t.Run, 1), pos, strconv.FormatBool(t.Borrowing), t.Reason, shownMessage(t.KueueMessage, visible), basis)
		if err := s.Row(cells...); err != nil {
			return err
		}
	}
	return s.Close()
}
