package e2e

import (
	"testing"

	"github.com/playwright-community/playwright-go"
)

// A team with a quota of MIG partitions, typed in the browser: a profile the
// instance type's nodes do not offer is refused next to the field with the
// values kept; an offered one shows its vCPU and memory share as it is
// typed, is saved, and comes back in the edit form.
func TestTeamFormMIGPartitions(t *testing.T) {
	base := isolatedConsole(t)
	page := newPage(t)
	expect := playwright.NewPlaywrightAssertions()
	must := mustFor(t)

	_, err := page.Goto(base + "/teams/new")
	must(err)
	must(page.Locator("#name").Fill("notebooks"))
	row := page.Locator("#quota-rows .quota-row").First()
	_, err = row.Locator(`select[data-field="instanceType"]`).SelectOption(playwright.SelectOptionValues{Values: &[]string{"ml.p4de.24xlarge"}})
	must(err)
	must(row.Locator(`input[data-field="partition"]`).Fill("mig-2g.20gb"))
	must(row.Locator(`input[data-field="partitions"]`).Fill("7"))
	must(page.Locator("#save").Click())
	must(expect.Locator(page.Locator(`[data-error-for="quota.0.partition"]`)).ToContainText("offer mig-1g.10gb, mig-3g.40gb, not mig-2g.20gb"))
	must(expect.Locator(page.Locator(`input[name="quota.0.partitions"]`)).ToHaveValue("7"))

	// An offered profile: seven 1g.10gb partitions are one A100's share.
	row = page.Locator("#quota-rows .quota-row").First()
	must(row.Locator(`input[data-field="partition"]`).Fill("mig-1g.10gb"))
	must(row.Locator(`input[data-field="partitions"]`).Fill("7"))
	must(expect.Locator(row.Locator(`[data-field="derived"]`)).ToContainText("7 × mig-1g.10gb (1 GPU-equivalent) · 12 vCPU · 144 GiB"))
	must(page.Locator("#save").Click())
	must(page.Locator("#apply").Click())
	must(expect.Page(page).ToHaveURL(base + "/teams?saved=notebooks"))

	_, err = page.Goto(base + "/teams/notebooks/edit")
	must(err)
	must(expect.Locator(page.Locator(`input[name="quota.0.partition"]`)).ToHaveValue("mig-1g.10gb"))
	must(expect.Locator(page.Locator(`input[name="quota.0.partitions"]`)).ToHaveValue("7"))
}
