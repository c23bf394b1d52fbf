package handlers_test

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/html"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/kueuetest"
	"github.com/openquota/console/internal/taskhistory"
	"github.com/openquota/console/internal/webtest"
)

// A ClusterQueue made with kubectl, as Kueue's getting-started example
// makes it, is listed on the teams page with who manages it, its
// namespaces and its tasks; its import preview shows what would be written
// and the import is asked for the signed-in admin with the preview's
// fingerprint.
func TestQueuesTheConsoleDidNotCreate(t *testing.T) {
	f, admin := withKubectlQueue(t)
	s := f.settings

	code, body := admin.Get("/teams")
	if code != http.StatusOK {
		t.Fatalf("/teams: %d\n%.300s", code, body)
	}
	got := webtest.HTMLRows(t, body, "queues", webtest.ByAttr("data-queue"))
	want := map[string][]string{"cluster-queue": {"cluster-queue", "cluster-queue", "default", "—", "kubectl-client-side-apply", "9 GPUs", "1", "1", "Import…"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("queues the console did not create (-want +got):\n%s", diff)
	}
	if !strings.Contains(body, `href="/queues/cluster-queue/import"`) {
		t.Error("no import link for the queue")
	}

	code, body = admin.Get("/queues/cluster-queue/import")
	if code != http.StatusOK || !strings.Contains(body, `id="import-writes-cluster-queue"`) || !strings.Contains(body, "metadata.labels[app.kubernetes.io/managed-by]") {
		t.Fatalf("import preview: %d\n%.500s", code, body)
	}
	if code, location, _ := admin.Post("/queues/import", url.Values{"queue": {"cluster-queue"}, "fingerprint": {"fp-cluster-queue"}}); code != http.StatusSeeOther || location != "/teams" {
		t.Errorf("import: %d %q", code, location)
	}
	if diff := cmp.Diff([]string{"import cluster-queue as previewed in fp-cluster-queue by admin"}, f.writes.made()); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}

	// Whoever may list Workloads in default is a member of the queue's team:
	// they see its page and tasks, and no other team.
	f.access.grant("researcher", listWorkloads("default"))
	researcher := user(t, f.handler(), "researcher")
	if code, body := researcher.Get("/usage/cluster-queue"); code != http.StatusOK || !strings.Contains(body, "cluster-queue") {
		t.Errorf("a member of namespace default on the queue's team page: %d", code)
	}
	if code, _ := researcher.Get("/usage/team-000"); code != http.StatusForbidden {
		t.Errorf("a member of namespace default on team-000's page: %d, want 403", code)
	}

	// A team member sees neither the queue nor its preview.
	f.access.grant("member", listWorkloads(s.Namespace("team-000")))
	member := user(t, f.handler(), "member")
	if _, body := member.Get("/teams"); strings.Contains(body, `data-queue="cluster-queue"`) {
		t.Error("a member of team-000 sees a queue outside their team")
	}
	// A whole cohort's queues, previewed together.
	code, body = admin.Get("/queues/import?queue=cluster-queue&queue=hyperpod-ns-team-000-clusterqueue")
	if code != http.StatusOK || !strings.Contains(body, `data-queue="cluster-queue"`) || !strings.Contains(body, `data-queue="hyperpod-ns-team-000-clusterqueue"`) {
		t.Errorf("a preview of two queues: %d", code)
	}
	if code, _ := member.Get("/queues/cluster-queue/import"); code != http.StatusForbidden {
		t.Errorf("a member's import preview: %d, want 403", code)
	}
}

// withKubectlQueue is a fixture of two teams and a ClusterQueue made with
// kubectl, as Kueue's getting-started example makes it, with a running and
// a pending task, and an admin of the console.
func withKubectlQueue(t *testing.T) (*fixture, *webtest.Browser) {
	f := newFixture(t, 2, 0).withProxy()
	s, now := f.settings, time.Now()
	objs := kueuetest.Cluster(s, s.Cohort, 2, 0, now)
	objs.ClusterQueues = append(objs.ClusterQueues,
		kueuetest.MakeClusterQueue("cluster-queue").Nominal(9, nil).WrittenBy("kubectl-client-side-apply").Obj())
	objs.LocalQueues = append(objs.LocalQueues, kueuetest.MakeLocalQueue("default", "user-queue", "cluster-queue"))
	objs.Workloads = append(objs.Workloads,
		kueuetest.MakeWorkload(s, "default", "sample-job").Queue("user-queue").GPUs(1, 1).Created(now.Add(-time.Minute)).
			In("cluster-queue").Admitted(now, "ml.p5.48xlarge").Obj(),
		kueuetest.MakeWorkload(s, "default", "sample-job-2").Queue("user-queue").GPUs(9, 1).Created(now.Add(-time.Minute)).Obj())
	f.model.publish(snapshotOf(s, objs, now))
	f.access.grant("admin", listClusterQueues, editTeams)
	return f, user(t, f.handler(), "admin")
}

// A queue the console does not manage is marked so, with who manages it,
// where its usage shows; its own page offers its import, not an allocation
// form it does not have.
func TestQueuesTheConsoleDidNotCreateAreMarked(t *testing.T) {
	_, admin := withKubectlQueue(t)
	const mark = "not managed by the console (kubectl-client-side-apply)"

	_, body := admin.Get("/usage")
	rows := webtest.HTMLRows(t, body, "team-usage", webtest.ByAttr("data-team"))
	if got := rows["cluster-queue"]; len(got) == 0 || !strings.HasSuffix(got[0], mark) {
		t.Errorf("the queue's usage row: %q, want its name marked %q", got, mark)
	}
	if got := rows["team-000"]; len(got) == 0 || got[0] != "team-000" {
		t.Errorf("a team's usage row: %q, want it unmarked", got)
	}

	_, body = admin.Get("/usage/cluster-queue")
	if !strings.Contains(body, mark) || !strings.Contains(body, `href="/queues/cluster-queue/import"`) || strings.Contains(body, "Edit allocation") {
		t.Errorf("the queue's page: want it marked, with its import and no allocation form\n%.2000s", body)
	}
	_, body = admin.Get("/usage/team-000")
	if strings.Contains(body, mark[:len("not managed")]) || !strings.Contains(body, `href="/teams/team-000/edit"`) {
		t.Errorf("a team's page: want its allocation form and no mark\n%.2000s", body)
	}
}

// A queue Kueue keeps inactive is marked on the usage page with Kueue's
// reason, its page says it admits nothing, in Kueue's words, and its
// waiting tasks get no estimated wait, but why.
func TestAnInactiveQueueSaysWhy(t *testing.T) {
	f := newFixture(t, 1, 0)
	s, now := f.settings, time.Now()
	objs := kueuetest.Cluster(s, s.Cohort, 1, 0, now)
	cq := kueuetest.MakeClusterQueue("cluster-queue").Nominal(9, nil).WrittenBy("kubectl-client-side-apply").Obj()
	const why = "Can't admit new workloads: references inactive AdmissionCheck(s): sample-prov."
	cq.Status.Conditions = []metav1.Condition{{Type: kueuev1beta2.ClusterQueueActive, Status: metav1.ConditionFalse,
		Reason: kueuev1beta2.ClusterQueueActiveReasonAdmissionCheckInactive, Message: why}}
	objs.ClusterQueues = append(objs.ClusterQueues, cq)
	objs.LocalQueues = append(objs.LocalQueues, kueuetest.MakeLocalQueue("default", "user-queue", "cluster-queue"))
	objs.Workloads = append(objs.Workloads, kueuetest.MakeWorkload(s, "default", "sample-job").Queue("user-queue").GPUs(1, 1).
		Created(now.Add(-time.Minute)).Obj())
	f.model.publish(snapshotOf(s, objs, now))
	f.cluster.overview = domain.BuildOverview(s, nil, objs.ClusterQueues)
	f.cfg.TaskHistory = &taskHistory{rates: taskhistory.AdmissionRates{Recorded: 24 * time.Hour}}
	h := f.handler()

	// The overview does not call it enabled.
	_, body := webtest.Get(t, h, "/")
	queues := webtest.HTMLRows(t, body, "cluster-queues", webtest.ByAttr("data-cluster-queue"))
	if got, other := queues["cluster-queue"], queues[s.ClusterQueue("team-000")]; len(got) < 4 || got[3] != "Inactive" || len(other) < 4 || other[3] != "Enabled" {
		t.Errorf("the overview's admission cells: %q and %q; want only cluster-queue inactive", got, other)
	}
	webtest.MustContain(t, "the overview", html.UnescapeString(body), `title="Kueue: `+why+`">Inactive<`)
	code, body := webtest.Get(t, h, "/?format=csv&table=cluster-queues")
	header, csvRows := webtest.ReadCSV(t, "the ClusterQueues CSV", code, body)
	row := webtest.CSVRecords(header, csvRows, func(r map[string]string) string { return r["ClusterQueue"] })["cluster-queue"]
	if row["Admission"] != "Inactive" || row["Why Kueue admits nothing"] != why {
		t.Errorf("the ClusterQueues CSV's row of cluster-queue: %v", row)
	}

	// Its waiting task waits for no estimate: the queue admits nothing;
	// nor does its class, in this queue.
	_, body = webtest.Get(t, h, "/tasks?team=cluster-queue")
	webtest.MustContain(t, "the queue's tasks", html.UnescapeString(body), "not while its queue admits nothing",
		"not while its queue admits nothing: Kueue keeps its queue inactive: "+why)
	if got := webtest.HTMLRows(t, body, "class-stats", webtest.ByAttr("data-class"))["batch"]; !slices.Contains(got, "not while its queue admits nothing") {
		t.Errorf("the queue's class batch: %q, want its estimated wait to say the queue admits nothing", got)
	}

	// The usage CSV says so too, beside Kueue's enabled flag.
	code, body = webtest.Get(t, h, "/usage?format=csv")
	header, csvRows = webtest.ReadCSV(t, "the usage CSV", code, body)
	usage := webtest.CSVRecords(header, csvRows, func(r map[string]string) string { return r["Team"] })
	if got := usage["cluster-queue"]["Why Kueue admits nothing"]; got != "Kueue keeps its queue inactive: "+why {
		t.Errorf("the usage CSV's row of cluster-queue says %q of its admission", got)
	}
	for _, team := range []string{"team-000", "Total"} {
		if got := usage[team]["Why Kueue admits nothing"]; got != "" {
			t.Errorf("the usage CSV's row of %s says %q of its admission", team, got)
		}
	}

	_, body = webtest.Get(t, h, "/usage")
	rows := webtest.HTMLRows(t, body, "team-usage", webtest.ByAttr("data-team"))
	if got := rows["cluster-queue"]; len(got) == 0 || !strings.Contains(got[0], "inactive") || strings.Contains(rows["team-000"][0], "inactive") {
		t.Errorf("the usage rows' team cells: %q and %q; want only cluster-queue marked inactive", got, rows["team-000"])
	}
	webtest.MustContain(t, "the usage page", html.UnescapeString(body), `title="Kueue: `+why+`"`)
	_, body = webtest.Get(t, h, "/usage/cluster-queue")
	webtest.MustContain(t, "the queue's page", html.UnescapeString(body), `id="team-inactive"`, "Kueue admits no new task in this queue. Kueue says: "+why)
	_, body = webtest.Get(t, h, "/usage/team-000")
	webtest.MustNotContain(t, "an active team's page", body, `id="team-inactive"`)
}

// The overview shows the cohort tree to viewers of the whole cluster, with
// each cohort's figures and the queues under it; a team member, who may
// see only their team, does not get it.
func TestOverviewShowsTheCohortTree(t *testing.T) {
	f := newFixture(t, 2, 0).withProxy()
	s := f.settings
	cohorts := []*kueuev1beta2.Cohort{kueuetest.MakeCohort("org", "", 4), kueuetest.MakeCohort(s.Cohort, "org", 0)}
	objs := kueuetest.Cluster(s, s.Cohort, 2, 0, time.Now())
	f.cluster.overview.Cohorts = domain.CohortTree(s, cohorts, objs.ClusterQueues)
	f.access.grant("admin", listClusterQueues)
	f.access.grant("member", listWorkloads(s.Namespace("team-000")))
	h := f.handler()

	_, body := user(t, h, "admin").Get("/")
	got := webtest.HTMLRows(t, body, "cohort-tree", func(n *html.Node) string {
		return webtest.Attr(n, "data-cohort") + webtest.Attr(n, "data-tree-queue")
	})
	want := map[string][]string{
		"org":                               {"org", "4", "20", "1", "0", "19", "—", "—"},
		s.Cohort:                            {"└ " + s.Cohort, "0", "16", "1", "0", "15", "—", "—"},
		"hyperpod-ns-team-000-clusterqueue": {"hyperpod-ns-team-000-clusterqueue", "—", "8", "0", "0", "—", "—", "—"},
		"hyperpod-ns-team-001-clusterqueue": {"hyperpod-ns-team-001-clusterqueue", "—", "8", "1", "0", "—", "—", "—"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("cohort tree (-want +got):\n%s", diff)
	}
	if _, body := user(t, h, "admin").Get("/usage"); len(webtest.HTMLRows(t, body, "cohort-tree", webtest.ByAttr("data-cohort"))) != 2 {
		t.Error("the usage page does not show the two cohorts")
	}
	for _, path := range []string{"/", "/usage"} {
		if _, body := user(t, h, "member").Get(path); strings.Contains(body, `id="cohort-tree"`) {
			t.Errorf("a team member sees the cohort tree with every team's queues on %s", path)
		}
	}
}

// A task its queue can never hold, as Kueue's own examples make it (a
// queue of vCPU without GPUs, asked for a GPU), gets no estimated wait from
// the queue's pace but why it cannot start; nor does the job a what-if
// asks about that Kueue finds so.
func TestATaskItsQueueCanNeverHoldGetsNoWait(t *testing.T) {
	f := newFixture(t, 1, 0)
	s, now := f.settings, time.Now()
	objs := kueuetest.Cluster(s, s.Cohort, 1, 0, now)
	objs.AddQuickStart()
	const never = "couldn't assign flavors to pod set main: resource nvidia.com/gpu unavailable in ClusterQueue"
	objs.Workloads = append(objs.Workloads, kueuetest.MakeWorkload(s, "default", "sample-job").Queue("user-queue").GPUs(1, 1).
		Created(now.Add(-time.Minute)).Pending("Pending", never, now.Add(-time.Minute)).Obj())
	f.model.publish(snapshotOf(s, objs, now))
	f.cfg.TaskHistory = &taskHistory{rates: taskhistory.AdmissionRates{Recorded: 24 * time.Hour}}
	h := f.handler()

	_, body := webtest.Get(t, h, "/tasks?team=cluster-queue")
	row := webtest.HTMLRows(t, body, "task-list", webtest.ByAttr("data-task"))["default/sample-job"]
	if !slices.Contains(row, "not as its queue is") {
		t.Errorf("the task's row %q, want its estimated wait to say it cannot start as its queue is", row)
	}
	webtest.MustContain(t, "the task's estimate", html.UnescapeString(body),
		"not as its queue is defined now (the task, or the queue's quota or flavors, must change): its queue, as it is defined, can never hold it: The team has no quota for nvidia.com/gpu")

	f.whatIf.answer = domain.WhatIfAnswer{Position: 2, Reason: never}
	answer := askJSON(t, getter(t, h), "/whatif?team=cluster-queue&row.0.instanceType=default-flavor&row.0.pods=1&row.0.vcpu=1")
	if answer.Verdict != "It would not start: the team's queue, as it is defined, can never hold it." || answer.EstimatedStart != "not as its queue is" ||
		!strings.HasSuffix(answer.Basis, "The team has no quota for nvidia.com/gpu") {
		t.Errorf("the what-if's answer: %+v", answer)
	}
}

// A cohort of queues of vCPU and memory only, as Kueue's own examples are,
// shows its figures in vCPU where GPUs would all read 0; the cohorts page
// shows each resource on its tab, and its CSV every resource at once.
func TestTheCohortTreeOfQueuesWithoutGPUs(t *testing.T) {
	f := newFixture(t, 0, 0).withProxy()
	s := f.settings
	lends := resource.MustParse("2")
	teamA := kueuetest.MakeClusterQueue("team-a-cq").Cohort("team-ab").
		Quota("default-flavor", corev1.ResourceCPU, "9").Quota("default-flavor", corev1.ResourceMemory, "36Gi").
		UsageOf("default-flavor", corev1.ResourceCPU, "12", "3").UsageOf("default-flavor", corev1.ResourceMemory, "40Gi", "4Gi").Obj()
	teamB := kueuetest.MakeClusterQueue("team-b-cq").Cohort("team-ab").
		Quota("default-flavor", corev1.ResourceCPU, "12").Quota("default-flavor", corev1.ResourceMemory, "48Gi").Obj()
	teamB.Spec.ResourceGroups[0].Flavors[0].Resources[0].LendingLimit = &lends
	f.cluster.overview.Cohorts = domain.CohortTree(s, nil, []*kueuev1beta2.ClusterQueue{teamA, teamB})
	f.access.grant("admin", listClusterQueues)
	h := f.handler()
	cells := func(n *html.Node) string { return webtest.Attr(n, "data-cohort") + webtest.Attr(n, "data-tree-queue") }

	_, body := user(t, h, "admin").Get("/")
	want := map[string][]string{
		"team-ab":   {"team-ab", "0", "21", "12", "3", "9", "—", "—"},
		"team-a-cq": {"team-a-cq", "—", "9", "12", "3", "—", "—", "—"},
		"team-b-cq": {"team-b-cq", "—", "12", "0", "0", "—", "default-flavor: lends at most 2", "—"},
	}
	if diff := cmp.Diff(want, webtest.HTMLRows(t, body, "cohort-tree", cells)); diff != "" {
		t.Errorf("the overview's cohort tree (-want +got):\n%s", diff)
	}
	webtest.MustContain(t, "the overview's cohort tree", body, `data-unit="vCPU"`)

	_, body = user(t, h, "admin").Get("/cohorts?resource=memory")
	want = map[string][]string{
		"team-ab":   {"team-ab", "0", "84", "40", "4", "44", "—", "—"},
		"team-a-cq": {"team-a-cq", "—", "36", "40", "4", "—", "—", "—"},
		"team-b-cq": {"team-b-cq", "—", "48", "0", "0", "—", "—", "—"},
	}
	if diff := cmp.Diff(want, webtest.HTMLRows(t, body, "cohort-tree", cells)); diff != "" {
		t.Errorf("the cohorts page in memory (-want +got):\n%s", diff)
	}
	webtest.MustContain(t, "the cohorts page in memory", body, `data-unit="Memory (GiB)"`, `href="/cohorts?format=csv"`)

	code, body := user(t, h, "admin").Get("/cohorts?format=csv")
	header, rows := webtest.ReadCSV(t, "/cohorts?format=csv", code, body)
	got := webtest.CSVRecords(header, rows, func(r map[string]string) string { return r["Name"] })
	for name, fields := range map[string]map[string]string{
		"team-ab":   {"Kind": "Cohort", "Depth": "0", "vCPU: quota (vCPU)": "21", "vCPU: in use (vCPU)": "12", "vCPU: headroom (vCPU)": "9", "Memory: borrowed (GiB)": "4", "GPUs: quota (GPUs)": "0"},
		"team-b-cq": {"Kind": "ClusterQueue", "Parent cohort": "team-ab", "Team": "team-b-cq", "vCPU: limits per flavor": "default-flavor: lends at most 2", "Memory: limits per flavor": ""},
	} {
		for column, value := range fields {
			if got[name][column] != value {
				t.Errorf("cohorts CSV, %s, %q: %q, want %q", name, column, got[name][column], value)
			}
		}
	}
	if len(got) != 3 {
		t.Errorf("cohorts CSV: %d rows, want 3", len(got))
	}
}
