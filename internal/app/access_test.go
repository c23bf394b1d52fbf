package app_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"

	"github.com/openquota/console/deploy/rbac"
	"github.com/openquota/console/internal/auth"
	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/handlers"
	"github.com/openquota/console/internal/kueue"
	"github.com/openquota/console/internal/webtest"
	"github.com/openquota/console/sandbox/sandboxtest"
)

// A viewer sees the pages with every form disabled and a note why; what they
// post anyway is refused (the cluster says they may not) and answered with 403
// "You may not change". An admin who holds quota-console-admin and nothing
// else creates, edits, rolls back and deletes a team and saves and rolls back
// the policy, all made by the console's ServiceAccount, within the admission
// policy, with the console's field manager and the admin as the actor.
func TestViewerSeesReadOnlyFormsAndMayNotChange(t *testing.T) {
	c := proxyConsole(t)
	ctx := context.Background()
	adminName := bindUser(t, c.kube, "admin", rbac.AdminRole)
	admin := c.as(t, adminName, "platform")
	viewerName := bindUser(t, c.kube, "viewer", rbac.ViewerRole)
	viewer := c.as(t, viewerName, "ml")
	nobody := c.as(t, bindUser(t, c.kube, "nobody", ""))

	code, body := admin.Get("/teams/new")
	if code != http.StatusOK {
		t.Fatalf("admin GET /teams/new: %d", code)
	}
	webtest.MustContain(t, "admin's form", body, `id="signed-in-user"`, admin.Headers[auth.DefaultUserHeader])
	webtest.MustNotContain(t, "admin's form", body, `id="read-only-note"`, "<fieldset disabled")
	code, location, body := admin.Post("/teams", webtest.TeamForm("shared", "4"))
	if code != http.StatusSeeOther || location != "/teams?saved=shared" {
		t.Fatalf("admin create: %d %q\n%s", code, location, body)
	}
	cq := c.clusterQueue(t, "shared")
	managers := map[string]bool{}
	for _, mf := range cq.ManagedFields {
		if mf.Operation == metav1.ManagedFieldsOperationApply {
			managers[mf.Manager] = true
		}
	}
	if !managers[domain.FieldManager] {
		t.Errorf("ClusterQueue's apply managers %v lack the console's %q", managers, domain.FieldManager)
	}

	// The viewer: every form disabled, with the reason.
	for path, perm := range map[string]string{
		"/teams/shared/edit":   "may not change ClusterQueues",
		"/teams/new":           "may not change ClusterQueues",
		"/teams/shared/delete": "may not delete ClusterQueues",
		"/policy":              "may not change WorkloadPriorityClasses",
	} {
		code, body := viewer.Get(path)
		if code != http.StatusOK {
			t.Errorf("viewer GET %s: %d", path, code)
			continue
		}
		webtest.MustContain(t, "viewer's "+path, body, `id="read-only-note"`, "Your account "+viewerName+" "+perm, " disabled")
	}
	_, body = viewer.Get("/teams/shared/edit")
	webtest.MustContain(t, "viewer's edit form", body, "<fieldset disabled", `id="save" disabled`)
	// A user with no role at all sees nothing, and is told which right is missing.
	code, body = nobody.Get("/teams/new")
	if code != http.StatusForbidden {
		t.Errorf("unbound user GET /teams/new: %d, want 403", code)
	}
	webtest.MustContain(t, "unbound user's refusal", body, "may not see this console's pages", "list on ClusterQueues")

	// What the viewer posts anyway: 403, in words, and nothing changes.
	_, _ = viewer.Get("/teams/shared/edit")
	code, _, body = viewer.Post("/teams/shared", webtest.TeamForm("shared", "8"))
	if code != http.StatusForbidden {
		t.Errorf("viewer edit: %d, want 403", code)
	}
	webtest.MustContain(t, "viewer's refused edit", body, "You may not change team shared", viewerName)
	if nominal, _ := gpuQuota(c.clusterQueue(t, "shared")); nominal.Value() != 4 {
		t.Errorf("the viewer's refused edit changed the quota to %s", &nominal)
	}
	code, _, body = viewer.Post("/teams/shared/delete", url.Values{})
	if code != http.StatusForbidden {
		t.Errorf("viewer delete: %d, want 403", code)
	}
	webtest.MustContain(t, "viewer's refused delete", body, "You may not change team shared")
	c.clusterQueue(t, "shared") // still there
	code, _, body = viewer.Post("/teams", webtest.TeamForm("viewers-own", "1"))
	if code != http.StatusForbidden {
		t.Errorf("viewer create: %d, want 403", code)
	}
	webtest.MustContain(t, "viewer's refused create", body, "You may not change team viewers-own")
	if _, err := c.kueue.KueueV1beta2().ClusterQueues().Get(ctx, c.settings.ClusterQueue("viewers-own"), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the viewer's refused create left a ClusterQueue: %v", err)
	}
	code, _, body = viewer.Post("/policy", url.Values{"prioritization": {"TaskRanking"}, "idleAllocation": {"FairShare"},
		"class.0.name": {"v-" + rand.String(4)}, "class.0.weight": {"10"}})
	if code != http.StatusForbidden {
		t.Errorf("viewer policy: %d, want 403", code)
	}
	webtest.MustContain(t, "viewer's refused policy", body, "You may not change the cluster policy")

	// The admin edits, rolls back and deletes; the objects carry the admin as
	// the one who changed them, and the namespace its Pod Security level.
	_, _ = admin.Get("/teams/shared/edit")
	edit := webtest.TeamForm("shared", "6")
	if code, _, body := admin.Post("/teams/shared", edit); code != http.StatusSeeOther {
		t.Fatalf("admin edit: %d\n%s", code, body)
	}
	if nominal, _ := gpuQuota(c.clusterQueue(t, "shared")); nominal.Value() != 6 {
		t.Errorf("admin's edit: nominal %s, want 6", &nominal)
	}
	if by := c.clusterQueue(t, "shared").Annotations[kueue.ChangedByAnnotation]; by != adminName {
		t.Errorf("the edit was recorded as made by %q, want %q", by, adminName)
	}
	ns, err := c.kube.CoreV1().Namespaces().Get(ctx, c.settings.Namespace("shared"), metav1.GetOptions{})
	if err != nil || ns.Labels[domain.PodSecurityEnforceLabel] != domain.DefaultPodSecurity {
		t.Errorf("the team namespace's Pod Security label: %v (%v)", ns.Labels, err)
	}
	_, _ = admin.Get("/teams/shared/history")
	if code, _, body := admin.Post("/teams/shared/history/1/rollback", url.Values{}); code != http.StatusSeeOther {
		t.Fatalf("admin rollback: %d\n%s", code, body)
	}
	if nominal, _ := gpuQuota(c.clusterQueue(t, "shared")); nominal.Value() != 4 {
		t.Errorf("admin's rollback: nominal %s, want 4", &nominal)
	}

	// The admin saves the policy twice and rolls it back.
	classes := []string{"urgent-" + rand.String(4), "batch-" + rand.String(4)}
	t.Cleanup(func() {
		for _, n := range classes {
			_ = c.kueue.KueueV1beta2().WorkloadPriorityClasses().Delete(context.Background(), n, metav1.DeleteOptions{})
		}
	})
	for _, policy := range []url.Values{
		{"prioritization": {"TaskRanking"}, "idleAllocation": {"FairShare"}, "class.0.name": {classes[0]}, "class.0.weight": {"80"}},
		{"prioritization": {"TaskRanking"}, "idleAllocation": {"FairShare"}, "class.0.name": {classes[1]}, "class.0.weight": {"20"}},
	} {
		_, _ = admin.Get("/policy")
		if code, location, body := admin.Post("/policy", policy); code != http.StatusSeeOther {
			t.Fatalf("admin policy save: %d %q\n%s", code, location, body)
		}
	}
	if _, err := c.kueue.KueueV1beta2().WorkloadPriorityClasses().Get(ctx, classes[0], metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("priority class %s, dropped from the policy: %v", classes[0], err)
	}
	_, _ = admin.Get("/policy/history")
	if code, _, body := admin.Post("/policy/history/1/rollback", url.Values{}); code != http.StatusSeeOther {
		t.Fatalf("admin policy rollback: %d\n%s", code, body)
	}
	wpc, err := c.kueue.KueueV1beta2().WorkloadPriorityClasses().Get(ctx, classes[0], metav1.GetOptions{})
	if err != nil || wpc.Value != 80 || wpc.Labels[domain.CohortLabel] != c.settings.Cohort {
		t.Errorf("after the policy rollback, priority class %s: %+v (%v)", classes[0], wpc, err)
	}

	_, _ = admin.Get("/teams/shared/delete")
	if code, location, body := admin.Post("/teams/shared/delete", url.Values{}); code != http.StatusSeeOther || location != "/teams?deleted=shared" {
		t.Errorf("admin delete: %d %q\n%s", code, location, body)
	}
}

// Without the CSRF token (or with a wrong one, or from another site) a POST is
// refused with 403 and changes nothing; with it, it goes through.
func TestPostWithoutCSRFTokenIsRejected(t *testing.T) {
	c := newConsoleWith(t, nil, func(d *handlers.Config) { d.Auth = &auth.Authenticator{Mode: auth.ModeNone} })
	t.Cleanup(func() { cleanupTeams(c) })
	b := &browser{T: t, H: c.h, Remote: "127.0.0.1:40000", Headers: map[string]string{}, Cookies: map[string]*http.Cookie{}}
	code, body := b.Get("/teams/new")
	if code != http.StatusOK || b.CSRF == "" || b.Cookies["quota_console_browser"] == nil {
		t.Fatalf("GET /teams/new: %d, token %q, cookies %v", code, b.CSRF, b.Cookies)
	}
	webtest.MustContain(t, "the form", body, `<input type="hidden" name="_csrf" value="`+b.CSRF+`">`, `id="no-sign-in"`)

	refused := map[string]func() (int, string, string){
		"no token": func() (int, string, string) {
			f := webtest.TeamForm("forged", "2")
			f["_csrf"] = nil
			r := httptest.NewRequest(http.MethodPost, "/teams", strings.NewReader(f.Encode()))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			rec := b.Do(r)
			return rec.Code, "", rec.Body.String()
		},
		"wrong token": func() (int, string, string) {
			f := webtest.TeamForm("forged", "2")
			f.Set("_csrf", strings.Repeat("x", len(b.CSRF)))
			return b.Post("/teams", f)
		},
		"other site": func() (int, string, string) {
			b.Headers["Sec-Fetch-Site"] = "cross-site"
			defer delete(b.Headers, "Sec-Fetch-Site")
			return b.Post("/teams", webtest.TeamForm("forged", "2"))
		},
	}
	for name, post := range refused {
		code, _, body := post()
		if code != http.StatusForbidden || !strings.Contains(body, "CSRF") {
			t.Errorf("%s: %d %q, want 403 about CSRF", name, code, body)
		}
	}
	for _, path := range []string{"/teams/forged/delete", "/policy"} {
		r := httptest.NewRequest(http.MethodPost, path, strings.NewReader("prioritization=TaskRanking"))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if rec := b.Do(r); rec.Code != http.StatusForbidden {
			t.Errorf("POST %s without token: %d, want 403", path, rec.Code)
		}
	}
	if _, err := c.kueue.KueueV1beta2().ClusterQueues().Get(context.Background(), c.settings.ClusterQueue("forged"), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a refused POST created a ClusterQueue: %v", err)
	}
	if code, location, body := b.Post("/teams", webtest.TeamForm("genuine", "2")); code != http.StatusSeeOther || location != "/teams?saved=genuine" {
		t.Errorf("with the token: %d %q\n%s", code, location, body)
	}
}

// Two admins edit the same team: the second save is not applied, and the
// form shows what the first one changed. Kueue's own status updates, which
// also move the resourceVersion, are no conflict.
func TestEditConflictShowsTheOtherChange(t *testing.T) {
	c := proxyConsole(t)
	ctx := context.Background()
	alice := c.as(t, bindUser(t, c.kube, "admin", rbac.AdminRole))
	bob := c.as(t, bindUser(t, c.kube, "admin", rbac.AdminRole))
	_, _ = alice.Get("/teams/new")
	if code, _, body := alice.Post("/teams", webtest.TeamForm("contested", "4")); code != http.StatusSeeOther {
		t.Fatalf("create: %d\n%s", code, body)
	}

	_, aliceForm := alice.Get("/teams/contested/edit")
	aliceRV, aliceAlloc := webtest.Hidden(t, aliceForm, "resourceVersion"), webtest.Hidden(t, aliceForm, "allocation")
	if aliceRV == "" || !strings.Contains(aliceAlloc, `"gpus":4`) {
		t.Fatalf("edit form carries resourceVersion %q, allocation %q", aliceRV, aliceAlloc)
	}

	_, bobForm := bob.Get("/teams/contested/edit")
	bobEdit := webtest.TeamForm("contested", "8")
	bobEdit.Set("fairShareWeight", "20")
	bobEdit.Set("resourceVersion", webtest.Hidden(t, bobForm, "resourceVersion"))
	bobEdit.Set("allocation", webtest.Hidden(t, bobForm, "allocation"))
	if code, _, body := bob.Post("/teams/contested", bobEdit); code != http.StatusSeeOther {
		t.Fatalf("bob's edit: %d\n%s", code, body)
	}

	aliceEdit := webtest.TeamForm("contested", "6")
	aliceEdit.Set("resourceVersion", aliceRV)
	aliceEdit.Set("allocation", aliceAlloc)
	code, _, body := alice.Post("/teams/contested", aliceEdit)
	if code != http.StatusConflict {
		t.Fatalf("alice's stale edit: %d, want 409\n%s", code, body)
	}
	webtest.MustContain(t, "conflict page", body, `id="conflict"`, "Someone else changed team contested",
		"quota ml.p5.48xlarge GPUs 4 → 8", "fair-share weight 10 → 20", `name="quota.0.gpus" value="6"`)
	if nominal, _ := gpuQuota(c.clusterQueue(t, "contested")); nominal.Value() != 8 {
		t.Errorf("alice's stale edit overwrote bob's: nominal %s, want 8", &nominal)
	}
	// Having seen bob's change, alice saves again: now it is her decision.
	again := webtest.CloneValues(aliceEdit)
	again.Set("resourceVersion", webtest.Hidden(t, body, "resourceVersion"))
	again.Set("allocation", webtest.Hidden(t, body, "allocation"))
	if !strings.Contains(again.Get("allocation"), `"gpus":8`) {
		t.Errorf("the conflict page's allocation is not bob's: %s", again.Get("allocation"))
	}
	if code, _, body := alice.Post("/teams/contested", again); code != http.StatusSeeOther {
		t.Fatalf("alice's second save: %d\n%s", code, body)
	}
	if nominal, _ := gpuQuota(c.clusterQueue(t, "contested")); nominal.Value() != 6 {
		t.Errorf("alice's second save: nominal %s, want 6", &nominal)
	}

	// Something other than the allocation moves the resourceVersion (as
	// Kueue's status updates do): no conflict.
	_, form := alice.Get("/teams/contested/edit")
	edit := webtest.TeamForm("contested", "5")
	edit.Set("resourceVersion", webtest.Hidden(t, form, "resourceVersion"))
	edit.Set("allocation", webtest.Hidden(t, form, "allocation"))
	patch := []byte(`{"metadata":{"labels":{"example.test/touched":"yes"}}}`)
	touched, err := c.kueue.KueueV1beta2().ClusterQueues().Patch(ctx, c.settings.ClusterQueue("contested"), types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if touched.ResourceVersion == edit.Get("resourceVersion") {
		t.Fatal("the patch did not move the resourceVersion")
	}
	if code, _, body := alice.Post("/teams/contested", edit); code != http.StatusSeeOther {
		t.Fatalf("edit after an unrelated change: %d, want 303\n%s", code, body)
	}
	if nominal, _ := gpuQuota(c.clusterQueue(t, "contested")); nominal.Value() != 5 {
		t.Errorf("nominal %s, want 5", &nominal)
	}
}

// The proxy's headers count only from the proxy's addresses or with its
// secret; otherwise 401. Probes and metrics need neither.
func TestProxyHeadersTrustedOnlyFromTheProxy(t *testing.T) {
	c := proxyConsole(t)
	user := bindUser(t, c.kube, "viewer", rbac.ViewerRole)
	cases := []struct {
		name    string
		remote  string
		headers map[string]string
		want    int
	}{
		{"loopback proxy", "127.0.0.1:40000", map[string]string{auth.DefaultUserHeader: user}, http.StatusOK},
		{"other address", "10.9.8.7:40000", map[string]string{auth.DefaultUserHeader: user}, http.StatusUnauthorized},
		{"other address claiming loopback", "10.9.8.7:40000", map[string]string{auth.DefaultUserHeader: user, "X-Forwarded-For": "127.0.0.1", "X-Real-IP": "127.0.0.1"}, http.StatusUnauthorized},
		{"other address, wrong secret", "10.9.8.7:40000", map[string]string{auth.DefaultUserHeader: user, auth.SecretHeader: proxySecret + "x"}, http.StatusUnauthorized},
		{"other address, secret", "10.9.8.7:40000", map[string]string{auth.DefaultUserHeader: user, auth.SecretHeader: proxySecret}, http.StatusOK},
		{"loopback, no user", "127.0.0.1:40000", map[string]string{}, http.StatusUnauthorized},
	}
	for _, tc := range cases {
		b := &browser{T: t, H: c.h, Remote: tc.remote, Headers: tc.headers, Cookies: map[string]*http.Cookie{}}
		code, body := b.Get("/teams")
		if code != tc.want {
			t.Errorf("%s: GET /teams = %d, want %d", tc.name, code, tc.want)
			continue
		}
		if code == http.StatusOK {
			webtest.MustContain(t, tc.name, body, `id="signed-in-user"`, user)
		} else {
			webtest.MustContain(t, tc.name, body, "Sign-in required")
			webtest.MustNotContain(t, tc.name, body, user)
		}
	}
	stranger := &browser{T: t, H: c.h, Remote: "10.9.8.7:40000", Headers: map[string]string{}, Cookies: map[string]*http.Cookie{}}
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		if code, _ := stranger.Get(path); code != http.StatusOK {
			t.Errorf("GET %s from an untrusted address: %d, want 200", path, code)
		}
	}
}

// Token mode against the sandbox's real TokenReview. The sandbox's apiserver
// has a static token file with one token, its admin's: signing in with it
// works, any other token is refused. (Other users' tokens: the unit tests
// of internal/auth use a fake TokenReview.)
func TestTokenSignInAgainstSandbox(t *testing.T) {
	env := sandboxtest.Env(t)
	cfg, err := env.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	a := &auth.Authenticator{Mode: auth.ModeToken, Tokens: auth.KubeTokenReviewer{Client: kubernetes.NewForConfigOrDie(cfg)},
		Sessions: auth.NewSessions(auth.RandomKeys(), auth.SessionTTL, nil)}
	c := newConsoleWith(t, nil, func(d *handlers.Config) { d.Auth = a })
	t.Cleanup(func() { cleanupTeams(c) })
	b := &browser{T: t, H: c.h, Remote: "127.0.0.1:40000", Headers: map[string]string{"Accept": "text/html"}, Cookies: map[string]*http.Cookie{}}

	rec := b.Do(httptest.NewRequest(http.MethodGet, "/teams/new", nil))
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != auth.SignInPath+"?next=%2Fteams%2Fnew" {
		t.Fatalf("not signed in: %d %q", rec.Code, rec.Header().Get("Location"))
	}
	code, body := b.Get(auth.SignInPath + "?next=%2Fteams%2Fnew")
	if code != http.StatusOK {
		t.Fatalf("sign-in page: %d", code)
	}
	webtest.MustContain(t, "sign-in page", body, `id="sign-in-form"`, `name="token"`, `name="next" value="/teams/new"`)
	code, _, body = b.Post(auth.SignInPath, url.Values{"token": {"not-a-token"}, "next": {"/teams/new"}})
	if code != http.StatusUnauthorized {
		t.Errorf("bad token: %d", code)
	}
	webtest.MustContain(t, "refused sign-in", body, "did not accept this token")
	code, location, body := b.Post(auth.SignInPath, url.Values{"token": {env.Token}, "next": {"/teams/new"}})
	if code != http.StatusSeeOther || location != "/teams/new" {
		t.Fatalf("sign-in with the admin token: %d %q\n%s", code, location, body)
	}
	if ck := b.Cookies[auth.SessionCookie]; ck == nil || !ck.HttpOnly || ck.SameSite != http.SameSiteLaxMode {
		t.Errorf("session cookie %+v", ck)
	}
	code, body = b.Get("/teams/new")
	if code != http.StatusOK {
		t.Fatalf("signed in: %d", code)
	}
	webtest.MustContain(t, "signed-in page", body, `id="signed-in-user"`, "sandbox-admin", `id="sign-out"`)
	webtest.MustNotContain(t, "signed-in page", body, `id="read-only-note"`)
	// Writes go through as the signed-in admin.
	if code, _, body := b.Post("/teams", webtest.TeamForm("tokened", "2")); code != http.StatusSeeOther {
		t.Errorf("create as the signed-in admin: %d\n%s", code, body)
	}
	if code, location, _ := b.Post(auth.SignOutPath, url.Values{}); code != http.StatusSeeOther || location != auth.SignInPath {
		t.Errorf("sign-out: %d %q", code, location)
	}
	if rec := b.Do(httptest.NewRequest(http.MethodGet, "/teams", nil)); rec.Code != http.StatusSeeOther {
		t.Errorf("after sign-out: %d, want a redirect to sign in", rec.Code)
	}
}
