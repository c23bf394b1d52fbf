package app_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	kueueclient "sigs.k8s.io/kueue/client-go/clientset/versioned"
	kueuefake "sigs.k8s.io/kueue/client-go/clientset/versioned/fake"

	"github.com/openquota/console/internal/app"
	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/kueue"
	"github.com/openquota/console/internal/webtest"
	"github.com/openquota/console/sandbox"
	"github.com/openquota/console/sandbox/sandboxtest"
)

// newServer is the console of clients with the default settings and no
// task history; wantReady waits for its caches.
func newServer(t *testing.T, clients kueue.Clients, wantReady bool) http.Handler {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	a, err := app.New(ctx, app.Config{Settings: domain.DefaultSettings, Clients: clients,
		TaskHistory: app.TaskHistoryConfig{Driver: app.TaskHistoryOff}, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	h := webtest.AtLoopback(a.Handler())
	if wantReady {
		// Ready is what /readyz says: the caches synced and the first
		// snapshot published.
		if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			code, _ := webtest.Get(t, h, "/readyz")
			return code == http.StatusOK, nil
		}); err != nil {
			t.Fatalf("console not ready: %v", a.Cache.Ready())
		}
	}
	return h
}

func TestOverviewAgainstSandbox(t *testing.T) {
	cfg, err := sandboxtest.Env(t).RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	h := newServer(t, kueue.Clients{Kube: kubernetes.NewForConfigOrDie(cfg), Kueue: kueueclient.NewForConfigOrDie(cfg)}, true)
	code, body := webtest.Get(t, h, "/")
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
	if code, _ := webtest.Get(t, h, "/readyz"); code != http.StatusOK {
		t.Errorf("/readyz = %d", code)
	}
	code, body = webtest.Get(t, h, "/metrics")
	if code != http.StatusOK || !strings.Contains(body, `quota_console_http_requests_total{code="200",method="GET",route="/"}`) {
		t.Errorf("/metrics = %d, lacks the request counter for /", code)
	}
}

// A cluster without Kueue's v1beta2 API: the page still renders and says which
// Kueue is needed; readiness says the same.
func TestOverviewWithoutKueue(t *testing.T) {
	h := newServer(t, kueue.Clients{Kube: k8sfake.NewClientset(), Kueue: kueuefake.NewSimpleClientset()}, false)
	var body string
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		var code int
		code, body = webtest.Get(t, h, "/")
		return code == http.StatusOK && strings.Contains(body, "does not serve the Kueue API"), nil
	})
	if err != nil {
		t.Fatalf("overview never explained the missing Kueue API:\n%s", body)
	}
	if !strings.Contains(body, "v1beta2") {
		t.Errorf("the explanation does not name the API version needed")
	}
	code, text := webtest.Get(t, h, "/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(text, "Kueue") {
		t.Errorf("/readyz = %d %q, want 503 naming Kueue", code, text)
	}
}

// The figures of the cluster, which name every team, are served by the
// metrics handler (--metrics-listen) and never on the pages' /metrics,
// which anyone may read.
func TestClusterFiguresOnlyOnTheMetricsListener(t *testing.T) {
	cfg, err := sandboxtest.Env(t).RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	a, err := app.New(ctx, app.Config{Settings: domain.DefaultSettings,
		Clients:     kueue.Clients{Kube: kubernetes.NewForConfigOrDie(cfg), Kueue: kueueclient.NewForConfigOrDie(cfg)},
		TaskHistory: app.TaskHistoryConfig{Driver: app.TaskHistoryOff}, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	pages, figures := webtest.AtLoopback(a.Handler()), a.MetricsHandler()
	var body string
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		var code int
		code, body = webtest.Get(t, figures, "/metrics")
		return code == http.StatusOK && strings.Contains(body, "quota_console_read_model_snapshot_timestamp_seconds "), nil
	}); err != nil {
		t.Fatalf("the metrics handler never served the snapshot's figures:\n%.2000s", body)
	}
	want := []string{"quota_console_build_info{", "quota_console_history_enabled 0"}
	for _, n := range sandbox.Fleet() {
		want = append(want, `quota_console_instance_type_nodes{instance_type="`+n.Shape.Type+`",state="ready"}`)
	}
	webtest.MustContain(t, "the metrics handler's /metrics", body, want...)
	_, public := webtest.Get(t, pages, "/metrics")
	for _, name := range []string{"quota_console_read_model_snapshot_timestamp_seconds", "quota_console_instance_type_", "quota_console_team_", "quota_console_namespace_team"} {
		if strings.Contains(public, name) {
			t.Errorf("the pages' public /metrics has %s", name)
		}
	}
	if !strings.Contains(public, "quota_console_build_info{") {
		t.Errorf("the pages' /metrics lost the console's own metrics")
	}
}
