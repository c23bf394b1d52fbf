package handlers_test

import (
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/openquota/console/internal/auth"
	"github.com/openquota/console/internal/handlers"
	"github.com/openquota/console/internal/webtest"
)

// bare is the console's HTTP server without a cluster: enough for what
// happens before a page's handler runs.
func bare(a *auth.Authenticator) http.Handler {
	return webtest.AtLoopback(handlers.New(handlers.Config{Auth: a}))
}

func serve(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec
}

func TestSecurityHeadersOnEveryAnswer(t *testing.T) {
	e := bare(&auth.Authenticator{Mode: auth.ModeNone})
	for _, path := range []string{"/healthz", "/static/app.js", "/no-such-page"} {
		rec := serve(e, httptest.NewRequest(http.MethodGet, path, nil))
		h := rec.Header()
		want := map[string]string{
			"Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; form-action 'self'",
			"X-Content-Type-Options":  "nosniff",
			"X-Frame-Options":         "DENY",
			"Referrer-Policy":         "same-origin",
		}
		for k, v := range want {
			if h.Get(k) != v {
				t.Errorf("GET %s: %s = %q, want %q", path, k, h.Get(k), v)
			}
		}
		if h.Get("Strict-Transport-Security") != "" {
			t.Errorf("GET %s: HSTS on plain HTTP", path)
		}
	}
	r := httptest.NewRequest(http.MethodGet, "/healthz", nil)
	r.TLS = &tls.ConnectionState{}
	if serve(e, r).Header().Get("Strict-Transport-Security") == "" {
		t.Error("no HSTS on a TLS request")
	}
}

func TestRequestBodyLimit(t *testing.T) {
	e := bare(&auth.Authenticator{Mode: auth.ModeNone})
	big := strings.NewReader("name=" + strings.Repeat("x", handlers.MaxBodyBytes+1))
	r := httptest.NewRequest(http.MethodPost, "/teams", big)
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if rec := serve(e, r); rec.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("POST of %d bytes: %d, want 413", handlers.MaxBodyBytes+6, rec.Code)
	}
}

// Probes and metrics answer without sign-in; pages do not.
func TestProbesAndMetricsNeedNoSignIn(t *testing.T) {
	for _, a := range []*auth.Authenticator{
		{Mode: auth.ModeProxy, Proxy: auth.Proxy{UserHeader: "X-Forwarded-User", GroupsHeader: "X-Forwarded-Groups"}}, // trusts nobody
		{Mode: auth.ModeToken, Sessions: auth.NewSessions(auth.RandomKeys(), time.Hour, nil)},
	} {
		e := bare(a)
		for _, path := range []string{"/healthz", "/metrics", "/static/app.css"} {
			if rec := serve(e, httptest.NewRequest(http.MethodGet, path, nil)); rec.Code != http.StatusOK {
				t.Errorf("%s: GET %s = %d, want 200", a.Mode, path, rec.Code)
			}
		}
		if rec := serve(e, httptest.NewRequest(http.MethodGet, "/teams", nil)); rec.Code != http.StatusUnauthorized {
			t.Errorf("%s: GET /teams = %d, want 401", a.Mode, rec.Code)
		}
	}
}

// HEAD answers wherever GET does, with the headers and no body, so that
// monitors probing with HEAD see the console up.
func TestHeadAnswersLikeGet(t *testing.T) {
	f := newFixture(t, 1, 0)
	srv := httptest.NewServer(f.handler())
	t.Cleanup(srv.Close)
	for _, path := range []string{"/healthz", "/readyz", "/", "/usage"} {
		resp, err := http.Head(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || len(body) != 0 {
			t.Errorf("HEAD %s = %d with %d bytes of body, want 200 and none", path, resp.StatusCode, len(body))
		}
	}
}

// Attack: after signing out on a shared machine, the next person opens the
// browser's history, back-forward cache or a proxy's cache and reads the
// teams' pages, CSV exports and JSON answers. Nothing but the static files
// is stored.
func TestAnswersAreNotStored(t *testing.T) {
	f := newFixture(t, 2, 3)
	h := f.handler()
	for _, path := range []string{"/", "/teams", "/usage/team-001", "/tasks?format=csv&table=tasks", whatIfJob + "&format=json", "/no-such-page", "/healthz"} {
		rec := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodGet, path, nil)
		r.Host = "127.0.0.1:8080"
		h.ServeHTTP(rec, r)
		if got := rec.Header().Get("Cache-Control"); got != "no-store" {
			t.Errorf("GET %s (%d): Cache-Control %q, want no-store", path, rec.Code, got)
		}
	}
	rec := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodGet, "/static/app.js", nil)
	r.Host = "127.0.0.1:8080"
	h.ServeHTTP(rec, r)
	if got := rec.Header().Get("Cache-Control"); rec.Code != http.StatusOK || got == "no-store" {
		t.Errorf("GET /static/app.js: %d, Cache-Control %q: the static files may be kept", rec.Code, got)
	}
}
