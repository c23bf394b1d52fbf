package e2e

import (
	"net/http"
	"testing"

	"github.com/playwright-community/playwright-go"
)

// Create a team, raise its GPUs, see the change on its history page, and roll
// back to the first revision with one click: the quota is back on /teams.
func TestRevisionsShowTheChangeAndRollBack(t *testing.T) {
	base := isolatedConsole(t)
	page := newPage(t)
	expect := playwright.NewPlaywrightAssertions()
	must := mustFor(t)
	gpus := func(team string) playwright.Locator {
		return page.Locator(`tr[data-team="` + team + `"] [data-col="gpus"]`)
	}

	// Create with 2 GPUs through the form.
	_, err := page.Goto(base + "/teams/new")
	must(err)
	must(page.Locator("#name").Fill("history-team"))
	row := page.Locator("#quota-rows .quota-row").First()
	_, err = row.Locator(`select[data-field="instanceType"]`).SelectOption(playwright.SelectOptionValues{Values: &[]string{"ml.p5.48xlarge"}})
	must(err)
	must(row.Locator(`input[data-field="gpus"]`).Fill("2"))
	must(page.Locator("#save").Click())
	must(page.Locator("#apply").Click()) // after the impact preview
	must(expect.Page(page).ToHaveURL(base + "/teams?saved=history-team"))
	must(expect.Locator(gpus("history-team")).ToHaveText("2"))
	// Whatever happens below, delete the team while the console still runs
	// (cleanups run last-registered first).
	t.Cleanup(func() {
		if _, err := page.Goto(base + "/teams/history-team/delete"); err == nil {
			_ = page.Locator("#confirm-delete").Click()
			_ = expect.Page(page).ToHaveURL(base + "/teams?deleted=history-team")
		}
	})

	// Edit: 4 GPUs.
	_, err = page.Goto(base + "/teams/history-team/edit")
	must(err)
	must(page.Locator(`input[name="quota.0.gpus"]`).Fill("4"))
	must(page.Locator("#save").Click())
	must(page.Locator("#apply").Click())
	must(expect.Page(page).ToHaveURL(base + "/teams?saved=history-team"))
	must(expect.Locator(gpus("history-team")).ToHaveText("4"))

	// The history: two revisions, the newest with the change in words.
	resp, err := page.Goto(base + "/teams/history-team/history")
	must(err)
	if resp.Status() == http.StatusNotFound {
		t.Fatalf("GET /teams/history-team/history: 404. The audit routes are registered by handlers.RegisterAudit, " +
			"which handlers.New (server.go) must call")
	}
	revisions := page.Locator("#revisions tbody tr")
	must(expect.Locator(revisions).ToHaveCount(2))
	newest := page.Locator(`tr[data-rev="2"]`)
	must(expect.Locator(newest.Locator(`[data-col="changes"]`)).ToContainText("quota ml.p5.48xlarge GPUs 2 → 4"))
	must(expect.Locator(newest.Locator(`[data-col="action"]`)).ToHaveText("update"))
	must(expect.Locator(newest.Locator(`[data-col="note"]`)).ToContainText("impact preview accepted: No task is preempted or admitted."))
	must(expect.Locator(page.Locator(`tr[data-rev="1"] [data-col="action"]`)).ToHaveText("create"))
	must(expect.Locator(newest.Locator("button.rollback")).ToHaveCount(0)) // the current revision
	screenshot(t, page, "history")

	// One click rolls back to revision 1, recorded as revision 3.
	must(page.Locator(`tr[data-rev="1"] button.rollback`).Click())
	must(expect.Page(page).ToHaveURL(base + "/teams/history-team/history?rolledback=1"))
	must(expect.Locator(page.Locator("#flash")).ToContainText("rolled back to revision 1"))
	must(expect.Locator(page.Locator(`tr[data-rev="3"] [data-col="action"]`)).ToHaveText("rollback to revision 1"))
	must(expect.Locator(page.Locator(`tr[data-rev="3"] [data-col="changes"]`)).ToContainText("quota ml.p5.48xlarge GPUs 4 → 2"))

	// The quota is back to the original value.
	_, err = page.Goto(base + "/teams")
	must(err)
	must(expect.Locator(gpus("history-team")).ToHaveText("2"))
}
