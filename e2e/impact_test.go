package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/playwright-community/playwright-go"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/kueue"
	"github.com/openquota/console/internal/testenv"
)

// Before a change is applied, the admin sees what Kueue will do with it.
// A quota cut stops nothing (Kueue never preempts for a quota that falls),
// and the preview says the team now borrows. Switching the policy from
// first-come-first-served to class ranking lets a waiting task of a high
// class preempt a running one of a low class: the preview names it, and
// once applied Kueue preempts exactly that task.
func TestImpactPreviewNamesWhatKueueWillPreempt(t *testing.T) {
	env := sandboxEnv(t)
	c := testenv.SandboxClients(t, env)
	ctx := context.Background()
	id := rand.String(5)
	s := domain.Settings{NamespacePrefix: "e" + id + "-", Cohort: "e2e-" + id, StateNamespace: domain.DefaultStateNamespace}
	base := startConsole(t, env, "--namespace-prefix", s.NamespacePrefix, "--cohort", s.Cohort)
	a := kueue.Applier{Kube: c.Kube, Kueue: c.Kueue}

	low, high := "low-"+id, "high-"+id
	t.Cleanup(func() {
		for _, class := range []string{low, high} {
			_ = c.Kueue.KueueV1beta2().WorkloadPriorityClasses().Delete(context.Background(), class, metav1.DeleteOptions{})
		}
	})
	if err := a.ApplyPolicy(ctx, s, domain.Policy{Prioritization: domain.FirstComeFirstServe, IdleAllocation: domain.IdleFirstComeFirstServe,
		Classes: []domain.PriorityClass{{Name: high, Weight: 90}, {Name: low, Weight: 10}}}); err != nil {
		t.Fatal(err)
	}
	gpus := int64(8)
	objs, err := domain.BuildTeam(s, domain.Team{Name: "nlp", Enabled: true, FairShareWeight: 10, Preemption: domain.PreemptLowerPriority,
		Lending: domain.DontLend, Quota: []domain.QuotaInput{{InstanceType: "ml.p5.48xlarge", GPUs: &gpus}}}, domain.LookupShape)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.ApplyTeam(ctx, objs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.DeleteTeam(context.Background(), s, "nlp") })
	ns, lq := s.Namespace("nlp"), s.LocalQueue("nlp")
	batch := testenv.Submit(t, c.Kube, testenv.Job{Namespace: ns, LocalQueue: lq, Name: "batch-1", Class: low, GPUs: 8})
	batchWl := testenv.WorkloadOf(t, c.Kueue, batch, "was admitted", testenv.CondTrue(kueuev1beta2.WorkloadQuotaReserved))
	urgent := testenv.Submit(t, c.Kube, testenv.Job{Namespace: ns, LocalQueue: lq, Name: "urgent-1", Class: high, GPUs: 8})
	urgentWl := testenv.WorkloadOf(t, c.Kueue, urgent, "waited", func(w *kueuev1beta2.Workload) bool {
		return apimeta.IsStatusConditionFalse(w.Status.Conditions, kueuev1beta2.WorkloadQuotaReserved)
	})

	page := newPage(t)
	expect := playwright.NewPlaywrightAssertions()
	must := mustFor(t)

	// A quota cut: nothing is preempted, and the team borrows.
	_, err = page.Goto(base + "/teams/nlp/edit")
	must(err)
	must(page.Locator(`input[name="quota.0.gpus"]`).Fill("4"))
	must(page.Locator("#save").Click())
	must(expect.Locator(page.Locator("#impact-summary")).ToContainText("No task is preempted or admitted."))
	must(expect.Locator(page.Locator("#impact-teams")).ToContainText("8 → 4"))
	must(expect.Locator(page.Locator("#impact")).ToContainText("Team nlp will hold 8 GPUs against a quota of 4"))
	screenshot(t, page, "impact-quota-cut")
	must(page.Locator("#back").Click())
	must(expect.Locator(page.Locator(`input[name="quota.0.gpus"]`)).ToHaveValue("4"))

	// The policy switch: the running low-class task is named, with why.
	_, err = page.Goto(base + "/policy")
	must(err)
	must(page.Locator(`input[name="prioritization"][value="TaskRanking"]`).Check())
	must(page.Locator("#save-policy").Click())
	preempted := page.Locator("#impact-preempted")
	// Tasks are named by their Jobs, their Workloads on hover.
	must(expect.Locator(preempted).ToContainText("Job " + batch.Name))
	must(expect.Locator(preempted.Locator(`[title$="Workload ` + ns + "/" + batchWl.Name + `"]`)).ToHaveText("Job " + batch.Name))
	must(expect.Locator(preempted).ToContainText("A task of higher priority in its own team needs the GPUs for Job " + urgent.Name + " (Workload " + ns + "/" + urgentWl.Name + ")"))
	must(expect.Locator(page.Locator("#impact-admitted")).ToContainText("Job " + urgent.Name))
	must(expect.Locator(page.Locator("#impact-summary")).ToContainText("1 task preempted (8 GPUs"))
	screenshot(t, page, "impact-policy-switch")
	must(page.Locator("#apply").Click())
	must(expect.Page(page).ToHaveURL(base + "/policy?saved=1"))

	// Kueue does what the preview said.
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		b, err := c.Kueue.KueueV1beta2().Workloads(ns).Get(ctx, batchWl.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		u, err := c.Kueue.KueueV1beta2().Workloads(ns).Get(ctx, urgentWl.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return apimeta.IsStatusConditionTrue(b.Status.Conditions, kueuev1beta2.WorkloadPreempted) &&
			apimeta.IsStatusConditionTrue(u.Status.Conditions, kueuev1beta2.WorkloadQuotaReserved), nil
	})
	if err != nil {
		t.Fatalf("Kueue did not preempt %s for %s after the policy switch: %v", batchWl.Name, urgentWl.Name, err)
	}
	_, err = page.Goto(base + "/tasks?team=nlp&state=all")
	must(err)
	must(expect.Locator(page.Locator(`tr[data-task="`+ns+"/"+batchWl.Name+`"]`)).ToHaveAttribute("data-state", string(domain.TaskPreempted)))
	screenshot(t, page, "impact-applied")
}
