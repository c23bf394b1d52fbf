package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/playwright-community/playwright-go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/testenv"
)

// An admin takes over a ClusterQueue someone made with kubectl: imports it
// after reading what will be written, raises its GPU quota, moves it under
// a cohort made on the cohorts page, and releases it. What the form cannot
// express (a second resource group, a lending limit, its namespaces) stays.
func TestImportEditMoveAndReleaseAQueue(t *testing.T) {
	env := sandboxEnv(t)
	c := testenv.SandboxClients(t, env)
	ctx := context.Background()
	const gpuFlavor = "ml.g6.12xlarge"
	if _, err := c.Kueue.KueueV1beta2().ResourceFlavors().Apply(ctx, domain.FlavorFor(gpuFlavor),
		metav1.ApplyOptions{FieldManager: domain.FieldManager, Force: true}); err != nil {
		t.Fatal(err)
	}
	h := testenv.ApplyHandMade(t, c, gpuFlavor, "")
	h.Workload(t, h.Namespaces[0], "run-1", 2)
	before := h.WaitAdmitted(t, 1, 1)

	cohort := "e2e-" + rand.String(5)
	sub := cohort + "-research"
	t.Cleanup(func() { _ = c.Kueue.KueueV1beta2().Cohorts().Delete(context.Background(), sub, metav1.DeleteOptions{}) })
	base := startConsole(t, env, "--namespace-prefix", "e"+rand.String(5)+"-", "--cohort", cohort)
	page := newPage(t)
	expect := playwright.NewPlaywrightAssertions()
	must := mustFor(t)

	// A cohort under the console's own.
	_, err := page.Goto(base + "/cohorts")
	must(err)
	must(page.Locator("#suffix").Fill("research"))
	must(page.Locator("#save-cohort").Click())
	must(page.Locator("#apply").Click()) // after the impact preview
	must(expect.Locator(page.Locator(`tr[data-cohort="` + sub + `"]`)).ToHaveCount(1))

	// Import, after the preview.
	_, err = page.Goto(base + "/teams")
	must(err)
	row := page.Locator(`tr[data-queue="` + h.ClusterQueue + `"]`)
	must(expect.Locator(row.Locator(`[data-col="managed-by"]`)).ToContainText("kubectl-client-side-apply"))
	must(row.Locator(`a[data-action="import"]`).Click())
	must(expect.Locator(page.Locator("#import-writes-" + h.ClusterQueue)).ToContainText("app.kubernetes.io/managed-by"))
	must(expect.Locator(page.Locator("#import-kept-" + h.ClusterQueue)).ToContainText("2 resource groups"))
	must(expect.Locator(page.Locator("#import-members-" + h.ClusterQueue)).ToContainText(h.Group()))
	screenshot(t, page, "import-preview")
	must(page.Locator("#import").Click())
	must(expect.Page(page).ToHaveURL(base + "/teams"))
	must(expect.Locator(page.Locator("#flash")).ToContainText("Imported " + h.ClusterQueue + " (team " + h.ClusterQueue + ")"))

	// More GPUs, and another cohort.
	_, err = page.Goto(base + "/teams/" + h.ClusterQueue + "/edit")
	must(err)
	must(expect.Locator(page.Locator(`input[name="quota.0.gpus"]`)).ToHaveValue("4"))
	must(expect.Locator(page.Locator("#team-bindings")).ToContainText(h.Group()))
	must(page.Locator(`input[name="quota.0.gpus"]`).Fill("6"))
	_, err = page.Locator("#cohort").SelectOption(playwright.SelectOptionValues{Values: &[]string{sub}})
	must(err)
	must(page.Locator("#save").Click())
	must(expect.Locator(page.Locator("#impact-summary")).ToContainText("No task is preempted or admitted."))
	must(page.Locator("#apply").Click())
	must(expect.Page(page).ToHaveURL(base + "/teams?saved=" + h.ClusterQueue))
	cq, err := c.Kueue.KueueV1beta2().ClusterQueues().Get(ctx, h.ClusterQueue, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gpus := cq.Spec.ResourceGroups[0].Flavors[0].Resources[2]
	if string(cq.Spec.CohortName) != sub || gpus.NominalQuota.Value() != 6 || gpus.LendingLimit == nil ||
		len(cq.Spec.ResourceGroups) != 2 || cq.Spec.NamespaceSelector.MatchLabels["research-group"] != h.ID {
		t.Errorf("after the save: cohort %q, GPUs %s (lending limit %v), %d resource groups, selector %v",
			cq.Spec.CohortName, gpus.NominalQuota.String(), gpus.LendingLimit, len(cq.Spec.ResourceGroups), cq.Spec.NamespaceSelector)
	}
	_, err = page.Goto(base + "/cohorts")
	must(err)
	must(expect.Locator(page.Locator(`tr[data-tree-queue="` + h.ClusterQueue + `"]`)).ToHaveCount(1))
	must(expect.Locator(page.Locator("#cohort-tree")).ToHaveAttribute("data-unit", "GPUs"))
	// The tree in vCPU, its tab.
	must(page.Locator(`nav.tabs a`, playwright.PageLocatorOptions{HasText: "vCPU"}).Click())
	must(expect.Page(page).ToHaveURL(base + "/cohorts?resource=cpu"))
	must(expect.Locator(page.Locator("#cohort-tree")).ToHaveAttribute("data-unit", "vCPU"))
	must(expect.Locator(page.Locator(`tr[data-tree-queue="` + h.ClusterQueue + `"]`)).ToHaveCount(1))
	must(expect.Locator(page.Locator("#export-cohorts")).ToHaveAttribute("href", "/cohorts?format=csv"))
	screenshot(t, page, "cohorts")

	// Release.
	_, err = page.Goto(base + "/queues/" + h.ClusterQueue + "/release")
	must(err)
	must(page.Locator("#release").Click())
	must(expect.Page(page).ToHaveURL(base + "/teams"))
	must(expect.Locator(page.Locator(`tr[data-queue="` + h.ClusterQueue + `"] a[data-action="import"]`)).ToHaveCount(1))
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		cq, err := c.Kueue.KueueV1beta2().ClusterQueues().Get(ctx, h.ClusterQueue, metav1.GetOptions{})
		return err == nil && !domain.ManagedByConsole(cq), nil
	})
	if err != nil {
		t.Error("the released ClusterQueue still carries the console's label")
	}
	for task, admitted := range h.Admissions(t) {
		if admitted != before[task] {
			t.Errorf("Workload %s: %s, before %s", task, admitted, before[task])
		}
	}
}
