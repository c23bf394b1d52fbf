package e2e

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/playwright-community/playwright-go"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/kueue"
	"github.com/openquota/console/internal/testenv"
)

// hostileText would run script wherever a page put it in as markup.
var hostileText = []string{
	`<script>alert("script")</script>`,
	`"><img src=x onerror=alert("img")>`,
	`'><svg onload=alert("svg")>`,
	`</textarea><script>alert("textarea")</script>`,
	`javascript:alert("link")`,
}

// hostileWatch records what a page must never do with hostile text: open
// a dialog, have the Content-Security-Policy block an injected script, or
// report a script error.
type hostileWatch struct {
	mu     sync.Mutex
	events []string
}

func watchHostile(page playwright.Page) *hostileWatch {
	w := &hostileWatch{}
	add := func(s string) {
		w.mu.Lock()
		w.events = append(w.events, s)
		w.mu.Unlock()
	}
	page.OnDialog(func(d playwright.Dialog) {
		add(fmt.Sprintf("a %s dialog opened: %q", d.Type(), d.Message()))
		_ = d.Dismiss()
	})
	page.OnConsole(func(m playwright.ConsoleMessage) {
		if strings.Contains(m.Text(), "Content Security Policy") {
			add("CSP blocked something: " + m.Text())
		}
	})
	page.OnPageError(func(err error) { add("script error: " + err.Error()) })
	return w
}

func (w *hostileWatch) check(t *testing.T, where string) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, e := range w.events {
		t.Errorf("%s: %s", where, e)
	}
	w.events = nil
}

// Script payloads that reach the console from the cluster (a team's stored
// description and members, Workload condition messages) show as text: no
// dialog opens, nothing is blocked by the CSP, no element is injected.
func TestHostileClusterStringsStayText(t *testing.T) {
	env := sandboxEnv(t)
	c := testenv.SandboxClients(t, env)
	kube, kq := c.Kube, c.Kueue
	id := rand.String(5)
	s := domain.Settings{NamespacePrefix: "x" + id + "-", Cohort: "xss-" + id}
	base := startConsole(t, env, "--namespace-prefix", s.NamespacePrefix, "--cohort", s.Cohort)
	ctx := context.Background()
	must := mustFor(t)

	// The team is written straight to the cluster, past the console's form.
	// It is held, so Kueue admits none of the test's Workloads.
	description := strings.Join(hostileText, " ")
	var members []domain.Member
	for _, h := range hostileText {
		members = append(members, domain.Member{Kind: "User", Name: h}, domain.Member{Kind: "Group", Name: h})
	}
	team := domain.Team{Name: "xss", Description: description, Enabled: false, Members: members,
		Lending: domain.LendAndBorrow, BorrowLimitPercent: 50, Preemption: domain.PreemptLowerPriority,
		Quota: []domain.QuotaInput{{InstanceType: "ml.p5.48xlarge", GPUs: ptr.To[int64](2)}}}
	objs, err := domain.BuildTeam(s, team, domain.LookupShape)
	must(err)
	a := kueue.Applier{Kube: kube, Kueue: kq}
	must(a.ApplyTeam(ctx, objs))
	t.Cleanup(func() { _ = a.DeleteTeam(context.Background(), s, team.Name) })

	ns, lq := s.Namespace(team.Name), s.LocalQueue(team.Name)
	messages := map[string]string{}
	for i, h := range hostileText[:len(hostileText)-1] {
		name := fmt.Sprintf("hostile-%d", i)
		messages[name] = h
		testenv.FinishedWorkload(t, kq, ns, lq, name, h)
	}

	page := newPage(t)
	watch := watchHostile(page)
	expect := playwright.NewPlaywrightAssertions()

	// Tasks: each message is the tooltip of its row, as text.
	_, err = page.Goto(base + "/tasks?team=" + team.Name + "&state=all")
	must(err)
	for name, m := range messages {
		why := page.Locator(fmt.Sprintf(`#task-list tr[data-task="%s/%s"] .why`, ns, name))
		must(expect.Locator(why).ToHaveAttribute("title", m))
	}
	// A new hostile Workload arrives while the page is open: the live update
	// swaps the table in place, and its message still stays text.
	late := hostileText[len(hostileText)-1] + ` <img src=x onerror=alert("live")>`
	testenv.FinishedWorkload(t, kq, ns, lq, "hostile-live", late)
	must(expect.Locator(page.Locator(fmt.Sprintf(`#task-list tr[data-task="%s/hostile-live"] .why`, ns))).ToHaveAttribute("title", late))
	screenshot(t, page, "hostile-tasks")
	checkNoInjection(t, page, "/tasks")
	watch.check(t, "/tasks")

	// The edit form shows the stored description and members as text.
	_, err = page.Goto(base + "/teams/" + team.Name + "/edit")
	must(err)
	var users, groups []string
	for _, m := range members {
		if m.Kind == "User" {
			users = append(users, m.Name)
		} else {
			groups = append(groups, m.Name)
		}
	}
	must(expect.Locator(page.Locator("#description")).ToHaveValue(description))
	must(expect.Locator(page.Locator("#users")).ToHaveValue(strings.Join(users, "\n")))
	must(expect.Locator(page.Locator("#groups")).ToHaveValue(strings.Join(groups, "\n")))
	screenshot(t, page, "hostile-team-form")
	checkNoInjection(t, page, "/teams/xss/edit")
	watch.check(t, "/teams/xss/edit")

	// A filter value from the URL is shown back as text.
	_, err = page.Goto(base + "/tasks?state=all&class=" + url.QueryEscape(hostileText[0]))
	must(err)
	must(expect.Locator(page.Locator("#class-stats tbody th").First()).ToHaveText(hostileText[0]))
	checkNoInjection(t, page, "/tasks?class=…")
	watch.check(t, "/tasks?class=…")

	// Every other page, the team listed where teams are.
	for _, path := range []string{"/teams", "/usage", "/usage/" + team.Name, "/", "/tasks", "/policy"} {
		_, err = page.Goto(base + path)
		must(err)
		must(expect.Locator(page.Locator("main h1")).ToBeVisible())
		if path == "/teams" || path == "/usage" {
			must(expect.Locator(page.Locator(`tr[data-team="xss"]`).First()).ToBeVisible())
		}
		checkNoInjection(t, page, path)
		watch.check(t, path)
	}
}

// checkNoInjection fails when the page holds an element a payload would
// have created.
func checkNoInjection(t *testing.T, page playwright.Page, where string) {
	t.Helper()
	found, err := page.Evaluate(`() => {
		const bad = [];
		for (const el of document.querySelectorAll("img, iframe, object, embed")) bad.push(el.outerHTML);
		for (const el of document.querySelectorAll("script")) {
			if (!el.src || !new URL(el.src).pathname.startsWith("/static/") || el.textContent.trim() !== "") bad.push(el.outerHTML);
		}
		for (const el of document.querySelectorAll("*")) {
			for (const a of el.attributes) {
				if (a.name.toLowerCase().startsWith("on")) bad.push(el.tagName + " " + a.name);
				if (["href", "src", "action", "formaction"].includes(a.name) && /^\s*javascript:/i.test(a.value)) bad.push(el.tagName + " " + a.name + "=" + a.value);
			}
		}
		return bad;
	}`)
	if err != nil {
		t.Errorf("%s: %v", where, err)
		return
	}
	if bad, ok := found.([]any); ok && len(bad) > 0 {
		t.Errorf("%s: injected markup: %v", where, bad)
	}
}
