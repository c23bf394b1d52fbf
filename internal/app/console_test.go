package app_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueclient "sigs.k8s.io/kueue/client-go/clientset/versioned"

	"github.com/openquota/console/deploy/rbac"
	"github.com/openquota/console/internal/app"
	"github.com/openquota/console/internal/auth"
	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/handlers"
	"github.com/openquota/console/internal/kueue"
	"github.com/openquota/console/internal/metrics"
	"github.com/openquota/console/internal/testenv"
	"github.com/openquota/console/internal/webtest"
	"github.com/openquota/console/sandbox/sandboxtest"
)

// The integration tests: the console as package app builds it (caches,
// read model, write path, access reviews, task history), on the test
// sandbox, through its HTTP handler. Each console has its own namespace
// prefix and cohort (admin-scope.yaml lets the console's ServiceAccount
// write hyperpod-ns- namespaces and cohorts named after shared-pool only).

// browser is a user's browser (webtest.Browser).
type browser = webtest.Browser

// console is a console on the test sandbox with its own prefix and cohort.
type console struct {
	h        http.Handler
	settings domain.Settings
	// kube and kueue are the test's own clients (the sandbox's admin).
	kube  kubernetes.Interface
	kueue kueueclient.Interface
	app   *app.App
	live  *kueue.Live
	cache *kueue.Cache
	pages handlers.Config
	// stop ends the console's parts (the recorder's run with them).
	stop context.CancelFunc
	// cookies the console set, sent back as a browser does (flash messages).
	cookies map[string]*http.Cookie
}

// setup is how a test's console differs from the default one.
type setup struct {
	// config changes the client configuration of the test and the console
	// (e.g. to go through a proxy).
	config func(*rest.Config)
	// consoleAs is the console's own identity when it is not the test's
	// (the ServiceAccount of deploy/rbac).
	consoleAs   *rest.Config
	settings    domain.Settings
	taskHistory app.TaskHistoryConfig
	// kueueConfig is where Kueue's configuration is read (zero: where
	// Kueue's manifests keep it).
	kueueConfig kueue.ConfigMapRef
	// pages changes what the pages are built on (the sign-in, the
	// limits, a Prometheus that is down, the task history they read).
	pages func(*handlers.Config)
}

func newConsole(t *testing.T) console {
	t.Helper()
	return newConsoleWith(t, nil, nil)
}

// newConsoleOnPrometheus starts a console whose pages read the sandbox's
// Prometheus.
func newConsoleOnPrometheus(t *testing.T) console {
	t.Helper()
	prom, err := metrics.NewProm(sandboxtest.Env(t).PrometheusURL)
	if err != nil {
		t.Fatal(err)
	}
	return newConsoleWith(t, nil, func(d *handlers.Config) { d.Prometheus = prom })
}

// newConsoleWith lets a test change the client config (e.g. to go through a
// proxy) and what the pages are built on.
func newConsoleWith(t *testing.T, config func(*rest.Config), pages func(*handlers.Config)) console {
	t.Helper()
	return startConsole(t, setup{config: config, pages: pages})
}

// ownSettings are a console's own prefix and cohort.
func ownSettings() domain.Settings {
	id := rand.String(5)
	return domain.Settings{NamespacePrefix: "hyperpod-ns-" + id + "-", Cohort: domain.DefaultSettings.Cohort + "-" + id}
}

// startConsole starts the console of s until the test ends, once its
// caches have synced.
func startConsole(t *testing.T, s setup) console {
	t.Helper()
	cfg, err := sandboxtest.Env(t).RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	if s.config != nil {
		s.config(cfg)
	}
	own := cfg
	if s.consoleAs != nil {
		own = s.consoleAs
	}
	clients, err := kueue.NewClients(own)
	if err != nil {
		t.Fatal(err)
	}
	if s.settings == (domain.Settings{}) {
		s.settings = ownSettings()
	}
	if s.taskHistory.Driver == "" && s.taskHistory.Store == nil {
		s.taskHistory.Driver = app.TaskHistoryOff
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	a, err := app.New(ctx, app.Config{Settings: s.settings, Clients: clients, Server: cfg.Host, TaskHistory: s.taskHistory,
		KueueConfigMap: s.kueueConfig, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return a.Live.Ready() == nil, nil
	}); err != nil {
		t.Fatalf("console not ready: %v", a.Live.Ready())
	}
	pages := a.Pages()
	if s.pages != nil {
		s.pages(&pages)
	}
	return console{h: webtest.AtLoopback(handlers.New(pages)), settings: s.settings, kube: kubernetes.NewForConfigOrDie(cfg),
		kueue: kueueclient.NewForConfigOrDie(cfg), app: a, live: a.Live, cache: a.Cache, pages: pages, stop: cancel, cookies: map[string]*http.Cookie{}}
}

// with is another console on the same parts whose pages adjust changes
// (e.g. another task history).
func (c console) with(adjust func(*handlers.Config)) console {
	pages := c.pages
	adjust(&pages)
	c.h, c.pages, c.cookies = webtest.AtLoopback(handlers.New(pages)), pages, map[string]*http.Cookie{}
	return c
}

func (c console) post(t *testing.T, path string, form url.Values) (int, string, string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin") // as the console's own page
	rec := c.serve(req)
	return rec.Code, rec.Header().Get("Location"), rec.Body.String()
}

func (c console) get(t *testing.T, path string) (int, string) {
	t.Helper()
	rec := c.serve(httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code, rec.Body.String()
}

// serve sends a request with the cookies the console set so far, and keeps
// the ones it sets now.
func (c console) serve(r *http.Request) *httptest.ResponseRecorder {
	for _, ck := range c.cookies {
		r.AddCookie(ck)
	}
	rec := httptest.NewRecorder()
	c.h.ServeHTTP(rec, r)
	for _, ck := range rec.Result().Cookies() {
		if ck.MaxAge < 0 {
			delete(c.cookies, ck.Name)
		} else {
			c.cookies[ck.Name] = ck
		}
	}
	return rec
}

// eventually polls a page until it contains want (the informers catch up
// within milliseconds; the deadline is generous).
func (c console) eventually(t *testing.T, path, want string) string {
	t.Helper()
	var body string
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		_, body = c.get(t, path)
		return strings.Contains(body, want), nil
	})
	if err != nil {
		t.Fatalf("GET %s never showed %q:\n%s", path, want, body)
	}
	return body
}

// csv reads a CSV answer, its rows keyed by their first two cells.
func (c console) csv(t *testing.T, path string) map[string]map[string]string {
	t.Helper()
	code, body := c.get(t, path)
	header, rows := webtest.ReadCSV(t, path, code, body)
	return webtest.CSVRecords(header, rows, func(r map[string]string) string { return r[header[0]] + "/" + r[header[1]] })
}

func (c console) clusterQueue(t *testing.T, team string) *kueuev1beta2.ClusterQueue {
	t.Helper()
	cq, err := c.kueue.KueueV1beta2().ClusterQueues().Get(context.Background(), c.settings.ClusterQueue(team), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("ClusterQueue of %s: %v", team, err)
	}
	return cq
}

// submit queues a suspended Job of one pod of gpus GPUs in the team's
// queue.
func (c console) submit(t *testing.T, team, name string, gpus int64) {
	t.Helper()
	testenv.Submit(t, c.kube, testenv.Job{Namespace: c.settings.Namespace(team), LocalQueue: c.settings.LocalQueue(team), Name: name, GPUs: gpus})
}

// cleanupTeams deletes, as the sandbox admin, the teams a test left.
func cleanupTeams(c console) {
	ctx := context.Background()
	list, err := c.kueue.KueueV1beta2().ClusterQueues().List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	a := kueue.Applier{Kube: c.kube, Kueue: c.kueue}
	for _, cq := range list.Items {
		if t, ok := domain.TeamFromClusterQueue(&cq); ok && cq.Name == c.settings.ClusterQueue(t.Name) {
			_ = a.DeleteTeam(ctx, c.settings, t.Name)
		}
	}
	_ = c.kueue.KueueV1beta2().Cohorts().Delete(ctx, c.settings.Cohort, metav1.DeleteOptions{})
}

// bindUser binds a fresh user name "<prefix>-<random>" to a ClusterRole of
// deploy/rbac (installed on first use) until the test ends; role "" binds
// nothing.
func bindUser(t *testing.T, kube kubernetes.Interface, prefix, role string) string {
	t.Helper()
	testenv.ConsoleRBAC(t)
	user := prefix + "-" + rand.String(5)
	if role != "" {
		testenv.BindUser(t, kube, user, role)
	}
	return user
}

const proxySecret = "test-proxy-secret-0123456789"

// proxyAuth trusts loopback and the shared secret.
func proxyAuth() *auth.Authenticator {
	trusted, _ := auth.ParseCIDRs(auth.DefaultProxyCIDRs)
	return &auth.Authenticator{Mode: auth.ModeProxy, Proxy: auth.Proxy{
		UserHeader: auth.DefaultUserHeader, GroupsHeader: auth.DefaultGroupsHeader, Trusted: trusted, Secret: []byte(proxySecret),
	}}
}

// proxyConsole is a console on the sandbox in auth mode proxy (proxyAuth).
// As an installed console does, it asks about its users and reads and
// writes with the ServiceAccount of deploy/rbac (a token of the
// TokenRequest API): a change goes through when the user may make it, with
// the console's own rights, within the admission policy. The test's own
// clients (c.kube, c.kueue) are the sandbox admin's.
func proxyConsole(t *testing.T) console {
	t.Helper()
	testenv.ConsoleRBAC(t)
	cfg, err := sandboxtest.Env(t).RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	// Applied again: other test binaries on the shared sandbox apply
	// deploy/rbac too, and the console's rights are what this console tests.
	if err := rbac.Apply(context.Background(), cfg, "quota-console-tests"); err != nil {
		t.Fatal(err)
	}
	saCfg, err := rbac.AsConsole(context.Background(), cfg, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c := startConsole(t, setup{consoleAs: saCfg, pages: func(p *handlers.Config) { p.Auth = proxyAuth() }})
	t.Cleanup(func() { cleanupTeams(c) })
	return c
}

// as is the browser of user (and groups) behind the proxy.
func (c console) as(t *testing.T, user string, groups ...string) *browser {
	return webtest.NewBrowser(t, c.h, map[string]string{auth.DefaultUserHeader: user, auth.DefaultGroupsHeader: strings.Join(groups, ",")})
}

func gpuQuota(cq *kueuev1beta2.ClusterQueue) (nominal, borrowing resource.Quantity) {
	r := cq.Spec.ResourceGroups[0].Flavors[0].Resources[0]
	return r.NominalQuota, *r.BorrowingLimit
}

// waitsOnTheCluster marks a test that spends most of its time waiting (on
// Kueue's cycles, a session's lifetime, Prometheus's scrapes or a window of
// the task history): such tests run side by side once the others are done,
// as many as go test's -parallel (make test gives 4). Each has its own
// console, prefix and cohort: no two share quota.
func waitsOnTheCluster(t *testing.T) { t.Parallel() }
