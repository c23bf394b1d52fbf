package e2e

import (
	"testing"

	"github.com/playwright-community/playwright-go"
	"k8s.io/apimachinery/pkg/util/rand"
)

// isolatedConsole starts a console whose teams live under their own namespace
// prefix and cohort, so the test never meets other tests' teams.
func isolatedConsole(t *testing.T) string {
	id := rand.String(5)
	return startConsole(t, sandboxEnv(t), "--namespace-prefix", "e"+id+"-", "--cohort", "e2e-"+id)
}

func TestCreateTeamShowsDerivedQuotaAndLists(t *testing.T) {
	base := isolatedConsole(t)
	page := newPage(t)
	expect := playwright.NewPlaywrightAssertions()
	must := mustFor(t)

	_, err := page.Goto(base + "/teams/new")
	must(err)
	must(page.Locator("#name").Fill("llm-team"))
	must(expect.Locator(page.Locator("#namespace-preview")).ToContainText("-llm-team"))
	row := page.Locator("#quota-rows .quota-row").First()
	_, err = row.Locator(`select[data-field="instanceType"]`).SelectOption(playwright.SelectOptionValues{Values: &[]string{"ml.p5.48xlarge"}})
	must(err)
	must(row.Locator(`input[data-field="gpus"]`).Fill("2"))
	// The derived vCPU and memory appear as the admin types.
	must(expect.Locator(row.Locator(`[data-field="derived"]`)).ToContainText("48 vCPU"))
	must(expect.Locator(row.Locator(`[data-field="derived"]`)).ToContainText("512 GiB"))
	must(expect.Locator(row.Locator(`input[data-field="vcpu"]`)).ToHaveAttribute("placeholder", "48"))
	must(expect.Locator(row.Locator(`input[data-field="memoryGiB"]`)).ToHaveAttribute("placeholder", "512"))
	// Each sharing strategy says what it does, as it is chosen.
	must(expect.Locator(page.Locator("#lending-meaning")).ToContainText("Lend and borrow: other teams of the cohort may use"))
	_, err = page.Locator("#lending").SelectOption(playwright.SelectOptionValues{Values: &[]string{"DontLend"}})
	must(err)
	must(expect.Locator(page.Locator("#lending-meaning")).ToContainText("Don't lend: this team's quota is for its own tasks only"))
	must(expect.Locator(page.Locator("#borrow-limit-field")).ToBeHidden())
	_, err = page.Locator("#lending").SelectOption(playwright.SelectOptionValues{Values: &[]string{"LendAndBorrow"}})
	must(err)
	must(expect.Locator(page.Locator("#weight-meaning")).ToContainText("0: the team gets idle compute only when no other team needs it"))
	screenshot(t, page, "team-form")

	must(page.Locator("#save").Click())
	must(expect.Locator(page.Locator("#impact-summary")).ToContainText("No task is preempted or admitted."))
	must(page.Locator("#apply").Click())
	must(expect.Page(page).ToHaveURL(base + "/teams?saved=llm-team"))
	teamRow := page.Locator(`tr[data-team="llm-team"]`)
	must(expect.Locator(teamRow.Locator(`[data-col="gpus"]`)).ToHaveText("2"))
	must(expect.Locator(teamRow.Locator(`[data-col="vcpu"]`)).ToHaveText("48"))
	must(expect.Locator(teamRow.Locator(`[data-col="memory-gib"]`)).ToHaveText("512"))
	screenshot(t, page, "teams")

	// The edit form shows back what was typed.
	_, err = page.Goto(base + "/teams/llm-team/edit")
	must(err)
	must(expect.Locator(page.Locator(`input[name="quota.0.gpus"]`)).ToHaveValue("2"))
	must(expect.Locator(page.Locator(`input[name="quota.0.vcpu"]`)).ToHaveValue(""))

	// Delete, after the confirmation page.
	_, err = page.Goto(base + "/teams/llm-team/delete")
	must(err)
	must(page.Locator("#confirm-delete").Click())
	must(expect.Page(page).ToHaveURL(base + "/teams?deleted=llm-team"))
	must(expect.Locator(page.Locator(`tr[data-team="llm-team"]`)).ToHaveCount(0))
}

func TestCreateTeamWithBadValuesShowsFieldErrors(t *testing.T) {
	base := isolatedConsole(t)
	page := newPage(t)
	expect := playwright.NewPlaywrightAssertions()
	must := mustFor(t)
	_, err := page.Goto(base + "/teams/new")
	must(err)
	must(page.Locator("#name").Fill("Bad_Name"))
	must(page.Locator("#fairShareWeight").Fill("250"))
	row := page.Locator("#quota-rows .quota-row").First()
	_, err = row.Locator(`select[data-field="instanceType"]`).SelectOption(playwright.SelectOptionValues{Values: &[]string{"ml.c5.2xlarge"}})
	must(err)
	must(row.Locator(`input[data-field="gpus"]`).Fill("4"))
	must(page.Locator("#groups").Fill("ml\nsystem:unauthenticated"))
	must(page.Locator("#save").Click())

	must(expect.Locator(page.Locator("#form-errors")).ToBeVisible())
	must(expect.Locator(page.Locator(`[data-error-for="name"]`)).ToContainText("lowercase"))
	must(expect.Locator(page.Locator(`[data-error-for="groups"]`)).ToContainText(`"system:unauthenticated" is one of Kubernetes' own names`))
	must(expect.Locator(page.Locator(`[data-error-for="fairShareWeight"]`)).ToContainText("0 to 100"))
	must(expect.Locator(page.Locator(`[data-error-for="quota.0.gpus"]`)).ToContainText("has no GPUs"))
	// Values are kept as typed.
	must(expect.Locator(page.Locator("#name")).ToHaveValue("Bad_Name"))
	must(expect.Locator(page.Locator(`input[name="quota.0.gpus"]`)).ToHaveValue("4"))
	screenshot(t, page, "team-form-errors")

	// Nothing was written.
	_, err = page.Goto(base + "/teams")
	must(err)
	must(expect.Locator(page.Locator(`tr[data-team]`)).ToHaveCount(0))
}
