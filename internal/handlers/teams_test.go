package handlers_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueclient "sigs.k8s.io/kueue/client-go/clientset/versioned"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/handlers"
	"github.com/openquota/console/internal/kueue"
	"github.com/openquota/console/internal/metrics"
	"github.com/openquota/console/sandbox/sandboxtest"
)

// console is a console on the test sandbox with its own prefix and cohort.
type console struct {
	h        http.Handler
	settings domain.Settings
	kube     kubernetes.Interface
	kueue    kueueclient.Interface
	live     *kueue.Live
	cache    *kueue.Cache
	// cookies the console set, sent back as a browser does (flash messages).
	cookies map[string]*http.Cookie
}

func newConsole(t *testing.T) console {
	t.Helper()
	return newConsoleWith(t, nil, nil)
}

// newConsoleWith lets a test change the client config (e.g. to go through a
// proxy) and the handler dependencies (e.g. a Prometheus that is down).
func newConsoleWith(t *testing.T, adjustConfig func(*rest.Config), adjustDeps func(*handlers.Deps)) console {
	t.Helper()
	cfg, err := sandboxtest.Env(t).RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	if adjustConfig != nil {
		adjustConfig(cfg)
	}
	kube, kq := kubernetes.NewForConfigOrDie(cfg), kueueclient.NewForConfigOrDie(cfg)
	id := rand.String(5)
	// admin-scope.yaml allows quota-console-admin (and the console's
	// ServiceAccount) hyperpod-ns- namespaces and cohorts named after shared-pool only.
	s := domain.Settings{NamespacePrefix: "hyperpod-ns-" + id + "-", Cohort: domain.DefaultSettings.Cohort + "-" + id}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cache := kueue.NewCache(kube, kq, s, log)
	live := kueue.NewLive(cache, s, log)
	cache.Start(ctx)
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return cache.Ready() == nil, nil
	}); err != nil {
		t.Fatalf("cache not ready: %v", cache.Ready())
	}
	go live.Run(ctx)
	deps := handlers.Deps{Cache: cache, Live: live, Applier: kueue.Applier{Kube: kube, Kueue: kq}, Settings: s,
		Metrics: metrics.NewConsole(), Log: log, KueueConfigMap: handlers.DefaultKueueConfigMap, Streams: ctx}
	if adjustDeps != nil {
		adjustDeps(&deps)
	}
	h := atLoopback(handlers.New(deps))
	return console{h: h, settings: s, kube: kube, kueue: kq, live: live, cache: cache, cookies: map[string]*http.Cookie{}}
}

func (c console) post(t *testing.T, path string, form url.Values) (int, string, string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin") // as the console's own page
	rec := c.serve(req)
	return rec.Code, rec.Header().Get("Location"), rec.Body.String()
}

// serve sends a request with the cookies the console set so far, and keeps
// the ones it sets now.
func (c console) serve(r *http.Request) *httptest.ResponseRecorder {
	for _, ck := range c.cookies {
		r.AddCookie(ck)
	}
	rec := httptest.NewRecorder()
	c.h.ServeHTTP(rec, r)
	for _, ck := range rec.Result().Cookies() {
		if ck.MaxAge < 0 {
			delete(c.cookies, ck.Name)
		} else {
			c.cookies[ck.Name] = ck
		}
	}
	return rec
}

func (c console) clusterQueue(t *testing.T, team string) *kueuev1beta2.ClusterQueue {
	t.Helper()
	cq, err := c.kueue.KueueV1beta2().ClusterQueues().Get(context.Background(), c.settings.ClusterQueue(team), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("ClusterQueue of %s: %v", team, err)
	}
	return cq
}

func teamForm(name, gpus string) url.Values {
	return url.Values{"name": {name}, "enabled": {"true"}, "fairShareWeight": {"10"}, "preemption": {"LowerPriority"},
		"lending": {"LendAndBorrow"}, "borrowLimit": {"50"}, "users": {"alice"}, "groups": {"ml"},
		"quota.0.instanceType": {"ml.p5.48xlarge"}, "quota.0.gpus": {gpus}}
}

func gpuQuota(cq *kueuev1beta2.ClusterQueue) (nominal, borrowing resource.Quantity) {
	r := cq.Spec.ResourceGroups[0].Flavors[0].Resources[0]
	return r.NominalQuota, *r.BorrowingLimit
}

func TestTeamCreateEditDeleteAgainstSandbox(t *testing.T) {
	c := newConsole(t)
	ctx := context.Background()

	code, location, body := c.post(t, "/teams", teamForm("research", "4"))
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
	code, _, body = c.post(t, "/teams", teamForm("research", "8"))
	if code != http.StatusUnprocessableEntity || !strings.Contains(body, "already exists") {
		t.Errorf("duplicate create: %d, body lacks the field error", code)
	}

	// Edit: 6 GPUs, disabled. The posted name cannot rename the team.
	edit := teamForm("renamed", "6")
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
	bad := teamForm("research", "-3")
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
		_, body := get(t, c.h, "/policy")
		return strings.Contains(body, `id="fair-sharing-warning"`), nil
	})
	if err != nil {
		t.Errorf("no warning that Kueue's fair sharing overrides first-come-first-serve")
	}
}

// atLoopback addresses httptest's requests (Host example.com) to 127.0.0.1,
// as a client of a console on loopback does.
func atLoopback(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Host == "example.com" {
			r.Host = "127.0.0.1:8080"
		}
		h.ServeHTTP(w, r)
	})
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

	code, _, body := c.post(t, "/teams", teamForm("platform", "4"))
	if code != http.StatusUnprocessableEntity || !strings.Contains(body, "not managed by this console") {
		t.Errorf("create over a foreign ClusterQueue: %d, want 422 with the field error\n%s", code, body)
	}
	cq := c.clusterQueue(t, "platform")
	if len(cq.Spec.ResourceGroups) != 0 || cq.Labels["owner"] != "someone-else" || string(cq.Spec.CohortName) != "" {
		t.Errorf("the foreign ClusterQueue was changed: labels %v, cohort %q, %d resource groups", cq.Labels, cq.Spec.CohortName, len(cq.Spec.ResourceGroups))
	}
}
