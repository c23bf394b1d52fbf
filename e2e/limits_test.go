package e2e

import (
	"testing"

	"github.com/playwright-community/playwright-go"
)

// A quota row's absolute limits, typed in the browser: a lend limit above
// the row's quota is refused next to its field with the values kept; within
// it, the team is saved and the teams table states both limits.
func TestTeamFormAbsoluteLimits(t *testing.T) {
	base := isolatedConsole(t)
	page := newPage(t)
	expect := playwright.NewPlaywrightAssertions()
	must := mustFor(t)

	_, err := page.Goto(base + "/teams/new")
	must(err)
	must(page.Locator("#name").Fill("lender"))
	row := page.Locator("#quota-rows .quota-row").First()
	_, err = row.Locator(`select[data-field="instanceType"]`).SelectOption(playwright.SelectOptionValues{Values: &[]string{"ml.p5.48xlarge"}})
	must(err)
	must(row.Locator(`input[data-field="gpus"]`).Fill("4"))
	must(row.Locator("details.lend-limits summary").Click())
	must(row.Locator(`input[data-field="lendGPUs"]`).Fill("6"))
	must(page.Locator("#save").Click())

	must(expect.Locator(page.Locator(`[data-error-for="quota.0.lendGPUs"]`)).ToContainText("Lend at most the team's quota"))
	must(expect.Locator(page.Locator(`input[name="quota.0.lendGPUs"]`)).ToHaveValue("6"))
	must(expect.Locator(page.Locator(`input[name="quota.0.gpus"]`)).ToHaveValue("4"))

	// Within the quota, with a borrow limit too: saved, and stated.
	must(page.Locator(`input[name="quota.0.lendGPUs"]`).Fill("2"))
	must(page.Locator("#quota-rows .quota-row").First().Locator("details.borrow-limits summary").Click())
	must(page.Locator(`input[name="quota.0.borrowGPUs"]`).Fill("3"))
	must(page.Locator("#save").Click())
	must(page.Locator("#apply").Click())
	must(expect.Page(page).ToHaveURL(base + "/teams?saved=lender"))
	lending := page.Locator(`tr[data-team="lender"] td`).Filter(playwright.LocatorFilterOptions{HasText: "lends at most"})
	must(expect.Locator(lending).ToContainText("ml.p5.48xlarge: 2 GPUs"))

	// The edit form shows both back, their sections open.
	_, err = page.Goto(base + "/teams/lender/edit")
	must(err)
	must(expect.Locator(page.Locator(`input[name="quota.0.lendGPUs"]`)).ToBeVisible())
	must(expect.Locator(page.Locator(`input[name="quota.0.lendGPUs"]`)).ToHaveValue("2"))
	must(expect.Locator(page.Locator(`input[name="quota.0.borrowGPUs"]`)).ToHaveValue("3"))
}
