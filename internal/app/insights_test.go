package app_test

import (
	"context"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/handlers"
	"github.com/openquota/console/internal/metrics"
	"github.com/openquota/console/internal/testenv"
	"github.com/openquota/console/internal/webtest"
	"github.com/openquota/console/sandbox/sandboxtest"
)

// The insight rules on a real cluster, with the policy's thresholds at a
// minute: a team whose job holds GPUs at 2 % (dcgm-exporter's stand-in,
// through the real Prometheus) is idle; it borrows from a team whose own
// job waits (it asks for an instance type the team has no quota of), so
// the lender's wait is long and the borrowing sustained once a minute has
// passed. Each insight appears on /insights and clears when its job goes.
func TestInsightsAppearAndClear(t *testing.T) {
	prom, err := metrics.NewProm(sandboxtest.Env(t).PrometheusURL)
	if err != nil {
		t.Fatal(err)
	}
	c := newConsoleWith(t, nil, func(d *handlers.Config) { d.Prometheus = prom })
	t.Cleanup(func() { cleanupTeams(c) })
	ctx := context.Background()

	policy := url.Values{"prioritization": {"FirstComeFirstServe"}, "idleAllocation": {"FirstComeFirstServe"},
		"alerts.longWait": {"1"}, "alerts.borrowing": {"1"}}
	if code, _, body := c.post(t, "/policy", policy); code != 303 {
		t.Fatalf("saving the policy's thresholds: %d\n%.600s", code, body)
	}
	borrower := webtest.TeamForm("borrower", "1")
	borrower.Set("borrowLimit", "100")
	createTeam(t, c, borrower)
	createTeam(t, c, webtest.TeamForm("lender", "2"))

	busy := testenv.Submit(t, c.kube, testenv.Job{Namespace: c.settings.Namespace("borrower"), LocalQueue: c.settings.LocalQueue("borrower"),
		Name: "notebook", GPUs: 2, InstanceType: "ml.p5.48xlarge", GPUUtil: "2"})
	testenv.WorkloadOf(t, c.kueue, busy, "admitted", testenv.CondTrue(kueuev1beta2.WorkloadAdmitted))
	stuck := testenv.Submit(t, c.kube, testenv.Job{Namespace: c.settings.Namespace("lender"), LocalQueue: c.settings.LocalQueue("lender"),
		Name: "elsewhere", GPUs: 1, InstanceType: "ml.g6.12xlarge"})

	// insights are each team's rules shown now, with their titles.
	insights := func(team string) map[string]string {
		_, page := c.get(t, "/insights?team="+team)
		out := map[string]string{}
		for rule, cells := range webtest.HTMLRows(t, page, "insights", webtest.ByAttr("data-rule")) {
			out[rule] = strings.Join(cells, " | ")
		}
		return out
	}
	until := func(what string, ok func() bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(context.Context) (bool, error) { return ok(), nil }); err != nil {
			t.Fatalf("%s: borrower's insights %v, lender's %v", what, insights("borrower"), insights("lender"))
		}
	}
	until("the idle, sustained borrowing and long wait insights never all appeared", func() bool {
		b, l := insights("borrower"), insights("lender")
		return strings.Contains(b["idle-gpus"], "holds 2 GPUs at 2 % utilization") &&
			strings.Contains(b["borrowing"], "borrowing for") && strings.Contains(b["borrowing"], "warning") &&
			strings.Contains(l["long-wait"], "1 task of class")
	})

	if err := c.kube.BatchV1().Jobs(busy.Namespace).Delete(ctx, busy.Name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}); err != nil {
		t.Fatal(err)
	}
	until("the borrower's insights never cleared after its job went", func() bool {
		b := insights("borrower")
		return !slices.ContainsFunc([]string{"idle-gpus", "borrowing"}, func(rule string) bool { _, ok := b[rule]; return ok })
	})
	if err := c.kube.BatchV1().Jobs(stuck.Namespace).Delete(ctx, stuck.Name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}); err != nil {
		t.Fatal(err)
	}
	until("the lender's long wait never cleared after its job went", func() bool {
		_, ok := insights("lender")["long-wait"]
		return !ok
	})
}
