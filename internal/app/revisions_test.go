package app_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/deploy/rbac"
	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/handlers"
	"github.com/openquota/console/internal/kueue"
	"github.com/openquota/console/internal/webtest"
)

// auditConsole is a console on the sandbox whose teams are deleted when the
// test ends.
func auditConsole(t *testing.T, adjust func(*handlers.Config)) console {
	t.Helper()
	c := newConsoleWith(t, nil, adjust)
	t.Cleanup(func() { cleanupTeams(c) })
	return c
}

// auditProxyConsole is auditConsole in auth mode proxy: users come from the
// proxy's headers, writes impersonate them, forms need the CSRF token.
func auditProxyConsole(t *testing.T) console {
	t.Helper()
	a := proxyAuth()
	return auditConsole(t, func(d *handlers.Config) { d.Auth = a })
}

// History, diff and one-click rollback, as a signed-in admin behind the
// proxy: every form carries the CSRF token, every write is made as the admin
// and names them in the audit annotations, the revisions and the Events.
func TestTeamRevisionsAndRollbackAgainstSandbox(t *testing.T) {
	c := auditProxyConsole(t)
	ctx := context.Background()
	adminName := bindUser(t, c.kube, "admin", rbac.AdminRole)
	admin := c.as(t, adminName, "platform")

	_, _ = admin.Get("/teams/new")
	if code, location, body := admin.Post("/teams", webtest.TeamForm("hist", "4")); code != http.StatusSeeOther || location != "/teams?saved=hist" {
		t.Fatalf("create: %d %q\n%s", code, location, body)
	}
	_, _ = admin.Get("/teams/hist/edit")
	edit := webtest.TeamForm("hist", "6")
	edit.Set("enabled", "false")
	edit.Set("borrowLimit", "100")
	if code, _, body := admin.Post("/teams/hist", edit); code != http.StatusSeeOther {
		t.Fatalf("edit: %d\n%s", code, body)
	}

	code, body := admin.Get("/teams/hist/history")
	if code != http.StatusOK {
		t.Fatalf("GET the revisions: %d\n%s", code, body)
	}
	webtest.MustContain(t, "history", body, `data-rev="2"`, `data-rev="1"`, adminName,
		"quota ml.p5.48xlarge GPUs 4 → 6", "borrow limit 50 % → 100 %", "Enabled → Disabled",
		`action="/teams/hist/history/1/rollback"`, "Roll back to 1")
	webtest.MustNotContain(t, "history", body, `action="/teams/hist/history/2/rollback"`) // the current revision
	if token := webtest.Hidden(t, body, "_csrf"); token == "" {
		t.Errorf("the rollback form's _csrf field is empty")
	}

	// A post without the page's token is refused and changes nothing.
	if code, _, _ := admin.Post("/teams/hist/history/1/rollback", url.Values{"_csrf": {"forged"}}); code != http.StatusForbidden {
		t.Errorf("rollback with a forged CSRF token: %d, want 403", code)
	}
	if nominal, _ := gpuQuota(c.clusterQueue(t, "hist")); nominal.Value() != 6 {
		t.Fatalf("a refused rollback changed the quota to %s", &nominal)
	}

	_, _ = admin.Get("/teams/hist/history")
	code, location, body := admin.Post("/teams/hist/history/1/rollback", url.Values{})
	if code != http.StatusSeeOther || location != "/teams/hist/history?rolledback=1" {
		t.Fatalf("rollback: %d %q\n%s", code, location, body)
	}
	cq := c.clusterQueue(t, "hist")
	if nominal, borrowing := gpuQuota(cq); nominal.Value() != 4 || borrowing.Value() != 2 || *cq.Spec.StopPolicy != kueuev1beta2.None {
		t.Errorf("after rollback: nominal %s, borrowing %s, stopPolicy %s; want 4, 2, None", &nominal, &borrowing, *cq.Spec.StopPolicy)
	}
	if cq.Annotations[kueue.CreatedByAnnotation] != adminName || cq.Annotations[kueue.ChangedByAnnotation] != adminName {
		t.Errorf("ClusterQueue audit: created by %q, changed by %q; want %s", cq.Annotations[kueue.CreatedByAnnotation],
			cq.Annotations[kueue.ChangedByAnnotation], adminName)
	}
	_, body = admin.Get(location)
	webtest.MustContain(t, "history after the rollback", body, `id="flash"`, "rolled back to revision 1", `data-rev="3"`,
		"rollback to revision 1", "quota ml.p5.48xlarge GPUs 6 → 4", "Disabled → Enabled")
	_, body = admin.Get("/teams")
	webtest.MustContain(t, "teams list", body, `data-team="hist"`)

	events, err := c.kube.CoreV1().Events(domain.EventNamespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + cq.Name})
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]string{}
	for _, ev := range events.Items {
		reasons[ev.Reason] = ev.Message
	}
	for _, r := range []string{domain.ReasonTeamCreated, domain.ReasonTeamUpdated, domain.ReasonTeamRolledBack} {
		if !strings.HasPrefix(reasons[r], adminName+" ") {
			t.Errorf("event %s: %q", r, reasons[r])
		}
	}

	// A viewer sees the history read-only (or, where the viewer role may not
	// get ConfigMaps, why not), and may not roll back.
	viewerName := bindUser(t, c.kube, "viewer", rbac.ViewerRole)
	viewer := c.as(t, viewerName)
	code, body = viewer.Get("/teams/hist/history")
	if code != http.StatusOK {
		t.Errorf("viewer GET the revisions: %d", code)
	}
	webtest.MustContain(t, "viewer's history", body, `id="read-only-note"`, "may not change ClusterQueues")
	if !strings.Contains(body, "may not read the revision history") {
		webtest.MustContain(t, "viewer's history", body, `data-rev="3"`)
	}
	webtest.MustNotContain(t, "viewer's history", body, "Roll back to")
	if code, _, _ := viewer.Post("/teams/hist/history/1/rollback", url.Values{}); code != http.StatusForbidden {
		t.Errorf("viewer rollback: %d, want 403", code)
	}
	if code, _ := admin.Get("/teams/hist/history/7/rollback"); code != http.StatusMethodNotAllowed && code != http.StatusNotFound {
		t.Errorf("GET of a rollback: %d", code)
	}
	_, _ = admin.Get("/teams/hist/history")
	if code, _, _ := admin.Post("/teams/hist/history/99/rollback", url.Values{}); code != http.StatusNotFound {
		t.Errorf("rollback to a revision that does not exist: %d, want 404", code)
	}
	if code, _ := admin.Get("/teams/nosuchteam/history"); code != http.StatusNotFound {
		t.Errorf("history of a team that does not exist: %d, want 404", code)
	}
}

// handEdit changes a team's ClusterQueue as kubectl edit would.
func (c console) handEdit(t *testing.T, team string, edit func(*kueuev1beta2.ClusterQueue)) {
	t.Helper()
	cq := c.clusterQueue(t, team)
	edit(cq)
	if _, err := c.kueue.KueueV1beta2().ClusterQueues().Update(context.Background(), cq, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
}

func gpusAndHold(cq *kueuev1beta2.ClusterQueue) {
	cq.Spec.ResourceGroups[0].Flavors[0].Resources[0].NominalQuota = resource.MustParse("6")
	cq.Spec.StopPolicy = ptr.To(kueuev1beta2.Hold)
}

// Drift: hand edits show on the team's drift page in words; re-apply sets
// them back; adopt takes them into the allocation, through the normal apply
// path, so the stored allocation and the objects agree again.
func TestDriftReapplyAndAdoptAgainstSandbox(t *testing.T) {
	c := auditConsole(t, nil)
	if code, _, body := c.post(t, "/teams", webtest.TeamForm("drifty", "4")); code != http.StatusSeeOther {
		t.Fatalf("create: %d\n%s", code, body)
	}
	c.eventually(t, "/teams/drifty/drift", `id="no-drift"`)

	c.handEdit(t, "drifty", gpusAndHold)
	body := c.eventually(t, "/teams/drifty/drift", `id="drift"`)
	webtest.MustContain(t, "drift page", body,
		"GPUs quota on ml.p5.48xlarge", `<td data-col="want">4</td>`, `<td data-col="got">6</td>`,
		"Disabled (stopPolicy Hold)", "2 of the fields the console manages for",
		// what adopting would do to the allocation
		"quota ml.p5.48xlarge GPUs 4 → 6", "quota ml.p5.48xlarge vCPU derived → 96", "Enabled → Disabled",
		// and what it cannot keep
		"EFA quota on ml.p5.48xlarge follows the GPUs (24), not the 16 set by hand.",
		`action="/teams/drifty/drift/reapply"`, `action="/teams/drifty/drift/adopt"`, `name="_csrf"`)

	// Re-apply: back to 4 GPUs, enabled.
	code, location, body := c.post(t, "/teams/drifty/drift/reapply", url.Values{})
	if code != http.StatusSeeOther || location != "/teams/drifty/drift?reapplied=1" {
		t.Fatalf("reapply: %d %q\n%s", code, location, body)
	}
	cq := c.clusterQueue(t, "drifty")
	if nominal, _ := gpuQuota(cq); nominal.Value() != 4 || *cq.Spec.StopPolicy != kueuev1beta2.None {
		t.Errorf("after re-apply: %s GPUs, stopPolicy %s", &nominal, *cq.Spec.StopPolicy)
	}
	_, body = c.get(t, location)
	webtest.MustContain(t, "drift page after re-apply", body, `id="no-drift"`, "was re-applied")

	// Adopt: the allocation takes the 6 GPUs (vCPU stays 96) and Disabled.
	c.handEdit(t, "drifty", gpusAndHold)
	body = c.eventually(t, "/teams/drifty/drift", `id="drift"`)
	fp := webtest.Hidden(t, body, "adopt")
	if code, _, body := c.post(t, "/teams/drifty/drift/adopt", url.Values{"adopt": {"stale"}}); code != http.StatusConflict ||
		!strings.Contains(body, "changed since the page was loaded") {
		t.Errorf("adopt with a stale preview: %d", code)
	}
	code, location, body = c.post(t, "/teams/drifty/drift/adopt", url.Values{"adopt": {fp}})
	if code != http.StatusSeeOther || location != "/teams/drifty/drift?adopted=1" {
		t.Fatalf("adopt: %d %q\n%s", code, location, body)
	}
	cq = c.clusterQueue(t, "drifty")
	stored, ok := domain.TeamFromClusterQueue(cq)
	if !ok || stored.Enabled || len(stored.Quota) != 1 || *stored.Quota[0].GPUs != 6 || stored.Quota[0].VCPU == nil || *stored.Quota[0].VCPU != 96 {
		t.Errorf("adopted allocation: %+v", stored)
	}
	if nominal, _ := gpuQuota(cq); nominal.Value() != 6 || *cq.Spec.StopPolicy != kueuev1beta2.Hold {
		t.Errorf("after adopt: %s GPUs, stopPolicy %s", &nominal, *cq.Spec.StopPolicy)
	}
	_, body = c.get(t, location)
	webtest.MustContain(t, "drift page after adopt", body, `id="no-drift"`, "were adopted")

	// Both show in the history, with who (the console's own account: no
	// sign-in here) and why.
	_, body = c.get(t, "/teams/drifty/history")
	webtest.MustContain(t, "history", body, `data-rev="3"`, "adopted hand edits of the ClusterQueue",
		"re-applied the allocation over hand edits", "No change to the allocation.", kueue.SystemActor)
}

// The policy history page: diffs, hand edits of the priority classes with
// re-apply, and rollback.
func TestPolicyRevisionsAgainstSandbox(t *testing.T) {
	c := auditConsole(t, nil)
	ctx := context.Background()
	id := rand.String(4)
	high, low := "high-"+id, "low-"+id
	t.Cleanup(func() {
		for _, n := range []string{high, low} {
			_ = c.kueue.KueueV1beta2().WorkloadPriorityClasses().Delete(ctx, n, metav1.DeleteOptions{})
		}
		_ = c.kube.CoreV1().ConfigMaps(c.settings.State()).Delete(ctx, domain.PolicyRevisionsName(c.settings), metav1.DeleteOptions{})
	})
	ranking := url.Values{"prioritization": {"TaskRanking"}, "idleAllocation": {"FairShare"},
		"class.0.name": {high}, "class.0.weight": {"80"}, "class.1.name": {low}, "class.1.weight": {"20"}}
	fcfs := url.Values{"prioritization": {"FirstComeFirstServe"}, "idleAllocation": {"FairShare"},
		"class.0.name": {high}, "class.0.weight": {"80"}}
	for _, f := range []url.Values{ranking, fcfs} {
		if code, _, body := c.post(t, "/policy", f); code != http.StatusSeeOther {
			t.Fatalf("save policy: %d\n%s", code, body)
		}
	}
	code, body := c.get(t, "/policy/history")
	if code != http.StatusOK {
		t.Fatalf("GET /policy/history: %d\n%s", code, body)
	}
	webtest.MustContain(t, "policy history", body, `data-rev="2"`, "prioritization task ranking → first come, first served",
		fmt.Sprintf("priority class %s removed (was weight 20)", low), `action="/policy/history/1/rollback"`,
		c.settings.State()+"/"+domain.PolicyRevisionsName(c.settings))

	// Someone sets a priority class's value by hand.
	wpc, err := c.kueue.KueueV1beta2().WorkloadPriorityClasses().Get(ctx, high, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wpc.Value = 1000
	if _, err := c.kueue.KueueV1beta2().WorkloadPriorityClasses().Update(ctx, wpc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.eventually(t, "/policy/history", fmt.Sprintf("WorkloadPriorityClass %s: value is 1000 in the cluster, the allocation says 0", high))
	if code, location, body := c.post(t, "/policy/drift/reapply", url.Values{}); code != http.StatusSeeOther || location != "/policy/history?reapplied=1" {
		t.Fatalf("reapply policy: %d %q\n%s", code, location, body)
	}
	value := func(name string) int32 {
		w, err := c.kueue.KueueV1beta2().WorkloadPriorityClasses().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("priority class %s: %v", name, err)
		}
		return w.Value
	}
	if value(high) != 0 {
		t.Errorf("after re-apply %s = %d, want 0", high, value(high))
	}

	code, location, body := c.post(t, "/policy/history/1/rollback", url.Values{})
	if code != http.StatusSeeOther || location != "/policy/history?rolledback=1" {
		t.Fatalf("rollback policy: %d %q\n%s", code, location, body)
	}
	if value(high) != 80 || value(low) != 20 {
		t.Errorf("after rollback: %s = %d, %s = %d; want 80 and 20", high, value(high), low, value(low))
	}
	_, body = c.get(t, location)
	webtest.MustContain(t, "policy history after rollback", body, `data-rev="4"`, "rollback to revision 1",
		"re-applied over hand edits of the priority classes", "rolled back to revision 1")
	if _, err := c.kube.CoreV1().ConfigMaps(c.settings.State()).Get(ctx, domain.PolicyRevisionsName(c.settings), metav1.GetOptions{}); apierrors.IsNotFound(err) {
		t.Errorf("no policy history ConfigMap")
	}
}
