package app_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"

	"github.com/openquota/console/internal/auth"
	"github.com/openquota/console/internal/handlers"
	"github.com/openquota/console/internal/webtest"
	"github.com/openquota/console/sandbox/sandboxtest"
)

// Live update streams were checked once, when they opened: they kept
// pushing after the viewer signed out, after the session expired, and after
// a member was removed from the team whose tasks they showed.

// tokenConsole is a console on the sandbox in auth mode token whose
// sessions last ttl, and the browser of the sandbox's admin, signed in,
// who made the team "streamed".
func tokenConsole(t *testing.T, ttl time.Duration) (console, *browser) {
	t.Helper()
	env := sandboxtest.Env(t)
	cfg, err := env.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	keys := auth.RandomKeys()
	a := &auth.Authenticator{Mode: auth.ModeToken, Keys: keys, Sessions: auth.NewSessions(keys, ttl, nil),
		Tokens: auth.KubeTokenReviewer{Client: kubernetes.NewForConfigOrDie(cfg)}}
	c := newConsoleWith(t, nil, func(d *handlers.Config) { d.Auth = a })
	t.Cleanup(func() { cleanupTeams(c) })
	b := &browser{T: t, H: c.h, Remote: "127.0.0.1:40000", Headers: map[string]string{"Accept": "text/html"}, Cookies: map[string]*http.Cookie{}}
	b.Get(auth.SignInPath)
	if code, _, body := b.Post(auth.SignInPath, url.Values{"token": {env.Token}}); code != http.StatusSeeOther {
		t.Fatalf("sign-in: %d\n%.300s", code, body)
	}
	b.Get("/teams/new")
	if code, _, body := b.Post("/teams", webtest.TeamForm("streamed", "1")); code != http.StatusSeeOther {
		t.Fatalf("create the team: %d\n%.300s", code, body)
	}
	return c, b
}

// afterwards submits a task to team every few seconds and reads the
// stream until it ends or within passes; it returns the names of the
// submitted tasks the stream showed, and whether it ended.
func afterwards(t *testing.T, c console, team, prefix string, events <-chan webtest.Pushed, within time.Duration) (shown []string, ended bool) {
	t.Helper()
	var submitted []string
	deadline := time.After(within)
	tick := time.NewTicker(3 * time.Second)
	defer tick.Stop()
	submit := func() {
		name := fmt.Sprintf("%s-%d", prefix, len(submitted)+1)
		c.submit(t, team, name, 1)
		submitted = append(submitted, name)
	}
	submit()
	for {
		select {
		case p, open := <-events:
			if !open {
				return shown, true
			}
			for _, html := range p.Fragments {
				for _, name := range submitted {
					if strings.Contains(html, name) && !slices.Contains(shown, name) {
						shown = append(shown, name)
					}
				}
			}
		case <-tick.C:
			submit()
		case <-deadline:
			return shown, false
		}
	}
}

func TestLiveStreamEndsAtSignOut(t *testing.T) {
	c, b := tokenConsole(t, auth.SessionTTL)
	srv := httptest.NewServer(c.h)
	t.Cleanup(srv.Close)
	events := webtest.Watch(t, srv.URL, "/tasks?state=all", 0, b.CookieHeader())
	b.Get("/tasks")
	if code, location, _ := b.Post(auth.SignOutPath, url.Values{}); code != http.StatusSeeOther || location != auth.SignInPath {
		t.Fatalf("sign-out: %d %q", code, location)
	}
	shown, ended := afterwards(t, c, "streamed", "after-sign-out", events, 15*time.Second)
	if len(shown) > 0 || !ended {
		t.Errorf("after sign-out the open stream showed tasks made since %q and ended: %v, want none and ended", shown, ended)
	}
}

func TestLiveStreamEndsWhenTheSessionExpires(t *testing.T) {
	waitsOnTheCluster(t)
	const ttl = 15 * time.Second
	started := time.Now()
	c, b := tokenConsole(t, ttl)
	srv := httptest.NewServer(c.h)
	t.Cleanup(srv.Close)
	events := webtest.Watch(t, srv.URL, "/tasks?state=all", 0, b.CookieHeader())
	// Drain what the stream sends until the session has expired.
	for expired := time.After(time.Until(started.Add(ttl + time.Second))); ; {
		select {
		case <-events:
			continue
		case <-expired:
		}
		break
	}
	if code, _ := b.Get("/tasks"); code != http.StatusSeeOther {
		t.Fatalf("the session still works after its %v: %d", ttl, code)
	}
	shown, ended := afterwards(t, c, "streamed", "after-expiry", events, 15*time.Second)
	if len(shown) > 0 || !ended {
		t.Errorf("after the session expired the open stream showed tasks made since %q and ended: %v, want none and ended", shown, ended)
	}
}

func TestLiveStreamEndsWhenTheViewerLosesTheTeam(t *testing.T) {
	waitsOnTheCluster(t)
	c := proxyConsole(t)
	// The team's admin may do anything: what is tested is its member's stream.
	admin := c.as(t, bindUser(t, c.kube, "admin", "cluster-admin"), "platform")
	member := "member-" + rand.String(5)
	admin.Get("/teams/new")
	f := webtest.TeamForm("alpha", "1")
	f.Set("users", member)
	f.Set("groups", "")
	if code, _, body := admin.Post("/teams", f); code != http.StatusSeeOther {
		t.Fatalf("create alpha: %d\n%.300s", code, body)
	}
	srv := httptest.NewServer(c.h)
	t.Cleanup(srv.Close)
	events := webtest.Watch(t, srv.URL, "/tasks?state=all", 0, map[string]string{auth.DefaultUserHeader: member})
	if shown, _ := afterwards(t, c, "alpha", "while-member", events, 10*time.Second); len(shown) == 0 {
		t.Fatal("the member's stream never showed the team's tasks")
	}

	admin.Get("/teams/alpha/edit")
	f.Set("users", "someone-else")
	if code, _, body := admin.Post("/teams/alpha", f); code != http.StatusSeeOther {
		t.Fatalf("remove the member: %d\n%.300s", code, body)
	}
	// The access checks remember an answer for 30 seconds: the stream must
	// end within that, and a margin.
	removed := time.Now()
	shown, ended := afterwards(t, c, "alpha", "after-removal", events, 45*time.Second)
	if !ended {
		t.Errorf("the stream of a member removed from alpha was still open 45 s later and showed the team's new tasks %q", shown)
	} else {
		t.Logf("the stream ended %v after the member was removed, having shown %q", time.Since(removed).Round(100*time.Millisecond), shown)
	}
	// Reconnecting goes through the read checks again.
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/events?view=%2Ftasks", nil)
	req.Header.Set(auth.DefaultUserHeader, member)
	if res, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	} else {
		res.Body.Close()
		if res.StatusCode != http.StatusForbidden {
			t.Errorf("the removed member reconnects: %d, want 403", res.StatusCode)
		}
	}
}

// A stream ends after a bounded lifetime; the page reconnects through the
// sign-in and read checks.
func TestLiveStreamsEndAfterTheirLifetime(t *testing.T) {
	c := newConsoleWith(t, nil, func(d *handlers.Config) { d.Limits.StreamLifetime = 2 * time.Second })
	srv := httptest.NewServer(c.h)
	t.Cleanup(srv.Close)
	events := webtest.Watch(t, srv.URL, "/tasks", 0, nil)
	limit := time.After(15 * time.Second)
	for {
		select {
		case _, open := <-events:
			if open {
				continue
			}
		case <-limit:
			t.Fatal("a stream with a lifetime of 2 s was still open after 15 s")
		}
		return
	}
}
