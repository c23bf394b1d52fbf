package main

import (
	"context"
	"strings"
	"testing"

	"github.com/a-h/templ"
	"github.com/google/go-cmp/cmp"

	"github.com/openquota/console/web/templates"
)

func render(t *testing.T, c templ.Component) string {
	t.Helper()
	var b strings.Builder
	if err := c.Render(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// The pages' own templates carry the counts the watchers read.
func TestParsePageReadsCountsFromTheConsoleTemplates(t *testing.T) {
	part := func(id string, c templ.Component) templates.LivePart {
		return templates.LivePart{ID: id, HTML: render(t, c)}
	}
	tasksPage := templates.Page{Title: "Tasks", Snapshot: 42}
	tasks := templates.TasksView{
		Live: []templates.LivePart{
			part("class-stats-live", templates.TaskStats(templates.TaskStatsPart{TableID: "class-stats", Rows: []templates.StatsRow{
				{Class: "inference", Pending: 7, Running: 3},
				{Class: "loadtest-probe", Pending: 12},
			}})),
			part("team-class-stats-live", templates.TaskStats(templates.TaskStatsPart{TableID: "team-class-stats", WithTeam: true, Teams: []templates.LivePart{
				part("team-class-stats-team-000", templates.StatsRows([]templates.StatsRow{
					{Team: "team-000", Class: "inference", Pending: 2},
					{Team: "team-000", Class: "loadtest-probe", Pending: 5},
				}, true)),
			}})),
			part("task-list-live", templates.TaskList(templates.TaskListPart{
				Summary: part("task-list-summary", templates.TaskListSummary("Tasks 1–1 of 1 (page 1 of 1).")),
				Rows: []templates.LivePart{part("task-row-1", templates.TaskRowCells(templates.TaskRow{
					Namespace: "ns", Name: "wl", Team: "team-000", Class: "inference", State: "Pending"}))}})),
		},
	}
	usage := templates.UsageView{
		Page: templates.Page{Title: "Team usage", Snapshot: 9},
		Live: []templates.LivePart{part("usage-live", templates.UsageTable(templates.UsageTablePart{
			Rows: []templates.LivePart{
				part("usage-queue-team-000", templates.UsageRowCells(templates.UsageRow{Team: "team-000", Pending: 4}, false)),
				part("usage-queue-team-001", templates.UsageRowCells(templates.UsageRow{Team: "team-001", Pending: 0}, false)),
			},
			Total: part("usage-total", templates.UsageRowCells(templates.UsageRow{Team: "Total", Pending: 4}, true)),
		}))},
	}
	team := templates.TeamUsageView{
		Page: templates.Page{Title: "Team team-001", Snapshot: 3},
		Live: []templates.LivePart{part("team-live", templates.TeamSummary(templates.TeamSummaryView{Team: "team-001", Pending: 6}))},
	}
	for _, tc := range []struct {
		name string
		html string
		want pageState
	}{
		{"tasks", render(t, templates.Framed(tasksPage, templates.TasksBody(tasks))), pageState{Version: 42, Live: map[string]map[countKey]int{
			"class-stats-live":          {{Class: "inference"}: 7, {Class: "loadtest-probe"}: 12},
			"team-class-stats-live":     {},
			"team-class-stats-team-000": {{Class: "inference", Team: "team-000"}: 2, {Class: "loadtest-probe", Team: "team-000"}: 5},
			"task-list-live":            {},
			"task-list-summary":         {},
			"task-row-1":                {},
		}}},
		{"usage", render(t, templates.Usage(usage)), pageState{Version: 9, Live: map[string]map[countKey]int{
			"usage-live": {}, "usage-queue-team-000": {{Team: "team-000"}: 4}, "usage-queue-team-001": {{Team: "team-001"}: 0}, "usage-total": {},
		}}},
		{"team usage", render(t, templates.Framed(team.Page, templates.TeamUsageBody(team))), pageState{Version: 3, Live: map[string]map[countKey]int{"team-live": {
			{Team: "team-001"}: 6,
		}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := parsePage(strings.NewReader(tc.html))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("parsePage (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParsePageKeepsLivePartsApart(t *testing.T) {
	page := `<html><body><main data-snapshot="5">
<table><tr data-class="a" data-team=""><td data-pending="99">outside any live part</td></tr></table>
<div id="one" data-live><br><img src="x"><input name="q">
  <table><tbody><tr data-class="a" data-team=""><td>1</td><td data-pending="1"><a href="#">1</a></td></tr></tbody></table>
</div>
<div id="two" data-live><table><tr data-team="t" data-pending="3"><td>x</td></tr>
  <tfoot><tr data-total="true" data-pending="30"></tr></tfoot></table></div>
<div id="not-live"><p data-team="t" data-pending="77"></p></div>
</main></body></html>`
	want := pageState{Version: 5, Live: map[string]map[countKey]int{
		"one": {{Class: "a"}: 1},
		"two": {{Team: "t"}: 3},
	}}
	if diff := cmp.Diff(want, parsePage(strings.NewReader(page))); diff != "" {
		t.Errorf("parsePage (-want +got):\n%s", diff)
	}
}

func TestParseFragment(t *testing.T) {
	for _, tc := range []struct {
		name, html string
		want       map[countKey]int
	}{
		{"stats rows", `<table><tr data-class="c" data-team=""><th>c</th><td data-pending="4">4</td></tr>` +
			`<tr data-class="c" data-team="t"><td data-pending="2">2</td></tr></table>`,
			map[countKey]int{{Class: "c"}: 4, {Class: "c", Team: "t"}: 2}},
		{"usage rows", `<tr data-team="t" data-pending="8"></tr><tr data-total="true" data-pending="80"></tr>`,
			map[countKey]int{{Team: "t"}: 8}},
		{"a pending cell after its row ended counts nowhere", `<tr data-class="c"></tr><td data-pending="1"></td>`,
			map[countKey]int{}},
		{"not a number", `<tr data-team="t" data-pending="many"></tr>`, map[countKey]int{}},
		{"empty", ``, map[countKey]int{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, parseFragment(tc.html)); diff != "" {
				t.Errorf("parseFragment (-want +got):\n%s", diff)
			}
		})
	}
}
