package handlers_test

import (
	"cmp"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"golang.org/x/net/html"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/kueuetest"
	"github.com/openquota/console/internal/webtest"
)

// A team's page lists its ClusterQueue's quota per flavor and resource with
// its borrowing and lending limits ("none" when unset), what it borrows
// (Kueue's figure) and what it lends now (the usage page's attribution).
func TestTeamPageShowsLimits(t *testing.T) {
	f := newFixture(t, 2, 0)
	s, now := f.settings, time.Now()
	objs := kueuetest.Cluster(s, s.Cohort, 2, 0, now)
	q := resource.MustParse
	team0 := (&kueuetest.ClusterQueueWrapper{ClusterQueue: *objs.ClusterQueues[0]}).Quota("ml.p5.48xlarge", corev1.ResourceCPU, "192").
		Quota("ml.p5.48xlarge", corev1.ResourceMemory, "2Ti").Quota("ml.trn1.32xlarge", domain.ResourceNeuron, "16").
		Quota("ml.p4de.24xlarge", domain.PartitionResource("mig-1g.10gb"), "7").
		Quota("ml.p5.48xlarge", corev1.ResourceEphemeralStorage, "20Gi").Obj()
	gpu, cpu, mem := &team0.Spec.ResourceGroups[0].Flavors[0].Resources[0], &team0.Spec.ResourceGroups[0].Flavors[0].Resources[1],
		&team0.Spec.ResourceGroups[0].Flavors[0].Resources[2]
	gpu.LendingLimit, cpu.BorrowingLimit, mem.LendingLimit = ptr(q("4")), ptr(q("96500m")), ptr(q("512Gi"))
	team0.Status.FlavorsUsage[0].Resources[0].Total = q("2")
	team0.Status.FlavorsUsage = append(team0.Status.FlavorsUsage, kueuev1beta2.FlavorUsage{Name: "ml.p4de.24xlarge",
		Resources: []kueuev1beta2.ResourceUsage{{Name: domain.PartitionResource("mig-1g.10gb"), Total: q("3")}}})
	// team-001 uses 11 of its 8 GPUs: the 3 it borrows are team-000's, the
	// only queue with idle GPUs (6, of which it lends at most 4).
	team1 := objs.ClusterQueues[1]
	team1.Status.FlavorsUsage[0].Resources[0].Total, team1.Status.FlavorsUsage[0].Resources[0].Borrowed = q("11"), q("3")
	objs.ClusterQueues[0] = team0
	f.model.publish(snapshotOf(s, objs, now))
	h := f.handler()

	for _, tc := range []struct {
		team string
		want map[string][]string
	}{
		{"team-000", map[string][]string{
			"ml.p5.48xlarge/GPUs":                     {"ml.p5.48xlarge", "GPUs", "8", "2", "none", "4", "0", "3"},
			"ml.p5.48xlarge/vCPU":                     {"ml.p5.48xlarge", "vCPU", "192", "0", "96.5", "none", "0", "0"},
			"ml.p5.48xlarge/Memory (GiB)":             {"ml.p5.48xlarge", "Memory (GiB)", "2048", "0", "none", "512", "0", "0"},
			"ml.trn1.32xlarge/Neuron devices":         {"ml.trn1.32xlarge", "Neuron devices", "16", "0", "none", "none", "0", "0"},
			"ml.p4de.24xlarge/mig-1g.10gb partitions": {"ml.p4de.24xlarge", "mig-1g.10gb partitions", "7", "3", "none", "none", "0", "0"},
			"ml.p5.48xlarge/Ephemeral storage (GiB)":  {"ml.p5.48xlarge", "Ephemeral storage (GiB)", "20", "0", "none", "none", "0", "0"},
		}},
		{"team-001", map[string][]string{
			"ml.p5.48xlarge/GPUs": {"ml.p5.48xlarge", "GPUs", "8", "11", "none", "none", "3", "0"},
		}},
	} {
		t.Run(tc.team, func(t *testing.T) {
			code, body := webtest.Get(t, h, "/usage/"+tc.team)
			if code != http.StatusOK {
				t.Fatalf("/usage/%s: %d", tc.team, code)
			}
			got := webtest.HTMLRows(t, body, "team-limits", webtest.ByAttr("data-limit"))
			if diff := gocmp.Diff(tc.want, got); diff != "" {
				t.Errorf("limits: flavor, resource, nominal, in use, borrowing limit, lending limit, borrowed, lent (-want +got):\n%s", diff)
			}
		})
	}
}

// A team's page shows its figures in every resource it has: a queue made
// as Kueue's getting-started example makes it (vCPU and memory, no GPUs)
// gets vCPU and memory columns, with what its waiting task asks for; a
// team of the console gets GPUs, vCPU and memory.
func TestTeamPageShowsEveryResourceItHas(t *testing.T) {
	f := newFixture(t, 1, 0)
	s, now := f.settings, time.Now()
	objs := kueuetest.Cluster(s, s.Cohort, 1, 0, now)
	objs.ClusterQueues[0] = (&kueuetest.ClusterQueueWrapper{ClusterQueue: *objs.ClusterQueues[0]}).
		Quota("ml.p5.48xlarge", corev1.ResourceCPU, "192").Quota("ml.p5.48xlarge", corev1.ResourceMemory, "2Ti").Obj()
	objs.AddQuickStart()
	pod := corev1.PodSpec{Containers: []corev1.Container{{Name: "dummy-job", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("200Mi")}}}}}
	objs.Workloads = append(objs.Workloads, kueuetest.MakeWorkload(s, "default", "sample-job").Queue("user-queue").
		PodSpec("main", 3, pod).Created(now.Add(-time.Minute)).Obj())
	f.model.publish(snapshotOf(s, objs, now))
	h := f.handler()

	byHeading := func(n *html.Node) string {
		for ch := n.FirstChild; ch != nil; ch = ch.NextSibling {
			if ch.Type == html.ElementNode && (ch.Data == "th" || ch.Data == "td") {
				return cmp.Or(strings.TrimSpace(webtest.NodeText(ch)), "resource")
			}
		}
		return ""
	}
	for _, tc := range []struct {
		team   string
		want   map[string][]string
		charts []string
	}{
		{"cluster-queue", map[string][]string{
			"resource":                  {"", "vCPU", "Memory (GiB)"},
			"Allocated":                 {"Allocated", "9", "36"},
			"In use by tasks":           {"In use by tasks", "0", "0"},
			"Borrowed from other teams": {"Borrowed from other teams", "0", "0"},
			"Lent to other teams":       {"Lent to other teams", "0", "0"},
			"Pending demand":            {"Pending demand", "3", "0.59"},
			"Allocation utilization":    {"Allocation utilization", "0 %", "0 %"},
		}, []string{"vCPU in use vs quota", "Borrowed vCPU"}},
		{"team-000", map[string][]string{
			"resource":                  {"", "GPUs", "vCPU", "Memory (GiB)"},
			"Allocated":                 {"Allocated", "8", "192", "2048"},
			"In use by tasks":           {"In use by tasks", "0", "0", "0"},
			"Borrowed from other teams": {"Borrowed from other teams", "0", "0", "0"},
			"Lent to other teams":       {"Lent to other teams", "0", "0", "0"},
			"Pending demand":            {"Pending demand", "0", "0", "0"},
			"Allocation utilization":    {"Allocation utilization", "0 %", "0 %", "0 %"},
		}, []string{"GPUs in use vs quota", "Borrowed GPUs", "Hardware GPU utilization"}},
	} {
		t.Run(tc.team, func(t *testing.T) {
			_, body := webtest.Get(t, h, "/usage/"+tc.team)
			if diff := gocmp.Diff(tc.want, webtest.HTMLRows(t, body, "team-summary", byHeading)); diff != "" {
				t.Errorf("the team's figures by resource (-want +got):\n%s", diff)
			}
			// Its charts are of its first resource; of hardware utilization
			// only for GPUs.
			var charts []string
			for _, m := range regexp.MustCompile(`class="chart-title" id="[^"]*">([^<]*)<`).FindAllStringSubmatch(body, -1) {
				charts = append(charts, m[1])
			}
			if diff := gocmp.Diff(tc.charts, charts); diff != "" {
				t.Errorf("the team's charts (-want +got):\n%s", diff)
			}
		})
	}
}

// The overview's ClusterQueues and the Teams page's queues of other
// managers name each queue's quota in the resources it has.
func TestQueueListsNameTheQuotaInItsResources(t *testing.T) {
	f := newFixture(t, 1, 0)
	s, now := f.settings, time.Now()
	objs := kueuetest.Cluster(s, s.Cohort, 1, 0, now)
	objs.AddQuickStart()
	f.model.publish(snapshotOf(s, objs, now))
	f.cluster.overview = domain.BuildOverview(s, nil, objs.ClusterQueues)
	h := f.handler()

	_, body := webtest.Get(t, h, "/")
	rows := webtest.HTMLRows(t, body, "cluster-queues", webtest.ByAttr("data-cluster-queue"))
	got := map[string]string{}
	for name, cells := range rows {
		got[name] = cells[2]
	}
	want := map[string]string{"cluster-queue": "9 vCPU · 36 GiB", s.ClusterQueue("team-000"): "8 GPUs"}
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("the overview's nominal quotas (-want +got):\n%s", diff)
	}
	_, body = webtest.Get(t, h, "/teams")
	if got := webtest.HTMLRows(t, body, "queues", webtest.ByAttr("data-queue"))["cluster-queue"]; len(got) < 6 || got[5] != "9 vCPU · 36 GiB" {
		t.Errorf("the Teams page's row of cluster-queue: %q, want its quota 9 vCPU · 36 GiB", got)
	}
	code, body := webtest.Get(t, h, "/?format=csv&table=cluster-queues")
	header, csvRows := webtest.ReadCSV(t, "the ClusterQueues CSV", code, body)
	row := webtest.CSVRecords(header, csvRows, func(r map[string]string) string { return r["ClusterQueue"] })["cluster-queue"]
	if row["Nominal GPU quota (count)"] != "0" || row["Nominal vCPU quota (count)"] != "9" || row["Nominal memory quota (GiB)"] != "36" {
		t.Errorf("the ClusterQueues CSV's row of cluster-queue: %v", row)
	}
}

func ptr[T any](v T) *T { return &v }

// A stopped queue says how on the usage page and on its team's page, and a
// team's page names its stopped LocalQueues: Kueue admits nothing there.
func TestPagesSayHowAQueueIsStopped(t *testing.T) {
	f := newFixture(t, 2, 0)
	s, now := f.settings, time.Now()
	objs := kueuetest.Cluster(s, s.Cohort, 2, 0, now)
	drain := kueuev1beta2.HoldAndDrain
	objs.ClusterQueues[1].Spec.StopPolicy = &drain
	held := kueuetest.MakeLocalQueue(s.Namespace("team-000"), "urgent", s.ClusterQueue("team-000"))
	hold := kueuev1beta2.Hold
	held.Spec.StopPolicy = &hold
	objs.LocalQueues = append(objs.LocalQueues, held)
	f.model.publish(snapshotOf(s, objs, now))
	h := f.handler()

	_, usage := webtest.Get(t, h, "/usage")
	webtest.MustContain(t, "/usage", usage, "Disabled, drained", "stopPolicy HoldAndDrain")
	_, team0 := webtest.Get(t, h, "/usage/team-000")
	webtest.MustContain(t, "/usage/team-000", team0, "LocalQueue "+s.Namespace("team-000")+"/urgent (stopPolicy Hold) is stopped")
	_, team1 := webtest.Get(t, h, "/usage/team-001")
	webtest.MustContain(t, "/usage/team-001", team1, `id="team-stopped"`, "Held and drained (stopPolicy HoldAndDrain)")
}

// Quota Kueue reserves for tasks that wait for admission checks is shown
// beside what admitted tasks use: no one else can have it.
func TestUsageShowsQuotaReservedForAdmissionChecks(t *testing.T) {
	f := newFixture(t, 1, 0)
	s, now := f.settings, time.Now()
	objs := kueuetest.Cluster(s, s.Cohort, 1, 0, now)
	cq := objs.ClusterQueues[0]
	cq.Status.FlavorsUsage[0].Resources[0].Total = resource.MustParse("2")
	cq.Status.FlavorsReservation = []kueuev1beta2.FlavorUsage{{Name: cq.Status.FlavorsUsage[0].Name,
		Resources: []kueuev1beta2.ResourceUsage{{Name: domain.ResourceGPU, Total: resource.MustParse("6")}}}}
	f.model.publish(snapshotOf(s, objs, now))
	_, body := webtest.Get(t, f.handler(), "/usage")
	webtest.MustContain(t, "/usage", body, "2 (+4 reserved for tasks waiting for admission checks)")
}
