package handlers_test

import (
	"net/http/httptest"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openquota/console/internal/handlers"
	"github.com/openquota/console/internal/kueuetest"
	"github.com/openquota/console/internal/metrics"
	"github.com/openquota/console/internal/webtest"
)

var pendingAttr = regexp.MustCompile(`id="team-summary" data-team="[^"]*" data-pending="(\d+)"`)

// A change reaches the watchers of the views it changes, as the HTML of the
// parts that changed, and no other watcher: rendered once per view, not
// once per watcher.
func TestLiveUpdatesGoOnlyToTheViewsThatChange(t *testing.T) {
	f := newFixture(t, 2, 0) // team-000 and team-001, no tasks
	f.cfg.Limits.Streams = handlers.StreamLimits{PerUser: 50, Total: 50}
	f.cfg.Metrics = metrics.NewConsole()
	srv := httptest.NewServer(f.handler())
	t.Cleanup(srv.Close)
	shown := f.model.Snapshot().Version
	const busyWatchers = 12
	var busy []<-chan webtest.Pushed
	for range busyWatchers {
		busy = append(busy, webtest.Watch(t, srv.URL, "/usage/team-001", shown, nil))
	}
	quiet := webtest.Watch(t, srv.URL, "/usage/team-000", shown, nil)
	renders := func() float64 {
		return webtest.MetricValue(t, srv.Config.Handler, "quota_console_live_render_duration_seconds_count")
	}
	before, versionBefore := renders(), f.model.Snapshot().Version

	// A task of team-001 waits: its page changes, team-000's does not.
	s, now := f.settings, time.Now()
	objs := kueuetest.Cluster(s, s.Cohort, 2, 0, now)
	objs.Workloads = append(objs.Workloads, kueuetest.MakeWorkload(s, s.Namespace("team-001"), "waits").Queue(s.LocalQueue("team-001")).
		GPUs(8, 1).Created(now).Pending("Pending", "waits for quota", now).Obj())
	f.model.publish(snapshotOf(s, objs, now))

	for i, ch := range busy {
		deadline := time.After(10 * time.Second)
	wait:
		for {
			select {
			case p := <-ch:
				html, ok := p.Fragments["team-live"]
				if m := pendingAttr.FindStringSubmatch(html); ok && m != nil && m[1] == "1" {
					if diff := cmp.Diff([]string{"team-live"}, p.IDs()); diff != "" {
						t.Errorf("watcher %d got parts beyond the changed one (-want +got):\n%s", i, diff)
					}
					break wait
				}
			case <-deadline:
				t.Fatalf("watcher %d of /usage/team-001 never saw the pending task", i)
			}
		}
	}
	select {
	case p := <-quiet:
		t.Errorf("the watcher of an unchanged view received %v", p.IDs())
	case <-time.After(time.Second):
	}
	// Each snapshot renders each watched view at most once, whatever the
	// number of its watchers.
	snapshots := float64(f.model.Snapshot().Version - versionBefore)
	if rendered := renders() - before; rendered > 2*snapshots+2 {
		t.Errorf("%v renders for %v snapshots and 2 watched views (%d watchers): views are rendered per watcher", rendered, snapshots, busyWatchers+1)
	}
	_, body := webtest.Get(t, srv.Config.Handler, "/metrics")
	webtest.MustContain(t, "/metrics", body, "quota_console_live_watchers "+strconv.Itoa(busyWatchers+1), "quota_console_live_fragments_pushed_total ")
}
