package handlers_test

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/form"
	"github.com/openquota/console/internal/kueue"
	"github.com/openquota/console/internal/webtest"
	"github.com/openquota/console/internal/write"
)

// reviewTeamCut posts team-001's edit form with 8 GPUs for review, as its
// Review button does, and returns the preview page.
func reviewTeamCut(t *testing.T, admin *webtest.Browser) string {
	t.Helper()
	admin.Get("/teams/team-001/edit")
	typed := webtest.TeamForm("team-001", "8")
	typed.Set("step", "preview")
	code, _, body := admin.Post("/teams/team-001", typed)
	if code != http.StatusOK {
		t.Fatalf("preview: %d\n%.400s", code, body)
	}
	return body
}

// A team form goes through its preview: Review shows what Kueue will do
// with the values typed, Back returns to the form with them, Apply saves
// them.
func TestTeamFormGoesThroughItsImpactPreview(t *testing.T) {
	f := newFixture(t, 2, 0).withProxy()
	f.access.grant("admin", listClusterQueues, editTeams, deleteTeams, editPolicy)
	f.writes.impact = domain.Impact{
		Preempted: []domain.ImpactTask{{Namespace: "hyperpod-ns-team-001", Name: "train-7", Team: "team-001", Class: "training",
			GPUs: 8, Ran: 90 * time.Minute, GPUHours: 12, Why: "Team team-001 would exceed its quota of 8 GPUs by 8."}},
		Teams:         []domain.TeamImpact{{Team: "team-001", QuotaNow: 16, QuotaAfter: 8, InUseNow: 16, InUseAfter: 8}},
		GPUsPreempted: 8, GPUHoursAtRisk: 12,
		WritesTo: "ClusterQueue hyperpod-ns-team-001-clusterqueue",
		Writes:   []string{"GPUs quota on ml.p5.48xlarge: 16 → 8"},
	}
	admin := user(t, f.handler(), "admin")
	body := reviewTeamCut(t, admin)
	webtest.MustContain(t, "the preview", body, `id="impact-writes"`, "What it changes on ClusterQueue hyperpod-ns-team-001-clusterqueue",
		"GPUs quota on ml.p5.48xlarge: 16 → 8")
	webtest.MustContain(t, "the preview", body, `id="impact-preempted"`, "hyperpod-ns-team-001/train-7", "1h 30m", "12.0",
		"would exceed its quota of 8 GPUs by 8", "16 → 8", `id="apply"`, `id="back"`,
		"1 task preempted (8 GPUs, 12.0 GPU-hours of work).")
	if made := f.writes.made(); len(made) != 0 {
		t.Errorf("a preview made changes: %v", made)
	}
	if !slices.Contains(f.writes.previews, "PreviewTeam team-001") {
		t.Errorf("previews asked: %v", f.writes.previews)
	}

	carried := webtest.FormValues(t, body, "confirm-form")
	if carried.Get("quota.0.gpus") != "8" || carried.Get("users") != "alice" || carried.Get("previewed") == "" {
		t.Errorf("the confirmation does not carry the typed values: %v", carried)
	}
	back := webtest.CloneValues(carried)
	back.Set("step", "edit")
	code, _, body := admin.Post("/teams/team-001", back)
	if code != http.StatusOK || !strings.Contains(body, `id="save"`) || !strings.Contains(body, `value="8"`) {
		t.Errorf("back to the form: %d\n%.400s", code, body)
	}

	apply := webtest.CloneValues(carried)
	apply.Set("step", "apply")
	if code, location, _ := admin.Post("/teams/team-001", apply); code != http.StatusSeeOther || location != "/teams?saved=team-001" {
		t.Errorf("apply: %d %q", code, location)
	}
	if made := f.writes.made(); !slices.Contains(made, "save team team-001 by admin") {
		t.Errorf("apply made %v", made)
	}
}

// A preview names other teams' tasks: someone who may not make the change
// gets none; their post goes to the write path, which refuses it.
func TestNoPreviewForWhoMayNotChange(t *testing.T) {
	f := newFixture(t, 2, 0).withProxy()
	f.access.grant("viewer", listClusterQueues)
	viewer := user(t, f.handler(), "viewer")
	viewer.Get("/teams/team-001/edit")
	typed := webtest.TeamForm("team-001", "8")
	typed.Set("step", "preview")
	viewer.Post("/teams/team-001", typed)
	if len(f.writes.previews) != 0 {
		t.Errorf("a viewer got previews: %v", f.writes.previews)
	}
	if made := f.writes.made(); !slices.Contains(made, "save team team-001 by viewer") {
		t.Errorf("the viewer's post did not go to the write path: %v", made)
	}
	_, body := viewer.Get("/teams/team-001/delete")
	webtest.MustNotContain(t, "the viewer's delete page", body, `id="impact"`)
}

// A form that cannot be saved gets its field errors from the preview, as
// from a save, and no confirmation.
func TestPreviewOfABadFormShowsItsErrors(t *testing.T) {
	f := newFixture(t, 2, 0).withProxy()
	f.access.grant("admin", listClusterQueues, editTeams, deleteTeams, editPolicy)
	admin := user(t, f.handler(), "admin")
	admin.Get("/teams/new")
	var errs form.Errors
	errs.Add("name", "Use lowercase letters, digits and dashes.")
	f.writes.outcome = &write.Outcome{Kind: write.Rejected, Fields: errs, Message: "Check the fields marked below."}
	typed := webtest.TeamForm("Bad Name", "8")
	typed.Set("step", "preview")
	code, _, body := admin.Post("/teams", typed)
	if code != http.StatusUnprocessableEntity || strings.Contains(body, `id="apply"`) || !strings.Contains(body, "lowercase") {
		t.Errorf("preview of a bad form: %d\n%.400s", code, body)
	}
}

// The delete confirmation shows what deleting stops.
func TestDeleteConfirmationShowsItsImpact(t *testing.T) {
	f := newFixture(t, 2, 0).withProxy()
	f.access.grant("admin", listClusterQueues, editTeams, deleteTeams, editPolicy)
	f.writes.impact = domain.Impact{Deleted: []domain.ImpactTask{{Namespace: "hyperpod-ns-team-001", Name: "serve-1", Team: "team-001",
		GPUs: 4, Why: "Stopped and deleted with its team's namespace."}}, GPUsDeleted: 4}
	admin := user(t, f.handler(), "admin")
	code, body := admin.Get("/teams/team-001/delete")
	if code != http.StatusOK {
		t.Fatalf("delete page: %d", code)
	}
	webtest.MustContain(t, "the delete confirmation", body, `id="impact-deleted"`, "hyperpod-ns-team-001/serve-1", "1 task deleted (4 GPUs running).")
}

// A preview that Kueue's cycles cut short names every task Kueue had not
// tried: the page lists the first of them and counts the rest.
func TestAPreviewListsTheFirstUncertainTasks(t *testing.T) {
	f := newFixture(t, 2, 0).withProxy()
	f.access.grant("admin", listClusterQueues, editTeams)
	for i := range 120 {
		f.writes.impact.Uncertain = append(f.writes.impact.Uncertain, domain.ImpactTask{Namespace: "hyperpod-ns-team-001",
			Name: fmt.Sprintf("wait-%03d", i), Team: "team-001", GPUs: 1, Why: "Kueue had not tried it yet when the preview stopped."})
	}
	body := reviewTeamCut(t, user(t, f.handler(), "admin"))
	webtest.MustContain(t, "the preview", body, `id="impact-uncertain"`, "hyperpod-ns-team-001/wait-049", "and 70 more, for the same reasons.")
	webtest.MustNotContain(t, "the preview", body, "hyperpod-ns-team-001/wait-050")
}

// When the cluster cannot say whether the user may make a change, the
// forms stay usable (the write path decides on save), but the preview,
// which names other teams' tasks, is not shown.
func TestNoPreviewWhenTheClusterCannotSayWhoMayChange(t *testing.T) {
	f := newFixture(t, 2, 0).withProxy()
	f.access.grant("admin", listClusterQueues, editTeams, deleteTeams, editPolicy)
	admin := user(t, f.handler(), "admin")
	admin.Get("/teams/team-001/edit")
	f.access.mu.Lock()
	f.access.unsure = []kueue.Permission{editTeams, deleteTeams, editPolicy} // the pages' reads are known
	f.access.mu.Unlock()
	typed := webtest.TeamForm("team-001", "8")
	typed.Set("step", "preview")
	admin.Post("/teams/team-001", typed)
	policy := url.Values{"prioritization": {"FirstComeFirstServe"}, "step": {"preview"}}
	admin.Post("/policy", policy)
	_, body := admin.Get("/teams/team-001/delete")
	webtest.MustNotContain(t, "the delete page", body, `id="impact"`)
	if len(f.writes.previews) != 0 {
		t.Errorf("previews shown while the cluster could not say who may change: %v", f.writes.previews)
	}
}
