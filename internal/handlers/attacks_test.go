package handlers_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/openquota/console/internal/auth"
	"github.com/openquota/console/internal/handlers"
	"github.com/openquota/console/internal/kueuetest"
	"github.com/openquota/console/internal/webtest"
)

// Each test here performs an attack that a review of the console found, and
// checks that it fails. (Those that need the real apiserver, its RBAC and
// TokenReviews are in package app.)

// Requests with 100 kB methods and random paths, before any sign-in: each
// used to add a time series to /metrics, forever.
func TestRequestsCannotGrowTheMetrics(t *testing.T) {
	h := newFixture(t, 1, 0).withProxy().handler()
	series := func() (int, int) {
		_, body := webtest.Get(t, h, "/metrics")
		n := 0
		for _, line := range strings.Split(body, "\n") {
			if strings.HasPrefix(line, "quota_console_http_requests_total{") {
				n++
			}
		}
		return n, len(body)
	}
	before, _ := series()
	for i := range 50 {
		r := httptest.NewRequest(http.MethodGet, fmt.Sprintf("/no-such-page-%d", i), nil)
		r.Method = strings.Repeat("X", 100_000) + fmt.Sprint(i)
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	after, size := series()
	if after-before > 2 {
		t.Errorf("50 odd requests added %d series", after-before)
	}
	if size > 200_000 {
		t.Errorf("/metrics is %d bytes", size)
	}
	if _, body := webtest.Get(t, h, "/metrics"); !strings.Contains(body, `quota_console_http_requests_total{code="200",method="GET",route="/metrics"}`) {
		t.Error("/metrics lacks the request counter of its own route")
	}
}

// DNS rebinding: a page on attacker.example, whose name then resolves to
// 127.0.0.1, reads and posts to a console that runs without sign-in.
func TestConsoleWithoutSignInRefusesForeignHosts(t *testing.T) {
	f := newFixture(t, 1, 0)
	h := f.handler()
	for _, path := range []string{"/", "/teams", "/tasks?format=csv&table=tasks"} {
		r := httptest.NewRequest(http.MethodGet, path, nil)
		r.Host = "attacker.example:8080"
		if rec := webtest.NewBrowser(t, h, nil).Do(r); rec.Code != http.StatusMisdirectedRequest {
			t.Errorf("GET %s with Host attacker.example: %d, want 421", path, rec.Code)
		}
	}
	r := httptest.NewRequest(http.MethodPost, "/teams", strings.NewReader(webtest.TeamForm("rebound", "1").Encode()))
	r.Host = "attacker.example:8080"
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set("Sec-Fetch-Site", "same-origin") // to the browser, attacker.example is the page's own origin
	if rec := webtest.NewBrowser(t, h, nil).Do(r); rec.Code != http.StatusMisdirectedRequest {
		t.Errorf("POST /teams with Host attacker.example: %d, want 421", rec.Code)
	}
	if made := f.writes.made(); len(made) != 0 {
		t.Errorf("the rebound post reached the write path: %v", made)
	}
	if code, _ := webtest.Get(t, h, "/teams"); code != http.StatusOK {
		t.Errorf("GET /teams on 127.0.0.1: %d", code)
	}
}

// Slow clients held connections forever: headers sent a byte at a time, a
// body that never ends.
func TestServerDropsSlowClients(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
	})
	srv := handlers.NewHTTPServer(h, handlers.Timeouts{ReadHeader: 300 * time.Millisecond, Read: 600 * time.Millisecond, Idle: time.Second, Write: time.Second})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	slow := func(name string, send func(net.Conn)) {
		conn, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		start := time.Now()
		send(conn)
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err = bufio.NewReader(conn).ReadString('\n')
		for err == nil {
			_, err = bufio.NewReader(conn).ReadString('\n')
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("%s: the connection stayed open %v", name, d.Round(100*time.Millisecond))
		}
	}
	slow("headers never finished", func(c net.Conn) { _, _ = c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n")) })
	slow("body never finished", func(c net.Conn) {
		_, _ = c.Write([]byte("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\nabc"))
	})
}

// Every open live update stream holds a connection and a goroutine: one
// user opening hundreds of them, or many users, exhausted the console.
func TestLiveStreamsAreCapped(t *testing.T) {
	f := newFixture(t, 2, 10).withProxy()
	f.access.grant("viewer", listClusterQueues)
	f.access.grant("other", listClusterQueues)
	f.cfg.Limits.Streams = handlers.StreamLimits{PerUser: 2, Total: 3}
	srv := httptest.NewServer(f.handler())
	t.Cleanup(srv.Close)
	for i, want := range []int{200, 200, 503} {
		if got := webtest.OpenStream(t, srv.URL, "/tasks", auth.DefaultUserHeader, "viewer"); got != want {
			t.Errorf("stream %d of one user: %d, want %d", i+1, got, want)
		}
	}
	for i, want := range []int{200, 503} {
		if got := webtest.OpenStream(t, srv.URL, "/tasks", auth.DefaultUserHeader, "other"); got != want {
			t.Errorf("stream %d of another user (total cap 3): %d, want %d", i+1, got, want)
		}
	}
}

// ended waits (up to limit) for a stream to end.
func ended(events <-chan webtest.Pushed, limit time.Duration) bool {
	deadline := time.After(limit)
	for {
		select {
		case _, open := <-events:
			if !open {
				return true
			}
		case <-deadline:
			return false
		}
	}
}

// A stream ends after a bounded lifetime; the page reconnects through the
// sign-in and read checks.
func TestLiveStreamsEndAfterTheirLifetime(t *testing.T) {
	f := newFixture(t, 2, 10)
	f.cfg.Limits.StreamLifetime = 500 * time.Millisecond
	srv := httptest.NewServer(f.handler())
	t.Cleanup(srv.Close)
	if !ended(webtest.Watch(t, srv.URL, "/tasks", 0, nil), 10*time.Second) {
		t.Fatal("a stream with a lifetime of 0.5 s was still open after 10 s")
	}
}

// Live update streams were checked once, when they opened: a member removed
// from the team whose tasks they showed kept receiving them. The stream
// asks again, ends, and the reconnection is refused.
func TestLiveStreamEndsWhenTheViewerLosesTheTeam(t *testing.T) {
	f := newFixture(t, 2, 10).withProxy()
	f.access.grant("member", listWorkloads(f.settings.Namespace("team-001")))
	srv := httptest.NewServer(f.handler())
	t.Cleanup(srv.Close)
	events := webtest.Watch(t, srv.URL, "/tasks?state=all", 0, map[string]string{auth.DefaultUserHeader: "member"})
	f.access.mu.Lock()
	f.access.allowed = nil
	f.access.mu.Unlock()
	// The stream asks again every few seconds, at its next event or
	// heartbeat: the team's tasks keep changing meanwhile.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for i := 11; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(500 * time.Millisecond):
			}
			now := time.Now()
			f.model.publish(snapshotOf(f.settings, kueuetest.Cluster(f.settings, f.settings.Cohort, 2, i, now), now))
		}
	}()
	if !ended(events, 20*time.Second) {
		t.Fatal("the stream of a member removed from the team was still open 20 s later")
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/events?view=%2Ftasks", nil)
	req.Header.Set(auth.DefaultUserHeader, "member")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Errorf("the removed member reconnects: %d, want 403", res.StatusCode)
	}
}

// A page number past any list, up to one that overflows when multiplied by
// the page size, shows the last page: it reaches no runtime panic.
func TestHugeTaskPageNumbersShowTheLastPage(t *testing.T) {
	f := newFixture(t, 2, 120)
	h := f.handler()
	for _, page := range []string{"9223372036854775807", "99999999999999999999", "184467440737095517", "-5"} {
		code, body := webtest.Get(t, h, "/tasks?state=all&page="+page)
		if code != http.StatusOK {
			t.Errorf("page %s: %d\n%.300s", page, code, body)
			continue
		}
		webtest.MustContain(t, "page "+page, body, "Tasks ")
	}
}

// An open page is told, with each heartbeat of its live stream, what its
// banner says is missing: the cluster not answering shows without a
// reload, and clears once it answers.
func TestTheLiveStreamCarriesTheBanner(t *testing.T) {
	f := newFixture(t, 1, 0)
	f.cluster.reachable, f.cluster.since = false, time.Now().Add(-time.Minute)
	f.cfg.Limits.StreamHeartbeat = 20 * time.Millisecond
	srv := httptest.NewServer(f.handler())
	t.Cleanup(srv.Close)
	res, err := http.Get(srv.URL + "/events?view=%2Ftasks")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	lines := bufio.NewScanner(res.Body)
	deadline := time.AfterFunc(10*time.Second, func() { res.Body.Close() })
	defer deadline.Stop()
	for event := ""; lines.Scan(); {
		line := lines.Text()
		if name, ok := strings.CutPrefix(line, "event: "); ok {
			event = name
			continue
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok && event == "problem" {
			if !strings.Contains(data, "The cluster has not answered since") {
				t.Errorf("the banner pushed: %s", data)
			}
			return
		}
	}
	t.Fatal("no banner came with the heartbeats")
}
