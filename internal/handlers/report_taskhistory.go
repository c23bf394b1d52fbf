package handlers

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/memo"
	"github.com/openquota/console/internal/taskhistory"
	"github.com/openquota/console/web/templates"
)

// reportPageSize is how many tasks a page of the per-task report lists.
const reportPageSize = 50

// summaryResource is a resource of the history's usage summary: its key
// (?resource=), label and unit on the page, its name in the summary CSV's
// columns, and its hours in a row.
type summaryResource struct {
	key, label, unit, column string
	of                       func(taskhistory.UsageRow) taskhistory.ResourceHours
}

// summaryResources are the resources of every usage summary.
var summaryResources = []summaryResource{
	{"gpu", "GPUs", "GPU-hours", "GPU-hours", func(r taskhistory.UsageRow) taskhistory.ResourceHours { return r.GPU }},
	{"neuron", "Neuron", "Neuron-device-hours", "Neuron-device-hours", func(r taskhistory.UsageRow) taskhistory.ResourceHours { return r.Neuron }},
	{"vcpu", "vCPU", "vCPU-hours", "vCPU-hours", func(r taskhistory.UsageRow) taskhistory.ResourceHours { return r.VCPU }},
}

// partitionResource is a MIG profile's partitions as a resource of the
// summary, in partition-hours.
func partitionResource(profile string) summaryResource {
	return summaryResource{key: profile, label: profile + " partitions", unit: "partition-hours", column: profile + " partition-hours",
		of: func(r taskhistory.UsageRow) taskhistory.ResourceHours { return r.Partitions[profile] }}
}

// partitionGPUHours are the partition-hours of every MIG profile in
// whole-GPU-hours, a column of the CSVs.
var partitionGPUHours = summaryResource{column: "Partition GPU-equivalent hours", of: taskhistory.UsageRow.PartitionGPUHours}

// pageResources are the resources the page offers: summaryResources, then
// each MIG profile of the summary.
func pageResources(profiles []string) []summaryResource {
	out := slices.Clone(summaryResources)
	for _, p := range profiles {
		out = append(out, partitionResource(p))
	}
	return out
}

// partitionColumns are the resources the CSVs add after their first
// columns: each MIG profile's partition-hours, then all of them in
// whole-GPU-hours; none without partitions, so that a CSV without them
// keeps its columns.
func partitionColumns(profiles []string) []summaryResource {
	if len(profiles) == 0 {
		return nil
	}
	var out []summaryResource
	for _, p := range profiles {
		out = append(out, partitionResource(p))
	}
	return append(out, partitionGPUHours)
}

// chooseResource offers resources as the page's tabs and returns the one
// f asks for (GPUs when it names none of them).
func chooseResource(h *templates.TaskHistoryReport, f reportFilter, resources []summaryResource) summaryResource {
	res := resources[0]
	for _, r := range resources {
		if r.key == f.Resource {
			res = r
		}
	}
	h.Resources = h.Resources[:0]
	for _, r := range resources {
		g := f
		g.Resource, g.After, g.Rows = r.key, "", ""
		h.Resources = append(h.Resources, templates.ResourceChoice{Key: r.key, Label: r.label, Href: g.query(), Current: r.key == res.key})
	}
	h.Unit, h.UnitNote = res.unit, partitionNote(res.key)
	return res
}

// partitionNote says what a MIG profile's partition-hours are worth in
// whole GPUs; "" for another resource.
func partitionNote(profile string) string {
	n, ok := domain.PartitionSlices(profile)
	if !ok {
		return ""
	}
	return fmt.Sprintf("A %s partition has %d of a GPU's 7 compute slices: a partition-hour is %d/7 of a whole-GPU-hour (the CSVs give both).",
		profile, n, n)
}

// taskHistoryReport shows (or exports) the usage summary per team, instance
// type and UTC day, and the per-task report, from the task history, for
// the days [from, to).
func (p reportPage) taskHistoryReport(c echo.Context, f reportFilter, view templates.ReportView, from, to time.Time) error {
	snap := p.model.Snapshot()
	visible, _ := p.scopeOf(c)
	days := taskhistory.Window{From: from, To: to}
	now := time.Now()
	if to.After(now) {
		to = now
	}
	window := taskhistory.Window{From: from, To: to}
	h := &templates.TaskHistoryReport{}
	view.TaskHistory = h
	chooseResource(h, f, summaryResources) // the tabs of a page without a summary
	var filterGeneration uint64
	h.TeamFilter, filterGeneration = p.teamFilters.of(snap, visible, f.Team)
	team, teams := f.Team, []string(nil)
	switch {
	case team != "" && !visible.sees(team):
		team, teams = "", []string{}
	case team == "" && !visible.all:
		teams = visible.list()
	}
	sees := func(t string) bool {
		if teams != nil {
			return slices.Contains(teams, t)
		}
		return team == "" || t == team
	}

	err := p.taskHistory.Available()
	table, isCSV := csvTable(c)
	if err != nil {
		if isCSV {
			return echo.NewHTTPError(http.StatusServiceUnavailable, p.taskHistoryNote(err))
		}
		h.Unavailable = p.taskHistoryNote(err)
		return render(c, http.StatusOK, templates.Report(view))
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), 30*time.Second)
	defer cancel()
	rq := taskhistory.ReportQuery{Window: window, Team: team, Teams: teams}
	if isCSV && f.Layout == layoutHyperPod {
		return p.exports.run(c, func() error { return p.hyperPodCSV(c, days, rq, sees) })
	}
	if isCSV && table == "tasks" {
		return p.exports.run(c, func() error { return p.taskReportCSV(c, rq) })
	}
	if isCSV {
		return p.exports.run(c, func() error {
			sum, err := p.summaries.of(ctx, days)
			if err != nil {
				return echo.NewHTTPError(http.StatusServiceUnavailable, p.taskHistoryNote(err))
			}
			return usageSummaryCSV(c, sum.UpTo, visibleUsage(sum.UsageSummary, sees), incompleteDays(sum.UsageSummary))
		})
	}
	sum, err := p.summaries.of(ctx, days)
	if err != nil {
		h.Unavailable = p.taskHistoryNote(err)
		return render(c, http.StatusOK, templates.Report(view))
	}
	rq.Limit, rq.After = reportPageSize, f.After
	tasks, err := p.taskPages.of(ctx, days, rq)
	if err != nil {
		h.TasksUnavailable = p.taskHistoryNote(err)
		p.fillSummary(h, f, visible, sees, sum)
		return render(c, http.StatusOK, templates.Report(view))
	}
	// Every request of the same teams and query shows the same body while
	// the summary, the page of tasks and the teams stay.
	key := strings.Join([]string{view.From, view.To, sum.key, strconv.FormatUint(tasks.id, 36), strconv.FormatUint(filterGeneration, 36)}, "\x00")
	body, err := p.bodies.get(visible.key()+"\x00"+f.query(), key, func() templ.Component {
		p.fillSummary(h, f, visible, sees, sum)
		p.fillTasks(h, f, tasks)
		return templates.ReportBody(view)
	})
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, templates.Framed(view.Page, body))
}

// fillSummary puts the usage summary's part of the page in h: the
// resources, the rows of the page asked for, the charts and the CSVs. Its
// parts are sum's own, never those kept for another summary while sum's
// are made: the body they go in is kept.
func (p reportPage) fillSummary(h *templates.TaskHistoryReport, f reportFilter, visible scope, sees func(string) bool, sum daysSummary) {
	// What the page takes from the summary beyond its rows is made once per
	// summary and teams, like the rows: it reads every row and period.
	facts, _ := p.summaryFacts.exact(f.Team+"\x00"+visible.key(), sum.key, func() (summaryFacts, error) {
		return summaryFacts{resources: pageResources(taskhistory.Profiles(sum.Rows, sees)), missing: missingNotes(sum.Days),
			upTo: "Figures up to " + sum.UpTo.UTC().Format("2006-01-02 15:04:05") + " UTC.", upToAt: sum.UpTo.UTC().Format(time.RFC3339Nano)}, nil
	})
	res := chooseResource(h, f, facts.resources)
	h.UpTo, h.UpToAt, h.Missing = facts.upTo, facts.upToAt, facts.missing
	// The rows of the same summary, resource and teams are made once.
	shown := strings.Join([]string{f.Team, res.key, visible.key()}, "\x00")
	rows, _ := p.summaryRows.exact(shown, sum.key, func() ([]templ.Component, error) {
		incomplete := incompleteDays(sum.UsageSummary)
		var rows []templ.Component
		for _, r := range visibleUsage(sum.UsageSummary, sees) {
			hours := res.of(r)
			if hours == (taskhistory.ResourceHours{}) {
				continue
			}
			row := templates.UsageSummaryRow{Day: r.Day.Format(dateLayout), Team: r.Team, InstanceType: r.InstanceType,
				Allocated: domain.FormatHours(hours.Allocated), Used: domain.FormatHours(hours.Used),
				Borrowed: domain.FormatHours(hours.Borrowed), Lent: domain.FormatHours(hours.Lent), Incomplete: incomplete[r.Day]}
			rows = append(rows, p.pieces.of(row, templates.UsageSummaryRowCells(row)))
		}
		return rows, nil
	})
	p.summaryPage(h, f, rows)
	h.Charts, _ = p.summaryRows.exact("charts\x00"+shown, sum.key, func() ([]templ.Component, error) {
		return p.summaryCharts(visibleUsage(sum.UsageSummary, sees), res.unit, res.of), nil
	})
	h.SummaryCSV = f.query("format", "csv", "table", "summary", "after", "", "rows", "")
	h.TasksCSV = f.query("format", "csv", "table", "tasks", "after", "", "rows", "")
	h.HyperPodCSV = f.query("format", "csv", "layout", layoutHyperPod, "after", "", "rows", "")
}

// fillTasks puts the page of the per-task report in h, with links to the
// pages around it.
func (p reportPage) fillTasks(h *templates.TaskHistoryReport, f reportFilter, tasks taskPage) {
	h.Tasks, h.TaskCount = tasks.rows, tasks.count
	switch {
	case h.TaskCount == 0:
		h.TasksSummary = "No tasks existed in this range."
	case f.After == "":
		h.TasksSummary = fmt.Sprintf("The first %d tasks, by end (tasks still open last).", h.TaskCount)
	default:
		h.TasksSummary = fmt.Sprintf("%d more tasks, by end (tasks still open last).", h.TaskCount)
		h.TasksFirst = f.query("after", "")
	}
	if tasks.next != "" {
		h.TasksNext = f.query("after", tasks.next)
	}
}

// summaryFacts are what the report page shows of a summary for some teams
// besides its rows: the resources it offers (MIG profiles the teams used
// among them), the notes on periods with no record, and when it ends.
type summaryFacts struct {
	resources    []summaryResource
	missing      []string
	upTo, upToAt string
}

// summaryPageSize is how many rows of the usage summary a page shows: a
// week of 200 teams is thousands, which people read in the CSV.
const summaryPageSize = 100

// summaryPage shows the rows of the summary from f.Rows (an offset), a
// page of them, with links to the pages before and after.
func (p reportPage) summaryPage(h *templates.TaskHistoryReport, f reportFilter, rows []templ.Component) {
	from, _ := strconv.Atoi(f.Rows)
	from = min(max(from, 0)/summaryPageSize*summaryPageSize, max(len(rows)-1, 0)/summaryPageSize*summaryPageSize)
	to := min(from+summaryPageSize, len(rows))
	h.Rows = rows[from:to]
	if len(rows) <= summaryPageSize {
		return
	}
	h.RowsShown = fmt.Sprintf("Rows %d–%d of %d; the CSV has them all.", from+1, to, len(rows))
	page := func(offset int) string {
		if offset == 0 {
			return f.query("rows", "")
		}
		return f.query("rows", strconv.Itoa(offset))
	}
	if from > 0 {
		h.RowsPrevious = page(from - summaryPageSize)
	}
	if to < len(rows) {
		h.RowsNext = page(to)
	}
}

// taskPages are the per-task report's pages, each shared for reportTTL
// (and refreshed in the background after): tasks that end move them, and
// many viewers ask for the same. The key holds the teams asked for, so a
// page is only ever shared by viewers who may see the same teams.
type taskPages struct {
	taskHistory interface {
		TaskReport(ctx context.Context, q taskhistory.ReportQuery, each func(taskhistory.ReportRow) error) (next string, gaps []taskhistory.Period, err error)
	}
	shared *memo.Memo[taskPage]
}

// taskPage is a page of the per-task report: its rows rendered once (many
// requests show the same page), how many, and the next page's cursor.
type taskPage struct {
	rows  templ.Component
	count int
	next  string
	// id names the page: a page made again has another.
	id uint64
}

// taskPagesMade counts the pages of the per-task report made (their ids).
var taskPagesMade atomic.Uint64

func newTaskPages(h usageHistory) *taskPages {
	return &taskPages{taskHistory: h, shared: &memo.Memo[taskPage]{TTL: reportTTL, FailureTTL: taskHistoryTTL, Max: 256}}
}

// of is the page of rq over days (up to now).
func (t *taskPages) of(ctx context.Context, days taskhistory.Window, rq taskhistory.ReportQuery) (taskPage, error) {
	teams := "all"
	if rq.Teams != nil {
		teams = "only:" + strings.Join(rq.Teams, ",")
	}
	key := strings.Join([]string{days.From.String(), days.To.String(), rq.Team, teams, strconv.Itoa(rq.Limit), rq.After}, "\x00")
	return t.shared.Recent(ctx, key, func(ctx context.Context) (taskPage, error) {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		q := rq
		q.Window = days
		if now := time.Now(); q.Window.To.After(now) {
			q.Window.To = now
		}
		var rows []templates.TaskReportRow
		next, _, err := t.taskHistory.TaskReport(ctx, q, func(r taskhistory.ReportRow) error {
			rows = append(rows, taskReportRow(r))
			return nil
		})
		if err != nil {
			return taskPage{}, err
		}
		var html strings.Builder
		err = templates.TaskReportRows(rows).Render(ctx, &html)
		return taskPage{rows: templ.Raw(html.String()), count: len(rows), next: next, id: taskPagesMade.Add(1)}, err
	})
}

// reportTTL is how long a usage summary of a day still open is shared: its
// figures are hours per day, and many viewers (and their CSVs) ask for the
// same days.
const reportTTL = 30 * time.Second

// closedAfter is how long after its end a day's figures are final: events
// of its last moments are recorded by then.
const closedAfter = 5 * time.Minute

// maxClosedDays bounds the closed days kept (more than a year's report).
const maxClosedDays = 400

// usageSummaries are the usage summaries of the days asked for, a day at a
// time, shared by the page and its CSV. A closed day the history recorded
// whole never changes: it is computed once and kept. The other days (the
// open one, and days with periods of no record, which a recorder may still
// account for) are shared for reportTTL. At most summaryConcurrency days
// are computed at once, whoever asks.
type usageSummaries struct {
	taskHistory interface {
		UsageSummary(ctx context.Context, w taskhistory.Window) (*taskhistory.UsageSummary, error)
	}
	shared *memo.Memo[*taskhistory.UsageSummary]
	slots  summarySlots

	mu     sync.Mutex
	closed map[time.Time]*taskhistory.UsageSummary // by day
	joined map[string]daysSummary                  // by key
}

func newSummaries(h usageHistory) *usageSummaries {
	return &usageSummaries{taskHistory: h, slots: make(summarySlots, summaryConcurrency),
		shared: &memo.Memo[*taskhistory.UsageSummary]{TTL: reportTTL, FailureTTL: taskHistoryTTL, Max: 64},
		closed: map[time.Time]*taskhistory.UsageSummary{}}
}

// daysSummary is a summary of several days; key names the days' summaries
// it is made of: equal keys, equal figures.
type daysSummary struct {
	*taskhistory.UsageSummary
	key string
	// days are the days' summaries, held so that no other summary takes
	// their addresses (the key) while this one is kept.
	days []*taskhistory.UsageSummary
}

// of is the summary of days (whole UTC days, the last possibly cut short),
// up to now.
func (u *usageSummaries) of(ctx context.Context, days taskhistory.Window) (daysSummary, error) {
	now := time.Now()
	var sums []*taskhistory.UsageSummary
	var key strings.Builder
	for day := days.From; day.Before(days.To) && !day.After(now); day = day.AddDate(0, 0, 1) {
		end := day.AddDate(0, 0, 1)
		if end.After(days.To) {
			end = days.To
		}
		sum, err := u.day(ctx, taskhistory.Window{From: day, To: end}, now)
		if err != nil {
			return daysSummary{}, err
		}
		// The summary's address names it (see daysSummary.days).
		var room [16]byte
		key.Write(strconv.AppendUint(room[:0], uint64(uintptr(unsafe.Pointer(sum))), 36))
		key.WriteByte(',')
		sums = append(sums, sum)
	}
	// The same days' summaries are joined once: a week of 200 teams is
	// thousands of rows, which every request would otherwise copy.
	u.mu.Lock()
	joined, ok := u.joined[key.String()]
	u.mu.Unlock()
	if ok {
		return joined, nil
	}
	joined = daysSummary{UsageSummary: &taskhistory.UsageSummary{UpTo: days.From}, key: key.String(), days: sums}
	for _, sum := range sums {
		joined.Rows = append(joined.Rows, sum.Rows...)
		joined.Days = append(joined.Days, sum.Days...)
		joined.UpTo = sum.UpTo
	}
	u.mu.Lock()
	if u.joined == nil || len(u.joined) >= maxJoinedSummaries {
		u.joined = map[string]daysSummary{}
	}
	u.joined[joined.key] = joined
	u.mu.Unlock()
	return joined, nil
}

// maxJoinedSummaries bounds the joined summaries kept (ranges asked for
// while their days' summaries stay the same).
const maxJoinedSummaries = 64

// day is the summary of one day.
func (u *usageSummaries) day(ctx context.Context, day taskhistory.Window, now time.Time) (*taskhistory.UsageSummary, error) {
	closed := !day.To.After(now.Add(-closedAfter))
	if closed {
		u.mu.Lock()
		sum := u.closed[day.From]
		u.mu.Unlock()
		if sum != nil {
			return sum, nil
		}
	}
	sum, err := u.shared.Recent(ctx, strconv.FormatInt(day.From.UnixNano(), 36)+","+strconv.FormatInt(day.To.UnixNano(), 36), func(ctx context.Context) (*taskhistory.UsageSummary, error) {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		release, err := u.slots.take(ctx)
		if err != nil {
			return nil, fmt.Errorf("waiting for other usage summaries: %w", err)
		}
		defer release()
		w := day
		if now := time.Now(); w.To.After(now) {
			w.To = now
		}
		return u.taskHistory.UsageSummary(ctx, w)
	})
	if err == nil && closed && wholeRecord(sum) {
		u.mu.Lock()
		if len(u.closed) >= maxClosedDays {
			clear(u.closed)
		}
		u.closed[day.From] = sum
		u.mu.Unlock()
	}
	return sum, err
}

// wholeRecord reports whether the history has a record of all of a
// summary's days.
func wholeRecord(sum *taskhistory.UsageSummary) bool {
	for _, d := range sum.Days {
		if len(d.Missing) > 0 {
			return false
		}
	}
	return true
}

// visibleUsage are the rows of a summary of the teams the viewer sees;
// the summary is shared with other viewers and stays as it is.
func visibleUsage(sum *taskhistory.UsageSummary, sees func(team string) bool) []taskhistory.UsageRow {
	var rows []taskhistory.UsageRow
	for _, r := range sum.Rows {
		if sees(r.Team) {
			rows = append(rows, r)
		}
	}
	return rows
}

// chartedTeams is how many teams the report's charts draw a line each for;
// the others are summed in one line.
const chartedTeams = 5

// summaryCharts are the usage summary's hours used and borrowed per UTC day,
// a line per team (the teams that used the most; the rest summed), summed
// over the instance types.
func (p reportPage) summaryCharts(rows []taskhistory.UsageRow, unit string, of func(taskhistory.UsageRow) taskhistory.ResourceHours) []templ.Component {
	used, borrowed := dailySeries(rows, of)
	if used == nil {
		return nil
	}
	return []templ.Component{
		p.pieces.chart(templates.ChartModel{ID: "report-used", Title: unit + " used per UTC day", Unit: "h", Series: used, Daily: true}),
		p.pieces.chart(templates.ChartModel{ID: "report-borrowed", Title: unit + " borrowed per UTC day", Unit: "h", Series: borrowed, Daily: true}),
	}
}

// dailySeries are the hours used and borrowed per UTC day, a series per team
// (the chartedTeams teams that used and borrowed the most, then one for the
// others), summed over instance types; nil without rows.
func dailySeries(rows []taskhistory.UsageRow, of func(taskhistory.UsageRow) taskhistory.ResourceHours) (usedSeries, borrowedSeries []templates.ChartSeries) {
	used, borrowed := map[string]map[time.Time]float64{}, map[string]map[time.Time]float64{}
	total := map[string]float64{}
	var days []time.Time
	for _, r := range rows {
		h := of(r)
		if used[r.Team] == nil {
			used[r.Team], borrowed[r.Team] = map[time.Time]float64{}, map[time.Time]float64{}
		}
		if !slices.ContainsFunc(days, r.Day.Equal) {
			days = append(days, r.Day)
		}
		used[r.Team][r.Day] += h.Used
		borrowed[r.Team][r.Day] += h.Borrowed
		total[r.Team] += h.Used + h.Borrowed
	}
	if len(days) == 0 {
		return nil, nil
	}
	slices.SortFunc(days, time.Time.Compare)
	teams := slices.Collect(maps.Keys(total))
	slices.SortFunc(teams, func(a, b string) int {
		if c := cmp.Compare(total[b], total[a]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	series := func(byTeam map[string]map[time.Time]float64) []templates.ChartSeries {
		var out []templates.ChartSeries
		others := make([]templates.ChartPoint, len(days))
		for i, d := range days {
			others[i].T = d
		}
		for i, team := range teams {
			if i >= chartedTeams && len(teams) > chartedTeams+1 {
				for j, d := range days {
					others[j].V += byTeam[team][d]
				}
				continue
			}
			s := templates.ChartSeries{Name: team}
			for _, d := range days {
				s.Points = append(s.Points, templates.ChartPoint{T: d, V: byTeam[team][d]})
			}
			out = append(out, s)
		}
		if len(teams) > chartedTeams+1 {
			out = append(out, templates.ChartSeries{Name: fmt.Sprintf("%d other teams", len(teams)-chartedTeams), Points: others})
		}
		return out
	}
	return series(used), series(borrowed)
}

// incompleteDays are the days of a summary the history has no full record of.
func incompleteDays(sum *taskhistory.UsageSummary) map[time.Time]bool {
	incomplete := map[time.Time]bool{}
	for _, day := range sum.Days {
		if len(day.Missing) > 0 {
			incomplete[day.Day] = true
		}
	}
	return incomplete
}

// missingNotes say which parts of the days the history has no record of;
// a run of days without any record is one note.
func missingNotes(days []taskhistory.UsageDay) []string {
	var notes []string
	var first, last time.Time // the run of unrecorded days so far
	flush := func() {
		switch {
		case first.IsZero():
		case first.Equal(last):
			notes = append(notes, fmt.Sprintf("%s: no record; that day's figures leave it out.", first.Format(dateLayout)))
		default:
			notes = append(notes, fmt.Sprintf("%s to %s: no record; those days' figures leave them out.", first.Format(dateLayout), last.Format(dateLayout)))
		}
		first = time.Time{}
	}
	for _, day := range days {
		if len(day.Missing) == 0 {
			flush()
			continue
		}
		if wholeDay(day) {
			if first.IsZero() || !day.Day.Equal(last.AddDate(0, 0, 1)) {
				flush()
				first = day.Day
			}
			last = day.Day
			continue
		}
		flush()
		notes = append(notes, missingNote(day))
	}
	flush()
	return notes
}

// wholeDay reports whether the history has no record of any of day.
func wholeDay(day taskhistory.UsageDay) bool {
	return len(day.Missing) == 1 && !day.Missing[0].From.After(day.Day) && !day.Missing[0].To.Before(day.Day.Add(24*time.Hour))
}

// missingNote says which part of a day the history has no record of.
func missingNote(day taskhistory.UsageDay) string {
	var parts []string
	var all time.Duration
	for _, p := range day.Missing {
		layout := "15:04"
		if p.To.Sub(p.From) < time.Minute { // to the second, or it reads as nothing
			layout = "15:04:05"
		}
		end := p.To.UTC().Format(layout)
		if p.To.Sub(day.Day) >= 24*time.Hour {
			end = "24:00"
		}
		parts = append(parts, p.From.UTC().Format(layout)+"–"+end)
		all += p.To.Sub(p.From)
	}
	inAll := ""
	if len(parts) > 1 {
		inAll = " (" + domain.FormatDuration(all) + " in all)"
	}
	return fmt.Sprintf("%s: no record %s UTC%s; that day's figures leave it out.", day.Day.Format(dateLayout), strings.Join(parts, ", "), inAll)
}

func taskReportRow(r taskhistory.ReportRow) templates.TaskReportRow {
	row := templates.TaskReportRow{Task: taskName(r.Task), Label: taskLabel(r.Task.Named()), Team: r.Task.Team, Class: r.Task.Class,
		InstanceType: instanceUseWords(r.Use), Start: "—", End: "—", GPUHours: domain.FormatHours(r.GPUHours()),
		Borrowed: "no", Preempted: strconv.Itoa(r.TimesPreempted), Outcome: outcomeLabel(r)}
	if hours, whole := r.PartitionHours(); hours > 0 {
		row.Partitions = fmt.Sprintf("%s partition-hours of %s (%s GPU-hours equivalent)", domain.FormatHours(hours), r.Partitions, domain.FormatHours(whole))
	}
	if !r.Start.IsZero() {
		row.Start = recordedTime(r.Start)
	}
	if !r.End.IsZero() {
		row.End = recordedTime(r.End)
	}
	if r.Borrowed() {
		row.Borrowed = "yes"
	}
	return row
}

// instanceUseWords name the instance types a task held in the window, each
// with how long when there are several ("ml.g6.12xlarge for 36m 40s,
// ml.p5.48xlarge for 3m 36s"); "—" for none.
func instanceUseWords(use []taskhistory.InstanceUse) string {
	switch len(use) {
	case 0:
		return "—"
	case 1:
		return use[0].InstanceType
	}
	parts := make([]string, len(use))
	for i, u := range use {
		parts[i] = u.InstanceType + " for " + domain.FormatDuration(u.Held)
	}
	return strings.Join(parts, ", ")
}

// outcomeLabel is how a task ended, or where it stands while open.
func outcomeLabel(r taskhistory.ReportRow) string {
	switch r.Outcome {
	case "":
		if r.State == domain.TaskAdmitted {
			return "running"
		}
		return "waiting"
	case taskhistory.OutcomeVanished:
		return "deleted while no recorder ran"
	}
	return string(r.Outcome)
}

// usageSummaryCSV writes a summary's rows. The summary may be shared from
// a moment before, so each row says up to when its figures run, as the page
// does. The MIG partitions' columns come last, so that the columns before
// keep their places.
func usageSummaryCSV(c echo.Context, upTo time.Time, rows []taskhistory.UsageRow, incomplete map[time.Time]bool) error {
	partitions := partitionColumns(taskhistory.Profiles(rows, nil))
	header := append(summaryColumns([]string{"Day (UTC)", "Team", "Instance type"}, summaryResources), "Day fully recorded", "Figures up to (UTC)")
	header = summaryColumns(header, partitions)
	end := upTo.UTC().Format(time.RFC3339Nano)
	s, err := startCSV(c, "usage-summary.csv", header...)
	if err != nil {
		return err
	}
	for _, r := range rows {
		cells := append(summaryCells([]string{r.Day.Format(dateLayout), r.Team, r.InstanceType}, r, summaryResources),
			strconv.FormatBool(!incomplete[r.Day]), end)
		if err := s.Row(summaryCells(cells, r, partitions)...); err != nil {
			return err
		}
	}
	return s.Close()
}

// summaryColumns are columns with the summary CSV's four of each resource
// after them.
func summaryColumns(columns []string, resources []summaryResource) []string {
	for _, r := range resources {
		for _, what := range []string{"allocated", "used", "borrowed", "lent"} {
			columns = append(columns, fmt.Sprintf("%s %s (h)", r.column, what))
		}
	}
	return columns
}

// summaryCells are cells with row's hours of each resource after them, in
// the order of summaryColumns.
func summaryCells(cells []string, row taskhistory.UsageRow, resources []summaryResource) []string {
	for _, res := range resources {
		h := res.of(row)
		cells = append(cells, domain.FormatHours(h.Allocated), domain.FormatHours(h.Used), domain.FormatHours(h.Borrowed), domain.FormatHours(h.Lent))
	}
	return cells
}

// taskReportCSV streams the per-task report, batch by batch as the store
// reads them (holding no connection while it writes). The answer starts
// with the first row (or the end): a store that fails before it gets 503
// and a plain sentence, not an empty table.
func (p reportPage) taskReportCSV(c echo.Context, rq taskhistory.ReportQuery) error {
	var s *csvStream
	start := func() error {
		if s != nil {
			return nil
		}
		var err error
		header := append(append([]string{"Namespace", "Task"}, ownerColumns...), "Team", "Priority class", "Instance type", "Start (UTC)", "End (UTC)",
			"Held (h)", "GPU-hours (h)", "GPU partitions (MIG)", "Partition-hours (h)", "Partition GPU-equivalent hours (h)", "Borrowed", "Times preempted", "Outcome")
		s, err = startCSV(c, "task-report.csv", header...)
		return err
	}
	stamp := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format(time.RFC3339)
	}
	_, _, err := p.taskHistory.TaskReport(c.Request().Context(), rq, func(r taskhistory.ReportRow) error {
		if err := start(); err != nil {
			return err
		}
		// A row per instance type the task held in the window, so that the
		// rows add up to the summary per instance type; one row for a task
		// that held nothing in it.
		use := r.Use
		if len(use) == 0 {
			use = []taskhistory.InstanceUse{{}}
		}
		for _, u := range use {
			cells := append(append([]string{r.Task.Namespace, r.Task.Name}, ownerCells(r.Task.Named())...), r.Task.Team, r.Task.Class, u.InstanceType, stamp(r.Start), stamp(r.End),
				domain.FormatHours(u.Held.Hours()), domain.FormatHours(u.GPUHours), u.Partitions, domain.FormatHours(u.PartitionHours), domain.FormatHours(u.PartitionGPUHours),
				strconv.FormatBool(u.Borrowed), strconv.Itoa(r.TimesPreempted), outcomeLabel(r))
			if err := s.Row(cells...); err != nil {
				return err
			}
		}
		return nil
	})
	switch {
	case err != nil && s == nil:
		return echo.NewHTTPError(http.StatusServiceUnavailable, p.taskHistoryNote(err))
	case err != nil:
		return err // the header is sent: the download ends short
	}
	if err := start(); err != nil {
		return err
	}
	return s.Close()
}
