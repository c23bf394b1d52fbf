package metrics

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openquota/console/sandbox/sandboxtest"
)

// countingProm is the sandbox's Prometheus behind a proxy that counts the
// queries it is sent.
func countingProm(t *testing.T) (*Prom, *atomic.Int64) {
	t.Helper()
	target, err := url.Parse(sandboxtest.Env(t).PrometheusURL)
	if err != nil {
		t.Fatal(err)
	}
	var queries atomic.Int64
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		queries.Add(1)
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	p, err := NewProm(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return p, &queries
}

// Many viewers at once, and again within the TTL, cost Prometheus one
// query; after the TTL it is asked again.
func TestCachedAsksPrometheusOncePerTTL(t *testing.T) {
	p, queries := countingProm(t)
	now := time.Now()
	c := NewCached(p, 30*time.Second)
	c.answers.Now = func() time.Time { return now }
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.TeamGPUUtilization(ctx, "hyperpod-ns-"); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n := queries.Load(); n != 1 {
		t.Errorf("32 concurrent viewers sent %d queries, want 1", n)
	}
	now = now.Add(29 * time.Second)
	if _, err := c.TeamGPUUtilization(ctx, "hyperpod-ns-"); err != nil || queries.Load() != 1 {
		t.Errorf("within the TTL: %d queries (err %v), want still 1", queries.Load(), err)
	}
	if _, err := c.TeamGPUUtilization(ctx, "other-prefix-"); err != nil || queries.Load() != 2 {
		t.Errorf("another question: %d queries (err %v), want 2", queries.Load(), err)
	}
	now = now.Add(2 * time.Second)
	if _, err := c.TeamGPUUtilization(ctx, "hyperpod-ns-"); err != nil || queries.Load() != 3 {
		t.Errorf("after the TTL: %d queries (err %v), want 3", queries.Load(), err)
	}
}

// A Prometheus that is down is asked again after FailureTTL, not after TTL.
func TestCachedRemembersFailuresBriefly(t *testing.T) {
	var queries atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		queries.Add(1)
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	p, err := NewProm(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	c := NewCached(p, time.Minute)
	c.answers.Now = func() time.Time { return now }
	for range 3 {
		if _, err := c.TeamGPUUtilization(context.Background(), "x-"); err == nil {
			t.Fatal("a failing Prometheus gave no error")
		}
	}
	if queries.Load() != 1 {
		t.Errorf("%d queries within the failure TTL, want 1", queries.Load())
	}
	now = now.Add(c.answers.FailureTTL)
	_, _ = c.TeamGPUUtilization(context.Background(), "x-")
	if queries.Load() != 2 {
		t.Errorf("%d queries after the failure TTL, want 2", queries.Load())
	}
}
