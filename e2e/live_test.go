package e2e

import (
	"context"
	"encoding/csv"
	"os"
	"regexp"
	"testing"

	"github.com/playwright-community/playwright-go"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/kueue"
	"github.com/openquota/console/internal/testenv"
)

// Jobs submitted to Kueue show up on the Team usage and Tasks pages without
// a reload, and the usage table downloads as CSV.
func TestDashboardsUpdateLiveAndExportCSV(t *testing.T) {
	env := sandboxEnv(t)
	c := testenv.SandboxClients(t, env)
	kube, kq := c.Kube, c.Kueue
	id := rand.String(5)
	s := domain.Settings{NamespacePrefix: "l" + id + "-", Cohort: "live-" + id}
	base := startConsole(t, env, "--namespace-prefix", s.NamespacePrefix, "--cohort", s.Cohort)
	ctx := context.Background()
	must := mustFor(t)
	team := domain.Team{Name: "live", Enabled: true, Lending: domain.LendAndBorrow, BorrowLimitPercent: 50,
		Preemption: domain.PreemptLowerPriority, Quota: []domain.QuotaInput{{InstanceType: "ml.p5.48xlarge", GPUs: ptr.To[int64](8)}}}
	objs, err := domain.BuildTeam(s, team, domain.LookupShape)
	must(err)
	a := kueue.Applier{Kube: kube, Kueue: kq}
	must(a.ApplyTeam(ctx, objs))
	t.Cleanup(func() { _ = a.DeleteTeam(context.Background(), s, "live") })

	page := newPage(t)
	expect := playwright.NewPlaywrightAssertions()
	_, err = page.Goto(base + "/usage")
	must(err)
	row := page.Locator(`#team-usage tr[data-team="live"]`)
	must(expect.Locator(row.Locator(`[data-col="in-use"]`)).ToHaveText("0"))
	// A marker that a reload would wipe out.
	_, err = page.Evaluate(`window.__noReload = true`)
	must(err)

	res := corev1.ResourceList{domain.ResourceGPU: resource.MustParse("2"), corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "live-job", Labels: map[string]string{"kueue.x-k8s.io/queue-name": s.LocalQueue("live")}},
		Spec: batchv1.JobSpec{Suspend: ptr.To(true), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "main", Image: "trainer", Resources: corev1.ResourceRequirements{Requests: res, Limits: res}}},
		}}},
	}
	_, err = kube.BatchV1().Jobs(s.Namespace("live")).Create(ctx, job, metav1.CreateOptions{})
	must(err)

	must(expect.Locator(row.Locator(`[data-col="in-use"]`)).ToHaveText("2"))
	must(expect.Locator(row.Locator(`[data-col="running"]`)).ToHaveText("1"))
	still, err := page.Evaluate(`window.__noReload === true`)
	must(err)
	if still != true {
		t.Fatal("the page reloaded instead of updating in place")
	}
	screenshot(t, page, "usage")

	// The usage table as CSV.
	download, err := page.ExpectDownload(func() error { return page.Locator("#export-csv").Click() })
	must(err)
	path, err := download.Path()
	must(err)
	f, err := os.Open(path)
	must(err)
	defer f.Close()
	records, err := csv.NewReader(f).ReadAll()
	must(err)
	found := false
	for _, r := range records[1:] {
		if r[0] == "live" {
			found = true
			if r[4] != "2" {
				t.Errorf("CSV in-use GPUs for live = %q, want 2 (row %v)", r[4], r)
			}
		}
	}
	if records[0][3] != "Allocated (GPUs)" || !found {
		t.Errorf("CSV header %v, team row found: %v", records[0], found)
	}

	// The task is on the Tasks page, with its state and reason; a second job
	// appears there without a reload too.
	_, err = page.Goto(base + "/tasks?team=live")
	must(err)
	running := page.Locator(`#task-list tr[data-state="Running"]`)
	must(expect.Locator(running).ToHaveCount(1))
	must(expect.Locator(running.Locator(".why")).ToContainText("Admitted"))
	// Named by its Job, its Workload's name on hover.
	must(expect.Locator(running.Locator("th .task-name")).ToHaveText("Job " + job.Name))
	must(expect.Locator(running.Locator("th .task-name")).ToHaveAttribute("title", regexp.MustCompile(`^Job `+job.Name+` — Workload `+s.Namespace("live")+`/`)))
	must(expect.Locator(page.Locator(`#class-stats`)).ToBeVisible())
	_, err = page.Evaluate(`window.__noReload = true`)
	must(err)
	second := job.DeepCopy()
	second.ResourceVersion = ""
	second.Name = "live-job-2"
	_, err = kube.BatchV1().Jobs(s.Namespace("live")).Create(ctx, second, metav1.CreateOptions{})
	must(err)
	must(expect.Locator(running).ToHaveCount(2))
	still, err = page.Evaluate(`window.__noReload === true`)
	must(err)
	if still != true {
		t.Fatal("the Tasks page reloaded instead of updating in place")
	}
	screenshot(t, page, "tasks")
}
