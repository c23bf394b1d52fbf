package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/playwright-community/playwright-go"

	"github.com/openquota/console/sandbox"
)

func TestScratchPage(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<html><body><h1>Hello</h1><table id="instance-types"><tr data-instance-type="x"><td data-col="count">3</td></tr></table></body></html>`)
	}))
	defer srv.Close()
	page := newPage(t)
	if _, err := page.Goto(srv.URL); err != nil {
		t.Fatal(err)
	}
	expect := playwright.NewPlaywrightAssertions()
	if err := expect.Locator(page.Locator(`table#instance-types tr[data-instance-type="x"] td[data-col="count"]`)).ToHaveText("3"); err != nil {
		t.Fatal(err)
	}
	screenshot(t, page, "scratch")
}

func TestScratchPageFailWrong(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<html><body><td data-col="count">3</td></body></html>`)
	}))
	defer srv.Close()
	page := newPage(t)
	if _, err := page.Goto(srv.URL); err != nil {
		t.Fatal(err)
	}
	err := playwright.NewPlaywrightAssertions(1000).Locator(page.Locator(`td[data-col="count"]`)).ToHaveText("4")
	t.Logf("expected error: %v", err)
}

func TestScratchConsole(t *testing.T) {
	consoleOnce.Do(func() { consoleBin = "/tmp/fakeconsole/console" })
	base := startConsole(t, &sandbox.Env{Kubeconfig: "/k", PrometheusURL: "http://p"})
	page := newPage(t)
	if _, err := page.Goto(base + "/"); err != nil {
		t.Fatal(err)
	}
	if err := playwright.NewPlaywrightAssertions().Locator(page.Locator(`td[data-col="ready"]`)).ToHaveText("4"); err != nil {
		t.Fatal(err)
	}
}

func TestScratchConsoleExits(t *testing.T) {
	consoleOnce.Do(func() { consoleBin = "/tmp/fakeconsole/console" })
	startConsole(t, &sandbox.Env{Kubeconfig: "/k", PrometheusURL: "http://p"}, "--fail")
}

func TestScratchConsoleShowsOutput(t *testing.T) {
	consoleOnce.Do(func() { consoleBin = "/tmp/fakeconsole/console" })
	base := startConsole(t, &sandbox.Env{Kubeconfig: "/k", PrometheusURL: "http://p"})
	page := newPage(t)
	if _, err := page.Goto(base + "/"); err != nil {
		t.Fatal(err)
	}
	t.Error("deliberate failure to see the console output and the failure screenshot")
}
