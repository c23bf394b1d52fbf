package handlers_test

import (
	"net/http/httptest"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/handlers"
	"github.com/openquota/console/internal/kueuetest"
	"github.com/openquota/console/internal/metrics"
	"github.com/openquota/console/internal/webtest"
)

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

	webtest.AwaitOnlyPending(t, busy, 10*time.Second, "/usage/team-001")
	webtest.Quiet(t, quiet, time.Second, "/usage/team-000")
	// Each snapshot renders each watched view at most once, whatever the
	// number of its watchers.
	snapshots := float64(f.model.Snapshot().Version - versionBefore)
	if rendered := renders() - before; rendered > 2*snapshots+2 {
		t.Errorf("%v renders for %v snapshots and 2 watched views (%d watchers): views are rendered per watcher", rendered, snapshots, busyWatchers+1)
	}
	_, body := webtest.Get(t, srv.Config.Handler, "/metrics")
	webtest.MustContain(t, "/metrics", body, "quota_console_live_watchers "+strconv.Itoa(busyWatchers+1), "quota_console_live_fragments_pushed_total ")
}

// A change of the read model pushes, to each view, the parts that depend
// on it and whose content changed, and renders no view it cannot change:
// a team's task reaches that team's rows and the figures over all teams;
// a quota reaches the usage pages only; the clock's cadence reaches the
// figures that grow with it (the Tasks page), not the usage pages.
func TestAChangePushesThePartsThatDependOnIt(t *testing.T) {
	s := domain.DefaultSettings
	now := time.Now().Truncate(domain.ClockCadence).Add(time.Second)
	objs := kueuetest.Cluster(s, s.Cohort, 2, 300, now)
	views := []string{"/tasks?sort=name", "/tasks?team=team-000", "/usage", "/usage/team-000", "/usage/team-001"}
	for _, tc := range []struct {
		name   string
		change func(m *domain.Model)
		after  time.Duration
		// want are the parts each view receives; some are views that
		// receive parts, whichever.
		want    map[string][]string
		some    []string
		renders float64 // at most, for all views
	}{
		{
			name: "a pending task of team-001",
			change: func(m *domain.Model) {
				m.SetWorkload(kueuetest.MakeWorkload(s, s.Namespace("team-001"), "zz-new").Queue(s.LocalQueue("team-001")).Class("training").
					GPUs(1, 1).Created(now).Pending("Pending", "waits for quota", now).Obj())
			},
			after: time.Second,
			want: map[string][]string{
				"/tasks?sort=name": {"class-stats-live", "task-list-summary", "team-class-stats-team-001"},
				"/usage":           {"usage-queue-" + s.ClusterQueue("team-001"), "usage-total"},
				"/usage/team-001":  {"team-live"},
			},
			renders: 3,
		},
		{
			name: "a quota of team-000",
			change: func(m *domain.Model) {
				cq := objs.ClusterQueues[0].DeepCopy()
				cq.Spec.ResourceGroups[0].Flavors[0].Resources[0].NominalQuota.Set(16)
				m.SetClusterQueue(cq)
			},
			after: time.Second,
			want: map[string][]string{
				"/usage":          {"usage-queue-" + s.ClusterQueue("team-000"), "usage-total"},
				"/usage/team-000": {"team-limits", "team-live"}, // the limits table shows the quota
			},
			renders: 4, // and the Tasks pages, whose figures stay
		},
		{
			name:    "the clock's cadence",
			change:  func(*domain.Model) {},
			after:   domain.ClockCadence,
			some:    []string{"/tasks?sort=name", "/tasks?team=team-000"},
			renders: 2,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := domain.NewModel(s)
			model.Load(domain.SnapshotInput{Settings: s, ClusterQueues: objs.ClusterQueues, LocalQueues: objs.LocalQueues,
				Workloads: objs.Workloads, Classes: objs.Classes})
			f := newFixture(t, 2, 0)
			f.model = newReadModel(model.Snapshot(now))
			f.cfg.ReadModel = f.model
			f.cfg.Metrics = metrics.NewConsole()
			srv := httptest.NewServer(f.handler())
			t.Cleanup(srv.Close)
			watchers := map[string]<-chan webtest.Pushed{}
			for _, v := range views {
				watchers[v] = webtest.Watch(t, srv.URL, v, f.model.Snapshot().Version, nil)
			}
			renders := func() float64 {
				return webtest.MetricValue(t, srv.Config.Handler, "quota_console_live_render_duration_seconds_count")
			}
			before := renders()

			tc.change(model)
			f.model.publish(model.Snapshot(now.Add(tc.after)))

			// Collect for 1.5 s, and on a busy machine until the views that
			// must receive something did (at most 10 s).
			got := map[string][]string{}
			start := time.Now()
			received := func() bool {
				for _, v := range tc.some {
					if len(got[v]) == 0 {
						return false
					}
				}
				return true
			}
			for time.Since(start) < 1500*time.Millisecond || !received() && time.Since(start) < 10*time.Second {
				for v, ch := range watchers {
					select {
					case p := <-ch:
						got[v] = append(got[v], p.IDs()...)
					default:
					}
				}
				time.Sleep(10 * time.Millisecond)
			}
			for _, v := range tc.some {
				if len(got[v]) == 0 {
					t.Errorf("%s received nothing", v)
				}
				delete(got, v)
			}
			for v, ids := range got {
				slices.Sort(ids)
				got[v] = slices.Compact(ids)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("parts pushed by view (-want +got):\n%s", diff)
			}
			if n := renders() - before; n > tc.renders {
				t.Errorf("%v views rendered, want at most %v: views the change cannot alter were rendered", n, tc.renders)
			}
		})
	}
}
