package handlers

import (
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/web/templates"
)

// Windows the task statistics can cover.
var taskWindows = []struct {
	key, label string
	d          time.Duration
}{
	{"1h", "Last hour", time.Hour},
	{"6h", "Last 6 hours", 6 * time.Hour},
	{"24h", "Last 24 hours", 24 * time.Hour},
	{"7d", "Last 7 days", 7 * 24 * time.Hour},
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

// taskFilterParams are the query parameters of taskFilter.
var taskFilterParams = []string{"window", "team", "class", "state", "borrowing"}

// taskFilter is the tasks page's query, as typed in its URL.
type taskFilter struct {
	Window, Team, Class, State string
	Borrowing                  bool
}

func parseTaskFilter(c echo.Context) taskFilter {
	f := taskFilter{Window: c.QueryParam("window"), Team: c.QueryParam("team"), Class: c.QueryParam("class"),
		State: c.QueryParam("state"), Borrowing: c.QueryParam("borrowing") == "1"}
	if f.Window == "" {
		f.Window = "24h"
	}
	return f
}

func (f taskFilter) window() time.Duration {
	for _, w := range taskWindows {
		if w.key == f.Window {
			return w.d
		}
	}
	return 24 * time.Hour
}

func (f taskFilter) query(extra ...string) string {
	q := url.Values{"window": {f.Window}}
	for k, v := range map[string]string{"team": f.Team, "class": f.Class, "state": f.State} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if f.Borrowing {
		q.Set("borrowing", "1")
	}
	for i := 0; i+1 < len(extra); i += 2 {
		q.Set(extra[i], extra[i+1])
	}
	return "/tasks?" + q.Encode()
}

// matchesStats keeps the tasks the statistics cover: team and class filters only.
func (f taskFilter) matchesStats(t *domain.Task) bool {
	return (f.Team == "" || t.Team == f.Team) && (f.Class == "" || t.Class == f.Class)
}

// matchesList adds the state and borrowing filters of the task list.
func (f taskFilter) matchesList(t *domain.Task) bool {
	if !f.matchesStats(t) || (f.Borrowing && !t.Borrowing) {
		return false
	}
	switch f.State {
	case "all":
		return true
	case "":
		return t.State != domain.TaskFinished
	case "Queued":
		return t.State == domain.TaskPending || t.State == domain.TaskPreempted
	}
	return string(t.State) == f.State
}

// maxListedTasks bounds the HTML list; the CSV export has every task.
const maxListedTasks = 200

func (d Deps) tasks(c echo.Context) error {
	snap := d.Live.Snapshot()
	f := parseTaskFilter(c)
	now := snap.Taken
	if now.IsZero() {
		now = time.Now()
	}
	start := now.Add(-f.window())

	// The snapshot is shared and read-only: filter by pointer, and copy
	// tasks for the statistics only when a filter narrows them.
	statTasks := snap.Tasks
	narrowed := f.Team != "" || f.Class != ""
	if narrowed {
		statTasks = nil
	}
	var listed []*domain.Task
	teamSet := map[string]bool{}
	visible, _ := d.scopeOf(c)
	if !visible.all {
		narrowed, statTasks = true, nil // a team member sees their teams' tasks only
	}
	for i := range snap.Tasks {
		t := &snap.Tasks[i]
		if !visible.sees(t.Team) {
			continue
		}
		if t.Team != "" {
			teamSet[t.Team] = true
		}
		if narrowed && f.matchesStats(t) {
			statTasks = append(statTasks, *t)
		}
		if f.matchesList(t) {
			listed = append(listed, t)
		}
	}
	for _, u := range snap.Teams {
		if visible.sees(u.Team) {
			teamSet[u.Team] = true
		}
	}
	teams := make([]string, 0, len(teamSet))
	for t := range teamSet {
		teams = append(teams, t)
	}
	sort.Strings(teams)
	classes := snap.Classes
	if f.Class != "" {
		classes = []string{f.Class}
	}
	sortTasks(listed)

	if table, ok := csvTable(c); ok {
		switch table {
		case "classes":
			return statsCSV(c, domain.StatsByClass(statTasks, classes, start, now))
		case "breakdown":
			return breakdownCSV(c, domain.StatsByTeamAndClass(statTasks, teams, classes, start, now))
		}
		return tasksCSV(c, listed)
	}

	view := templates.TasksView{
		Page:         templates.Page{Title: "Tasks", Active: "tasks", Problem: d.problem(), Snapshot: snap.Version},
		AsOf:         now.Format(time.TimeOnly),
		TaskCount:    len(listed),
		CSVClasses:   csvHref(c, "classes", taskFilterParams...),
		CSVBreakdown: csvHref(c, "breakdown", taskFilterParams...),
		CSVTasks:     csvHref(c, "tasks", taskFilterParams...),
	}
	if len(snap.Classes) > 0 {
		view.LowestClass = snap.Classes[len(snap.Classes)-1]
	}
	for _, w := range taskWindows {
		view.Windows = append(view.Windows, templates.Choice{Value: w.key, Label: w.label, Selected: w.key == f.Window})
	}
	view.Teams = append(view.Teams, templates.Choice{Value: "", Label: "All teams", Selected: f.Team == ""})
	for _, t := range teams {
		view.Teams = append(view.Teams, templates.Choice{Value: t, Label: t, Selected: t == f.Team})
	}
	view.Classes = append(view.Classes, templates.Choice{Value: "", Label: "All classes", Selected: f.Class == ""})
	for _, cl := range snap.Classes {
		view.Classes = append(view.Classes, templates.Choice{Value: cl, Label: cl, Selected: cl == f.Class})
	}
	for _, s := range taskStates {
		view.States = append(view.States, templates.Choice{Value: s.key, Label: s.label, Selected: s.key == f.State})
	}
	for _, s := range domain.StatsByClass(statTasks, classes, start, now) {
		view.Stats = append(view.Stats, statsRow(f, "", s))
	}
	if f.Team == "" {
		for _, tc := range domain.StatsByTeamAndClass(statTasks, teams, classes, start, now) {
			for _, s := range tc.Classes {
				if s.Running+s.Pending+s.Preempted+s.Samples > 0 {
					view.Breakdown = append(view.Breakdown, statsRow(f, tc.Team, s))
				}
			}
		}
	}
	for i, t := range listed {
		if i == maxListedTasks {
			break
		}
		view.Tasks = append(view.Tasks, taskRow(t))
	}
	view.Shown = len(view.Tasks)
	return render(c, http.StatusOK, templates.Tasks(view))
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
	row := templates.TaskRow{Namespace: t.Namespace, Name: t.Name, Team: t.Team, Class: t.Class, State: stateLabel(t),
		GPUs: t.GPUs, Waited: duration(t.Wait, 1), Ran: "—", Position: "—", Reason: t.Reason, KueueMessage: t.KueueMessage,
		Borrowing: t.Borrowing}
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

// sortTasks puts what waits first (by queue position), then what runs
// (newest first), then what finished.
func sortTasks(ts []*domain.Task) {
	rank := map[domain.TaskState]int{domain.TaskPreempted: 0, domain.TaskPending: 0, domain.TaskAdmitted: 1, domain.TaskFinished: 2}
	sort.SliceStable(ts, func(i, j int) bool {
		a, b := ts[i], ts[j]
		if rank[a.State] != rank[b.State] {
			return rank[a.State] < rank[b.State]
		}
		switch a.State {
		case domain.TaskPending, domain.TaskPreempted:
			if (a.Position == 0) != (b.Position == 0) {
				return a.Position != 0
			}
			if a.Position != b.Position {
				return a.Position < b.Position
			}
		case domain.TaskAdmitted:
			if !a.AdmittedAt.Equal(b.AdmittedAt) {
				return a.AdmittedAt.After(b.AdmittedAt)
			}
		case domain.TaskFinished:
			if !a.FinishedAt.Equal(b.FinishedAt) {
				return a.FinishedAt.After(b.FinishedAt)
			}
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
}

// duration shows a duration briefly ("2h 05m", "45s"); "—" without samples.
func duration(d time.Duration, samples int) string {
	if samples == 0 {
		return "—"
	}
	d = d.Round(time.Second)
	switch {
	case d >= 24*time.Hour:
		return fmt.Sprintf("%dd %02dh", int(d.Hours())/24, int(d.Hours())%24)
	case d >= time.Hour:
		return fmt.Sprintf("%dh %02dm", int(d.Hours()), int(d.Minutes())%60)
	case d >= time.Minute:
		return fmt.Sprintf("%dm %02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%ds", int(d.Seconds()))
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

func statsCSV(c echo.Context, stats []domain.ClassStats) error {
	s, err := startCSV(c, "task-stats-by-class.csv", statsHeader...)
	if err != nil {
		return err
	}
	for _, st := range stats {
		if err := s.Row(statsCells(st)...); err != nil {
			return err
		}
	}
	return s.Close()
}

func breakdownCSV(c echo.Context, rows []domain.TeamClassStats) error {
	s, err := startCSV(c, "task-stats-by-team-and-class.csv", append([]string{"Team"}, statsHeader...)...)
	if err != nil {
		return err
	}
	for _, tc := range rows {
		for _, st := range tc.Classes {
			if err := s.Row(append([]string{tc.Team}, statsCells(st)...)...); err != nil {
				return err
			}
		}
	}
	return s.Close()
}

func tasksCSV(c echo.Context, tasks []*domain.Task) error {
	s, err := startCSV(c, "tasks.csv", "Namespace", "Task", "Team", "Priority class", "State", "GPUs (count)",
		"Waited (s)", "Ran (s)", "Queue position", "Borrowing", "Why", "Kueue message")
	if err != nil {
		return err
	}
	for _, t := range tasks {
		pos := ""
		if t.Position > 0 {
			pos = strconv.Itoa(t.Position)
		}
		if err := s.Row(t.Namespace, t.Name, t.Team, t.Class, stateLabel(t), strconv.FormatInt(t.GPUs, 10),
			seconds(t.Wait, 1), seconds(t.Run, 1), pos, strconv.FormatBool(t.Borrowing), t.Reason, t.KueueMessage); err != nil {
			return err
		}
	}
	return s.Close()
}
