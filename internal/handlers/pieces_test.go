package handlers_test

import (
	"net/http"
	"testing"
	"time"

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
