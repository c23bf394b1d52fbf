package e2e

import (
	"context"
	"fmt"
	"html"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

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
	"github.com/openquota/console/sandbox"
)

// The browser resolves every name under example.test to 127.0.0.1 (see
// launchBrowser), so one machine can play the console at
// quota.apps.example.test, a sibling site at x.apps.example.test (same site:
// same registrable domain) and another site at attacker.other.test.
const (
	consoleHost = "quota.apps.example.test"
	siblingHost = "x.apps.example.test"
	foreignHost = "attacker.other-example.test"
)

// proxyConsole starts a console behind an authenticating proxy (trusted on
// loopback) for the name consoleHost; the tests' browsers send the proxy's
// headers themselves.
func proxyConsole(t *testing.T, env *sandbox.Env, s domain.Settings) (base string) {
	t.Helper()
	local := startConsole(t, env, "--auth", "proxy", "--auth-proxy-cidrs", "127.0.0.1/32", "--auth-proxy-hosts", consoleHost,
		"--namespace-prefix", s.NamespacePrefix, "--cohort", s.Cohort)
	return strings.Replace(local, "127.0.0.1", consoleHost, 1)
}

// bindRole binds a new user to a ClusterRole of deploy/rbac until the test ends.
func bindRole(t *testing.T, kube kubernetes.Interface, prefix, role string) string {
	t.Helper()
	user := prefix + "-" + rand.String(5)
	testenv.BindUser(t, kube, user, role)
	return user
}

func securitySetup(t *testing.T, name string) (*sandbox.Env, kubernetes.Interface, kueueclient.Interface, domain.Settings) {
	t.Helper()
	env := sandboxEnv(t)
	cfg, err := env.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	if err := rbac.Apply(context.Background(), cfg, "quota-console-tests"); err != nil {
		t.Fatalf("installing deploy/rbac: %v", err)
	}
	kube, kq := kubernetes.NewForConfigOrDie(cfg), kueueclient.NewForConfigOrDie(cfg)
	id := rand.String(5)
	s := domain.Settings{NamespacePrefix: "hyperpod-ns-" + id + "-", Cohort: name + "-" + id}
	return env, kube, kq, s
}

// asUser is a browser page whose requests carry the proxy's headers for user.
func asUser(t *testing.T, user string) playwright.Page {
	t.Helper()
	page := newPage(t)
	if err := page.SetExtraHTTPHeaders(map[string]string{auth.DefaultUserHeader: user, auth.DefaultGroupsHeader: ""}); err != nil {
		t.Fatal(err)
	}
	return page
}

func createTeam(t *testing.T, page playwright.Page, base, team, users string) {
	t.Helper()
	expect := playwright.NewPlaywrightAssertions()
	if _, err := page.Goto(base + "/teams/new"); err != nil {
		t.Fatal(err)
	}
	row := page.Locator("#quota-rows .quota-row").First()
	for _, step := range []func() error{
		func() error { return page.Locator("#name").Fill(team) },
		func() error { return page.Locator("#users").Fill(users) },
		func() error { return page.Locator("#groups").Fill("") },
		func() error {
			_, err := row.Locator(`select[data-field="instanceType"]`).SelectOption(playwright.SelectOptionValues{Values: &[]string{"ml.g5.2xlarge"}})
			return err
		},
		func() error { return row.Locator(`input[data-field="gpus"]`).Fill("1") },
		func() error { return page.Locator("#save").Click() },
		func() error { return page.Locator("#apply").Click() }, // after the impact preview
		func() error { return expect.Locator(page.Locator(`tr[data-team="` + team + `"]`)).ToHaveCount(1) },
	} {
		if err := step(); err != nil {
			t.Fatalf("creating team %s: %v", team, err)
		}
	}
}

// attackPage serves, on every name, a page that plants a _csrf cookie and a
// browser-id cookie for the parent domain apps.example.test and auto-submits
// a form that deletes a team.
func attackPage(t *testing.T, action string) (port string) {
	t.Helper()
	page := fmt.Sprintf(`<!doctype html><title>Cute cats</title>
<form id="f" method="post" action="%s"><input type="hidden" name="_csrf" value="t"></form>
<script>
document.cookie = "_csrf=t; domain=apps.example.test; path=/";
document.cookie = "quota_console_browser=tttttttttttttttttttttttt; domain=apps.example.test; path=/";
document.getElementById("f").submit();
</script>`, html.EscapeString(action))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(page))
	}))
	t.Cleanup(srv.Close)
	_, port, _ = net.SplitHostPort(srv.Listener.Addr().String())
	return port
}

// A page on another site, and one on a sibling subdomain of the console's
// own (which can plant cookies for the shared parent domain), auto-submit a
// form that deletes a team, in the browser of a signed-in admin. Both are
// refused; the team stays.
func TestFormsFromOtherSitesCannotDeleteATeam(t *testing.T) {
	env, kube, kq, s := securitySetup(t, "csrf")
	t.Cleanup(func() { _ = (kueue.Applier{Kube: kube, Kueue: kq}).DeleteTeam(context.Background(), s, "victim") })
	base := proxyConsole(t, env, s)
	admin := bindRole(t, kube, "admin", rbac.AdminRole)
	page := asUser(t, admin)
	createTeam(t, page, base, "victim", "")

	port := attackPage(t, base+"/teams/victim/delete")
	for _, host := range []string{siblingHost, foreignHost} {
		resp, err := page.Goto(fmt.Sprintf("http://%s:%s/", host, port))
		if err != nil {
			t.Fatal(err)
		}
		// The form posts itself; wait until the browser shows the console's answer.
		if err := page.WaitForURL(base+"/teams/victim/delete", playwright.PageWaitForURLOptions{Timeout: playwright.Float(10000)}); err != nil {
			t.Fatalf("the attack page on %s did not submit its form (%v): %v", host, resp.Status(), err)
		}
		text, err := page.Locator("body").InnerText()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(text, "CSRF check failed") {
			t.Errorf("the form from %s was not refused as CSRF: %.300s", host, text)
		}
		screenshot(t, page, "csrf-refused-"+host)
	}
	time.Sleep(500 * time.Millisecond) // a deletion, had one got through, starts at once
	cq, err := kq.KueueV1beta2().ClusterQueues().Get(context.Background(), s.ClusterQueue("victim"), metav1.GetOptions{})
	if err != nil || cq.DeletionTimestamp != nil {
		t.Fatalf("the team was deleted: %v", err)
	}

	// The console's own delete form still works.
	expect := playwright.NewPlaywrightAssertions()
	if _, err := page.Goto(base + "/teams/victim/delete"); err != nil {
		t.Fatal(err)
	}
	if err := page.Locator("#confirm-delete").Click(); err != nil {
		t.Fatal(err)
	}
	if err := expect.Page(page).ToHaveURL(base + "/teams?deleted=victim"); err != nil {
		t.Fatal(err)
	}
}

// A team member, signed in through the proxy, sees their team and is told
// which right is missing on another team's page.
func TestTeamMemberSeesOnlyTheirTeam(t *testing.T) {
	env, kube, kq, s := securitySetup(t, "member")
	t.Cleanup(func() {
		for _, team := range []string{"ours", "theirs"} {
			_ = (kueue.Applier{Kube: kube, Kueue: kq}).DeleteTeam(context.Background(), s, team)
		}
	})
	base := proxyConsole(t, env, s)
	admin := asUser(t, bindRole(t, kube, "admin", rbac.AdminRole))
	member := "member-" + rand.String(5)
	createTeam(t, admin, base, "ours", member)
	createTeam(t, admin, base, "theirs", "someone-else")

	expect := playwright.NewPlaywrightAssertions()
	page := asUser(t, member)
	resp, err := page.Goto(base + "/usage/ours")
	if err != nil || resp.Status() != http.StatusOK {
		t.Fatalf("member on their team's page: %v %v", resp.Status(), err)
	}
	if err := expect.Locator(page.Locator("#signed-in-user")).ToHaveText(member); err != nil {
		t.Error(err)
	}
	screenshot(t, page, "member-own-team")
	resp, err = page.Goto(base + "/usage")
	if err != nil || resp.Status() != http.StatusOK {
		t.Fatalf("member on the usage page: %v %v", resp.Status(), err)
	}
	if err := expect.Locator(page.Locator(`a[href="/usage/ours"]`)).ToHaveCount(1); err != nil {
		t.Error(err)
	}
	if err := expect.Locator(page.Locator(`a[href="/usage/theirs"]`)).ToHaveCount(0); err != nil {
		t.Error("the member sees the other team on the usage page")
	}
	resp, err = page.Goto(base + "/usage/theirs")
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status() != http.StatusForbidden {
		t.Errorf("member on another team's page: %d, want 403", resp.Status())
	}
	if err := expect.Locator(page.Locator("#error-message")).ToContainText(`may not see team "theirs"`); err != nil {
		t.Error(err)
	}
	if err := expect.Locator(page.Locator("#error-message")).ToContainText(`list on Workloads in namespace "` + s.Namespace("theirs") + `"`); err != nil {
		t.Error(err)
	}
	screenshot(t, page, "member-other-team-403")
}
