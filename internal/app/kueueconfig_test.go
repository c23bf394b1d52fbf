package app_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/kueue"
)

// A console that cannot read Kueue's configuration answers a what-if and
// previews a change with Kueue's defaults, and says so: on a cluster with
// fair sharing on, Kueue may decide otherwise.
func TestAnswersSayWhenKueueConfigurationIsUnreadable(t *testing.T) {
	c := startConsole(t, setup{kueueConfig: kueue.ConfigMapRef{Namespace: "kueue-system", Name: "missing-" + rand.String(5), Key: "controller_manager_config.yaml"}})
	t.Cleanup(func() { cleanupTeams(c) })
	team := "cfg-" + rand.String(4)
	if code, _, body := c.post(t, "/teams", whatIfTeamForm(p5Team(team, 8), "")); code != 303 {
		t.Fatalf("create team: %d %.300s", code, body)
	}
	wc := whatIfConsole{console: c}
	// The what-if answers once the console's caches hold the new queue.
	if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		_, err := c.cache.ClusterQueues.Get(c.settings.ClusterQueue(team))
		_, lqErr := c.cache.LocalQueues.LocalQueues(c.settings.Namespace(team)).Get(c.settings.LocalQueue(team))
		return err == nil && lqErr == nil, nil
	}); err != nil {
		t.Fatalf("the console never saw team %s's ClusterQueue", team)
	}
	r := wc.ask(t, func(path string) (int, string) { return c.get(t, path) }, wiJob{team: team, pods: []wiPods{p5(1, 8)}})
	if !strings.Contains(r.Uncertain, domain.KueueDefaultsAssumed) {
		t.Errorf("what-if: uncertain %q, want it to say %q", r.Uncertain, domain.KueueDefaultsAssumed)
	}

	form := whatIfTeamForm(p5Team(team, 4), "")
	form.Set("step", "preview")
	code, _, body := c.post(t, "/teams/"+url.PathEscape(team), form)
	if code != 200 || !strings.Contains(body, "Kueue&#39;s configuration could not be read") {
		t.Errorf("preview of a quota cut: %d, want the note that Kueue's defaults are assumed in %.2000s", code, body)
	}
}
