package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// protocolServer speaks one live-update protocol the way the brief defines
// it, serving a Tasks page whose probe-class pending count the test moves.
// (The console itself is measured in TestWatchersFollowTheConsole.)
type protocolServer struct {
	protocol     string // "snapshot", "fragments", or "refuse" (503 on /events)
	refetchDelay time.Duration
	live         bool // the page has a live part

	mu      sync.Mutex
	version uint64
	pending int
	subs    map[chan struct{}]bool

	pageLoads, refetches, streams atomic.Int32
	inflight, maxInflight         atomic.Int32
	views                         sync.Map // the view= of each stream
}

func newProtocolServer(protocol string) *protocolServer {
	return &protocolServer{protocol: protocol, live: true, version: 1, subs: map[chan struct{}]bool{}}
}

func (s *protocolServer) liveHTML() string {
	return fmt.Sprintf(`<h2>By priority class</h2><table id="class-stats"><tr data-class="probe" data-team=""><th>probe</th>`+
		`<td data-pending="%d">%d</td></tr></table>`, s.pending, s.pending)
}

func (s *protocolServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/tasks":
		if r.Header.Get("X-Live") == "1" {
			s.refetches.Add(1)
			n := s.inflight.Add(1)
			for m := s.maxInflight.Load(); n > m && !s.maxInflight.CompareAndSwap(m, n); m = s.maxInflight.Load() {
			}
			time.Sleep(s.refetchDelay)
			defer s.inflight.Add(-1)
		} else {
			s.pageLoads.Add(1)
		}
		s.mu.Lock()
		body := fmt.Sprintf(`<html><body><main data-snapshot="%d">`, s.version)
		if s.live {
			body += `<div id="tasks-live" data-live>` + s.liveHTML() + `</div>`
		}
		body += `</main></body></html>`
		s.mu.Unlock()
		fmt.Fprint(w, body)
	case "/events":
		s.streams.Add(1)
		s.views.Store(r.URL.Query().Get("view"), true)
		if s.protocol == "refuse" {
			http.Error(w, "too many watchers", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		changed := make(chan struct{}, 1)
		s.mu.Lock()
		s.subs[changed] = true
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			delete(s.subs, changed)
			s.mu.Unlock()
		}()
		fmt.Fprint(w, "retry: 100\n")
		s.send(w, s.protocol == "snapshot")
		for {
			select {
			case <-r.Context().Done():
				return
			case <-changed:
				s.send(w, true)
			}
		}
	default:
		http.NotFound(w, r)
	}
}

// send writes the current version as the protocol's event; the push
// protocol sends nothing on connect.
func (s *protocolServer) send(w http.ResponseWriter, now bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.protocol == "snapshot":
		fmt.Fprintf(w, "event: snapshot\ndata: %d\n\n", s.version)
	case s.protocol == "fragments" && now:
		data, _ := json.Marshal(struct {
			Version   uint64            `json:"version"`
			Fragments map[string]string `json:"fragments"`
		}{s.version, map[string]string{"tasks-live": s.liveHTML()}})
		fmt.Fprintf(w, "event: fragments\ndata: %s\n\n", data)
	}
	w.(http.Flusher).Flush()
}

func TestReadFragmentsKeepsTheirOrder(t *testing.T) {
	got, err := readFragments(`{"version":3,"asOf":"10:00:00","fragments":{"z-outer":"<b>1</b>","a-row":"two","m":"\u003c"}}`)
	if err != nil {
		t.Fatal(err)
	}
	want := []fragment{{"z-outer", "<b>1</b>"}, {"a-row", "two"}, {"m", "<"}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(fragment{})); diff != "" {
		t.Errorf("readFragments (-want +got):\n%s", diff)
	}
}

// change adds n pending tasks of the probe class and tells the streams.
func (s *protocolServer) change(n int) {
	s.mu.Lock()
	s.pending += n
	s.version++
	for ch := range s.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	s.mu.Unlock()
}

func (s *protocolServer) waiting() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.subs)
}

// startWatcher runs one watcher of /tasks against srv until the test ends.
func startWatcher(t *testing.T, srv *httptest.Server) *watcher {
	t.Helper()
	w := newWatcher(watchTasks, "team-a", []string{"team-a"}, "probe")
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.run(ctx, srv.Client(), srv.URL, func() { close(ready) })
	}()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		t.Fatal("watcher never got ready")
	}
	return w
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestWatcherRefetchesOnSnapshotEventsOneAtATime(t *testing.T) {
	ps := newProtocolServer("snapshot")
	ps.refetchDelay = 150 * time.Millisecond
	srv := httptest.NewServer(ps)
	t.Cleanup(srv.Close) // after the watcher stops (cleanups run last-in first-out)
	w := startWatcher(t, srv)
	eventually(t, "the stream is open", func() bool { return ps.waiting() == 1 })

	var probes []probe
	for i := 0; i < 10; i++ { // a burst while a refetch is in flight
		probes = append(probes, probe{Team: "team-a", Sent: time.Now()})
		ps.change(1)
		time.Sleep(5 * time.Millisecond)
	}
	eventually(t, "the page shows all 10", func() bool { return w.sawAll(probes) })

	if got := ps.maxInflight.Load(); got != 1 {
		t.Errorf("at most %d refetches at once; app.js makes one at a time", got)
	}
	// One refetch for the burst's start, one more for the events that came
	// meanwhile (and perhaps one for the connect event): never one per event.
	if got := ps.refetches.Load(); got < 2 || got > 3 {
		t.Errorf("%d refetches for a burst of 10 events; want 2 or 3", got)
	}
	lat, missed, early := w.seenLatencies(probes, time.Minute)
	if len(lat) != 10 || missed != 0 || early != 0 {
		t.Errorf("seenLatencies = %d latencies, %d missed, %d early; want 10, 0, 0", len(lat), missed, early)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mode != modeRefetch || w.events == 0 {
		t.Errorf("mode %q after %d events; want %q", w.mode, w.events, modeRefetch)
	}
	if _, ok := ps.views.Load("/tasks"); !ok {
		t.Error("the stream did not name its view (/events?view=/tasks)")
	}
}

func TestWatcherReadsPushedFragmentsWithoutRefetching(t *testing.T) {
	ps := newProtocolServer("fragments")
	srv := httptest.NewServer(ps)
	t.Cleanup(srv.Close) // after the watcher stops (cleanups run last-in first-out)
	w := startWatcher(t, srv)
	eventually(t, "the stream is open", func() bool { return ps.waiting() == 1 })

	var probes []probe
	for i := 0; i < 3; i++ {
		probes = append(probes, probe{Team: "team-a", Sent: time.Now()})
		ps.change(1)
		eventually(t, fmt.Sprintf("probe %d shows", i+1), func() bool { return w.sawAll(probes) })
	}
	if n := ps.refetches.Load(); n != 0 {
		t.Errorf("%d refetches in push mode; want none", n)
	}
	w.mu.Lock()
	mode, pushes := w.mode, w.pushes
	w.mu.Unlock()
	if mode != modePush || pushes != 3 {
		t.Errorf("mode %q, %d pushes; want %q, 3", mode, pushes, modePush)
	}
}

func TestWatcherCountsARefusedStreamAndStops(t *testing.T) {
	ps := newProtocolServer("refuse")
	srv := httptest.NewServer(ps)
	t.Cleanup(srv.Close) // after the watcher stops (cleanups run last-in first-out)
	w := startWatcher(t, srv)
	time.Sleep(300 * time.Millisecond) // longer than the retry a reconnect would wait
	w.mu.Lock()
	refused := w.refused
	w.mu.Unlock()
	if !refused || ps.streams.Load() != 1 {
		t.Errorf("refused=%v after %d stream requests; want refused after 1 (EventSource gives up on 503)", refused, ps.streams.Load())
	}
	if !w.sawAll([]probe{{Team: "team-a"}}) {
		t.Error("a refused watcher can never see a probe: waiting for it must not block the run")
	}
	if _, missed, _ := w.seenLatencies([]probe{{Team: "team-a", Sent: time.Now()}}, time.Minute); missed != 1 {
		t.Errorf("missed = %d; want the refused watcher's probe counted as missed", missed)
	}
}

func TestWatcherOfAPageWithoutLivePartsOpensNoStream(t *testing.T) {
	ps := newProtocolServer("snapshot")
	ps.live = false
	srv := httptest.NewServer(ps)
	t.Cleanup(srv.Close) // after the watcher stops (cleanups run last-in first-out)
	w := startWatcher(t, srv)
	if ps.streams.Load() != 0 || !w.noLive {
		t.Errorf("%d streams, noLive=%v; app.js opens no stream on a page without live parts", ps.streams.Load(), w.noLive)
	}
}

func TestSeenLatenciesPairTheNthProbeWithTheNthRise(t *testing.T) {
	t0 := time.Unix(1000, 0)
	w := newWatcher(watchTeamUsage, "a", []string{"a", "b"}, "probe")
	w.firstSeen[countKey{Team: "a"}] = []time.Time{t0.Add(300 * time.Millisecond), t0.Add(2 * time.Second), t0.Add(-time.Second + 5*time.Second)}
	probes := []probe{
		{Team: "a", Sent: t0},                      // seen after 300 ms
		{Team: "b", Sent: t0},                      // another team: not this page's
		{Team: "a", Sent: t0.Add(time.Second)},     // seen after 1 s
		{Team: "a", Sent: t0.Add(5 * time.Second)}, // the count rose before it was sent
		{Team: "a", Sent: t0.Add(6 * time.Second)}, // never seen
	}
	lat, missed, early := w.seenLatencies(probes, 10*time.Second)
	if diff := cmp.Diff([]time.Duration{300 * time.Millisecond, time.Second}, lat); diff != "" || missed != 1 || early != 1 {
		t.Errorf("latencies (-want +got):\n%s\nmissed %d (want 1), early %d (want 1)", diff, missed, early)
	}
	lat, missed, _ = w.seenLatencies(probes[:1], 100*time.Millisecond)
	if len(lat) != 0 || missed != 1 {
		t.Errorf("seen after the timeout: %v latencies, %d missed; want it missed", lat, missed)
	}
}

func TestPlanWatchers(t *testing.T) {
	ws := planWatchers(100, 32, []string{"a", "b", "c"}, "probe")
	kinds := map[string]int{}
	teams := map[string]map[string]bool{}
	for _, w := range ws {
		kinds[w.Kind.Label]++
		if teams[w.Kind.Label] == nil {
			teams[w.Kind.Label] = map[string]bool{}
		}
		teams[w.Kind.Label][w.Path] = true
	}
	want := map[string]int{"/tasks": 32, "/tasks?team=<team>": 17, "/usage": 17, "/usage/<team>": 17, "/": 17}
	if diff := cmp.Diff(want, kinds); diff != "" {
		t.Errorf("watchers per page (-want +got):\n%s", diff)
	}
	if got := len(teams["/usage/<team>"]); got != 3 {
		t.Errorf("team pages watched: %d distinct; want all 3 probe teams", got)
	}
	for _, w := range ws {
		if w.Kind.Label == "/usage" && len(w.keys) != 3 {
			t.Errorf("a /usage watcher follows %d teams' counts; want 3", len(w.keys))
		}
	}
}
