package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/google/go-cmp/cmp"

	"github.com/openquota/console/deploy/rbac"
	"github.com/openquota/console/internal/auth"
	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/handlers"
	"github.com/openquota/console/internal/testenv"
	"github.com/openquota/console/internal/webtest"
	"github.com/openquota/console/sandbox/sandboxtest"
)

// Each test here performs an attack that a review of the console found, and
// checks that it fails.

// A page on a sibling subdomain (x.apps.example.com next to
// quota.apps.example.com) plants _csrf=t for the parent domain and
// auto-submits POST /teams/<team>/delete with _csrf=t, with the admin's
// session (here: the proxy's headers, which the admin's browser would get
// from the proxy's own cookie).
func TestFormFromAnotherSiteCannotDeleteATeam(t *testing.T) {
	c := proxyConsole(t)
	adminName := bindUser(t, c.kube, "admin", rbac.AdminRole)
	admin := c.as(t, adminName, "platform")
	admin.Get("/teams/new")
	if code, _, body := admin.Post("/teams", webtest.TeamForm("victim", "1")); code != http.StatusSeeOther {
		t.Fatalf("create: %d\n%s", code, body)
	}
	for _, site := range []string{"same-site", "cross-site"} {
		attacker := c.as(t, adminName, "platform") // the admin's identity, none of the page's cookies
		attacker.Cookies["_csrf"] = &http.Cookie{Name: "_csrf", Value: "t"}
		attacker.Cookies["quota_console_browser"] = &http.Cookie{Name: "quota_console_browser", Value: strings.Repeat("t", 24)}
		attacker.Headers["Sec-Fetch-Site"] = site
		attacker.Headers["Origin"] = "http://x.apps.example.com"
		code, _, body := attacker.Post("/teams/victim/delete", url.Values{"_csrf": {"t"}})
		if code != http.StatusForbidden {
			t.Errorf("%s form: %d, want 403\n%.300s", site, code, body)
		}
	}
	if cq := c.clusterQueue(t, "victim"); cq.DeletionTimestamp != nil {
		t.Error("the team is being deleted")
	}
}

// Requests with 100 kB methods and random paths, before any sign-in: each
// used to add a time series to /metrics, forever.
func TestRequestsCannotGrowTheMetrics(t *testing.T) {
	c := proxyConsole(t)
	series := func() (int, int) {
		rec := c.serve(httptest.NewRequest(http.MethodGet, "/metrics", nil))
		n := 0
		for _, line := range strings.Split(rec.Body.String(), "\n") {
			if strings.HasPrefix(line, "quota_console_http_requests_total{") {
				n++
			}
		}
		return n, rec.Body.Len()
	}
	before, _ := series()
	for i := range 50 {
		r := httptest.NewRequest(http.MethodGet, fmt.Sprintf("/no-such-page-%d", i), nil)
		r.Method = strings.Repeat("X", 100_000) + fmt.Sprint(i)
		c.serve(r)
	}
	after, size := series()
	if after-before > 2 {
		t.Errorf("50 odd requests added %d series", after-before)
	}
	if size > 200_000 {
		t.Errorf("/metrics is %d bytes", size)
	}
}

// DNS rebinding: a page on attacker.example, whose name then resolves to
// 127.0.0.1, reads and posts to a console that runs without sign-in.
func TestConsoleWithoutSignInRefusesForeignHosts(t *testing.T) {
	c := newConsole(t)
	for _, path := range []string{"/", "/teams", "/tasks?format=csv&table=tasks"} {
		r := httptest.NewRequest(http.MethodGet, path, nil)
		r.Host = "attacker.example:8080"
		if rec := c.serve(r); rec.Code != http.StatusMisdirectedRequest {
			t.Errorf("GET %s with Host attacker.example: %d, want 421", path, rec.Code)
		}
	}
	r := httptest.NewRequest(http.MethodPost, "/teams", strings.NewReader(webtest.TeamForm("rebound", "1").Encode()))
	r.Host = "attacker.example:8080"
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set("Sec-Fetch-Site", "same-origin") // to the browser, attacker.example is the page's own origin
	if rec := c.serve(r); rec.Code != http.StatusMisdirectedRequest {
		t.Errorf("POST /teams with Host attacker.example: %d, want 421", rec.Code)
	}
	if code, _ := c.get(t, "/teams"); code != http.StatusOK {
		t.Errorf("GET /teams on 127.0.0.1: %d", code)
	}
}

// A member of a team, who may edit ConfigMaps in the team's namespace,
// plants a revision with a huge quota where the history used to live, and
// waits for an admin to roll back to it. And a revision that does not pass
// validation, wherever it comes from, cannot be applied.
func TestPlantedOrInvalidRevisionsCannotBeRolledBackTo(t *testing.T) {
	c := auditProxyConsole(t)
	ctx := context.Background()
	admin := c.as(t, bindUser(t, c.kube, "admin", rbac.AdminRole), "platform")
	admin.Get("/teams/new")
	if code, _, body := admin.Post("/teams", webtest.TeamForm("planted", "2")); code != http.StatusSeeOther {
		t.Fatalf("create: %d\n%.300s", code, body)
	}
	ns, history := c.settings.Namespace("planted"), domain.TeamRevisionsName(c.settings, "planted")
	editor := bindUser(t, c.kube, "editor", "")
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "editor", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: editor}}}
	if _, err := c.kube.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg, err := sandboxtest.Env(t).RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Impersonate = rest.ImpersonationConfig{UserName: editor, Groups: []string{"system:authenticated"}}
	asEditor := kubernetes.NewForConfigOrDie(cfg)

	huge := domain.Team{Name: "planted", Enabled: true, FairShareWeight: 1, Preemption: domain.PreemptNever, Lending: domain.LendAndBorrow,
		BorrowLimitPercent: 50, Quota: []domain.QuotaInput{{InstanceType: "ml.p5.48xlarge", GPUs: ptr.To[int64](9999)}}}
	rev, _ := json.Marshal(domain.TeamRevision{Revision: 7, At: time.Now(), By: "alice", Action: domain.ActionUpdate, Allocation: huge})
	planted := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: history, Namespace: ns}, Data: map[string]string{"rev-000007": string(rev)}}
	// The new RoleBinding takes a moment to reach the apiserver's authorizer.
	var plantErr error
	_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		_, plantErr = asEditor.CoreV1().ConfigMaps(ns).Create(ctx, planted, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(plantErr) { // where the history is kept in the team namespace: add to it
			cm, err := asEditor.CoreV1().ConfigMaps(ns).Get(ctx, history, metav1.GetOptions{})
			if err != nil {
				plantErr = err
				return false, nil
			}
			cm.Data["rev-000007"] = string(rev)
			_, plantErr = asEditor.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
		}
		return plantErr == nil, nil
	})
	if plantErr != nil {
		t.Fatalf("the team's editor could not write in the team namespace: %v", plantErr)
	}
	planted.Namespace = c.settings.State()
	if _, err := asEditor.CoreV1().ConfigMaps(c.settings.State()).Create(ctx, planted, metav1.CreateOptions{}); err == nil {
		t.Error("the team's editor wrote a ConfigMap in the console's own namespace")
	}
	admin.Get("/teams/planted/history")
	code, _, body := admin.Post("/teams/planted/history/7/rollback", url.Values{})
	if code != http.StatusNotFound {
		t.Errorf("rollback to the planted revision: %d, want 404\n%.300s", code, body)
	}
	if nominal, _ := gpuQuota(c.clusterQueue(t, "planted")); nominal.Value() != 2 {
		t.Fatalf("the planted revision was applied: %s GPUs", &nominal)
	}

	// A revision in the console's own history that does not validate (written
	// there by hand by someone with cluster-admin rights): shown as such, not
	// applied.
	cm, err := c.kube.CoreV1().ConfigMaps(c.settings.State()).Get(ctx, history, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	invalid := huge
	invalid.Quota = []domain.QuotaInput{{InstanceType: "ml.p5.48xlarge", GPUs: ptr.To[int64](1_000_000_000)}}
	// Slip it in as revision 1, before the recorded ones (renumbered after
	// it), so that it is one an admin could roll back to.
	data := map[string]string{}
	for _, v := range cm.Data {
		var r domain.TeamRevision
		if err := json.Unmarshal([]byte(v), &r); err != nil {
			t.Fatal(err)
		}
		r.Revision++
		b, _ := json.Marshal(r)
		data[fmt.Sprintf("rev-%06d", r.Revision)] = string(b)
	}
	bad, _ := json.Marshal(domain.TeamRevision{Revision: 1, At: time.Now(), By: "mallory", Action: domain.ActionUpdate, Allocation: invalid})
	data["rev-000001"] = string(bad)
	cm.Data = data
	if _, err := c.kube.CoreV1().ConfigMaps(c.settings.State()).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, body = admin.Get("/teams/planted/history")
	webtest.MustContain(t, "history with an invalid revision", body, `data-col="invalid"`, "does not pass the form&#39;s validation")
	webtest.MustNotContain(t, "history with an invalid revision", body, `action="/teams/planted/history/1/rollback"`)
	code, _, body = admin.Post("/teams/planted/history/1/rollback", url.Values{})
	if code != http.StatusUnprocessableEntity {
		t.Errorf("rollback to an invalid revision: %d, want 422\n%.300s", code, body)
	}
	if nominal, _ := gpuQuota(c.clusterQueue(t, "planted")); nominal.Value() != 2 {
		t.Errorf("the invalid revision was applied: %s GPUs", &nominal)
	}
}

// Anyone who could sign in (any pod's token, any proxy user) read every
// team's tasks, members and descriptions.
func TestPagesNeedAReadRightTheClusterGrants(t *testing.T) {
	c := proxyConsole(t)
	admin := c.as(t, bindUser(t, c.kube, "admin", rbac.AdminRole), "platform")
	memberName := "member-" + rand.String(5)
	admin.Get("/teams/new")
	for team, members := range map[string]string{"alpha": memberName, "beta": "someone-else"} {
		f := webtest.TeamForm(team, "1")
		f.Set("users", members)
		f.Set("groups", "")
		f.Set("description", "secret plans of "+team)
		if code, _, body := admin.Post("/teams", f); code != http.StatusSeeOther {
			t.Fatalf("create %s: %d\n%.300s", team, code, body)
		}
	}
	c.submit(t, "alpha", "alpha-job", 1)
	c.submit(t, "beta", "beta-job", 1)
	if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		_, body := admin.Get("/tasks?state=all")
		return strings.Contains(body, "alpha-job") && strings.Contains(body, "beta-job"), nil
	}); err != nil {
		t.Fatal("the tasks never showed on the admin's Tasks page")
	}

	nobody := c.as(t, bindUser(t, c.kube, "nobody", ""))
	for _, path := range []string{"/", "/usage", "/tasks", "/teams", "/policy", "/usage/alpha", "/teams/beta/history", "/tasks?format=csv&table=tasks"} {
		code, body := nobody.Get(path)
		if code != http.StatusForbidden {
			t.Errorf("nobody GET %s: %d, want 403", path, code)
		}
		webtest.MustNotContain(t, "nobody's "+path, body, "alpha-job", "beta-job", "secret plans")
		webtest.MustContain(t, "nobody's "+path, body, "list on ClusterQueues", "list on Workloads")
	}

	member := c.as(t, memberName)
	code, body := member.Get("/usage/alpha")
	if code != http.StatusOK {
		t.Errorf("member GET /usage/alpha: %d", code)
	}
	webtest.MustContain(t, "member's /usage/alpha", body, "Team alpha")
	for _, path := range []string{"/usage/beta", "/teams/beta/edit", "/teams/beta/history", "/teams/beta/drift"} {
		code, body = member.Get(path)
		if code != http.StatusForbidden {
			t.Errorf("member of alpha GET %s: %d, want 403", path, code)
		}
		webtest.MustContain(t, "member's "+path, body, `may not see team "beta"`, `list on Workloads in namespace "`+c.settings.Namespace("beta")+`"`)
	}
	for _, path := range []string{"/tasks?state=all", "/tasks?format=csv&table=tasks&state=all", "/usage", "/teams"} {
		code, body = member.Get(path)
		if code != http.StatusOK {
			t.Errorf("member GET %s: %d", path, code)
		}
		webtest.MustNotContain(t, "member's "+path, body, "beta-job", ">beta<")
	}
	_, body = member.Get("/tasks?state=all")
	webtest.MustContain(t, "member's tasks", body, "alpha-job")

	viewer := c.as(t, bindUser(t, c.kube, "viewer", rbac.ViewerRole))
	_, body = viewer.Get("/tasks?state=all")
	webtest.MustContain(t, "viewer's tasks", body, "alpha-job", "beta-job")
}

// A 10-minute service account token signed in for 8 hours; a token issued
// for another audience was accepted.
func TestTokenSessionEndsWithTheTokenAgainstSandbox(t *testing.T) {
	env := sandboxtest.Env(t)
	kube := testenv.SandboxClients(t, env).Kube
	ctx := context.Background()
	ns := testenv.Namespace(t, kube, "tokens")
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "robot"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	token := func(audiences ...string) string {
		tr, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "robot", &authnv1.TokenRequest{
			Spec: authnv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600), Audiences: audiences}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	keys := auth.RandomKeys()
	a := &auth.Authenticator{Mode: auth.ModeToken, Keys: keys, Sessions: auth.NewSessions(keys, auth.SessionTTL, nil),
		Tokens: auth.KubeTokenReviewer{Client: kube, Audiences: []string{"quota-console"}}}
	c := newConsoleWith(t, nil, func(d *handlers.Config) { d.Auth = a })
	b := &browser{T: t, H: c.h, Remote: "127.0.0.1:40000", Headers: map[string]string{"Accept": "text/html"}, Cookies: map[string]*http.Cookie{}}
	b.Get(auth.SignInPath)
	if code, _, body := b.Post(auth.SignInPath, url.Values{"token": {token()}}); code != http.StatusUnauthorized {
		t.Errorf("a token for the apiserver's audience: %d, want 401\n%.300s", code, body)
	}
	started := time.Now()
	if code, _, body := b.Post(auth.SignInPath, url.Values{"token": {token("quota-console")}}); code != http.StatusSeeOther {
		t.Fatalf("a token for the console's audience: %d\n%.300s", code, body)
	}
	ck := b.Cookies[auth.SessionCookie]
	if ck == nil {
		t.Fatal("no session cookie")
	}
	if d := ck.Expires.Sub(started); d > 10*time.Minute+5*time.Second {
		t.Errorf("the session of a 10-minute token lasts %v", d.Round(time.Second))
	}
}

// Every open live update stream holds a connection and a goroutine: one
// user opening hundreds of them, or many users, exhausted the console.
func TestLiveStreamsAreCapped(t *testing.T) {
	c := newConsoleWith(t, nil, func(d *handlers.Config) {
		trusted, _ := auth.ParseCIDRs(auth.DefaultProxyCIDRs)
		d.Auth = &auth.Authenticator{Mode: auth.ModeProxy, Proxy: auth.Proxy{UserHeader: auth.DefaultUserHeader,
			GroupsHeader: auth.DefaultGroupsHeader, Trusted: trusted}}
		d.Limits.Streams = handlers.StreamLimits{PerUser: 2, Total: 3}
	})
	viewer := bindUser(t, c.kube, "viewer", rbac.ViewerRole)
	other := bindUser(t, c.kube, "viewer", rbac.ViewerRole)
	srv := httptest.NewServer(c.h)
	t.Cleanup(srv.Close)
	open := func(user string) int { return webtest.OpenStream(t, srv.URL, "/tasks", auth.DefaultUserHeader, user) }
	for i, want := range []int{200, 200, 503} {
		if got := open(viewer); got != want {
			t.Errorf("stream %d of one user: %d, want %d", i+1, got, want)
		}
	}
	for i, want := range []int{200, 503} {
		if got := open(other); got != want {
			t.Errorf("stream %d of another user (total cap 3): %d, want %d", i+1, got, want)
		}
	}
}

// ?deleted=<anything> made the console say "Team <anything> deleted.".
func TestFlashMessagesAreNotTakenFromTheURL(t *testing.T) {
	c := newConsole(t)
	t.Cleanup(func() { cleanupTeams(c) })
	for _, q := range []string{"deleted", "saved"} {
		_, body := c.get(t, "/teams?"+q+"="+url.QueryEscape("Pwned: call +1 555 0100"))
		webtest.MustNotContain(t, "/teams?"+q, body, "Pwned", "555")
	}
	_, body := c.get(t, "/policy?saved=1")
	webtest.MustNotContain(t, "/policy?saved=1", body, "Policy saved.")
	if code, location, _ := c.post(t, "/teams", webtest.TeamForm("flashed", "1")); code != http.StatusSeeOther {
		t.Fatalf("create: %d", code)
	} else {
		_, body = c.get(t, location)
		webtest.MustContain(t, "the page after a save", body, "Team flashed saved.")
		_, body = c.get(t, location)
		webtest.MustNotContain(t, "the page loaded again", body, "Team flashed saved.")
	}
}

// A console running with cluster-admin credentials (make run, or a cluster
// without the admission policy) took over what it did not make: a team
// named after an existing namespace relabelled it (lowering its Pod
// Security level) and deleting the team deleted it with everything in it;
// a policy class named after someone else's WorkloadPriorityClass
// rewrote its value and would later delete it. Both are refused now.
func TestTheConsoleTakesOverNoNamespaceOrPriorityClass(t *testing.T) {
	c := newConsole(t)
	ctx := context.Background()
	team := "victim-" + rand.String(5)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.settings.Namespace(team),
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted", "owner": "other-platform"}}}
	if _, err := c.kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.kube.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{}) })
	precious := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "precious", Namespace: ns.Name}}
	if _, err := c.kube.CoreV1().ConfigMaps(ns.Name).Create(ctx, precious, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	wpc := &kueuev1beta2.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "foreign-" + rand.String(5)}, Value: 1000}
	if _, err := c.kueue.KueueV1beta2().WorkloadPriorityClasses().Create(ctx, wpc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.kueue.KueueV1beta2().WorkloadPriorityClasses().Delete(context.Background(), wpc.Name, metav1.DeleteOptions{})
	})
	// The console's cache has both before the forms are posted.
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		_, nsErr := c.cache.Namespaces.Get(ns.Name)
		_, wpcErr := c.cache.WorkloadPriorityClasses.Get(wpc.Name)
		return nsErr == nil && wpcErr == nil, nil
	}); err != nil {
		t.Fatal("the console's cache never saw the namespace and the class")
	}

	code, _, body := c.post(t, "/teams", webtest.TeamForm(team, "1"))
	if code == http.StatusSeeOther || !strings.Contains(body, "is not managed by this console") {
		t.Errorf("a team named after an existing namespace: %d\n%.600s", code, body)
	}
	got, err := c.kube.CoreV1().Namespaces().Get(ctx, ns.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ns.Labels["pod-security.kubernetes.io/enforce"], got.Labels["pod-security.kubernetes.io/enforce"]); diff != "" || domain.ManagedByConsole(got) {
		t.Errorf("the namespace was taken over: labels %v", got.Labels)
	}
	if _, err := c.kube.CoreV1().ConfigMaps(ns.Name).Get(ctx, "precious", metav1.GetOptions{}); err != nil {
		t.Errorf("the namespace's ConfigMap: %v", err)
	}

	policy := url.Values{"prioritization": {"TaskRanking"}, "idleAllocation": {"FairShare"},
		"class.0.name": {wpc.Name}, "class.0.weight": {"5"}}
	code, _, body = c.post(t, "/policy", policy)
	if code == http.StatusSeeOther || !strings.Contains(body, "is not managed by this console") {
		t.Errorf("a policy class named after someone else's WorkloadPriorityClass: %d\n%.600s", code, body)
	}
	after, err := c.kueue.KueueV1beta2().WorkloadPriorityClasses().Get(ctx, wpc.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.Value != 1000 || domain.ManagedByConsole(after) {
		t.Errorf("the priority class was taken over: value %d, labels %v", after.Value, after.Labels)
	}
}

// A viewer posting the create-team form (with a valid CSRF token) learned
// which names exist: the form was checked before their right to change
// anything, and said "A team named … already exists" for a team or an
// unmanaged ClusterQueue of that name. Someone who may not change
// ClusterQueues is refused first, whatever the form names.
func TestCreateFormTellsNothingToWhoMayNotChange(t *testing.T) {
	c := proxyConsole(t)
	t.Cleanup(func() { cleanupTeams(c) })
	admin := c.as(t, bindUser(t, c.kube, "admin", rbac.AdminRole), "platform")
	admin.Get("/teams/new")
	existing := "exists-" + rand.String(4)
	if code, _, body := admin.Post("/teams", webtest.TeamForm(existing, "1")); code != http.StatusSeeOther {
		t.Fatalf("create: %d\n%.500s", code, body)
	}
	viewer := c.as(t, bindUser(t, c.kube, "viewer", rbac.ViewerRole))
	viewer.Get("/teams/new")
	for _, name := range []string{existing, "absent-" + rand.String(4)} {
		code, _, body := viewer.Post("/teams", webtest.TeamForm(name, "1"))
		if code != http.StatusForbidden {
			t.Errorf("a viewer's create of %s: %d, want 403", name, code)
		}
		webtest.MustNotContain(t, "the answer to a viewer's create of "+name, body, "already exists")
		webtest.MustContain(t, "the answer to a viewer's create of "+name, body, "You may not change team "+name)
	}
}
