package e2e

import (
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/playwright-community/playwright-go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	kueueclient "sigs.k8s.io/kueue/client-go/clientset/versioned"

	"github.com/openquota/console/deploy/rbac"
	"github.com/openquota/console/internal/auth"
	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/kueue"
	"github.com/openquota/console/internal/testenv"
)

// cspWatch collects the Content-Security-Policy violations a page reports.
type cspWatch struct {
	mu         sync.Mutex
	violations []string
}

func watchCSP(page playwright.Page) *cspWatch {
	w := &cspWatch{}
	page.OnConsole(func(m playwright.ConsoleMessage) {
		if strings.Contains(m.Text(), "Content Security Policy") {
			w.mu.Lock()
			w.violations = append(w.violations, m.Text())
			w.mu.Unlock()
		}
	})
	return w
}

func (w *cspWatch) check(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, v := range w.violations {
		t.Errorf("CSP violation: %s", v)
	}
}

// The console behind an authenticating proxy: the test plays the proxy with
// extra headers (user, groups, shared secret). Only the secret is trusted
// (--auth-proxy-cidrs ""), so a request without it gets 401. An admin creates
// a team; a viewer sees the edit form read-only, and a save forced anyway is
// refused with a clear message.
func TestProxySignInViewerIsReadOnly(t *testing.T) {
	env := sandboxEnv(t)
	cfg, err := env.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := rbac.Apply(ctx, cfg, "quota-console-tests"); err != nil {
		t.Fatalf("installing deploy/rbac: %v", err)
	}
	kube, kq := kubernetes.NewForConfigOrDie(cfg), kueueclient.NewForConfigOrDie(cfg)
	id := rand.String(5)
	admin, viewer := "admin-"+id, "viewer-"+id
	testenv.BindUser(t, kube, admin, rbac.AdminRole)
	testenv.BindUser(t, kube, viewer, rbac.ViewerRole)
	s := domain.Settings{NamespacePrefix: "hyperpod-ns-" + id + "-", Cohort: "auth-" + id} // admin-scope.yaml allows quota-console-admin hyperpod-ns- namespaces only
	t.Cleanup(func() { _ = (kueue.Applier{Kube: kube, Kueue: kq}).DeleteTeam(context.Background(), s, "guarded") })

	secret := "e2e-proxy-secret-" + rand.String(16)
	secretFile := filepath.Join(t.TempDir(), "proxy-secret")
	if err := os.WriteFile(secretFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := startConsole(t, env, "--auth", "proxy", "--auth-proxy-secret-file", secretFile, "--auth-proxy-cidrs", "",
		"--namespace-prefix", s.NamespacePrefix, "--cohort", s.Cohort)

	// Without the proxy's secret: 401, even from loopback and naming a user.
	req, _ := http.NewRequest(http.MethodGet, base+"/teams", nil)
	req.Header.Set(auth.DefaultUserHeader, admin)
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET /teams without the proxy secret: %s, want 401", resp.Status)
		}
	}

	expect := playwright.NewPlaywrightAssertions()
	must := mustFor(t)
	proxied := func(user, groups string) (playwright.Page, *cspWatch) {
		page := newPage(t)
		must(page.SetExtraHTTPHeaders(map[string]string{
			auth.DefaultUserHeader: user, auth.DefaultGroupsHeader: groups, auth.SecretHeader: secret,
		}))
		return page, watchCSP(page)
	}

	// The admin creates a team; the page scripts run under the CSP.
	page, csp := proxied(admin, "platform-admins")
	_, err = page.Goto(base + "/teams/new")
	must(err)
	must(expect.Locator(page.Locator("#signed-in-user")).ToHaveText(admin))
	must(expect.Locator(page.Locator("#read-only-note")).ToHaveCount(0))
	must(page.Locator("#name").Fill("guarded"))
	row := page.Locator("#quota-rows .quota-row").First()
	_, err = row.Locator(`select[data-field="instanceType"]`).SelectOption(playwright.SelectOptionValues{Values: &[]string{"ml.p5.48xlarge"}})
	must(err)
	must(row.Locator(`input[data-field="gpus"]`).Fill("2"))
	must(expect.Locator(row.Locator(`[data-field="derived"]`)).ToContainText("48 vCPU")) // team-form.js ran
	must(page.Locator("#save").Click())
	must(page.Locator("#apply").Click()) // after the impact preview
	must(expect.Page(page).ToHaveURL(base + "/teams?saved=guarded"))
	must(expect.Locator(page.Locator(`tr[data-team="guarded"]`)).ToHaveCount(1))
	screenshot(t, page, "auth-admin-signed-in")
	csp.check(t)

	// The viewer: signed in by name, the edit form read-only with the reason.
	page, csp = proxied(viewer, "ml")
	_, err = page.Goto(base + "/teams/guarded/edit")
	must(err)
	must(expect.Locator(page.Locator("#signed-in-user")).ToHaveText(viewer))
	must(expect.Locator(page.Locator("#read-only-note")).ToContainText("Your account " + viewer + " may not change ClusterQueues"))
	must(expect.Locator(page.Locator("#save")).ToBeDisabled())
	must(expect.Locator(page.Locator(`input[name="quota.0.gpus"]`)).ToBeDisabled())
	screenshot(t, page, "auth-viewer-read-only")

	// A save forced anyway (say the page was opened before the viewer lost
	// the admin role): Kubernetes refuses it, the console says so.
	_, err = page.Evaluate(`() => document.querySelectorAll("#team-form fieldset, #team-form button").forEach(e => e.disabled = false)`)
	must(err)
	must(page.Locator(`input[name="quota.0.gpus"]`).Fill("8"))
	must(page.Locator("#save").Click())
	must(expect.Locator(page.Locator("#apply-error")).ToContainText("You may not change team guarded"))
	screenshot(t, page, "auth-viewer-denied")
	csp.check(t)

	cq, err := kq.KueueV1beta2().ClusterQueues().Get(ctx, s.ClusterQueue("guarded"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if team, ok := domain.TeamFromClusterQueue(cq); !ok || *team.Quota[0].GPUs != 2 {
		t.Errorf("the viewer's refused save changed the team: %+v", team)
	}
}

// The console will not serve without sign-in on an address other machines
// can reach.
func TestConsoleRefusesNoAuthOffLoopback(t *testing.T) {
	skipIfDisabled(t)
	consoleOnce.Do(func() { consoleBin, consoleErr = buildConsole() })
	if consoleErr != nil {
		t.Fatalf("building the console: %v", consoleErr)
	}
	for _, listen := range []string{"0.0.0.0:0", ":0"} {
		out, err := exec.Command(consoleBin, "--listen", listen).CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 {
			t.Errorf("--listen %s without --auth: %v, want exit status 2\n%s", listen, err, out)
		}
		if !strings.Contains(string(out), "--auth none is only allowed on a loopback address") {
			t.Errorf("--listen %s: unclear refusal: %s", listen, out)
		}
	}
}
