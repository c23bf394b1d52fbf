package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/playwright-community/playwright-go"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/openquota/console/deploy/rbac"
	"github.com/openquota/console/internal/auth"
	"github.com/openquota/console/internal/kueue"
	"github.com/openquota/console/internal/testenv"
)

// fitCheck measures, in the page with every detail open, whether it scrolls
// sideways and which tables are wider than the element that holds them.
const fitCheck = `() => {
	for (const d of document.querySelectorAll("details")) d.open = true; // a row's or a chart's detail fits too
	const out = [];
	const over = document.documentElement.scrollWidth - window.innerWidth;
	if (over > 0) out.push("the page is " + over + " px too wide");
	for (const table of document.querySelectorAll("table")) {
		if (table.offsetParent === null) continue; // not shown
		const box = table.parentElement, style = getComputedStyle(box);
		const inner = box.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
		const extra = Math.round(table.getBoundingClientRect().width - inner);
		if (extra > 1) out.push("table " + (table.id || table.className || "?") + " is " + extra + " px wider than its container");
	}
	return out;
}`

// ownChecks are what axe-core does not check: every chart has its figures
// as a table.
const ownChecks = `() => {
	const out = [];
	for (const plot of document.querySelectorAll("figure.chart svg")) {
		const fig = plot.closest("figure");
		if (!fig.querySelector("details.chart-data table")) out.push("chart " + fig.id + " has no table of its figures");
	}
	return out;
}`

// axeRun runs axe-core in the page and returns its violations, each as
// "impact rule (help) on n: up to three of the elements it names".
const axeRun = `async () => {
	const r = await axe.run(document, { resultTypes: ["violations"] });
	return r.violations.map(v =>
		v.impact + " " + v.id + " (" + v.help + ") on " + v.nodes.length + ": " +
		v.nodes.slice(0, 3).map(n => n.target.join(" ")).join(", "));
}`

// At 1280 px every page fits (no page scrolls sideways, no table is wider
// than its container), axe-core finds no serious or critical accessibility
// violation, every chart has its figures as a table and keyboard focus is
// visible, signed in as an admin and as a team member; at 390 px (a phone)
// the overview and a team's page fit too. The data has the longest of names
// and columns: a team of a long name, tasks of long names running, waiting
// (with Kueue's reasons), preempted and finished. FIT_SHOTS=1 saves a
// screenshot of every page it visits for a person to look at.
func TestPagesFitAndPassAxe(t *testing.T) {
	env, kube, kq, s := securitySetup(t, "fit")
	team := "research-platform-inference-team"
	t.Cleanup(func() { _ = (kueue.Applier{Kube: kube, Kueue: kq}).DeleteTeam(context.Background(), s, team) })
	base := proxyConsole(t, env, s)
	admin := bindRole(t, kube, "admin", rbac.AdminRole)
	member := "member-" + rand.String(5)
	axePath, err := axeScript()
	if err != nil {
		t.Fatal(err)
	}
	axeSource, err := os.ReadFile(axePath)
	if err != nil {
		t.Fatalf("axe-core (e2e/setup.sh unpacks it): %v", err)
	}

	// page is a browser page whose requests carry the proxy's headers for
	// user. The console's Content-Security-Policy admits its own scripts
	// only; the test's context bypasses it to run axe-core in the page.
	page := func(user string, width, height int) playwright.Page {
		p := newPageWith(t, playwright.BrowserNewContextOptions{
			Viewport:  &playwright.Size{Width: width, Height: height},
			BypassCSP: playwright.Bool(true),
		})
		if err := p.SetExtraHTTPHeaders(map[string]string{auth.DefaultUserHeader: user, auth.DefaultGroupsHeader: ""}); err != nil {
			t.Fatal(err)
		}
		return p
	}
	createTeam(t, page(admin, 1280, 900), base, team, member)
	for i := range 2 { // one runs on the team's GPU, one waits for it
		testenv.Submit(t, kube, testenv.Job{Namespace: s.Namespace(team), LocalQueue: s.LocalQueue(team),
			Name: fmt.Sprintf("fine-tune-llama-with-a-rather-long-job-name-%d", i), GPUs: 1, InstanceType: "ml.g5.2xlarge"})
	}
	testenv.FinishedWorkload(t, kq, s.Namespace(team), s.LocalQueue(team), "evaluate-checkpoint-with-a-long-name", "Job finished successfully")
	// A task of a higher class preempts the running one: the preemptions
	// table, the widest, has a row.
	urgent := "urgent-inference-serving-" + rand.String(5)
	testenv.PriorityClass(t, kq, urgent, 1000)
	testenv.Submit(t, kube, testenv.Job{Namespace: s.Namespace(team), LocalQueue: s.LocalQueue(team),
		Name: "serve-llama-for-the-product-launch-with-a-long-name", Class: urgent, GPUs: 1, InstanceType: "ml.g5.2xlarge"})
	// The preemptions page shows the history when loaded: wait for the row.
	waiter := page(admin, 1280, 900)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(time.Second) {
		if _, err := waiter.Goto(base + "/preemptions"); err != nil {
			t.Fatal(err)
		}
		if n, err := waiter.Locator(`#preemptions tr[data-team="` + team + `"]`).Count(); err == nil && n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no preemption recorded within 60 s")
		}
	}

	pages := []string{"/", "/insights", "/usage", "/usage/" + team, "/tasks", "/tasks?team=" + team,
		"/preemptions", "/reports/usage", "/teams", "/teams/new", "/teams/" + team + "/edit", "/teams/" + team + "/history",
		"/teams/" + team + "/delete", "/policy", "/cohorts", "/whatif",
		"/whatif?team=" + team + "&row.0.instanceType=ml.g5.2xlarge&row.0.pods=1&row.0.gpus=1"}
	visit := func(t *testing.T, p playwright.Page, path string, axeToo bool) {
		resp, err := p.Goto(base + path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		// Parts that wait for Prometheus or the task history fill in after
		// the page loads.
		if _, err := p.WaitForFunction(`() => document.querySelectorAll("[data-filling]").length === 0`, nil,
			playwright.PageWaitForFunctionOptions{Timeout: playwright.Float(15000)}); err != nil {
			t.Logf("%s: still filling: %v", path, err)
		}
		width := p.ViewportSize().Width
		if os.Getenv("FIT_SHOTS") != "" {
			screenshot(t, p, fmt.Sprintf("fit-%d-%s", width, safeName(t.Name()+path)))
		}
		fit, err := p.Evaluate(fitCheck)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, problem := range fit.([]any) {
			t.Errorf("%s (%d) at %d px: %v", path, resp.Status(), width, problem)
		}
		if len(fit.([]any)) > 0 {
			screenshot(t, p, fmt.Sprintf("too-wide-%d-%s", width, safeName(t.Name()+path)))
		}
		if !axeToo {
			return
		}
		if _, err := p.AddScriptTag(playwright.PageAddScriptTagOptions{Content: playwright.String(string(axeSource))}); err != nil {
			t.Fatalf("%s: injecting axe-core: %v", path, err)
		}
		found, err := p.Evaluate(axeRun)
		if err != nil {
			t.Fatalf("%s: axe-core: %v", path, err)
		}
		var violations []any
		for _, v := range found.([]any) {
			if strings.HasPrefix(v.(string), "serious ") || strings.HasPrefix(v.(string), "critical ") {
				violations = append(violations, v)
				t.Errorf("%s (%d): axe-core: %v", path, resp.Status(), v)
			} else {
				t.Logf("%s: axe-core: %v", path, v)
			}
		}
		t.Logf("%s: axe-core: %d serious or critical", path, len(violations))
		own, err := p.Evaluate(ownChecks)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, problem := range own.([]any) {
			t.Errorf("%s (%d): %v", path, resp.Status(), problem)
		}
		// Keyboard focus is visible: the first stop (the brand link) and the
		// next have an outline.
		for range 2 {
			if err := p.Keyboard().Press("Tab"); err != nil {
				t.Fatal(err)
			}
			outline, err := p.Evaluate(`() => { const s = getComputedStyle(document.activeElement); return document.activeElement.tagName + " " + s.outlineStyle + " " + s.outlineWidth; }`)
			if err != nil {
				t.Fatal(err)
			}
			if o := outline.(string); strings.Contains(o, " none ") || strings.HasSuffix(o, " 0px") || strings.HasPrefix(o, "BODY") {
				t.Errorf("%s: focus is not visible: %s", path, o)
			}
		}
	}
	// The usage report prints with its charts, each with its figures as a
	// table, and without navigation and forms.
	t.Run("print", func(t *testing.T) {
		p := page(admin, 1280, 900)
		expect := playwright.NewPlaywrightAssertions()
		must := mustFor(t)
		_, err := p.Goto(base + "/reports/usage?team=" + team)
		must(err)
		must(expect.Locator(p.Locator("#report-charts figure.chart")).ToHaveCount(2))
		must(expect.Locator(p.Locator("#report-used .chart-legend li")).ToHaveText([]string{team}))
		must(expect.Locator(p.Locator("#report-used-table tbody tr")).Not().ToHaveCount(0))
		must(expect.Locator(p.Locator("#print-report")).ToBeVisible())
		must(p.EmulateMedia(playwright.PageEmulateMediaOptions{Media: playwright.MediaPrint}))
		must(expect.Locator(p.Locator("header.top")).ToBeHidden())
		must(expect.Locator(p.Locator("#report-range")).ToBeHidden())
		must(expect.Locator(p.Locator("#report-range-printed")).ToBeVisible())
		must(expect.Locator(p.Locator("#report-used svg.chart-plot")).ToBeVisible())
		must(expect.Locator(p.Locator("#report-borrowed svg.chart-plot")).ToBeVisible())
		must(expect.Locator(p.Locator("#history-usage")).ToBeVisible())
		if os.Getenv("FIT_SHOTS") != "" {
			screenshot(t, p, "fit-print-reports-usage")
		}
	})
	for _, who := range []struct{ role, user string }{{"admin", admin}, {"member", member}} {
		t.Run(who.role, func(t *testing.T) {
			wide := page(who.user, 1280, 900)
			for _, path := range pages {
				visit(t, wide, path, true)
			}
			phone := page(who.user, 390, 844)
			for _, path := range []string{"/", "/usage/" + team} {
				visit(t, phone, path, false)
			}
		})
	}
}
