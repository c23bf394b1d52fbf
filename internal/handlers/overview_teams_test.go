package handlers_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/html"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/kueuetest"
	"github.com/openquota/console/internal/webtest"
)

// A team member's overview starts with their teams: quota, use, borrowing,
// tasks, and how much more they can borrow from their cohort tree now (or
// why nothing); a viewer of the whole cluster gets no such section.
func TestOverviewShowsMembersTheirTeams(t *testing.T) {
	f := newFixture(t, 3, 0).withProxy()
	s, now := f.settings, time.Now()
	// Three queues of 8 GPUs using 0, 1 and 2 (kueuetest.Cluster), in a
	// cohort under org, which has 4 GPUs of its own; team-001 uses 9 and
	// borrows 1, all its borrowing limit allows.
	objs := kueuetest.Cluster(s, s.Cohort, 3, 30, now)
	team1 := objs.ClusterQueues[1]
	team1.Spec.ResourceGroups[0].Flavors[0].Resources[0].BorrowingLimit = resource.NewQuantity(1, resource.DecimalSI)
	team1.Status.FlavorsUsage[0].Resources[0].Total = *resource.NewQuantity(9, resource.DecimalSI)
	team1.Status.FlavorsUsage[0].Resources[0].Borrowed = *resource.NewQuantity(1, resource.DecimalSI)
	cohorts := []*kueuev1beta2.Cohort{kueuetest.MakeCohort("org", "", 4), kueuetest.MakeCohort(s.Cohort, "org", 0)}
	f.model.publish(snapshotOf(s, objs, now))
	f.cluster.overview = domain.BuildOverview(s, nil, objs.ClusterQueues)
	f.cluster.overview.Cohorts = domain.CohortTree(s, cohorts, objs.ClusterQueues)
	f.access.grant("alice", listWorkloads(s.Namespace("team-000")))
	f.access.grant("bob", listWorkloads(s.Namespace("team-001")), listWorkloads(s.Namespace("team-002")))
	f.access.grant("admin", listClusterQueues)
	h := f.handler()

	// Task i of the 30 is team i%3's, asks for 1+i%4 GPUs, and runs when
	// i%6 is 0 or 1, waits when 2 or 3, was preempted (waits) when 4.
	cases := []struct {
		user    string
		figures map[string][]string
		borrow  map[string]string
	}{
		{"alice", map[string][]string{"team-000": {"8", "0", "0", "5", "5", "16"}}, map[string]string{
			// Idle and lendable: team-002's 6, org's own 4, less team-001's 1 borrowed.
			"team-000": "You can borrow up to 9 more GPUs right now."}},
		{"bob", map[string][]string{"team-001": {"8", "9", "1", "5", "5", "9"}, "team-002": {"8", "2", "0", "0", "5", "11"}}, map[string]string{
			"team-001": "Your team cannot borrow right now: it already borrows 1 GPU, as much as its borrowing limit allows.",
			// team-000's 8 and org's 4, less 1 borrowed.
			"team-002": "You can borrow up to 11 more GPUs right now."}},
	}
	for _, tc := range cases {
		t.Run(tc.user, func(t *testing.T) {
			_, body := user(t, h, tc.user).Get("/")
			figures, borrow := map[string][]string{}, map[string]string{}
			for team := range tc.figures {
				figures[team] = webtest.HTMLRows(t, body, "your-team-"+team, webtest.ByAttr("data-team"))[team]
				webtest.MustContain(t, tc.user+"'s overview", body, "Your team "+team,
					`href="/usage/`+team+`"`, `href="/tasks?team=`+team+`"`)
			}
			if diff := cmp.Diff(tc.figures, figures); diff != "" {
				t.Errorf("team figures: GPU quota, in use, borrowed, running, pending, pending GPUs (-want +got):\n%s", diff)
			}
			doc, err := html.Parse(strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			for team := range tc.borrow {
				if n := webtest.FindNode(doc, func(n *html.Node) bool { return webtest.Attr(n, "data-borrow") == team }); n != nil {
					borrow[team] = strings.Join(strings.Fields(webtest.NodeText(n)), " ")
				}
			}
			if diff := cmp.Diff(tc.borrow, borrow); diff != "" {
				t.Errorf("what the teams may borrow (-want +got):\n%s", diff)
			}
		})
	}

	_, body := user(t, h, "admin").Get("/")
	webtest.MustNotContain(t, "an admin's overview", body, "Your team", "data-your-team")
}

// A member of a team whose queue has vCPU and memory and no GPUs, as in
// Kueue's own shared-quota example, reads its figures and what it may
// borrow in vCPU, not as 0 GPUs.
func TestOverviewShowsATeamWithoutGPUsInVCPU(t *testing.T) {
	f := newFixture(t, 0, 0).withProxy()
	s, now := f.settings, time.Now()
	teamA := kueuetest.MakeClusterQueue("team-a-cq").Cohort("team-ab").
		Quota("default-flavor", corev1.ResourceCPU, "9").Quota("default-flavor", corev1.ResourceMemory, "36Gi").
		UsageOf("default-flavor", corev1.ResourceCPU, "9", "0").Obj()
	teamB := kueuetest.MakeClusterQueue("team-b-cq").Cohort("team-ab").
		Quota("default-flavor", corev1.ResourceCPU, "12").Quota("default-flavor", corev1.ResourceMemory, "48Gi").Obj()
	lends := resource.MustParse("2500m")
	teamB.Spec.ResourceGroups[0].Flavors[0].Resources[0].LendingLimit = &lends
	objs := kueuetest.Objects{ClusterQueues: []*kueuev1beta2.ClusterQueue{teamA, teamB},
		LocalQueues: []*kueuev1beta2.LocalQueue{kueuetest.MakeLocalQueue("team-a", "user-queue", "team-a-cq"), kueuetest.MakeLocalQueue("team-b", "user-queue", "team-b-cq")}}
	f.model.publish(snapshotOf(s, objs, now))
	f.cluster.overview = domain.BuildOverview(s, nil, objs.ClusterQueues)
	f.cluster.overview.Cohorts = domain.CohortTree(s, nil, objs.ClusterQueues)
	f.access.grant("alice", listWorkloads("team-a"))
	h := f.handler()

	_, body := user(t, h, "alice").Get("/")
	if diff := cmp.Diff([]string{"9", "9", "0", "0", "0", "0"}, webtest.HTMLRows(t, body, "your-team-team-a-cq", webtest.ByAttr("data-team"))["team-a-cq"]); diff != "" {
		t.Errorf("team figures: quota, in use, borrowed, running, pending, pending ask (-want +got):\n%s", diff)
	}
	webtest.MustContain(t, "alice's overview", body, `data-unit="vCPU"`, "You can borrow up to 2.5 more vCPU right now.")
}

// A team with quota on two GPU flavors is told on which it can borrow:
// a task takes one flavor whole.
func TestOverviewSaysOnWhichFlavorATeamCanBorrow(t *testing.T) {
	f := newFixture(t, 0, 0).withProxy()
	s, now := f.settings, time.Now()
	teamA := kueuetest.MakeClusterQueue("team-a-cq").Cohort("pool").
		Quota("a100", kueuetest.GPU, "2").Quota("l4", kueuetest.GPU, "2").UsageOf("a100", kueuetest.GPU, "2", "0").Obj()
	teamB := kueuetest.MakeClusterQueue("team-b-cq").Cohort("pool").Quota("a100", kueuetest.GPU, "4").Obj()
	objs := kueuetest.Objects{ClusterQueues: []*kueuev1beta2.ClusterQueue{teamA, teamB},
		LocalQueues: []*kueuev1beta2.LocalQueue{kueuetest.MakeLocalQueue("team-a", "user-queue", "team-a-cq")}}
	f.model.publish(snapshotOf(s, objs, now))
	f.cluster.overview = domain.BuildOverview(s, nil, objs.ClusterQueues)
	f.cluster.overview.Cohorts = domain.CohortTree(s, nil, objs.ClusterQueues)
	f.access.grant("alice", listWorkloads("team-a"))

	_, body := user(t, f.handler(), "alice").Get("/")
	// team-b's 4 idle A100s; team-a's own L4s are idle, not borrowed.
	webtest.MustContain(t, "alice's overview", body, "You can borrow up to 4 more GPUs right now (4 on a100).")
}
