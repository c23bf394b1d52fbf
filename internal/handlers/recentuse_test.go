package handlers_test

import (
	"net/http"
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
}
