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
			if _, err := c.NamespaceGPUUtilization(ctx); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	// A question of utilization is two queries: the readings' sum and count.
	const perQuestion = 2
	if n := queries.Load(); n != perQuestion {
		t.Errorf("32 concurrent viewers sent %d queries, want %d", n, perQuestion)
	}
	now = now.Add(29 * time.Second)
	if _, err := c.NamespaceGPUUtilization(ctx); err != nil || queries.Load() != perQuestion {
		t.Errorf("within the TTL: %d queries (err %v), want still %d", queries.Load(), err, perQuestion)
	}
	// Each GPU's figure over the hour is one query.
	if _, err := c.NamespaceGPUUtilizationOver(ctx, time.Hour); err != nil || queries.Load() != perQuestion+1 {
		t.Errorf("another question: %d queries (err %v), want %d", queries.Load(), err, perQuestion+1)
	}
	now = now.Add(2 * time.Second)
	if _, err := c.NamespaceGPUUtilization(ctx); err != nil || queries.Load() != 2*perQuestion+1 {
		t.Errorf("after the TTL: %d queries (err %v), want %d", queries.Load(), err, 2*perQuestion+1)
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
	// One question is one or two queries (the second may be called off
	// once the first failed): count what the first asking sent.
	if _, err := c.NamespaceGPUUtilization(context.Background()); err == nil {
		t.Fatal("a failing Prometheus gave no error")
	}
	first := queries.Load()
	for range 2 {
		if _, err := c.NamespaceGPUUtilization(context.Background()); err == nil {
			t.Fatal("a failing Prometheus gave no error")
		}
	}
	if n := queries.Load(); n != first {
		t.Errorf("%d queries within the failure TTL, want %d (the first asking's)", n, first)
	}
	now = now.Add(c.answers.FailureTTL)
	_, _ = c.NamespaceGPUUtilization(context.Background())
	if n := queries.Load(); n <= first {
		t.Errorf("%d queries after the failure TTL, want more than %d", n, first)
	}
}
