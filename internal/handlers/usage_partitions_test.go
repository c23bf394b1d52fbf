package handlers_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/html"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/kueuetest"
	"github.com/openquota/console/internal/webtest"
)

// The usage page offers each MIG profile a team has quota of beside the
// four resources: allocated, in use, borrowed and lent partitions as Kueue
// counts them, and the partitions' hardware utilization (dcgm-exporter's
// engine activity per profile); the team's page names that utilization.
func TestUsagePageShowsPartitionsPerProfile(t *testing.T) {
	f := newFixture(t, 2, 0)
	s, now := f.settings, time.Now()
	objs := kueuetest.Cluster(s, s.Cohort, 2, 0, now)
	mig := domain.PartitionResource("mig-1g.10gb")
	q := resource.MustParse
	for i, cq := range objs.ClusterQueues {
		w := &kueuetest.ClusterQueueWrapper{ClusterQueue: *cq}
		objs.ClusterQueues[i] = w.Quota("ml.p4de.24xlarge", mig, "7").Obj()
	}
	// team-000 uses 9 of its 7: it borrows 2, which team-001 lends.
	objs.ClusterQueues[0].Status.FlavorsUsage = append(objs.ClusterQueues[0].Status.FlavorsUsage, kueuev1beta2.FlavorUsage{
		Name: "ml.p4de.24xlarge", Resources: []kueuev1beta2.ResourceUsage{{Name: mig, Total: q("9"), Borrowed: q("2")}}})
	f.model.publish(snapshotOf(s, objs, now))
	f.cfg.Prometheus = prometheus{util: map[string]float64{f.settings.Namespace("team-000"): 73},
		partitions: map[string]map[string]float64{f.settings.Namespace("team-000"): {"mig-1g.10gb": 41}}}
	h := f.handler()

	code, body := webtest.Get(t, h, "/usage")
	if code != http.StatusOK {
		t.Fatalf("/usage: %d", code)
	}
	webtest.MustContain(t, "/usage", body, `href="/usage?resource=mig-1g.10gb"`)

	code, body = webtest.Get(t, h, "/usage?resource=mig-1g.10gb")
	if code != http.StatusOK {
		t.Fatalf("/usage?resource=mig-1g.10gb: %d", code)
	}
	cells := func(n *html.Node) string { return webtest.Attr(n, "data-team") + webtest.Attr(n, "data-total") }
	want := map[string][]string{
		// team, allocated, in use, borrowed, lent, pending demand, allocation and hardware utilization, running, pending
		"team-000": {"team-000", "7", "9", "2", "0", "0", "129 %", "41 %", "0", "0"},
		"team-001": {"team-001", "7", "0", "0", "2", "0", "0 %", "—", "0", "0"},
		"true":     {"Total", "14", "9", "2", "2", "0", "64 %", "41 % (teams weighted by use)", "0", "0"},
	}
	if diff := cmp.Diff(want, webtest.HTMLRows(t, body, "team-usage", cells)); diff != "" {
		t.Errorf("mig-1g.10gb usage (-want +got):\n%s", diff)
	}
	webtest.MustContain(t, "the profile's table", body, "Allocated (partitions)")

	code, body = webtest.Get(t, h, "/usage?resource=mig-1g.10gb&format=csv")
	header, rows := webtest.ReadCSV(t, "/usage?resource=mig-1g.10gb&format=csv", code, body)
	byTeam := webtest.CSVRecords(header, rows, func(r map[string]string) string { return r["Team"] })
	for team, wantRow := range map[string]map[string]string{
		"team-000": {"Allocated (partitions)": "7", "Borrowed (partitions)": "2", "Hardware utilization of the mig-1g.10gb partitions (%)": "41"},
		"team-001": {"Lent (partitions)": "2"},
		"Total":    {"In use by tasks (partitions)": "9"},
	} {
		for col, v := range wantRow {
			if got := byTeam[team][col]; got != v {
				t.Errorf("CSV %s %s: %q, want %q", team, col, got, v)
			}
		}
	}

	_, body = webtest.Get(t, h, "/usage/team-000")
	webtest.MustContain(t, "team-000's page", body, "Hardware utilization, mig-1g.10gb partitions", `data-profile="mig-1g.10gb">41 %`)
}

// A team's hardware utilization is its namespaces' GPUs': every namespace
// whose LocalQueues feed its ClusterQueue, whatever it is named, and none
// that feeds another team's queue too (dcgm-exporter names a GPU's
// namespace, not its task). A team without a reading has an empty cell in
// the CSV, never 0.
func TestUtilizationIsReadByTheNamespacesThatFeedAQueue(t *testing.T) {
	f := newFixture(t, 3, 0)
	s, now := f.settings, time.Now()
	objs := kueuetest.Cluster(s, s.Cohort, 3, 0, now)
	for _, cq := range objs.ClusterQueues[1:] {
		cq.Spec.NamespaceSelector = &metav1.LabelSelector{} // they serve any namespace, as imported queues may
	}
	objs.LocalQueues = append(objs.LocalQueues,
		kueuetest.MakeLocalQueue("data", "user-queue", s.ClusterQueue("team-002")),
		kueuetest.MakeLocalQueue("shared", "a", s.ClusterQueue("team-001")),
		kueuetest.MakeLocalQueue("shared", "b", s.ClusterQueue("team-002")))
	f.model.publish(snapshotOf(s, objs, now))
	f.cfg.Prometheus = prometheus{util: map[string]float64{"data": 50, "shared": 90, s.Namespace("team-002"): 10, s.Namespace("team-000"): 73}}
	h := f.handler()

	code, body := webtest.Get(t, h, "/usage?format=csv&resource=gpu")
	header, rows := webtest.ReadCSV(t, "/usage?format=csv", code, body)
	byTeam := webtest.CSVRecords(header, rows, func(r map[string]string) string { return r["Team"] })
	got := map[string]string{}
	for _, team := range []string{"team-000", "team-001", "team-002"} {
		got[team] = byTeam[team]["Hardware GPU utilization (%)"]
	}
	want := map[string]string{"team-000": "73", "team-001": "", "team-002": "30"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("hardware utilization by team (-want +got):\n%s", diff)
	}
}
