package handlers_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/html"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/form"
	"github.com/openquota/console/internal/kueuetest"
	"github.com/openquota/console/internal/webtest"
	"github.com/openquota/console/internal/write"
)

// The insights page lists what needs attention, each team's only to who
// sees that team; the overview's headline sums the cluster and counts the
// insights the viewer may see.
func TestInsightsAndHeadline(t *testing.T) {
	f := newFixture(t, 2, 0).withProxy()
	s, now := f.settings, time.Now()
	objs := kueuetest.Cluster(s, s.Cohort, 2, 0, now)
	objs.Workloads = append(objs.Workloads,
		kueuetest.MakeWorkload(s, s.Namespace("team-000"), "stuck").Queue(s.LocalQueue("team-000")).GPUs(8, 1).
			Created(now.Add(-3*time.Hour)).Pending("Pending", "couldn't assign flavors", now.Add(-3*time.Hour)).Obj(),
		kueuetest.MakeWorkload(s, s.Namespace("team-001"), "run").Queue(s.LocalQueue("team-001")).GPUs(2, 1).
			Created(now.Add(-time.Hour)).Admitted(now.Add(-time.Hour), "ml.p5.48xlarge").Obj())
	for _, cq := range objs.ClusterQueues {
		cq.Spec.ResourceGroups = kueuetest.MakeClusterQueue(cq.Name).Nominal(8, nil).Obj().Spec.ResourceGroups
	}
	objs.ClusterQueues[1].Status = kueuetest.MakeClusterQueue("x").Usage(2, 0).Obj().Status
	f.model.publish(snapshotOf(s, objs, now))
	f.cluster.overview = domain.Overview{InstanceTypes: []domain.InstanceTypeCapacity{{Type: "ml.p5.48xlarge", Count: 2, Ready: 1, NotReady: 1, GPUs: 16}}}
	f.access.grant("admin", listClusterQueues)
	f.access.grant("member", listWorkloads(s.Namespace("team-001")))

	code, body := user(t, f.handler(), "admin").Get("/insights")
	if code != http.StatusOK {
		t.Fatalf("/insights: %d\n%.300s", code, body)
	}
	got := webtest.HTMLRows(t, body, "insights", webtest.ByAttr("data-rule"))
	for _, rule := range []string{"long-wait", "quota-beyond-capacity", "not-ready-nodes"} {
		if _, ok := got[rule]; !ok {
			t.Errorf("no %s insight: %v", rule, got)
		}
	}
	if row := got["long-wait"]; len(row) < 3 || row[1] != "team-000" || !strings.Contains(row[2], "the longest for 3h 00m") {
		t.Errorf("long wait row %v", row)
	}

	_, body = user(t, f.handler(), "member").Get("/insights")
	if strings.Contains(body, `data-rule="long-wait"`) {
		t.Error("a member of team-001 sees team-000's long wait")
	}

	// The list as CSV: the page's rows, of what the viewer may see.
	webtest.MustContain(t, "the insights page", body, `id="export-insights"`, `href="/insights?format=csv"`)
	csvOf := func(who string) map[string]map[string]string {
		code, body := user(t, f.handler(), who).Get("/insights?format=csv")
		header, rows := webtest.ReadCSV(t, "the insights CSV of "+who, code, body)
		return webtest.CSVRecords(header, rows, func(r map[string]string) string { return r["Rule"] })
	}
	admin := csvOf("admin")
	if r := admin["long-wait"]; r["Team"] != "team-000" || r["Severity"] != got["long-wait"][0] || !strings.Contains(r["Title"], "the longest for 3h 00m") ||
		r["Link"] == "" || len(admin) != len(got) {
		t.Errorf("the admin's insights CSV %v, want the page's %d rows", admin, len(got))
	}
	if _, ok := csvOf("member")["long-wait"]; ok {
		t.Error("a member of team-001 gets team-000's long wait in the CSV")
	}

	_, body = user(t, f.handler(), "admin").Get("/")
	want := map[string]string{"headline-ready": "8", "headline-allocated": "16", "headline-in-use": "2", "headline-waiting": "1",
		"headline-longest-wait": "3h 00m", "headline-idle": "—"}
	doc, err := html.Parse(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	gotHead := map[string]string{}
	for id := range want {
		if n := webtest.FindNode(doc, func(n *html.Node) bool { return webtest.Attr(n, "id") == id }); n != nil {
			gotHead[id] = strings.TrimSpace(webtest.NodeText(n))
		}
	}
	if diff := cmp.Diff(want, gotHead); diff != "" {
		t.Errorf("headline (-want +got):\n%s", diff)
	}
}

// A team's page lists the insights about that team; /insights?team= lists
// only them.
func TestTeamInsights(t *testing.T) {
	f := newFixture(t, 2, 0)
	s, now := f.settings, time.Now()
	objs := kueuetest.Cluster(s, s.Cohort, 2, 0, now)
	objs.Workloads = append(objs.Workloads,
		kueuetest.MakeWorkload(s, s.Namespace("team-000"), "stuck").Queue(s.LocalQueue("team-000")).GPUs(8, 1).
			Created(now.Add(-3*time.Hour)).Pending("Pending", "couldn't assign flavors", now.Add(-3*time.Hour)).Obj())
	f.model.publish(snapshotOf(s, objs, now))
	h := f.handler()
	_, body := webtest.Get(t, h, "/usage/team-000")
	webtest.MustContain(t, "team-000's page", body, `id="team-insights"`, `data-rule="long-wait"`)
	if _, body := webtest.Get(t, h, "/usage/team-001"); strings.Contains(body, `data-rule="long-wait"`) {
		t.Error("team-001's page lists team-000's long wait")
	}
	_, body = webtest.Get(t, h, "/insights?team=team-001")
	if strings.Contains(body, `data-rule="long-wait"`) {
		t.Error("/insights?team=team-001 lists team-000's long wait")
	}
}

// The cluster policy sets when the insights speak up: a long wait of 4 h
// with a 3 h wait is no insight; a class's own 2 h is. The policy form keeps
// a threshold it refuses, with the reason next to the field.
func TestInsightThresholdsFromThePolicy(t *testing.T) {
	f := newFixture(t, 1, 0)
	s, now := f.settings, time.Now()
	objs := kueuetest.Cluster(s, s.Cohort, 1, 0, now)
	objs.Workloads = append(objs.Workloads, kueuetest.MakeWorkload(s, s.Namespace("team-000"), "stuck").Queue(s.LocalQueue("team-000")).
		Class("training").GPUs(8, 1).Created(now.Add(-3*time.Hour)).Pending("Pending", "couldn't assign flavors", now.Add(-3*time.Hour)).Obj())
	f.model.publish(snapshotOf(s, objs, now))
	rulesOf := func(body string) []string {
		var rules []string
		for rule := range webtest.HTMLRows(t, body, "insights", webtest.ByAttr("data-rule")) {
			rules = append(rules, rule)
		}
		return rules
	}

	f.cluster.policy = domain.Policy{Prioritization: domain.TaskRanking, IdleAllocation: domain.IdleFairShare,
		Alerts: domain.PolicyAlerts{LongWaitMinutes: 240}, Classes: []domain.PriorityClass{{Name: "training", Weight: 10}}}
	_, body := webtest.Get(t, f.handler(), "/insights")
	webtest.MustContain(t, "the insights' thresholds", body, "Long wait: over 4h 00m;")
	for _, rule := range rulesOf(body) {
		if rule == "long-wait" || rule == "starving-class" {
			t.Errorf("a 3 h wait under a 4 h threshold is insight %s", rule)
		}
	}

	f.cluster.policy.Classes[0].LongWaitMinutes = 120
	_, body = webtest.Get(t, f.handler(), "/insights")
	webtest.MustContain(t, "the insights' thresholds", body, "(class training: 2h 00m)")
	if rules := rulesOf(body); !slices.Contains(rules, "long-wait") {
		t.Errorf("a 3 h wait of a class with a 2 h threshold: insights %v", rules)
	}

	_, body = webtest.Get(t, f.handler(), "/policy")
	if got := webtest.FormValues(t, body, "policy-form"); got.Get("alerts.longWait") != "240" || got.Get("class.0.longWait") != "120" {
		t.Errorf("the policy form shows long waits %q and %q", got.Get("alerts.longWait"), got.Get("class.0.longWait"))
	}
	// The write path refuses an idle alert of 101 %: the form shows why
	// next to the field, with what was typed.
	typed := url.Values{"prioritization": {"TaskRanking"}, "idleAllocation": {"FairShare"}, "class.0.name": {"training"},
		"class.0.weight": {"10"}, "alerts.idleUtilization": {"101"}}
	_, errs := form.ParsePolicy(typed).Validate()
	f.writes.outcome = &write.Outcome{Kind: write.Rejected, Fields: errs}
	b := webtest.NewBrowser(t, f.handler(), nil)
	b.Get("/policy")
	code, _, body := b.Post("/policy", typed)
	if code != http.StatusUnprocessableEntity {
		t.Fatalf("an idle alert of 101 %%: %d", code)
	}
	webtest.MustContain(t, "the refused form", body, `data-error-for="alerts.idleUtilization"`,
		"Enter a whole percentage from 1 to 100", `value="101"`)
}

// The insights page's list is live: a node that stops being ready (no
// change of the read model) reaches an open page as the rules find it, and
// its recovery clears it there.
func TestInsightsReachAnOpenPage(t *testing.T) {
	f := newFixture(t, 2, 0)
	capacity := func(notReady int) {
		f.cluster.mu.Lock()
		defer f.cluster.mu.Unlock()
		f.cluster.overview = domain.Overview{InstanceTypes: []domain.InstanceTypeCapacity{
			{Type: "ml.p5.48xlarge", Count: 4, Ready: 4 - notReady, NotReady: notReady, GPUs: 32}}}
	}
	capacity(0)
	srv := httptest.NewServer(f.handler())
	t.Cleanup(srv.Close)
	if _, body := webtest.Get(t, srv.Config.Handler, "/insights"); strings.Contains(body, "not-ready-nodes") {
		t.Fatalf("insights with every node ready:\n%.600s", body)
	}
	pushes := webtest.Watch(t, srv.URL, "/insights", f.model.Snapshot().Version, nil)
	capacity(1)
	// A request for the page may find the change first (it runs the rules
	// when they are stale): the open page is pushed it all the same.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, body := webtest.Get(t, srv.Config.Handler, "/insights"); strings.Contains(body, "not-ready-nodes") {
			break
		}
	}
	webtest.AwaitPart(t, pushes, 10*time.Second, "insights-live", "a node not ready", func(list string) bool {
		return strings.Contains(list, `data-rule="not-ready-nodes"`) && strings.Contains(list, "1 of 4 ml.p5.48xlarge nodes not ready")
	})
	capacity(0)
	webtest.AwaitPart(t, pushes, 10*time.Second, "insights-live", "every node ready again", func(list string) bool {
		return !strings.Contains(list, "not-ready-nodes")
	})
}

// A member of a team that borrows read, in its borrowing insight, the name
// of a lender of its cohort and how many GPUs that team's tasks wait for:
// another team's figures they may not see. They read that a team that
// lends to theirs waits; a platform viewer still reads which.
func TestTheBorrowingInsightNamesNoTeamTheMemberMayNotSee(t *testing.T) {
	f := newFixture(t, 2, 0).withProxy()
	s, now := f.settings, time.Now()
	objs := kueuetest.Cluster(s, s.Cohort, 2, 0, now)
	// team-000 holds 10 of its 8 GPUs; team-001 lends and waits for 6.
	objs.ClusterQueues[0].Status = kueuetest.MakeClusterQueue("x").Usage(10, 2).Obj().Status
	objs.ClusterQueues[1].Status = kueuetest.MakeClusterQueue("x").Usage(0, 0).Obj().Status
	objs.Workloads = append(objs.Workloads,
		kueuetest.MakeWorkload(s, s.Namespace("team-001"), "waits").Queue(s.LocalQueue("team-001")).GPUs(6, 1).
			Created(now.Add(-time.Minute)).Pending("Pending", "couldn't assign flavors", now.Add(-time.Minute)).Obj())
	f.model.publish(snapshotOf(s, objs, now))
	f.access.grant("member", listWorkloads(s.Namespace("team-000")))
	f.access.grant("viewer", listClusterQueues)
	h := f.handler()

	code, body := user(t, h, "viewer").Get("/insights?format=csv")
	header, rows := webtest.ReadCSV(t, "the viewer's insights CSV", code, body)
	if title := webtest.CSVRecords(header, rows, func(r map[string]string) string { return r["Rule"] })["borrowing"]["Title"]; !strings.Contains(title, "team-001") {
		t.Fatalf("the viewer's borrowing insight %q does not name the lender", title)
	}
	for _, path := range []string{"/insights", "/insights?format=csv", "/usage/team-000"} {
		code, body := user(t, h, "member").Get(path)
		if code != http.StatusOK || !strings.Contains(body, "borrow") {
			t.Fatalf("the member's %s: %d, no borrowing insight\n%.300s", path, code, body)
		}
		webtest.MustNotContain(t, "the member's "+path, body, "team-001", "6 GPUs")
	}
}

// A store that opened but now refuses the recorder's writes (a full disk,
// a database gone read-only) still answers the pages with what it holds:
// the insights say that recording has stopped.
func TestInsightsSayWhenTheTaskHistoryStopsRecording(t *testing.T) {
	f := newFixture(t, 2, 0).withProxy()
	f.access.grant("admin", listClusterQueues)
	history := &taskHistory{recording: errors.New("database or disk is full")}
	f.cfg.TaskHistory = history
	_, body := user(t, f.handler(), "admin").Get("/insights")
	webtest.MustContain(t, "insights", body, `data-rule="dependency"`, "The task history store refuses new records")
}
