package handlers_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/openquota/console/internal/kueuetest"
	"github.com/openquota/console/internal/taskhistory"
	"github.com/openquota/console/internal/webtest"
)

// Pages keep what they rendered for every team (rows, charts, live parts,
// report days) and pick per request what the viewer may see: after a viewer
// of every team loaded them, a member of team-001 still gets team-001's
// pieces and never another team's.
func TestAMemberNeverGetsAnotherTeamsCachedPiece(t *testing.T) {
	f := newFixture(t, 3, 60).withProxy()
	f.access.grant("viewer", listClusterQueues)
	f.access.grant("member", listWorkloads(f.settings.Namespace("team-001")))
	today := time.Now().UTC().Truncate(24 * time.Hour)
	history := &taskHistory{}
	for _, day := range []time.Time{today.AddDate(0, 0, -3), today} {
		for _, team := range []string{"team-000", "team-001", "team-002"} {
			history.summary.Rows = append(history.summary.Rows, taskhistory.UsageRow{Day: day, Team: team, InstanceType: "ml.p5.48xlarge",
				GPU: taskhistory.ResourceHours{Allocated: 8, Used: 2}})
		}
		history.summary.Days = append(history.summary.Days, taskhistory.UsageDay{Day: day})
	}
	f.cfg.TaskHistory = history
	f.cluster.unchanged = true // the pages keep what they rendered
	h := f.handler()
	pages := []string{"/", "/teams", "/usage", "/usage/team-001", "/tasks?state=all", "/tasks?state=all&window=7d",
		"/reports/usage?source=history", "/reports/usage?source=history&format=csv&table=summary"}

	viewer := user(t, h, "viewer")
	for _, path := range pages {
		code, body := viewer.Get(path)
		if code != http.StatusOK {
			t.Fatalf("viewer GET %s: %d", path, code)
		}
		webtest.MustContain(t, "viewer's "+path, body, "team-001")
	}
	member := user(t, h, "member")
	for _, path := range pages {
		code, body := member.Get(path)
		if code != http.StatusOK {
			t.Errorf("member GET %s: %d", path, code)
		}
		if path != "/" { // the cluster page names no team the member has tasks in
			webtest.MustContain(t, "member's "+path, body, "team-001")
		}
		webtest.MustNotContain(t, "member's "+path, body, "team-000", "team-002")
	}
}

// The Tasks page's body is rendered once per snapshot and view and shared:
// each viewer still gets their own name and CSRF token around it, and a new
// snapshot shows in it.
func TestTasksPageSharesItsBodyNotItsViewer(t *testing.T) {
	f := newFixture(t, 3, 60).withProxy()
	f.access.grant("ana", listClusterQueues)
	f.access.grant("ben", listClusterQueues)
	h := f.handler()
	main := func(name string) (string, string) { return pageAndMain(t, user(t, h, name), "/tasks?team=team-001") }
	anaPage, ana := main("ana")
	benPage, ben := main("ben")
	webtest.MustContain(t, "ana's page", anaPage, `id="signed-in-user"`, ">ana<", `id="task-filters"`, `id="task-list-live"`)
	webtest.MustNotContain(t, "ana's page", anaPage, ">ben<")
	webtest.MustContain(t, "ben's page", benPage, ">ben<")
	webtest.MustNotContain(t, "ben's page", benPage, ">ana<")
	if ana != ben {
		t.Errorf("the same view at the same snapshot shows differently:\n%s", cmp.Diff(ana, ben))
	}

	now := time.Now().Add(3 * time.Minute)
	f.model.publish(snapshotOf(f.settings, kueuetest.Cluster(f.settings, f.settings.Cohort, 3, 90, now), now))
	_, after := main("ana")
	webtest.MustContain(t, "the page at the new snapshot", after, now.Format(time.TimeOnly))
	if after == ana {
		t.Errorf("the page did not change with the snapshot")
	}
}

// The usage report's body is rendered once per teams and query and shared:
// each viewer still gets their own name around it, and a team that comes
// shows in it (its team filter lists the teams).
func TestUsageReportSharesItsBodyNotItsViewer(t *testing.T) {
	f := newFixture(t, 3, 60).withProxy()
	f.access.grant("ana", listClusterQueues)
	f.access.grant("ben", listClusterQueues)
	today := time.Now().UTC().Truncate(24 * time.Hour)
	history := &taskHistory{}
	history.summary.Rows = []taskhistory.UsageRow{{Day: today, Team: "team-001", InstanceType: "ml.p5.48xlarge",
		GPU: taskhistory.ResourceHours{Allocated: 8, Used: 2}}}
	history.summary.Days = []taskhistory.UsageDay{{Day: today}}
	f.cfg.TaskHistory = history
	h := f.handler()
	main := func(name string) (string, string) {
		return pageAndMain(t, user(t, h, name), "/reports/usage?source=history")
	}
	anaPage, ana := main("ana")
	benPage, ben := main("ben")
	webtest.MustContain(t, "ana's page", anaPage, `id="signed-in-user"`, ">ana<", `id="history-usage"`, `data-team="team-001"`)
	webtest.MustNotContain(t, "ana's page", anaPage, ">ben<")
	webtest.MustContain(t, "ben's page", benPage, ">ben<")
	webtest.MustNotContain(t, "ben's page", benPage, ">ana<")
	if ana != ben {
		t.Errorf("the same query for the same teams shows differently:\n%s", cmp.Diff(ana, ben))
	}
	webtest.MustNotContain(t, "the team filter before the team came", ana, `value="team-003"`)

	now := time.Now()
	f.model.publish(snapshotOf(f.settings, kueuetest.Cluster(f.settings, f.settings.Cohort, 4, 60, now), now))
	_, after := main("ana")
	webtest.MustContain(t, "the team filter after a team came", after, `value="team-003"`)
}

// pageAndMain is the page at path as b gets it, and what its <main> holds.
func pageAndMain(t *testing.T, b *webtest.Browser, path string) (page, inside string) {
	t.Helper()
	code, page := b.Get(path)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d", path, code)
	}
	_, rest, _ := strings.Cut(page, "<main")
	inside, _, _ = strings.Cut(rest, "</main>")
	return page, inside
}
