package handlers_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	kueueclient "sigs.k8s.io/kueue/client-go/clientset/versioned"
	kueuefake "sigs.k8s.io/kueue/client-go/clientset/versioned/fake"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/handlers"
	"github.com/openquota/console/internal/kueue"
	"github.com/openquota/console/internal/metrics"
	"github.com/openquota/console/sandbox"
	"github.com/openquota/console/sandbox/sandboxtest"
)

func newServer(t *testing.T, kube kubernetes.Interface, kq kueueclient.Interface, wantReady bool) http.Handler {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cache := kueue.NewCache(kube, kq, domain.DefaultSettings, log)
	cache.Start(ctx)
	if wantReady {
		if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			return cache.Ready() == nil, nil
		}); err != nil {
			t.Fatalf("cache not ready: %v", cache.Ready())
		}
	}
	return atLoopback(handlers.New(handlers.Deps{Cache: cache, Metrics: metrics.NewConsole(), Log: log}))
}

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code, rec.Body.String()
}

func TestOverviewAgainstSandbox(t *testing.T) {
	cfg, err := sandboxtest.Env(t).RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	h := newServer(t, kubernetes.NewForConfigOrDie(cfg), kueueclient.NewForConfigOrDie(cfg), true)
	code, body := get(t, h, "/")
	if code != http.StatusOK {
		t.Fatalf("GET / = %d\n%s", code, body)
	}
	for _, n := range sandbox.Fleet() {
		if !strings.Contains(body, `data-instance-type="`+n.Shape.Type+`"`) {
			t.Errorf("overview lacks a row for %s", n.Shape.Type)
		}
	}
	if strings.Contains(body, `id="problem"`) {
		t.Errorf("overview reports a problem with a healthy sandbox")
	}
	if code, _ := get(t, h, "/readyz"); code != http.StatusOK {
		t.Errorf("/readyz = %d", code)
	}
	code, body = get(t, h, "/metrics")
	if code != http.StatusOK || !strings.Contains(body, `quota_console_http_requests_total{code="200",method="GET",route="/"}`) {
		t.Errorf("/metrics = %d, lacks the request counter for /", code)
	}
}

// A cluster without Kueue's v1beta2 API: the page still renders and says which
// Kueue is needed; readiness says the same.
func TestOverviewWithoutKueue(t *testing.T) {
	h := newServer(t, k8sfake.NewClientset(), kueuefake.NewSimpleClientset(), false)
	var body string
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		var code int
		code, body = get(t, h, "/")
		return code == http.StatusOK && strings.Contains(body, "does not serve the Kueue API"), nil
	})
	if err != nil {
		t.Fatalf("overview never explained the missing Kueue API:\n%s", body)
	}
	if !strings.Contains(body, "v1beta2") {
		t.Errorf("the explanation does not name the API version needed")
	}
	code, text := get(t, h, "/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(text, "Kueue") {
		t.Errorf("/readyz = %d %q, want 503 naming Kueue", code, text)
	}
}
