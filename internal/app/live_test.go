package app_test

import (
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/openquota/console/internal/handlers"
	"github.com/openquota/console/internal/webtest"
)

// A change reaches the watchers of the views it changes, as the HTML of the
// parts that changed, and no other watcher: rendered once per view, not
// once per watcher.
func TestLiveUpdatesGoOnlyToTheViewsThatChange(t *testing.T) {
	c := newConsoleWith(t, nil, func(d *handlers.Config) { d.Limits.Streams = handlers.StreamLimits{PerUser: 50, Total: 50} })
	// Names of their own: a team label is the team's name, and other
	// tests on the same cluster make teams too.
	busyTeam, quietTeam := "busy-"+rand.String(4), "quiet-"+rand.String(4)
	for _, team := range []string{busyTeam, quietTeam} {
		if code, _, body := c.post(t, "/teams", webtest.TeamForm(team, "2")); code != 303 {
			t.Fatalf("create %s: %d\n%s", team, code, body)
		}
		t.Cleanup(func() { c.post(t, "/teams/"+team+"/delete", url.Values{}) })
	}
	srv := httptest.NewServer(c.h)
	t.Cleanup(srv.Close)
	shown := c.live.Snapshot().Version
	const busyWatchers = 12
	var busy []<-chan webtest.Pushed
	for range busyWatchers {
		busy = append(busy, webtest.Watch(t, srv.URL, "/usage/"+busyTeam, shown, nil))
	}
	quiet := webtest.Watch(t, srv.URL, "/usage/"+quietTeam, shown, nil)
	// The page they loaded may be older than the stream's start: each gets
	// the parts as they are now, once.
	drain := func(ch <-chan webtest.Pushed) {
		for {
			select {
			case <-ch:
			case <-time.After(500 * time.Millisecond):
				return
			}
		}
	}
	for _, ch := range append(busy, quiet) {
		drain(ch)
	}
	renders := func() float64 { return webtest.MetricValue(t, c.h, "quota_console_live_render_duration_seconds_count") }
	before, versionBefore := renders(), c.live.Snapshot().Version

	c.submit(t, busyTeam, "waits", 8) // more than the team's quota: stays pending

	webtest.AwaitOnlyPending(t, busy, 30*time.Second, "/usage/"+busyTeam)
	webtest.Quiet(t, quiet, 2*time.Second, "/usage/"+quietTeam)
	// Each snapshot renders each watched view at most once, whatever the
	// number of its watchers.
	snapshots := float64(c.live.Snapshot().Version - versionBefore)
	if rendered := renders() - before; rendered > 2*snapshots+2 {
		t.Errorf("%v renders for %v snapshots and 2 watched views (%d watchers): views are rendered per watcher", rendered, snapshots, busyWatchers+1)
	}
	// An operator sees it in /metrics.
	_, body := webtest.Get(t, c.h, "/metrics")
	webtest.MustContain(t, "/metrics", body, `quota_console_read_model_update_duration_seconds_count{kind="Workload"}`,
		`quota_console_read_model_update_duration_seconds_count{kind="snapshot"}`,
		"quota_console_live_watchers "+strconv.Itoa(busyWatchers+1), "quota_console_live_fragments_pushed_total ",
		`quota_console_http_request_duration_seconds_count{route="/metrics"}`)
}
