package handlers

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	authzv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/openquota/console/internal/auth"
	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/metrics"
)

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// bare is the console's HTTP server without a cluster: enough for what
// happens before a page's handler runs.
func bare(a *auth.Authenticator) http.Handler {
	return atLoopback(New(Deps{Metrics: metrics.NewConsole(), Log: discard, Auth: a, RESTConfig: &rest.Config{Host: "http://127.0.0.1:1"}}))
}

// atLoopback addresses httptest's requests (Host example.com) to 127.0.0.1,
// as a client of a console on loopback does.
func atLoopback(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Host == "example.com" {
			r.Host = "127.0.0.1:8080"
		}
		h.ServeHTTP(w, r)
	})
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
	big := strings.NewReader("name=" + strings.Repeat("x", MaxBodyBytes+1))
	r := httptest.NewRequest(http.MethodPost, "/teams", big)
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if rec := serve(e, r); rec.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("POST of %d bytes: %d, want 413", MaxBodyBytes+6, rec.Code)
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

// fakeSSAR answers SelfSubjectAccessReviews: only "admin" may do anything.
// The user is what the test's clientFor says the client acts as.
func fakeSSAR(calls *atomic.Int32, user string, fail bool) kubernetes.Interface {
	client := k8sfake.NewClientset()
	client.PrependReactor("create", "selfsubjectaccessreviews", func(action k8stesting.Action) (bool, runtime.Object, error) {
		calls.Add(1)
		if fail {
			return true, nil, errors.New("connection refused")
		}
		r := action.(k8stesting.CreateAction).GetObject().(*authzv1.SelfSubjectAccessReview).DeepCopy()
		r.Status.Allowed = user == "admin"
		return true, r, nil
	})
	return client
}

func TestAccessCacheAsksAsTheUserAndRemembers(t *testing.T) {
	var calls atomic.Int32
	fail := false
	a := newAccessCache(func(u auth.User) (kubernetes.Interface, error) { return fakeSSAR(&calls, u.Name, fail), nil })
	now := time.Now()
	a.now = func() time.Time { return now }
	ctx := context.Background()
	admin, viewer := auth.User{Name: "admin"}, auth.User{Name: "viewer", Groups: []string{"ml"}}

	if ok, known := a.allowed(ctx, admin, mayEditTeams); !ok || !known {
		t.Errorf("admin: %v %v", ok, known)
	}
	if ok, known := a.allowed(ctx, viewer, mayEditTeams); ok || !known {
		t.Errorf("viewer: %v %v", ok, known)
	}
	for range 5 {
		a.allowed(ctx, viewer, mayEditTeams)
	}
	if calls.Load() != 2 {
		t.Errorf("%d reviews, want 2 (answers cached per user)", calls.Load())
	}
	// Another permission, or the same name in other groups, is another question.
	a.allowed(ctx, viewer, mayEditPolicy)
	a.allowed(ctx, auth.User{Name: "viewer", Groups: []string{"platform"}}, mayEditTeams)
	if calls.Load() != 4 {
		t.Errorf("%d reviews, want 4", calls.Load())
	}
	now = now.Add(accessTTL)
	a.allowed(ctx, viewer, mayEditTeams)
	if calls.Load() != 5 {
		t.Errorf("answer not refreshed after %v", accessTTL)
	}
	// When the cluster cannot answer: unknown (the form stays enabled), asked again soon.
	fail = true
	now = now.Add(accessTTL)
	if ok, known := a.allowed(ctx, viewer, mayEditTeams); ok || known {
		t.Errorf("failing review: %v %v, want unknown", ok, known)
	}
	now = now.Add(accessUnknownTTL)
	fail = false
	if ok, known := a.allowed(ctx, viewer, mayEditTeams); ok || !known {
		t.Errorf("after recovery: %v %v", ok, known)
	}
}

// A conflict lists the other admin's change; a reorder of instance types is
// a change too (Kueue tries flavors in order).
func TestConflictDetectsReorder(t *testing.T) {
	was := domain.Team{Name: "ml", Enabled: true, Quota: []domain.QuotaInput{{InstanceType: "ml.p5.48xlarge", GPUs: ptr.To[int64](4)},
		{InstanceType: "ml.g5.2xlarge", Count: ptr.To[int64](2)}}}
	swapped := was
	swapped.Quota = []domain.QuotaInput{was.Quota[1], was.Quota[0]}
	if sameAllocation(was, swapped) {
		t.Error("flavor order is part of the allocation (Kueue tries flavors in order)")
	}
	if !sameAllocation(was, was) {
		t.Error("an allocation differs from itself")
	}
}

func TestForbiddenExplainsWhoMayNot(t *testing.T) {
	e := echo.New()
	c := e.NewContext(httptest.NewRequest(http.MethodPost, "/teams/x", nil), httptest.NewRecorder())
	c.Set("auth.user", auth.User{Name: "bob"})
	d := Deps{}
	cq := schema.GroupResource{Group: "kueue.x-k8s.io", Resource: "clusterqueues"}
	refused := fmt.Errorf("cluster queue x: %w", apierrors.NewForbidden(cq, "x", errors.New(`User "bob" cannot patch resource "clusterqueues"`)))
	msg, ok := d.forbidden(c, refused, "team x")
	if !ok || !strings.HasPrefix(msg, "You may not change team x: your account bob is not allowed") || !strings.Contains(msg, "cannot patch") {
		t.Errorf("%v %q", ok, msg)
	}
	impersonation := apierrors.NewForbidden(schema.GroupResource{Resource: "users"}, "bob",
		errors.New(`User "system:serviceaccount:quota-console:quota-console" cannot impersonate resource "users"`))
	if msg, ok := d.forbidden(c, impersonation, "team x"); !ok || !strings.Contains(msg, "The console is not allowed to act on your behalf") {
		t.Errorf("impersonation refused: %q", msg)
	}
	if _, ok := d.forbidden(c, errors.New("forbidden"), "team x"); ok {
		t.Error("a plain error taken for a Forbidden status")
	}
}
