package app_test

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/openquota/console/internal/handlers"
	"github.com/openquota/console/internal/metrics"
	"github.com/openquota/console/internal/webtest"
	"github.com/openquota/console/sandbox/sandboxtest"
)

// With Prometheus down, every page still answers 200: what comes from
// Kubernetes renders, and the Prometheus panels say they are unavailable.
func TestPagesAnswerWithPrometheusDown(t *testing.T) {
	down, err := metrics.NewProm("http://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	c := newConsoleWith(t, nil, func(d *handlers.Config) { d.Prometheus = down })
	if code, _, body := c.post(t, "/teams", webtest.TeamForm("promdown", "2")); code != http.StatusSeeOther {
		t.Fatalf("create: %d\n%s", code, body)
	}
	t.Cleanup(func() { c.post(t, "/teams/promdown/delete", url.Values{}) })
	var body string
	_ = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		_, body = webtest.Get(t, c.h, "/usage")
		return strings.Contains(body, `data-team="promdown"`), nil
	})
	pages := map[string]string{
		"/":                    "Prometheus is unavailable",
		"/usage":               "Prometheus is unavailable",
		"/usage/promdown":      "Prometheus is unavailable",
		"/reports/usage":       "Prometheus is unavailable",
		"/tasks":               `id="class-stats"`,
		"/teams":               `data-team="promdown"`,
		"/policy":              `id="policy-form"`,
		"/teams/promdown/edit": `value="promdown"`,
	}
	for path, want := range pages {
		// A page asks Prometheus in the background and shows a part as
		// coming until the first answer, which a busy machine may give
		// after the page: the next request says it.
		var code int
		var body string
		_ = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			code, body = webtest.Get(t, c.h, path)
			return code != http.StatusOK || strings.Contains(body, want), nil
		})
		if code != http.StatusOK {
			t.Errorf("GET %s = %d with Prometheus down", path, code)
			continue
		}
		if !strings.Contains(body, want) {
			t.Errorf("GET %s lacks %q", path, want)
		}
	}
	if _, body := webtest.Get(t, c.h, "/usage"); !strings.Contains(body, `data-team="promdown"`) {
		t.Errorf("/usage lost the Kubernetes data while Prometheus is down")
	}
}

// When the apiserver stops answering, pages keep showing the last known data
// and say how old it is.
func TestPagesShowLastKnownDataWhenAPIServerIsUnreachable(t *testing.T) {
	waitsOnTheCluster(t)
	env := sandboxtest.Env(t)
	target, err := url.Parse(env.APIServerURL)
	if err != nil {
		t.Fatal(err)
	}
	var cut atomic.Bool
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // loopback test
	proxy.FlushInterval = -1                                                                  // stream watches
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if cut.Load() {
			http.Error(w, "unreachable", http.StatusServiceUnavailable)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)

	c := newConsoleWith(t, func(cfg *rest.Config) {
		cfg.Host = srv.URL
		cfg.TLSClientConfig = rest.TLSClientConfig{Insecure: true}
	}, nil)
	if code, _, body := c.post(t, "/teams", webtest.TeamForm("cutoff", "2")); code != http.StatusSeeOther {
		t.Fatalf("create: %d\n%s", code, body)
	}
	defer c.post(t, "/teams/cutoff/delete", url.Values{})
	_ = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		_, body := webtest.Get(t, c.h, "/usage")
		return strings.Contains(body, `data-team="cutoff"`), nil
	})

	cut.Store(true)
	srv.CloseClientConnections()
	var body string
	err = wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		var code int
		code, body = webtest.Get(t, c.h, "/usage")
		return code == http.StatusOK && strings.Contains(body, "has not answered since"), nil
	})
	cut.Store(false)
	if err != nil {
		t.Fatalf("/usage never said the cluster stopped answering:\n%s", body)
	}
	if !strings.Contains(body, `data-team="cutoff"`) {
		t.Errorf("/usage dropped the last known data while the apiserver is unreachable")
	}
}
