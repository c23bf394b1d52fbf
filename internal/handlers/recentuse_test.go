package handlers_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/kueuetest"
	"github.com/openquota/console/internal/webtest"
)

// A team whose queue orders its waiting tasks by recent use: the form
// offers the choice and says whether Kueue applies it, the policy page
// names the team, and the team's page lists its LocalQueues in the order
// Kueue gives them, with their recent use.
func TestOrderByRecentUse(t *testing.T) {
	f := newFixture(t, 2, 0)
	s, now := f.settings, time.Now()
	objs := kueuetest.Cluster(s, s.Cohort, 2, 0, now)
	cq := objs.ClusterQueues[0]
	cq.Spec.AdmissionScope = domain.AdmissionScopeOf(true)
	f.model.publish(snapshotOf(s, objs, now))
	sampled := time.Date(2026, 11, 27, 7, 30, 0, 0, time.UTC)
	f.cluster.uses = map[string][]domain.LocalQueueUse{cq.Name: {
		{Namespace: "vision", Name: "user-queue", Weight: 1},
		{Namespace: "research", Name: "user-queue", Weight: 2, Consumed: domain.RecentAmount{GPUs: 2.25, VCPU: 9, MemoryGiB: 36}, Score: 1, LastUpdate: sampled, Counted: true},
	}}
	f.cfg.RecentUse = f.cluster
	team := s.TeamOfClusterQueue(cq)

	// Kueue's configuration has no admissionFairSharing: the form says what to set.
	_, body := webtest.Get(t, f.handler(), "/teams/"+team+"/edit")
	webtest.MustContain(t, "the team form", body, `<select id="order" name="order"`, "Kueue does not apply it yet")

	f.cluster.recentUse = &domain.RecentUseConfig{HalfLife: time.Hour, Sampling: 10 * time.Second}
	_, body = webtest.Get(t, f.handler(), "/teams/"+team+"/edit")
	webtest.MustContain(t, "the team form", body, "half-life of 1h0m0s, sampled every 10s")

	_, body = webtest.Get(t, f.handler(), "/policy")
	webtest.MustContain(t, "the policy page", body, `<span id="recent-use-teams">`+team+`</span>`, "half-life of 1h0m0s")

	code, body := webtest.Get(t, f.handler(), "/usage/"+team)
	if code != http.StatusOK {
		t.Fatalf("/usage/%s: %d", team, code)
	}
	got := webtest.HTMLRows(t, body, "recent-use", webtest.ByAttr("data-queue"))
	want := map[string][]string{
		"vision/user-queue":   {"1", "vision", "user-queue", "1", "", "", "", "not yet"},
		"research/user-queue": {"2", "research", "user-queue", "2", "2.2", "9.0", "36.0", "2026-11-27 07:30:00 UTC"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("recent use (-want +got):\n%s", diff)
	}
	// A team that orders by priority has no such table.
	other := s.TeamOfClusterQueue(objs.ClusterQueues[1])
	if _, body := webtest.Get(t, f.handler(), "/usage/"+other); strings.Contains(body, `id="recent-use"`) {
		t.Errorf("team %s orders by priority but its page lists recent use", other)
	}

	// The tasks of the team say what orders them; the usage page marks it.
	_, body = webtest.Get(t, f.handler(), "/tasks?team="+team)
	webtest.MustContain(t, "the team's tasks", body, `id="order-note"`, `href="/usage/`+team+`#recent-use"`)
	_, body = webtest.Get(t, f.handler(), "/tasks?team="+other)
	webtest.MustNotContain(t, "the other team's tasks", body, `id="order-note"`)
	_, body = webtest.Get(t, f.handler(), "/usage")
	badges := webtest.HTMLRows(t, body, "team-usage", webtest.ByAttr("data-team"))
	if !strings.Contains(badges[team][0], "by recent use") || strings.Contains(badges[other][0], "by recent use") {
		t.Errorf("the usage page's team cells: %q and %q; want only %s marked by recent use", badges[team][0], badges[other][0], team)
	}
}

// The policy page sets every team's order of waiting tasks at once: each
// choice names the teams it changes, and a post whose list is no longer
// the teams it would change writes nothing.
func TestPolicyOrdersEveryTeamByRecentUse(t *testing.T) {
	f := newFixture(t, 3, 0).withProxy()
	s, now := f.settings, time.Now()
	objs := kueuetest.Cluster(s, s.Cohort, 3, 0, now)
	objs.ClusterQueues[1].Spec.AdmissionScope = domain.AdmissionScopeOf(true)
	f.model.publish(snapshotOf(s, objs, now))
	f.access.grant("admin", listClusterQueues, editTeams, editPolicy)
	f.access.grant("viewer", listClusterQueues)
	h := f.handler()
	admin := user(t, h, "admin")

	_, body := admin.Get("/policy")
	webtest.MustContain(t, "the policy page", body, `id="recent-use-recent-use"`, "Changes 2 teams: team-000, team-002.",
		`id="recent-use-arrival"`, "Changes team team-001.")
	if got := webtest.FormValues(t, body, "recent-use-recent-use"); got.Get("previewed") != "team-000, team-002" {
		t.Errorf("the choice posts back %q as previewed", got.Get("previewed"))
	}

	code, _, body := admin.Post("/policy/recent-use", url.Values{"order": {"recent-use"}, "previewed": {"team-000"}})
	if code != http.StatusConflict || !strings.Contains(body, "The teams changed since the page was shown") {
		t.Errorf("a stale list: %d\n%.300s", code, body)
	}
	if made := f.writes.made(); len(made) != 0 {
		t.Errorf("a stale list wrote %v", made)
	}

	code, location, _ := admin.Post("/policy/recent-use", url.Values{"order": {"recent-use"}, "previewed": {"team-000, team-002"}})
	if code != http.StatusSeeOther || location != "/policy?saved=1" {
		t.Errorf("the choice: %d %q", code, location)
	}
	if diff := cmp.Diff([]string{"order every team by recent use true by admin"}, f.writes.made()); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}

	// A viewer who may not change the policy gets no choice, which would
	// name every team.
	viewer := user(t, h, "viewer")
	_, body = viewer.Get("/policy")
	webtest.MustNotContain(t, "a viewer's policy page", body, `id="recent-use-recent-use"`, "team-002.")
	if code, _, _ := viewer.Post("/policy/recent-use", url.Values{"order": {"arrival"}, "previewed": {"team-001"}}); code != http.StatusForbidden {
		t.Errorf("a viewer's post: %d", code)
	}
	if len(f.writes.made()) != 1 {
		t.Errorf("a viewer's post wrote: %v", f.writes.made())
	}
}
