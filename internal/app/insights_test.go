package app_test

import (
	"context"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/testenv"
	"github.com/openquota/console/internal/webtest"
)

// The insight rules on a real cluster, with the policy's thresholds at a
// minute: a team whose job holds GPUs at 2 % (dcgm-exporter's stand-in,
// through the real Prometheus) is idle; it borrows from a team whose own
// job waits (it asks for an instance type the team has no quota of), so
// the lender's wait is long and the borrowing sustained once a minute has
// passed. Each insight appears on /insights and clears when its job goes.
func TestInsightsAppearAndClear(t *testing.T) {
	waitsOnTheCluster(t)
	c := newConsoleOnPrometheus(t)
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

// A node that is not ready under a quota, on a real cluster: two nodes of
// an instance type only this test uses, one of them not ready (nothing
// heartbeats it, as a node waiting for repair), and a team whose quota is
// both nodes' GPUs. The not-ready and quota-beyond-capacity insights
// appear, on an open insights page as a push too, and clear once the node
// is replaced by a ready one.
func TestNotReadyNodeUnderAQuota(t *testing.T) {
	c := newConsole(t)
	t.Cleanup(func() { cleanupTeams(c) })
	ctx := context.Background()
	instanceType := "ml.notready-" + rand.String(5) + ".xlarge"
	node := func(name string, ready bool) *corev1.Node {
		capacity := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("64Gi"),
			corev1.ResourcePods: resource.MustParse("110"), domain.ResourceGPU: resource.MustParse("4")}
		n := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{},
				Labels: map[string]string{domain.InstanceTypeLabel: instanceType, "type": "kwok", "kubernetes.io/hostname": name}},
			Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity.DeepCopy()},
		}
		if ready {
			n.Annotations["kwok.x-k8s.io/node"] = "fake" // KWOK heartbeats it
		} else {
			n.Spec.Unschedulable = true
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady",
				Message: "GPU health check failed", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
		}
		return n
	}
	up, down := node(instanceType+"-up", true), node(instanceType+"-down", false)
	for _, n := range []*corev1.Node{up, down} {
		if _, err := c.kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.kube.CoreV1().Nodes().Delete(context.Background(), n.Name, metav1.DeleteOptions{}) })
	}
	team := webtest.TeamForm("repair", "8")
	team.Set("quota.0.instanceType", instanceType)
	// KWOK reports the first node ready, the lister has both: the form
	// knows the type then.
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		code, _, _ := c.post(t, "/teams", team)
		return code == 303, nil
	}); err != nil {
		code, _, body := c.post(t, "/teams", team)
		t.Fatalf("creating a team with quota on %s: %d\n%.800s", instanceType, code, body)
	}

	srv := httptest.NewServer(c.h)
	t.Cleanup(srv.Close)
	_, page := c.get(t, "/insights")
	pushes := webtest.Watch(t, srv.URL, "/insights", 0, nil)
	notReady := "1 of 2 " + instanceType + " nodes not ready"
	beyond := "8 GPUs of quota on " + instanceType + ", 4 on its ready nodes"
	if !strings.Contains(page, notReady) {
		// The page was read before the cache had the nodes: the stream
		// brings them.
		webtest.AwaitPart(t, pushes, 2*time.Minute, "insights-live", "the not-ready node", func(list string) bool { return strings.Contains(list, notReady) })
	}
	_, page = c.get(t, "/insights")
	webtest.MustContain(t, "/insights", page, notReady, beyond)

	// Replaced, as HyperPod replaces a faulty instance: the new node,
	// under the same name, is one KWOK reports ready.
	if err := c.kube.CoreV1().Nodes().Delete(ctx, down.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	replaced := node(down.Name, true)
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := c.kube.CoreV1().Nodes().Create(ctx, replaced, metav1.CreateOptions{})
		return err == nil, nil // AlreadyExists while the old one goes
	}); err != nil {
		t.Fatalf("creating the replacement of %s: %v", down.Name, err)
	}
	start := time.Now()
	webtest.AwaitPart(t, pushes, 2*time.Minute, "insights-live", "the replaced node", func(list string) bool {
		return !strings.Contains(list, instanceType)
	})
	t.Logf("the insights cleared on the open page %v after %s was replaced", time.Since(start).Round(10*time.Millisecond), replaced.Name)
}

// A console started without a task history (the chart's default,
// --history-store none) says so where the history would be, and raises no
// alarm: the history is off, not failing.
func TestAConsoleWithoutTaskHistorySaysSoWithoutAlarm(t *testing.T) {
	c := newConsole(t) // --history-store none
	for _, path := range []string{"/insights", "/preemptions", "/"} {
		code, body := c.get(t, path)
		if code != 200 {
			t.Fatalf("GET %s: %d", path, code)
		}
		if strings.Contains(body, "cannot be read now") || strings.Contains(body, "unavailable right now") {
			t.Errorf("GET %s raises an alarm for a history that is off:\n%s", path, excerptAround(body, "now"))
		}
	}
	if _, body := c.get(t, "/preemptions"); !strings.Contains(body, "runs without a task history") {
		t.Errorf("the preemptions page does not say the console runs without a task history")
	}
	if code, body := c.get(t, "/preemptions?format=csv"); code != 503 || !strings.Contains(body, "runs without a task history") {
		t.Errorf("the preemptions CSV: %d %q, want 503 saying the console runs without a task history", code, body)
	}
}

// excerptAround is body around the first occurrence of word.
func excerptAround(body, word string) string {
	i := strings.Index(body, word)
	if i < 0 {
		return ""
	}
	return body[max(0, i-200):min(len(body), i+100)]
}
