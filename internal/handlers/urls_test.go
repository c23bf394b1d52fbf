package handlers

import (
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/taskhistory"
)

// pageURL's query is the one url.Values would encode from the same pairs,
// set one after the other (a later pair replaces an earlier one, an empty or
// default value deletes it).
func TestPageURLIsURLValuesEncoding(t *testing.T) {
	reference := func(path string, defaults map[string]string, pairs ...string) string {
		q := url.Values{}
		for i := 0; i+1 < len(pairs); i += 2 {
			if name, value := pairs[i], pairs[i+1]; value != "" && value != defaults[name] {
				q.Set(name, value)
			} else {
				q.Del(name)
			}
		}
		if len(q) == 0 {
			return path
		}
		return path + "?" + q.Encode()
	}
	defaults := map[string]string{"table": "tasks", "rows": "50"}
	for _, tc := range []struct {
		name  string
		pairs []string
		want  string
	}{
		{"no pairs", nil, "/reports/usage"},
		{"empty values left out", []string{"team", "", "from", ""}, "/reports/usage"},
		{"names in order", []string{"to", "2026-11-27", "from", "2026-11-20", "team", "nlp"},
			"/reports/usage?from=2026-11-20&team=nlp&to=2026-11-27"},
		{"a later pair replaces", []string{"team", "nlp", "after", "x", "team", "vision"},
			"/reports/usage?after=x&team=vision"},
		{"a later empty value deletes", []string{"team", "nlp", "after", "x", "after", ""},
			"/reports/usage?team=nlp"},
		{"defaults left out", []string{"table", "tasks", "rows", "100", "team", "nlp"},
			"/reports/usage?rows=100&team=nlp"},
		{"a default after a value deletes it", []string{"rows", "100", "rows", "50"}, "/reports/usage"},
		{"escaped", []string{"team", "a b&c=d/é", "q", "100%"},
			"/reports/usage?q=100%25&team=a+b%26c%3Dd%2F%C3%A9"},
		{"an odd last name is ignored", []string{"team", "nlp", "after"}, "/reports/usage?team=nlp"},
		{"more names than the room on the stack", []string{"a", "1", "b", "2", "c", "3", "d", "4", "e", "5", "f", "6",
			"g", "7", "h", "8", "i", "9", "j", "10", "k", "11", "l", "12", "m", "13", "n", "14", "o", "15", "p", "16", "q", "17"},
			"/reports/usage?a=1&b=2&c=3&d=4&e=5&f=6&g=7&h=8&i=9&j=10&k=11&l=12&m=13&n=14&o=15&p=16&q=17"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := pageURL("/reports/usage", defaults, tc.pairs...)
			if got != tc.want {
				t.Errorf("pageURL = %q, want %q", got, tc.want)
			}
			if ref := reference("/reports/usage", defaults, tc.pairs...); got != ref {
				t.Errorf("pageURL = %q, url.Values encodes %q", got, ref)
			}
		})
	}
}

// A state typed in the URL as the page labels it, in any case, filters as
// the page's own choice does: "running" lists the running tasks, not none.
func TestTaskStateAsTyped(t *testing.T) {
	for typed, want := range map[string]string{
		"": "", "Admitted": "Admitted", "running": "Admitted", "RUNNING": "Admitted", "pending": "Pending",
		"queued": "Queued", "Pending or preempted": "Queued", "ALL": "all", "finished": "Finished", "bogus": "bogus",
	} {
		if got := parseTaskFilter(url.Values{"state": {typed}}).State; got != want {
			t.Errorf("state=%q filters as %q, want %q", typed, got, want)
		}
	}
}

// The periods without a record: the longest listed in time order with how
// long each lasted (a gap of seconds at its minute), the rest counted.
func TestGapNotes(t *testing.T) {
	at := func(h, m, s int) time.Time { return time.Date(2026, 11, 28, h, m, s, 0, time.UTC) }
	var gaps []taskhistory.Period
	for i := range 8 { // 8 gaps of 1 s, one each minute from 02:00
		gaps = append(gaps, taskhistory.Period{From: at(2, i, 0), To: at(2, i, 1)})
	}
	gaps = append(gaps, taskhistory.Period{From: at(1, 21, 0), To: at(1, 55, 0)}, taskhistory.Period{From: at(0, 0, 0), To: at(1, 20, 0)})
	slices.SortFunc(gaps, func(a, b taskhistory.Period) int { return a.From.Compare(b.From) })
	want := []string{
		"No record for 1h 20m, from 2026-11-28 00:00 UTC to 2026-11-28 01:20 UTC: the figures leave such time out (no recorder ran, or it lost events).",
		"No record for 34m 00s, from 2026-11-28 01:21 UTC to 2026-11-28 01:55 UTC.",
		"No record for 1s, at 2026-11-28 02:00 UTC.",
		"No record for 1s, at 2026-11-28 02:01 UTC.",
		"No record for 1s, at 2026-11-28 02:02 UTC.",
		"And 5 more periods without a record, 5s in all.",
	}
	if diff := cmp.Diff(want, gapNotes(gaps)); diff != "" {
		t.Errorf("gap notes (-want +got):\n%s", diff)
	}
	if got := gapNotes(nil); got != nil {
		t.Errorf("no gaps: %v", got)
	}
}

// The total's hardware utilization weighs each team by what it uses: a team
// of 17 GPUs at 52 % and one of 2 at 94 % are at 56 % together, not 73 %.
func TestTotalHardwareWeighsTeamsByUse(t *testing.T) {
	gpus := usageResources[0]
	teams := []domain.TeamUsage{{Team: "nlp", InUse: domain.Amount{GPUs: 17}}, {Team: "speech", InUse: domain.Amount{GPUs: 2}},
		{Team: "idle"}}
	for _, tc := range []struct {
		name string
		util map[string]float64
		want string
	}{
		{"by use", map[string]float64{"nlp": 52, "speech": 94}, "56"},
		{"none in use: the plain mean", map[string]float64{"idle": 10}, "10"},
		{"no reading", nil, ""},
	} {
		if got, _ := totalHardware(teams, gpus, tc.util); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	// The column is the GPUs' utilization on every tab: the vCPU tab
	// weighs the teams by their GPUs too, not by their vCPU.
	teams[0].InUse.CPUMilli, teams[1].InUse.CPUMilli = 1000, 96000
	for _, res := range usageResources[:4] {
		if got, _ := totalHardware(teams, res, map[string]float64{"nlp": 52, "speech": 94}); got != "56" {
			t.Errorf("the %s tab: %q, want the GPUs' 56", res.key, got)
		}
	}
}

// A team's charts draw what its queue has quota of or holds: a queue of
// vCPU asked for a GPU it has no quota of charts its vCPU, a GPU team its
// GPUs, a team of nothing yet its GPUs.
func TestChartedResource(t *testing.T) {
	for _, tc := range []struct {
		name string
		u    domain.TeamUsage
		want string
	}{
		{"vCPU quota, a GPU asked for", domain.TeamUsage{Allocated: domain.Amount{CPUMilli: 9000}, PendingDemand: domain.Amount{GPUs: 1}}, "cpu"},
		{"GPU quota", domain.TeamUsage{Allocated: domain.Amount{GPUs: 8, CPUMilli: 96000}}, "gpu"},
		{"Neuron in use beyond a quota of none", domain.TeamUsage{InUse: domain.Amount{Neuron: 16}}, "neuron"},
		{"nothing", domain.TeamUsage{}, "gpu"},
	} {
		if got := chartedResource(tc.u).key; got != tc.want {
			t.Errorf("%s: charts %s, want %s", tc.name, got, tc.want)
		}
	}
}
