package app_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/webtest"
)

func TestTeamCreateEditDeleteAgainstSandbox(t *testing.T) {
	c := newConsole(t)
	ctx := context.Background()

	code, location, body := c.post(t, "/teams", webtest.TeamForm("research", "4"))
	if code != http.StatusSeeOther || location != "/teams?saved=research" {
		t.Fatalf("create: %d %q\n%s", code, location, body)
	}
	// The save waited for the console's read model: the team's own page
	// answers at once, not after the next snapshot.
	if code, _ := c.get(t, "/usage/research"); code != http.StatusOK {
		t.Errorf("the team's usage page right after the create: %d", code)
	}
	cq := c.clusterQueue(t, "research")
	if nominal, borrowing := gpuQuota(cq); nominal.Value() != 4 || borrowing.Value() != 2 {
		t.Errorf("created quota: nominal %s borrowing %s, want 4 and 2", &nominal, &borrowing)
	}
	if string(cq.Spec.CohortName) != c.settings.Cohort {
		t.Errorf("cohort %q, want %q", cq.Spec.CohortName, c.settings.Cohort)
	}
	lq, err := c.kueue.KueueV1beta2().LocalQueues(c.settings.Namespace("research")).Get(ctx, c.settings.LocalQueue("research"), metav1.GetOptions{})
	if err != nil || string(lq.Spec.ClusterQueue) != cq.Name {
		t.Errorf("LocalQueue: %v %v", lq, err)
	}
	rb, err := c.kube.RbacV1().RoleBindings(c.settings.Namespace("research")).Get(ctx, domain.TeamMemberRole, metav1.GetOptions{})
	if err != nil || len(rb.Subjects) != 2 {
		t.Errorf("member RoleBinding: %v %v", rb, err)
	}

	// The same name again is refused next to the field, and nothing changes.
	code, _, body = c.post(t, "/teams", webtest.TeamForm("research", "8"))
	if code != http.StatusUnprocessableEntity || !strings.Contains(body, "already exists") {
		t.Errorf("duplicate create: %d, body lacks the field error", code)
	}

	// Edit: 6 GPUs, disabled. The posted name cannot rename the team.
	edit := webtest.TeamForm("renamed", "6")
	edit.Set("enabled", "false")
	code, location, body = c.post(t, "/teams/research", edit)
	if code != http.StatusSeeOther || location != "/teams?saved=research" {
		t.Fatalf("edit: %d %q\n%s", code, location, body)
	}
	cq = c.clusterQueue(t, "research")
	if nominal, _ := gpuQuota(cq); nominal.Value() != 6 {
		t.Errorf("edited nominal GPUs = %s, want 6", &nominal)
	}
	if *cq.Spec.StopPolicy != kueuev1beta2.Hold {
		t.Errorf("disabled team stopPolicy = %s, want Hold", *cq.Spec.StopPolicy)
	}

	// Bad input writes nothing.
	bad := webtest.TeamForm("research", "-3")
	code, _, _ = c.post(t, "/teams/research", bad)
	if code != http.StatusUnprocessableEntity {
		t.Errorf("bad edit: %d, want 422", code)
	}
	if nominal, _ := gpuQuota(c.clusterQueue(t, "research")); nominal.Value() != 6 {
		t.Errorf("a refused edit changed the quota to %s", &nominal)
	}

	// Delete removes the ClusterQueue, the LocalQueue and the namespace.
	code, location, _ = c.post(t, "/teams/research/delete", url.Values{})
	if code != http.StatusSeeOther || location != "/teams?deleted=research" {
		t.Fatalf("delete: %d %q", code, location)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := c.kueue.KueueV1beta2().ClusterQueues().Get(ctx, c.settings.ClusterQueue("research"), metav1.GetOptions{})
		return err != nil, nil
	})
	if err != nil {
		t.Errorf("ClusterQueue still there after delete")
	}
	ns, err := c.kube.CoreV1().Namespaces().Get(ctx, c.settings.Namespace("research"), metav1.GetOptions{})
	if err == nil && ns.DeletionTimestamp == nil {
		t.Errorf("namespace not being deleted")
	}
}

func TestPolicyAgainstSandbox(t *testing.T) {
	c := newConsole(t)
	ctx := context.Background()
	id := rand.String(4)
	high, low := "high-"+id, "low-"+id
	t.Cleanup(func() {
		for _, n := range []string{high, low} {
			_ = c.kueue.KueueV1beta2().WorkloadPriorityClasses().Delete(context.Background(), n, metav1.DeleteOptions{})
		}
		_ = c.kueue.KueueV1beta2().Cohorts().Delete(context.Background(), c.settings.Cohort, metav1.DeleteOptions{})
	})
	ranking := url.Values{"prioritization": {"TaskRanking"}, "idleAllocation": {"FairShare"},
		"class.0.name": {high}, "class.0.weight": {"80"}, "class.1.name": {low}, "class.1.weight": {"20"}}
	code, location, body := c.post(t, "/policy", ranking)
	if code != http.StatusSeeOther || location != "/policy?saved=1" {
		t.Fatalf("save policy: %d %q\n%s", code, location, body)
	}
	value := func(name string) int32 {
		wpc, err := c.kueue.KueueV1beta2().WorkloadPriorityClasses().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("priority class %s: %v", name, err)
		}
		return wpc.Value
	}
	if value(high) != 80 || value(low) != 20 {
		t.Errorf("ranking values: %d, %d", value(high), value(low))
	}
	cohort, err := c.kueue.KueueV1beta2().Cohorts().Get(ctx, c.settings.Cohort, metav1.GetOptions{})
	if err != nil || !strings.Contains(cohort.Annotations[domain.PolicyAnnotation], `"FairShare"`) {
		t.Errorf("policy not recorded on the cohort: %v %v", cohort, err)
	}

	// First come, first served: every class at 0, weights kept for later.
	fcfs := url.Values{"prioritization": {"FirstComeFirstServe"}, "idleAllocation": {"FairShare"},
		"class.0.name": {high}, "class.0.weight": {"80"}}
	if code, _, body := c.post(t, "/policy", fcfs); code != http.StatusSeeOther {
		t.Fatalf("save FCFS: %d\n%s", code, body)
	}
	if value(high) != 0 {
		t.Errorf("FCFS value of %s = %d, want 0", high, value(high))
	}
	if _, err := c.kueue.KueueV1beta2().WorkloadPriorityClasses().Get(ctx, low, metav1.GetOptions{}); err == nil {
		t.Errorf("%s was dropped from the policy but still exists", low)
	}

	// The sandbox's Kueue runs with fair sharing on: asking for FCFS idle
	// allocation shows the mismatch warning.
	noFair := url.Values{"prioritization": {"FirstComeFirstServe"}, "idleAllocation": {"FirstComeFirstServe"}}
	if code, _, body := c.post(t, "/policy", noFair); code != http.StatusSeeOther {
		t.Fatalf("save: %d\n%s", code, body)
	}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		_, body := webtest.Get(t, c.h, "/policy")
		return strings.Contains(body, `id="fair-sharing-warning"`), nil
	})
	if err != nil {
		t.Errorf("no warning that Kueue's fair sharing overrides first-come-first-serve")
	}
}

// A ClusterQueue the console does not manage, with the name a new team's
// queue would have, is not taken over by creating that team.
func TestTeamCreateRefusesAQueueItDoesNotManage(t *testing.T) {
	c := newConsole(t)
	ctx := context.Background()
	foreign := &kueuev1beta2.ClusterQueue{
		ObjectMeta: metav1.ObjectMeta{Name: c.settings.ClusterQueue("platform"), Labels: map[string]string{"owner": "someone-else"}},
		Spec:       kueuev1beta2.ClusterQueueSpec{NamespaceSelector: &metav1.LabelSelector{}},
	}
	if _, err := c.kueue.KueueV1beta2().ClusterQueues().Create(ctx, foreign, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.kueue.KueueV1beta2().ClusterQueues().Delete(context.Background(), foreign.Name, metav1.DeleteOptions{})
	})
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		_, err := c.cache.ClusterQueues.Get(foreign.Name)
		return err == nil, nil
	})
	if err != nil {
		t.Fatal("the console's cache never saw the ClusterQueue")
	}

	code, _, body := c.post(t, "/teams", webtest.TeamForm("platform", "4"))
	if code != http.StatusUnprocessableEntity || !strings.Contains(body, "not managed by this console") {
		t.Errorf("create over a foreign ClusterQueue: %d, want 422 with the field error\n%s", code, body)
	}
	cq := c.clusterQueue(t, "platform")
	if len(cq.Spec.ResourceGroups) != 0 || cq.Labels["owner"] != "someone-else" || string(cq.Spec.CohortName) != "" {
		t.Errorf("the foreign ClusterQueue was changed: labels %v, cohort %q, %d resource groups", cq.Labels, cq.Spec.CohortName, len(cq.Spec.ResourceGroups))
	}
}
