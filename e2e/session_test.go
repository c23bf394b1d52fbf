package e2e

import (
	"context"
	"regexp"
	"testing"

	"github.com/openquota/console/internal/testenv"
	"github.com/playwright-community/playwright-go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	krand "k8s.io/apimachinery/pkg/util/rand"
)

// Signing out in one browser ends the account's sessions in every browser.
// A page left open in another, with its live stream, goes to the sign-in
// page by itself: the stream ends at its next check, the reconnection is
// refused, and the page reloads into the sign-in page.
func TestSignOutEndsOpenPagesElsewhere(t *testing.T) {
	env := sandboxEnv(t)
	kube := testenv.SandboxClients(t, env).Kube
	id := krand.String(5)
	state := "qc-signout-" + id
	t.Cleanup(func() { _ = kube.CoreV1().Namespaces().Delete(context.Background(), state, metav1.DeleteOptions{}) })
	base := startConsole(t, env, "--auth", "token", "--state-namespace", state,
		"--namespace-prefix", "hyperpod-ns-"+id+"-", "--cohort", "signout-"+id)
	expect := playwright.NewPlaywrightAssertions()
	must := mustFor(t)
	signIn := func() playwright.Page {
		page := newPage(t)
		_, err := page.Goto(base + "/tasks")
		must(err)
		must(expect.Page(page).ToHaveURL(regexp.MustCompile(`/auth/sign-in\?next=`)))
		must(page.Locator("#token").Fill(env.Token))
		must(page.Locator("#sign-in").Click())
		must(expect.Page(page).ToHaveURL(base + "/tasks"))
		return page
	}
	left := signIn()
	here := signIn()
	must(here.Locator("#sign-out").Click())
	must(expect.Page(here).ToHaveURL(base + "/auth/sign-in"))
	if err := expect.Locator(here.Locator("#sign-in-notice")).ToContainText("every session of sandbox-admin has ended, in every browser"); err != nil {
		t.Errorf("the sign-in page after sign-out: %v", err)
	}
	screenshot(t, here, "signed-out")

	// The stream checks the session at its next push or heartbeat (15 s),
	// the browser reconnects after 2 s.
	if err := expect.Page(left).ToHaveURL(regexp.MustCompile(`/auth/sign-in\?next=%2Ftasks`),
		playwright.PageAssertionsToHaveURLOptions{Timeout: playwright.Float(40000)}); err != nil {
		t.Errorf("the page left open in another browser after the account signed out: %v", err)
	}
	screenshot(t, left, "signed-out-elsewhere")
}
