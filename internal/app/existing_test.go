package app_test

import (
	"context"
	stdhtml "html"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/html"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/taskhistory"
	"github.com/openquota/console/internal/testenv"
	"github.com/openquota/console/internal/webtest"
)

// A cluster that already runs Kueue: a ClusterQueue made with kubectl,
// serving two ordinary namespaces, shows with its tasks as a team of its
// own; importing it writes exactly what its preview showed, changes no
// Workload's admission and leaves its spec alone; releasing gives it back.
func TestExistingQueueShowsImportsAndReleases(t *testing.T) {
	c := newConsole(t)
	ctx := context.Background()
	// The GPUs are on the instance type's flavor, as on a HyperPod cluster
	// (the console's own, applied as the console applies it).
	applyGPUFlavor(t, c)
	h := testenv.ApplyHandMade(t, testenv.Clients{Kube: c.kube, Kueue: c.kueue}, gpuFlavor, "")
	h.Workload(t, h.Namespaces[0], "run-1", 2)
	h.Workload(t, h.Namespaces[1], "run-2", 2)
	h.Workload(t, h.Namespaces[0], "wait-1", 4)
	team := h.ClusterQueue
	before := h.WaitAdmitted(t, 2, 3)
	var err error

	// Every task is the queue's team's, in its own namespace.
	var tasks map[string]map[string]string
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		tasks = c.csv(t, "/tasks?format=csv&table=tasks&state=all&team="+team)
		return len(tasks) == 3, nil
	})
	if err != nil {
		t.Fatalf("the tasks page never listed the queue's 3 tasks under team %s: %v", team, tasks)
	}
	for key, r := range tasks {
		if r["Team"] != team || !slices.Contains(h.Namespaces, r["Namespace"]) {
			t.Errorf("task %s: team %q namespace %q, want team %s in one of %v", key, r["Team"], r["Namespace"], team, h.Namespaces)
		}
	}
	var row map[string]string
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		row = c.csv(t, "/usage?format=csv&resource=gpu")[team+"/"+strings.Join(h.Namespaces, ", ")]
		return row != nil && row["In use by tasks (GPUs)"] == "4", nil
	})
	if err != nil || row["Allocated (GPUs)"] != "4" || row["Running tasks (count)"] != "2" || row["Pending tasks, preempted included (count)"] != "1" {
		t.Errorf("usage row of team %s serving %v: %v", team, h.Namespaces, row)
	}

	// The teams page lists it with who made it.
	if body := c.eventually(t, "/teams", `data-queue="`+h.ClusterQueue+`"`); !strings.Contains(body, "kubectl-client-side-apply") {
		t.Errorf("the teams page does not say kubectl manages %s", h.ClusterQueue)
	}

	// The preview, then the import.
	code, preview := c.get(t, "/queues/"+h.ClusterQueue+"/import")
	if code != 200 {
		t.Fatalf("import preview: %d\n%.400s", code, preview)
	}
	previewed := writtenRows(t, preview, h.ClusterQueue)
	fp := regexp.MustCompile(`name="fingerprint" value="([^"]+)"`).FindStringSubmatch(preview)
	if fp == nil {
		t.Fatalf("the preview has no import form:\n%.600s", preview)
	}
	old, err := c.kueue.KueueV1beta2().ClusterQueues().Get(ctx, h.ClusterQueue, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if code, _, body := c.post(t, "/queues/import", url.Values{"queue": {h.ClusterQueue}, "fingerprint": {fp[1]}}); code != 303 {
		t.Fatalf("import: %d\n%.400s", code, body)
	}
	now, err := c.kueue.KueueV1beta2().ClusterQueues().Get(ctx, h.ClusterQueue, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if now.Generation != old.Generation || !cmp.Equal(now.Spec, old.Spec) {
		t.Errorf("importing changed the ClusterQueue's spec (generation %d → %d):\n%s", old.Generation, now.Generation, cmp.Diff(old.Spec, now.Spec))
	}
	written := labelWrites(old.Labels, now.Labels, "ClusterQueue "+h.ClusterQueue)
	revisions := "ConfigMap " + c.settings.State() + "/" + domain.TeamRevisionsName(c.settings, team)
	if _, err := c.kube.CoreV1().ConfigMaps(c.settings.State()).Get(ctx, domain.TeamRevisionsName(c.settings, team), metav1.GetOptions{}); err == nil {
		written = append(written, revisions+" revision 1")
	}
	slices.Sort(written)
	if diff := cmp.Diff(previewed, written); diff != "" {
		t.Errorf("what importing wrote is not what the preview showed (-preview +written):\n%s", diff)
	}
	time.Sleep(2 * time.Second) // time for Kueue to react, if it would
	if diff := cmp.Diff(before, h.Admissions(t)); diff != "" {
		t.Errorf("importing changed Workloads' admissions (-before +after):\n%s", diff)
	}
	teams := c.eventually(t, "/teams", `data-action="release"`)
	if row := webtest.HTMLRows(t, teams, "teams", webtest.ByAttr("data-team"))[team]; len(row) < 2 || row[1] != strings.Join(h.Namespaces, ", ") {
		t.Errorf("the imported team's row on /teams: %v, want its namespaces %v", row, h.Namespaces)
	}

	// The imported team's form, saved with more GPUs: the quota changes,
	// everything the form cannot express stays.
	code, edit := c.get(t, "/teams/"+team+"/edit")
	if code != 200 {
		t.Fatalf("edit form of imported team %s: %d\n%.400s", team, code, edit)
	}
	form := webtest.FormValues(t, edit, "team-form")
	if form.Get("quota.0.instanceType") != gpuFlavor || form.Get("quota.0.gpus") != "4" {
		t.Fatalf("the edit form does not show the queue's quota (4 GPUs of %s): %v", gpuFlavor, form)
	}
	form.Set("quota.0.gpus", "6")
	if code, _, body := c.post(t, "/teams/"+team, form); code != 303 {
		t.Fatalf("saving imported team %s: %d\n%.600s", team, code, body)
	}
	saved, err := c.kueue.KueueV1beta2().ClusterQueues().Get(ctx, h.ClusterQueue, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantSpec := old.Spec.DeepCopy()
	for i, r := range wantSpec.ResourceGroups[0].Flavors[0].Resources {
		if r.Name == domain.ResourceGPU {
			wantSpec.ResourceGroups[0].Flavors[0].Resources[i].NominalQuota = resource.MustParse("6")
		}
	}
	gotSpec := saved.Spec.DeepCopy()
	for i, r := range gotSpec.ResourceGroups[0].Flavors[0].Resources {
		if r.Name != domain.ResourceGPU { // vCPU and memory follow the GPUs in proportion
			wantSpec.ResourceGroups[0].Flavors[0].Resources[i].NominalQuota = r.NominalQuota
		}
	}
	if diff := cmp.Diff(wantSpec, gotSpec, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
		t.Errorf("saving the imported team changed more than its GPU quota (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before, h.Admissions(t)); diff != "" {
		t.Errorf("raising the quota changed Workloads' admissions (-before +after):\n%s", diff)
	}

	// Its drift: none as saved; a GPU quota changed by hand in Kueue shows,
	// and re-applying sets it back.
	c.eventually(t, "/teams/"+team+"/drift", `id="no-drift"`)
	handEdited := saved.DeepCopy()
	for i, r := range handEdited.Spec.ResourceGroups[0].Flavors[0].Resources {
		if r.Name == domain.ResourceGPU {
			handEdited.Spec.ResourceGroups[0].Flavors[0].Resources[i].NominalQuota = resource.MustParse("5")
		}
	}
	if _, err := c.kueue.KueueV1beta2().ClusterQueues().Update(ctx, handEdited, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	drift := c.eventually(t, "/teams/"+team+"/drift", `id="drift"`)
	webtest.MustContain(t, "the drift of the hand-edited queue", drift, "the allocation it reads as")
	if code, _, body := c.post(t, "/teams/"+team+"/drift/reapply", nil); code != 303 {
		t.Fatalf("re-applying imported team %s: %d\n%.600s", team, code, body)
	}
	c.eventually(t, "/teams/"+team+"/drift", `id="no-drift"`)
	saved, err = c.kueue.KueueV1beta2().ClusterQueues().Get(ctx, h.ClusterQueue, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(*wantSpec, saved.Spec, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
		t.Errorf("re-applying did not set the queue back as saved (-want +got):\n%s", diff)
	}

	if code, _, body := c.post(t, "/teams/"+team+"/delete", nil); code == 303 || !strings.Contains(body, "Release it instead") {
		t.Errorf("deleting an imported team: %d\n%.400s", code, body)
	}

	// Release: the labels and revisions go, Kueue's objects stay.
	if code, _, body := c.post(t, "/queues/"+h.ClusterQueue+"/release", nil); code != 303 {
		t.Fatalf("release: %d\n%.400s", code, body)
	}
	released, err := c.kueue.KueueV1beta2().ClusterQueues().Get(ctx, h.ClusterQueue, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(old.Labels, released.Labels); diff != "" {
		t.Errorf("release left labels other than they were (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(old.Annotations, released.Annotations); diff != "" {
		t.Errorf("release left the console's annotations (-before +after):\n%s", diff)
	}
	if released.Generation != saved.Generation {
		t.Errorf("release changed the ClusterQueue's spec (generation %d → %d)", saved.Generation, released.Generation)
	}
	if _, err := c.kube.CoreV1().ConfigMaps(c.settings.State()).Get(ctx, domain.TeamRevisionsName(c.settings, team), metav1.GetOptions{}); err == nil {
		t.Error("release kept the team's revisions")
	}
	if diff := cmp.Diff(before, h.Admissions(t)); diff != "" {
		t.Errorf("releasing changed Workloads' admissions (-before +after):\n%s", diff)
	}
}

// gpuFlavor is the instance type of the hand-made queue's GPUs.
const gpuFlavor = "ml.g6.12xlarge"

// writtenRows are the preview's rows of what is written: "object field".
func writtenRows(t *testing.T, body, queue string) []string {
	t.Helper()
	rows := webtest.HTMLRows(t, body, "import-writes-"+queue, func(n *html.Node) string {
		if webtest.FindNode(n, func(c *html.Node) bool { return c.Data == "td" }) == nil {
			return ""
		}
		return webtest.NodeText(n)
	})
	var out []string
	for _, cells := range rows {
		out = append(out, cells[0]+" "+cells[1])
	}
	slices.Sort(out)
	return out
}

// labelWrites are the labels that differ between before and after, as
// preview rows name them.
func labelWrites(before, after map[string]string, object string) []string {
	var out []string
	for k, v := range after {
		if old, ok := before[k]; !ok || old != v {
			out = append(out, object+" metadata.labels["+k+"]")
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			out = append(out, object+" metadata.labels["+k+"]")
		}
	}
	return out
}

// Cohorts under the console's own: created from the cohorts page with a
// parent and a quota of their own, a team put in one from its form, a
// cycle refused with a sentence, a cohort with a team in it kept.
func TestCohortsUnderTheConsolesOwn(t *testing.T) {
	c := newConsole(t)
	ctx := context.Background()
	id := rand.String(5)
	outer, inner := c.settings.Cohort+"-org-"+id, c.settings.Cohort+"-research-"+id
	t.Cleanup(func() {
		_ = c.kueue.KueueV1beta2().Cohorts().Delete(context.Background(), inner, metav1.DeleteOptions{})
		_ = c.kueue.KueueV1beta2().Cohorts().Delete(context.Background(), outer, metav1.DeleteOptions{})
	})
	save := func(suffix, parent, gpus string) (int, string) {
		form := url.Values{"suffix": {suffix}, "parent": {parent}}
		if gpus != "" {
			form.Set("instanceType", "ml.p5.48xlarge")
			form.Set("gpus", gpus)
		}
		code, _, body := c.post(t, "/cohorts", form)
		return code, body
	}
	if code, body := save("org-"+id, c.settings.Cohort, "8"); code != 303 {
		t.Fatalf("creating cohort %s: %d\n%.400s", outer, code, body)
	}
	c.eventually(t, "/cohorts", `data-cohort="`+outer+`"`)
	if code, body := save("research-"+id, outer, ""); code != 303 {
		t.Fatalf("creating cohort %s: %d\n%.400s", inner, code, body)
	}
	co, err := c.kueue.KueueV1beta2().Cohorts().Get(ctx, outer, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if string(co.Spec.ParentName) != c.settings.Cohort || len(co.Spec.ResourceGroups) != 1 {
		t.Errorf("cohort %s: parent %q, %d resource groups", outer, co.Spec.ParentName, len(co.Spec.ResourceGroups))
	}
	c.eventually(t, "/cohorts", `data-cohort="`+inner+`" data-parent="`+outer+`"`)

	// The outer cohort under the inner one would be a cycle.
	if code, body := save("org-"+id, inner, "8"); code != 422 || !strings.Contains(body, "is already under") {
		t.Errorf("a cycle: %d\n%.600s", code, body)
	}

	// A team in the inner cohort.
	team := "in-cohort-" + id
	form := webtest.TeamForm(team, "2")
	form.Set("cohort", inner)
	if code, _, body := c.post(t, "/teams", form); code != 303 {
		t.Fatalf("creating team %s in %s: %d\n%.400s", team, inner, code, body)
	}
	t.Cleanup(func() { c.post(t, "/teams/"+team+"/delete", url.Values{}) })
	if got := c.clusterQueue(t, team).Spec.CohortName; string(got) != inner {
		t.Errorf("team %s's ClusterQueue is in cohort %q, want %s", team, got, inner)
	}
	if code, _, body := c.post(t, "/cohorts/"+inner+"/delete", url.Values{}); code == 303 || !strings.Contains(body, "is not empty") {
		t.Errorf("deleting a cohort with a team in it: %d\n%.400s", code, body)
	}
	// A cohort the console did not create is refused as a team's cohort.
	form.Set("cohort", "someone-elses")
	if code, _, body := c.post(t, "/teams/"+team, form); code != 422 || !strings.Contains(body, `id="err-cohort"`) {
		t.Errorf("a team in a cohort the console did not create: %d\n%.400s", code, body)
	}
}

// A cluster set up by hand, as platform teams do before they install the
// console: two levels of cohorts with a quota of their own, a queue serving
// two namespaces by a label with a lending limit and two resource groups,
// a queue a GitOps tool applies, running and pending Workloads in both.
// Every queue shows with Kueue's figures, and importing each one changes
// no Workload's admission.
func TestEveryHandWrittenQueueShowsAndImportsWithoutEviction(t *testing.T) {
	c := newConsole(t)
	ctx := context.Background()
	clients := applyGPUFlavor(t, c)
	id := rand.String(5)
	root, child := "root-"+id, "child-"+id
	testenv.ApplyCohort(t, clients, root, "", gpuFlavor, 4)
	testenv.ApplyCohort(t, clients, child, root, "", 0)
	h := testenv.ApplyHandMade(t, clients, gpuFlavor, child)
	g := testenv.ApplyGitOpsQueue(t, clients, gpuFlavor, root, 4)
	h.Workload(t, h.Namespaces[0], "run-a", 2)
	h.Workload(t, h.Namespaces[1], "run-b", 2)
	h.Workload(t, h.Namespaces[0], "wait", 16)
	g.Workload(t, g.Namespaces[0], "run", 2)
	g.Workload(t, g.Namespaces[0], "wait", 16)
	before := map[string]string{}
	maps.Copy(before, h.WaitAdmitted(t, 2, 3))
	maps.Copy(before, g.WaitAdmitted(t, 1, 2))

	// Every queue's row says what Kueue says.
	for _, q := range []testenv.HandMade{h, g} {
		var row map[string]string
		var kueueInUse int64
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			cq, err := c.kueue.KueueV1beta2().ClusterQueues().Get(ctx, q.ClusterQueue, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			kueueInUse = 0
			for _, f := range cq.Status.FlavorsUsage {
				for _, r := range f.Resources {
					if r.Name == domain.ResourceGPU {
						kueueInUse += r.Total.Value()
					}
				}
			}
			row = c.csv(t, "/usage?format=csv&resource=gpu")[q.ClusterQueue+"/"+strings.Join(q.Namespaces, ", ")]
			return row != nil && kueueInUse > 0 && row["In use by tasks (GPUs)"] == strconv.FormatInt(kueueInUse, 10) &&
				row["Pending tasks, preempted included (count)"] == "1", nil
		})
		if err != nil {
			t.Errorf("queue %s: row %v, Kueue's GPUs in use %d", q.ClusterQueue, row, kueueInUse)
		}
	}
	teams := c.eventually(t, "/teams", `data-queue="`+g.ClusterQueue+`"`)
	if !strings.Contains(teams, "argocd-controller") || !strings.Contains(teams, ">GitOps<") {
		t.Errorf("the teams page does not flag %s as kept by argocd-controller", g.ClusterQueue)
	}
	overview := c.eventually(t, "/", `data-cohort="`+child+`" data-parent="`+root+`"`)
	rows := webtest.HTMLRows(t, overview, "cohort-tree", webtest.ByAttr("data-cohort"))
	if got := rows[root]; len(got) < 3 || got[1] != "4" || got[2] != "12" {
		t.Errorf("cohort %s: own quota and quota under it %v, want 4 and 12", root, got)
	}

	// Both imported together, after one preview of both; nothing Kueue
	// decided changes.
	code, preview := c.get(t, "/queues/import?queue="+h.ClusterQueue+"&queue="+g.ClusterQueue)
	if code != 200 {
		t.Fatalf("import preview of %s and %s: %d", h.ClusterQueue, g.ClusterQueue, code)
	}
	if !strings.Contains(preview, `id="import-reconciler-`+g.ClusterQueue+`"`) {
		t.Errorf("the preview of %s does not warn that argocd-controller will undo the console's changes", g.ClusterQueue)
	}
	form := url.Values{}
	for _, m := range regexp.MustCompile(`name="(queue|fingerprint)" value="([^"]+)"`).FindAllStringSubmatch(preview, -1) {
		form.Add(m[1], m[2])
	}
	if len(form["queue"]) != 2 {
		t.Fatalf("the preview's form imports %v, want both queues", form["queue"])
	}
	if code, _, body := c.post(t, "/queues/import", form); code != 303 {
		t.Fatalf("importing both: %d\n%.400s", code, body)
	}
	time.Sleep(2 * time.Second) // time for Kueue to react, if it would
	after := map[string]string{}
	maps.Copy(after, h.Admissions(t))
	maps.Copy(after, g.Admissions(t))
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("importing changed Workloads' admissions (-before +after):\n%s", diff)
	}
}

// The GPUs of a queue the console did not create are read by the
// namespaces that feed it, not by a team namespace's name: a job pinned at
// 37 % in one of a hand-made queue's namespaces shows as that queue's
// hardware utilization on /usage, its CSV and its page, and its page charts
// the queue's own GPUs.
func TestHardwareUtilizationOfAQueueTheConsoleDidNotCreate(t *testing.T) {
	waitsOnTheCluster(t)
	c := newConsoleOnPrometheus(t)
	ctx := context.Background()
	clients := applyGPUFlavor(t, c)
	h := testenv.ApplyHandMade(t, clients, gpuFlavor, "")
	job := testenv.Submit(t, c.kube, testenv.Job{Namespace: h.Namespaces[1], LocalQueue: "user-queue", Name: "notebook",
		GPUs: 2, InstanceType: gpuFlavor, GPUUtil: "37"})
	testenv.WorkloadOf(t, c.kueue, job, "admitted", testenv.CondTrue(kueuev1beta2.WorkloadAdmitted))

	key := h.ClusterQueue + "/" + strings.Join(h.Namespaces, ", ")
	var row map[string]string
	var hardware []string
	err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(context.Context) (bool, error) {
		row = c.csv(t, "/usage?format=csv&resource=gpu")[key]
		_, page := c.get(t, "/usage/"+h.ClusterQueue)
		hardware = regexp.MustCompile(`data-col="hw-util">([^<]*)<`).FindStringSubmatch(page)
		return row["Hardware GPU utilization (%)"] == "37" && len(hardware) == 2 && hardware[1] == "37 %", nil
	})
	if err != nil {
		t.Fatalf("queue %s: usage row %v; its page's hardware utilization %q, want 37", h.ClusterQueue, row, hardware)
	}
	// The page's charts are of the queue's GPUs: its quota of 4, 2 in use,
	// and the utilization of its namespaces' GPUs.
	err = wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(context.Context) (bool, error) {
		_, page := c.get(t, "/usage/"+h.ClusterQueue+"?range=1h")
		charts := regexp.MustCompile(`id="(usage-vs-quota|borrowed|utilization)"[^>]*>.*?</figure>`).FindAllStringSubmatch(page, -1)
		drawn := 0
		for _, ch := range charts {
			if !strings.Contains(ch[0], "No data in this range") && !strings.Contains(ch[0], "chart-state") {
				drawn++
			}
		}
		return drawn == 3, nil
	})
	if err != nil {
		t.Errorf("queue %s: its page's charts stayed empty", h.ClusterQueue)
	}
}

// Plain pods grouped as Kueue's pod-group example groups them are one
// task, named by its group, not by the first pod Kueue lists as its owner.
func TestAPodGroupIsOneTaskNamedByItsGroup(t *testing.T) {
	c := newConsole(t)
	ctx := context.Background()
	clients := applyGPUFlavor(t, c)
	h := testenv.ApplyHandMade(t, clients, gpuFlavor, "")
	for _, role := range []string{"leader", "worker"} {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "sample-" + role, Namespace: h.Namespaces[0],
				Labels:      map[string]string{"kueue.x-k8s.io/queue-name": "user-queue", "kueue.x-k8s.io/pod-group-name": "sample-group"},
				Annotations: map[string]string{"kueue.x-k8s.io/pod-group-total-count": "2"}},
			Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "sleep", Image: "busybox",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}}}}},
		}
		if _, err := c.kube.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var tasks map[string]map[string]string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		tasks = csvRecords(t, c, "/tasks?format=csv&state=all&team="+h.ClusterQueue, func(r map[string]string) string { return r["Namespace"] + "/" + r["Task"] })
		g := tasks[h.Namespaces[0]+"/sample-group"]
		return len(tasks) == 1 && g["Owner kind"] == "Pod group" && g["Owner name"] == "sample-group" && g["State"] == "Running", nil
	})
	if err != nil {
		t.Errorf("queue %s's tasks %v, want the pod group sample-group running, as one task", h.ClusterQueue, tasks)
	}
}

// applyGPUFlavor applies the console's flavor of gpuFlavor as the console
// applies it, for the hand-made queues to name, and returns the clients
// that make them.
func applyGPUFlavor(t *testing.T, c console) testenv.Clients {
	t.Helper()
	if _, err := c.kueue.KueueV1beta2().ResourceFlavors().Apply(context.Background(), domain.FlavorFor(gpuFlavor),
		metav1.ApplyOptions{FieldManager: domain.FieldManager, Force: true}); err != nil {
		t.Fatal(err)
	}
	return testenv.Clients{Kube: c.kube, Kueue: c.kueue}
}

// Kueue's concurrent admission (its example admin/concurrent-admission-setup
// with GPUs): Kueue tries each job on every flavor at once through Variant
// Workloads. Each job is one task, on the pages and in the history, with
// its Variants' reasons.
func TestConcurrentAdmissionCountsEachJobOnce(t *testing.T) {
	waitsOnTheCluster(t)
	st := taskHistoryStore{cfg: taskhistory.Config{Driver: taskhistory.DriverSQLite, Path: filepath.Join(t.TempDir(), "history.db")}}.open(t)
	c := startTaskHistoryConsole(t, taskHistorySettings(), storeTaskHistory(st), st, nil).console
	ctx := context.Background()
	id := rand.String(5)
	ns := testenv.Namespace(t, c.kube, "ca")
	kubectl := metav1.CreateOptions{FieldManager: "kubectl-client-side-apply"}
	q := resource.MustParse
	var flavors []kueuev1beta2.FlavorQuotas
	for i, name := range []string{"reservation", "on-demand", "spot"} {
		rf := &kueuev1beta2.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: name + "-" + id}}
		if _, err := c.kueue.KueueV1beta2().ResourceFlavors().Create(ctx, rf, kubectl); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = c.kueue.KueueV1beta2().ResourceFlavors().Delete(context.Background(), rf.Name, metav1.DeleteOptions{})
		})
		flavors = append(flavors, kueuev1beta2.FlavorQuotas{Name: kueuev1beta2.ResourceFlavorReference(rf.Name), Resources: []kueuev1beta2.ResourceQuota{
			{Name: corev1.ResourceCPU, NominalQuota: q("100")}, {Name: corev1.ResourceMemory, NominalQuota: q("100Gi")},
			{Name: domain.ResourceGPU, NominalQuota: *resource.NewQuantity([]int64{4, 4, 8}[i], resource.DecimalSI)},
		}})
	}
	reservation, onDemand, spot := string(flavors[0].Name), string(flavors[1].Name), string(flavors[2].Name)
	cq := &kueuev1beta2.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "team-cluster-queue-" + id},
		Spec: kueuev1beta2.ClusterQueueSpec{
			NamespaceSelector:         &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
			ConcurrentAdmissionPolicy: &kueuev1beta2.ConcurrentAdmissionPolicy{Migration: kueuev1beta2.ConcurrentAdmissionMigration{Mode: kueuev1beta2.ConcurrentAdmissionTryPreferredFlavors}},
			Preemption:                &kueuev1beta2.ClusterQueuePreemption{WithinClusterQueue: kueuev1beta2.PreemptionPolicyLowerPriority},
			ResourceGroups: []kueuev1beta2.ResourceGroup{{CoveredResources: []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, domain.ResourceGPU},
				Flavors: flavors}},
		}}
	if _, err := c.kueue.KueueV1beta2().ClusterQueues().Create(ctx, cq, kubectl); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.kueue.KueueV1beta2().ClusterQueues().Delete(context.Background(), cq.Name, metav1.DeleteOptions{})
	})
	lq := &kueuev1beta2.LocalQueue{ObjectMeta: metav1.ObjectMeta{Name: "team-queue", Namespace: ns},
		Spec: kueuev1beta2.LocalQueueSpec{ClusterQueue: kueuev1beta2.ClusterQueueReference(cq.Name)}}
	if _, err := c.kueue.KueueV1beta2().LocalQueues(ns).Create(ctx, lq, kubectl); err != nil {
		t.Fatal(err)
	}

	// One at a time, so that each lands where the flavors then have room:
	// small on reservation (2 of 4), mid on on-demand (3 of 4, while it
	// would rather be on reservation, which has room for it once small
	// ends), large on spot (5 of 8: neither reservation nor on-demand can
	// ever hold it), and waiting has room nowhere.
	for _, j := range []struct {
		name, state string
		gpus        int64
	}{{"small", "Running", 2}, {"mid", "Running", 3}, {"large", "Running", 5}, {"waiting", "", 4}} {
		job := testenv.Submit(t, c.kube, testenv.Job{Namespace: ns, LocalQueue: lq.Name, Name: j.name, GPUs: j.gpus})
		if j.state != "" {
			testenv.WorkloadOf(t, c.kueue, job, "admitted", testenv.CondTrue(kueuev1beta2.WorkloadAdmitted))
		}
	}

	var tasks map[string]map[string]string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		tasks = csvRecords(t, c, "/tasks?format=csv&state=all&team="+cq.Name, func(r map[string]string) string { return r["Owner name"] })
		return len(tasks) == 4 && tasks["small"]["State"] == "Running" && tasks["mid"]["State"] == "Running" && tasks["large"]["State"] == "Running" &&
			tasks["waiting"]["State"] == "Pending" && strings.Contains(tasks["waiting"]["Why"], spot+": Waiting for quota") &&
			strings.Contains(tasks["mid"]["Why"], "Kueue moves it to "+reservation+" as soon as that has room") &&
			tasks["large"]["Why"] == "Admitted on flavor "+spot, nil
	})
	if err != nil {
		t.Fatalf("queue %s's tasks %v; want small, mid and large running, waiting pending, mid said to move to %s, large to stay, waiting's reason on %s",
			cq.Name, tasks, reservation, spot)
	}
	webtest.MustContain(t, "the waiting job's reason", tasks["waiting"]["Why"], "Tried on each flavor at once (Kueue's concurrent admission). "+reservation+": ")
	if got := tasks["waiting"]["Queue position"]; got != "1" {
		t.Errorf("the waiting job's queue position %q, want 1: its Variants are one task", got)
	}
	for name, want := range map[string]string{"small": reservation, "mid": onDemand, "large": spot} {
		if why := tasks[name]["Why"]; !strings.HasPrefix(why, "Admitted on flavor "+want) {
			t.Errorf("job %s's reason %q, want it admitted on %s", name, why, want)
		}
	}
	rows := csvRecords(t, c, "/usage?format=csv", func(r map[string]string) string { return r["Team"] })
	if got := rows[cq.Name]; got["Running tasks (count)"] != "3" || got["Pending tasks, preempted included (count)"] != "1" {
		t.Errorf("the usage CSV's row of %s: %v; want 3 running and 1 pending", cq.Name, got)
	}

	// The history follows the jobs' own Workloads, not the Variants.
	day := time.Now().UTC().Format("2006-01-02")
	report := "/reports/usage?source=history&from=" + day + "&to=" + day + "&team=" + cq.Name + "&format=csv&table=tasks"
	var recorded []string
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		recorded = slices.Sorted(maps.Keys(csvRecords(t, c, report, func(r map[string]string) string { return r["Owner name"] })))
		return slices.Equal(recorded, []string{"large", "mid", "small", "waiting"}), nil
	})
	if err != nil {
		t.Errorf("the per-task report of %s names %v, want each job once", cq.Name, recorded)
	}

	// A job of a higher class needs spot: Kueue preempts large's Variant
	// there and only evicts large's own Workload. large is preempted, by
	// urgent, on the page and in the history.
	urgentClass := "urgent-" + id
	testenv.PriorityClass(t, c.kueue, urgentClass, 1000)
	urgent := testenv.Submit(t, c.kube, testenv.Job{Namespace: ns, LocalQueue: lq.Name, Name: "urgent", GPUs: 5, Class: urgentClass})
	testenv.WorkloadOf(t, c.kueue, urgent, "admitted", testenv.CondTrue(kueuev1beta2.WorkloadAdmitted))
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		tasks = csvRecords(t, c, "/tasks?format=csv&state=all&team="+cq.Name, func(r map[string]string) string { return r["Owner name"] })
		return len(tasks) == 5 && tasks["large"]["State"] == "Preempted" && tasks["urgent"]["State"] == "Running", nil
	})
	if err != nil {
		t.Errorf("after urgent took spot, the tasks %v; want large preempted, urgent running, five tasks", tasks)
	}
	var preemptions map[string]map[string]string
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		preemptions = csvRecords(t, c, "/preemptions?format=csv&team="+cq.Name, func(r map[string]string) string { return r["Owner name"] })
		return len(preemptions) == 1 && preemptions["large"]["Preemptor owner name"] == "urgent", nil
	})
	if err != nil {
		t.Errorf("the preemptions of %s: %v; want large's, by urgent", cq.Name, preemptions)
	}
}

// Kueue's elastic jobs (its example jobs/sample-scalable-job): a Job that
// grows gets a new Workload slice, which replaces the first. The job stays
// one task, running since its first admission, on the pages and in the
// history.
func TestAnElasticJobThatGrowsIsOneTask(t *testing.T) {
	waitsOnTheCluster(t)
	st := taskHistoryStore{cfg: taskhistory.Config{Driver: taskhistory.DriverSQLite, Path: filepath.Join(t.TempDir(), "history.db")}}.open(t)
	c := startTaskHistoryConsole(t, taskHistorySettings(), storeTaskHistory(st), st, nil).console
	ctx := context.Background()
	h := testenv.ApplyHandMade(t, applyGPUFlavor(t, c), gpuFlavor, "")
	ns := h.Namespaces[0]
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi"), domain.ResourceGPU: resource.MustParse("1")}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "elastic", Namespace: ns, Labels: map[string]string{"kueue.x-k8s.io/queue-name": "user-queue"},
			Annotations: map[string]string{"kueue.x-k8s.io/elastic-job": "true"}},
		Spec: batchv1.JobSpec{Parallelism: ptr.To[int32](1), Completions: ptr.To[int32](100), Template: corev1.PodTemplateSpec{
			Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "main", Image: "trainer", Resources: corev1.ResourceRequirements{Requests: res, Limits: res}}}},
		}},
	}
	job, err := c.kube.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	first := testenv.WorkloadOf(t, c.kueue, job, "admitted", testenv.CondTrue(kueuev1beta2.WorkloadAdmitted))
	time.Sleep(2 * time.Second) // a run long enough to tell from the second slice's
	patch := []byte(`{"spec":{"parallelism":2}}`)
	if _, err := c.kube.BatchV1().Jobs(ns).Patch(ctx, job.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	grown := testenv.WorkloadOf(t, c.kueue, job, "grown and admitted", func(wl *kueuev1beta2.Workload) bool {
		return wl.Name != first.Name && apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueuev1beta2.WorkloadAdmitted)
	})

	var tasks map[string]map[string]string
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		tasks = csvRecords(t, c, "/tasks?format=csv&state=all&team="+h.ClusterQueue, func(r map[string]string) string { return r["Task"] })
		ran, _ := strconv.Atoi(tasks[grown.Name]["Ran (s)"])
		return len(tasks) == 1 && tasks[grown.Name]["State"] == "Running" && tasks[grown.Name]["GPUs (count)"] == "2" && ran >= 2, nil
	})
	if err != nil {
		t.Errorf("queue %s's tasks %v; want the job once, running 2 GPUs since its first slice's admission", h.ClusterQueue, tasks)
	}

	day := time.Now().UTC().Format("2006-01-02")
	report := "/reports/usage?source=history&from=" + day + "&to=" + day + "&team=" + h.ClusterQueue + "&format=csv&table=tasks"
	var recorded map[string]map[string]string
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		recorded = csvRecords(t, c, report, func(r map[string]string) string { return r["Task"] })
		return len(recorded) == 1 && recorded[first.Name]["Owner name"] == "elastic", nil
	})
	if err != nil {
		t.Errorf("the per-task report of %s: %v; want the job once, under its first slice %s", h.ClusterQueue, recorded, first.Name)
	}
}

// Kueue tries one job of a sweep of identical jobs: once it does not fit,
// Kueue skips the ones just like it (its scheduling equivalence) and gives
// them no reason at all. The Tasks page says why they wait, with the
// reason of the one it tried, instead of "waiting to be evaluated".
func TestAJobKueueSkipsSaysWhy(t *testing.T) {
	c := newConsole(t)
	ctx := context.Background()
	h := testenv.ApplyHandMade(t, applyGPUFlavor(t, c), gpuFlavor, "")
	ns := h.Namespaces[0]
	h.Workload(t, ns, "big", 4) // the queue's 4 GPUs
	h.WaitAdmitted(t, 1, 1)
	h.Workload(t, ns, "sweep-1", 1)
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		wl, err := c.kueue.KueueV1beta2().Workloads(ns).Get(ctx, "sweep-1", metav1.GetOptions{})
		return err == nil && apimeta.IsStatusConditionFalse(wl.Status.Conditions, kueuev1beta2.WorkloadQuotaReserved), nil
	}); err != nil {
		t.Fatal("Kueue never said why sweep-1 waits")
	}
	h.Workload(t, ns, "sweep-2", 1)

	var why string
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		why = c.csv(t, "/tasks?format=csv&table=tasks&state=all&team="+h.ClusterQueue)[ns+"/sweep-2"]["Why"]
		return strings.Contains(why, "Kueue skips it while sweep-1"), nil
	}); err != nil {
		t.Errorf("sweep-2's reason: %q, want it to wait behind sweep-1", why)
	}
	if !strings.HasPrefix(why, "Waiting for quota: needs 1 more nvidia.com/gpu") {
		t.Errorf("sweep-2's reason %q does not start with sweep-1's", why)
	}
	wl, err := c.kueue.KueueV1beta2().Workloads(ns).Get(ctx, "sweep-2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cond := apimeta.FindStatusCondition(wl.Status.Conditions, kueuev1beta2.WorkloadQuotaReserved); cond != nil {
		t.Errorf("Kueue gave sweep-2 a reason of its own (%s: %s): the case no longer asks what it says", cond.Reason, cond.Message)
	}
}

// A queue made as Kueue's getting-started example makes it, its quota on a
// flavor that is no instance type, once imported: its form shows that
// quota, kept as it is, and saves a change of what the form has (the
// fair-share weight) without touching it; the teams page offers its
// release, not its deletion, and the delete page sends to the release.
func TestAnImportedQueueOfOtherFlavorsIsEditable(t *testing.T) {
	c := newConsole(t)
	ctx := context.Background()
	clients := applyGPUFlavor(t, c)
	q := resource.MustParse
	h := testenv.ApplyHandMadeWith(t, clients, gpuFlavor, "", func(cq *kueuev1beta2.ClusterQueue) {
		flavor := cq.Spec.ResourceGroups[1].Flavors[0].Name // the setup's flavor without node labels
		cq.Spec.ResourceGroups = []kueuev1beta2.ResourceGroup{{
			CoveredResources: []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory},
			Flavors: []kueuev1beta2.FlavorQuotas{{Name: flavor, Resources: []kueuev1beta2.ResourceQuota{
				{Name: corev1.ResourceCPU, NominalQuota: q("9")}, {Name: corev1.ResourceMemory, NominalQuota: q("36Gi")}}}},
		}}
	})
	team := h.ClusterQueue
	code, preview := c.get(t, "/queues/"+h.ClusterQueue+"/import")
	fp := regexp.MustCompile(`name="fingerprint" value="([^"]+)"`).FindStringSubmatch(preview)
	if code != http.StatusOK || fp == nil {
		t.Fatalf("import preview: %d\n%.600s", code, preview)
	}
	if code, _, body := c.post(t, "/queues/import", url.Values{"queue": {h.ClusterQueue}, "fingerprint": {fp[1]}}); code != http.StatusSeeOther {
		t.Fatalf("import: %d\n%.400s", code, body)
	}
	before, err := c.kueue.KueueV1beta2().ClusterQueues().Get(ctx, h.ClusterQueue, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	c.eventually(t, "/teams", `href="/queues/`+h.ClusterQueue+`/release"`)
	_, teams := c.get(t, "/teams")
	webtest.MustNotContain(t, "the teams page", teams, `href="/teams/`+team+`/delete"`)
	rec := c.serve(httptest.NewRequest(http.MethodGet, "/teams/"+team+"/delete", nil))
	if loc := rec.Header().Get("Location"); rec.Code != http.StatusSeeOther || loc != "/queues/"+h.ClusterQueue+"/release" {
		t.Errorf("the delete page of an imported team: %d to %q, want its release", rec.Code, loc)
	}

	code, edit := c.get(t, "/teams/"+team+"/edit")
	if code != http.StatusOK {
		t.Fatalf("edit form: %d\n%.400s", code, edit)
	}
	webtest.MustContain(t, "the edit form", edit, `id="kept-quota"`, h.Flavor+": 9 vCPU, 36 GiB memory", `id="kept-as-is"`, "Namespace selector")
	form := webtest.FormValues(t, edit, "team-form")
	if form.Get("quota.0.instanceType") != "" {
		t.Fatalf("the form has quota rows of an instance type: %v", form)
	}
	// Its limits are kept with its quota: a new percentage would change
	// nothing in Kueue, so the form says so instead of recording it.
	percent := webtest.CloneValues(form)
	percent.Set("lending", string(domain.LendAndBorrow))
	percent.Set("borrowLimit", "300")
	if code, _, body := c.post(t, "/teams/"+team, percent); code == http.StatusSeeOther || !strings.Contains(stdhtml.UnescapeString(body), "change them in Kueue") {
		t.Errorf("a new borrow percentage for a queue of kept flavors: %d\n%.600s", code, body)
	}
	form.Set("fairShareWeight", "7")
	if code, _, body := c.post(t, "/teams/"+team, form); code != http.StatusSeeOther {
		t.Fatalf("saving the weight: %d\n%.800s", code, body)
	}
	after, err := c.kueue.KueueV1beta2().ClusterQueues().Get(ctx, h.ClusterQueue, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if w := after.Spec.FairSharing; w == nil || w.Weight == nil || w.Weight.Value() != 7 {
		t.Errorf("the weight after saving: %+v, want 7", w)
	}
	if diff := cmp.Diff(before.Spec.ResourceGroups, after.Spec.ResourceGroups); diff != "" {
		t.Errorf("saving the weight changed the queue's quota (-before +after):\n%s", diff)
	}
}

// Jobs with a priorityClassName and no Kueue class (Kueue's example
// jobs/sample-job with a PriorityClass): Kueue takes their priority from
// the Kubernetes PriorityClass. The class is one of the console's: the
// tasks carry it, the task filters and the what-if offer it.
func TestJobsOfAKubernetesPriorityClass(t *testing.T) {
	c := newConsole(t)
	ctx := context.Background()
	h := testenv.ApplyHandMade(t, applyGPUFlavor(t, c), gpuFlavor, "")
	ns := h.Namespaces[0]
	class := "qc-pod-class-" + rand.String(5)
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: class}, Value: 1_000_000}
	if _, err := c.kube.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.kube.SchedulingV1().PriorityClasses().Delete(context.Background(), class, metav1.DeleteOptions{})
	})
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi"), domain.ResourceGPU: resource.MustParse("1")}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "urgent", Namespace: ns, Labels: map[string]string{"kueue.x-k8s.io/queue-name": "user-queue"}},
		Spec: batchv1.JobSpec{Parallelism: ptr.To[int32](1), Completions: ptr.To[int32](1), Suspend: ptr.To(true), Template: corev1.PodTemplateSpec{
			Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, PriorityClassName: class,
				Containers: []corev1.Container{{Name: "main", Image: "trainer", Resources: corev1.ResourceRequirements{Requests: res, Limits: res}}}},
		}},
	}
	job, err := c.kube.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wl := testenv.WorkloadOf(t, c.kueue, job, "admitted", testenv.CondTrue(kueuev1beta2.WorkloadAdmitted))
	if ref := wl.Spec.PriorityClassRef; ref == nil || ref.Kind != kueuev1beta2.PodPriorityClassKind || ptr.Deref(wl.Spec.Priority, 0) != 1_000_000 {
		t.Fatalf("Kueue gave the Workload class %+v at priority %v: the case no longer asks what it says", ref, wl.Spec.Priority)
	}

	var task map[string]string
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		task = c.csv(t, "/tasks?format=csv&table=tasks&state=all&team="+h.ClusterQueue)[ns+"/"+wl.Name]
		return task != nil && task["State"] == "Running", nil // the read model follows Kueue's admission
	})
	if err != nil || task["Priority class"] != class || task["State"] != "Running" {
		t.Fatalf("the task of Job urgent: %v, want class %s, running", task, class)
	}
	option := `<option value="` + class + `"`
	if code, body := c.get(t, "/tasks?team="+h.ClusterQueue); code != 200 || !strings.Contains(body, option) {
		t.Errorf("the tasks page (%d) offers no filter by class %s", code, class)
	}
	if code, body := c.get(t, "/tasks?team="+h.ClusterQueue+"&class="+class+"&format=csv&table=tasks&state=all"); code != 200 || !strings.Contains(body, wl.Name) {
		t.Errorf("the tasks of class %s (%d) leave out its task:\n%.400s", class, code, body)
	}
	if code, body := c.get(t, "/whatif"); code != 200 || !strings.Contains(body, option) {
		t.Errorf("the what-if (%d) offers no class %s", code, class)
	}
	ask := "/whatif?format=json&team=" + h.ClusterQueue + "&class=" + class + "&row.0.instanceType=" + gpuFlavor + "&row.0.pods=1&row.0.gpus=1&row.0.vcpu=1&row.0.memoryGiB=1"
	if code, body := c.get(t, ask); code != 200 || !strings.Contains(body, `"admitted":true`) {
		t.Errorf("what if a 1-GPU job of class %s is submitted to a queue with 3 GPUs free: %d %s", class, code, body)
	}
}
