package rbac_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"strings"
	"testing"
	"time"

	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueclient "sigs.k8s.io/kueue/client-go/clientset/versioned"

	"github.com/openquota/console/deploy/rbac"
	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/kueue"
	"github.com/openquota/console/internal/testenv"
	"github.com/openquota/console/sandbox/sandboxtest"
)

func TestManifestsParse(t *testing.T) {
	objs, err := rbac.Objects()
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o.GetKind()]++
		if o.GetName() == "" {
			t.Errorf("a %s without a name", o.GetKind())
		}
	}
	want := map[string]int{"ClusterRole": 4, "ServiceAccount": 1, "ClusterRoleBinding": 2, "ValidatingAdmissionPolicy": 1,
		"ValidatingAdmissionPolicyBinding": 1}
	for kind, n := range want {
		if kinds[kind] != n {
			t.Errorf("%d objects of kind %s, want %d (all: %v)", kinds[kind], kind, n, kinds)
		}
	}
}

// The admin role may bind the team member role, which the install
// provides, and change no role at all.
func TestAdminRoleBindsOnlyTheTeamMemberRole(t *testing.T) {
	admin := clusterRole(t, rbac.AdminRole)
	if !grants(admin, "bind", rbacv1.GroupName, "clusterroles", domain.TeamMemberRole) {
		t.Errorf("%s cannot bind ClusterRole %s", rbac.AdminRole, domain.TeamMemberRole)
	}
	for _, verb := range []string{"escalate", "create", "patch", "update", "delete"} {
		if grants(admin, verb, rbacv1.GroupName, "clusterroles", domain.TeamMemberRole) {
			t.Errorf("%s may %s ClusterRole %s", rbac.AdminRole, verb, domain.TeamMemberRole)
		}
	}
	if grants(admin, "bind", rbacv1.GroupName, "clusterroles", "cluster-admin") {
		t.Errorf("%s may bind any ClusterRole", rbac.AdminRole)
	}
	if clusterRole(t, domain.TeamMemberRole) == nil {
		t.Errorf("deploy/rbac does not install %s", domain.TeamMemberRole)
	}
}

// Applying the manifests to the sandbox proves they are valid (server-side
// apply with strict field validation), and access reviews prove each role
// grants what it should and no more.
func TestManifestsApplyAndGrantWhatTheyShould(t *testing.T) {
	cfg, err := sandboxtest.Env(t).RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 2 { // idempotent
		if err := rbac.Apply(ctx, cfg, "quota-console-tests"); err != nil {
			t.Fatalf("applying deploy/rbac: %v", err)
		}
	}
	kube := kubernetes.NewForConfigOrDie(cfg)
	// A sandbox set up before the console stopped writing Events in its
	// own namespace still has the Role that allowed it (an apply does not
	// prune; a Helm upgrade does).
	_ = kube.RbacV1().RoleBindings(rbac.Namespace).Delete(ctx, "quota-console-events", metav1.DeleteOptions{})
	_ = kube.RbacV1().Roles(rbac.Namespace).Delete(ctx, "quota-console-events", metav1.DeleteOptions{})

	// Every resource the rules name is one the apiserver serves.
	served := map[string]bool{}
	_, lists, err := kube.Discovery().ServerGroupsAndResources()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lists {
		group := strings.Split(l.GroupVersion, "/")[0]
		if !strings.Contains(l.GroupVersion, "/") {
			group = ""
		}
		for _, r := range l.APIResources {
			served[group+"/"+r.Name] = true
		}
	}
	objs, _ := rbac.Objects()
	for _, o := range objs {
		if o.GetKind() != "ClusterRole" && o.GetKind() != "Role" {
			continue
		}
		role := toRole(t, o)
		for _, rule := range role.Rules {
			for _, g := range rule.APIGroups {
				for _, r := range rule.Resources {
					if g == "quota-console.openquota.dev" {
						continue // the admin role's marker, which admin-scope.yaml asks the authorizer about
					}
					if !served[g+"/"+r] {
						t.Errorf("%s %s names %q in group %q, which the apiserver does not serve", o.GetKind(), o.GetName(), r, g)
					}
				}
			}
		}
	}

	id := rand.String(5)
	viewer, admin := "viewer-"+id, "admin-"+id
	testenv.BindUser(t, kube, viewer, rbac.ViewerRole)
	testenv.BindUser(t, kube, admin, rbac.AdminRole)
	sa := "system:serviceaccount:" + rbac.Namespace + ":" + rbac.ServiceAccount
	saGroups := []string{"system:serviceaccounts", "system:serviceaccounts:" + rbac.Namespace, "system:authenticated"}

	type check struct {
		verb, group, resource, ns, name string
		want                            bool
	}
	cases := map[string][]check{
		sa: {
			{"list", "kueue.x-k8s.io", "clusterqueues", "", "", true},
			{"watch", "kueue.x-k8s.io", "workloads", "", "", true},
			{"watch", "", "nodes", "", "", true},
			// It acts as nobody else.
			{"impersonate", "", "users", "", "alice", false},
			{"impersonate", "", "groups", "", "system:masters", false},
			{"impersonate", "", "serviceaccounts", "kube-system", "default", false},
			// Kueue's queue positions; which cluster this is.
			{"get", "visibility.kueue.x-k8s.io", "clusterqueues/pendingworkloads", "", "team-clusterqueue", true},
			{"get", "", "namespaces", "", "kube-system", true},
			{"create", "authentication.k8s.io", "tokenreviews", "", "", true},
			{"create", "authorization.k8s.io", "subjectaccessreviews", "", "", true},
			{"get", "", "configmaps", "kueue-system", "kueue-manager-config", true},
			// Its own records: revision histories and revoked sessions in its
			// namespace, its leader election Lease, Events.
			{"update", "", "configmaps", rbac.Namespace, "x-history", true},
			{"patch", "", "configmaps", rbac.Namespace, "x-history", true},
			{"watch", "", "configmaps", rbac.Namespace, kueue.SignOutsConfigMap, true},
			{"list", "", "configmaps", rbac.Namespace, kueue.SignOutsConfigMap, true},
			// The teams' revision histories are followed by an informer.
			{"list", "", "configmaps", rbac.Namespace, "", true},
			{"watch", "", "configmaps", rbac.Namespace, "", true},
			{"list", "", "configmaps", "default", "", false},
			{"create", "coordination.k8s.io", "leases", rbac.Namespace, "", true},
			{"get", "coordination.k8s.io", "leases", rbac.Namespace, rbac.LeaderLease, true},
			{"update", "coordination.k8s.io", "leases", rbac.Namespace, rbac.LeaderLease, true},
			{"update", "coordination.k8s.io", "leases", rbac.Namespace, "another-lease", false},
			{"delete", "coordination.k8s.io", "leases", rbac.Namespace, rbac.LeaderLease, false},
			{"update", "coordination.k8s.io", "leases", "kube-system", "kube-controller-manager", false},
			{"create", "", "events", "default", "", true},
			// Only about cluster-scoped objects, which Kubernetes keeps in default.
			{"create", "", "events", rbac.Namespace, "", false},
			{"patch", "", "events", "default", "", false},
			{"create", "", "events", "kube-system", "", false},
			{"create", "", "configmaps", "default", "", false},
			// The changes it makes for users who may make them: what
			// quota-console-admin may (within the admission policy), no more.
			{"patch", "kueue.x-k8s.io", "clusterqueues", "", "", true},
			{"create", "", "namespaces", "", "", true},
			{"bind", rbacv1.GroupName, "clusterroles", "", domain.TeamMemberRole, true},
			{"bind", rbacv1.GroupName, "clusterroles", "", "cluster-admin", false},
			{"escalate", rbacv1.GroupName, "clusterroles", "", domain.TeamMemberRole, false},
			{"create", "batch", "jobs", "team-ns", "", false},
			{"get", "", "secrets", "kube-system", "", false},
			{"get", "", "configmaps", "kueue-system", "other", false},
			{"update", "", "configmaps", "kube-system", "aws-auth", false},
		},
		viewer: {
			{"list", "kueue.x-k8s.io", "clusterqueues", "", "", true},
			{"list", "kueue.x-k8s.io", "workloads", "", "", true},
			{"patch", "kueue.x-k8s.io", "clusterqueues", "", "", false},
			{"patch", "kueue.x-k8s.io", "workloadpriorityclasses", "", "", false},
			{"delete", "", "namespaces", "", "", false},
			// Nothing the pages do not show.
			{"get", "", "configmaps", "team-ns", "team-ns-clusterqueue-history", false},
			{"get", "", "configmaps", "kube-system", "aws-auth", false},
			{"list", "", "configmaps", "", "", false},
			{"list", rbacv1.GroupName, "rolebindings", "", "", false},
			{"get", "", "secrets", "team-ns", "", false},
		},
		admin: {
			{"patch", "kueue.x-k8s.io", "clusterqueues", "", "", true},
			{"create", "kueue.x-k8s.io", "clusterqueues", "", "", true},
			{"delete", "kueue.x-k8s.io", "clusterqueues", "", "", true},
			{"patch", "kueue.x-k8s.io", "localqueues", "team-ns", "", true},
			{"patch", "kueue.x-k8s.io", "resourceflavors", "", "", true},
			{"delete", "kueue.x-k8s.io", "workloadpriorityclasses", "", "", true},
			{"patch", "kueue.x-k8s.io", "cohorts", "", "", true},
			{"patch", "", "namespaces", "", "", true},
			{"patch", rbacv1.GroupName, "rolebindings", "team-ns", "", true},
			{"bind", rbacv1.GroupName, "clusterroles", "", domain.TeamMemberRole, true},
			{"escalate", rbacv1.GroupName, "clusterroles", "", domain.TeamMemberRole, false},
			{"patch", rbacv1.GroupName, "clusterroles", "", domain.TeamMemberRole, false},
			{"update", "", "configmaps", "kube-system", "aws-auth", false},
			{"create", "", "configmaps", rbac.Namespace, "", false},
			{"bind", rbacv1.GroupName, "clusterroles", "", "cluster-admin", false},
			{"patch", rbacv1.GroupName, "clusterroles", "", "cluster-admin", false},
			{"get", "", "secrets", "kube-system", "", false},
			{"create", "batch", "jobs", "team-ns", "", false},
		},
	}
	for user, checks := range cases {
		groups := []string{"system:authenticated"}
		if user == sa {
			groups = saGroups
		}
		for _, c := range checks {
			resource, subresource, _ := strings.Cut(c.resource, "/")
			res, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
				User: user, Groups: groups,
				ResourceAttributes: &authzv1.ResourceAttributes{Verb: c.verb, Group: c.group, Resource: resource, Subresource: subresource, Namespace: c.ns, Name: c.name},
			}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if res.Status.Allowed != c.want {
				t.Errorf("%s may %s %s.%s %s/%s: %v, want %v", user, c.verb, c.resource, c.group, c.ns, c.name, res.Status.Allowed, c.want)
			}
		}
	}

	// The service account's role is enough for the console's informers.
	saCfg := rest.CopyConfig(cfg)
	saCfg.Impersonate = rest.ImpersonationConfig{UserName: sa, Groups: saGroups}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cache := kueue.NewCache(kubernetes.NewForConfigOrDie(saCfg), kueueclient.NewForConfigOrDie(saCfg), domain.DefaultSettings, log)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cache.Start(cctx)
	if err := wait.PollUntilContextTimeout(cctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return cache.Ready() == nil, nil
	}); err != nil {
		t.Errorf("informers as the console's service account never synced: %v", cache.Ready())
	}
}

// roleHolder installs deploy/rbac and binds a new user, named prefix and a
// random suffix, to role: admin is the sandbox admin's config, as the same
// impersonating that user (who holds role and nothing else).
func roleHolder(t *testing.T, prefix, role string) (admin, as *rest.Config, user string) {
	t.Helper()
	admin, err := sandboxtest.Env(t).RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	if err := rbac.Apply(context.Background(), admin, "quota-console-tests"); err != nil {
		t.Fatal(err)
	}
	user = prefix + "-" + rand.String(5)
	testenv.BindUser(t, kubernetes.NewForConfigOrDie(admin), user, role)
	as = rest.CopyConfig(admin)
	as.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	return admin, as, user
}

// adminHolder is roleHolder of quota-console-admin once the apiserver
// enforces both for the new user: the user's binding and a policy just
// applied reach the apiserver's authorizer and admission a moment later (on
// a fresh cluster, after a test's first requests). The user may then create
// a team namespace (RBAC), and not another namespace (the admission policy).
func adminHolder(t *testing.T, prefix string) (admin, as *rest.Config, user string) {
	t.Helper()
	admin, as, user = roleHolder(t, prefix, rbac.AdminRole)
	kube := kubernetes.NewForConfigOrDie(as)
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	createNamespace := func(ctx context.Context, name string) error {
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels: map[string]string{domain.ManagedByLabel: domain.ManagedByValue, domain.PodSecurityEnforceLabel: domain.DefaultPodSecurity}}}, dry)
		return err
	}
	var team, other error
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		team, other = createNamespace(ctx, "hyperpod-ns-probe-"+rand.String(5)), createNamespace(ctx, "not-a-team-"+rand.String(5))
		return team == nil && other != nil, nil
	})
	if err != nil {
		t.Fatalf("%s holds %s, but the apiserver never enforced it: a team namespace: %v; another namespace: %v", user, rbac.AdminRole, team, other)
	}
	return admin, as, user
}

func clusterRole(t *testing.T, name string) *rbacv1.ClusterRole {
	t.Helper()
	objs, err := rbac.Objects()
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() == "ClusterRole" && o.GetName() == name {
			return toRole(t, o)
		}
	}
	t.Fatalf("no ClusterRole %s in deploy/rbac", name)
	return nil
}

func toRole(t *testing.T, o *unstructured.Unstructured) *rbacv1.ClusterRole {
	t.Helper()
	var role rbacv1.ClusterRole // a Role's rules read the same
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &role); err != nil {
		t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
	}
	return &role
}

func grants(role *rbacv1.ClusterRole, verb, group, resource, name string) bool {
	has := func(list []string, v string) bool {
		for _, x := range list {
			if x == v || x == "*" {
				return true
			}
		}
		return false
	}
	for _, r := range role.Rules {
		if has(r.Verbs, verb) && has(r.APIGroups, group) && has(r.Resources, resource) &&
			(len(r.ResourceNames) == 0 || has(r.ResourceNames, name)) {
			return true
		}
	}
	return false
}

// Attacks by a user who holds quota-console-admin (and nothing else), made
// with kubectl-like requests, not through the console: each would have
// reached beyond the teams (to cluster-admin, in the end). Every request is a
// server-side dry run, so an attack that succeeds changes nothing.
func TestAdminRoleCannotEscalate(t *testing.T) {
	ctx := context.Background()
	cfg, asCfg, user := adminHolder(t, "admin")
	kube, as := kubernetes.NewForConfigOrDie(cfg), kubernetes.NewForConfigOrDie(asCfg)
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	dryUpdate := metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}
	dryDelete := metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}

	// Objects the attacks aim at, as a cluster would have them.
	if _, err := kube.CoreV1().ConfigMaps("kube-system").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "aws-auth"},
		Data: map[string]string{"mapRoles": "[]"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	team := "hyperpod-ns-esc-" + rand.String(5)
	teamNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: team, Labels: map[string]string{domain.ManagedByLabel: domain.ManagedByValue}}}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, teamNS, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.CoreV1().Namespaces().Delete(context.Background(), team, metav1.DeleteOptions{}) })
	memberBinding := func(ns string, role string) *rbacv1.RoleBinding {
		return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "mine", Namespace: ns},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
	}

	attacks := map[string]func() error{
		"rewrite the team member role to grant everything": func() error {
			role, err := kube.RbacV1().ClusterRoles().Get(ctx, domain.TeamMemberRole, metav1.GetOptions{})
			if err != nil {
				return err
			}
			role.Rules = append(role.Rules, rbacv1.PolicyRule{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}})
			_, err = as.RbacV1().ClusterRoles().Update(ctx, role, dryUpdate)
			return err
		},
		"bind the team member role in kube-system": func() error {
			_, err := as.RbacV1().RoleBindings("kube-system").Create(ctx, memberBinding("kube-system", domain.TeamMemberRole), dry)
			return err
		},
		"bind an admin role in a team namespace": func() error {
			_, err := as.RbacV1().RoleBindings(team).Create(ctx, memberBinding(team, rbac.AdminRole), dry)
			return err
		},
		"change kube-system/aws-auth": func() error {
			cm, err := kube.CoreV1().ConfigMaps("kube-system").Get(ctx, "aws-auth", metav1.GetOptions{})
			if err != nil {
				return err
			}
			cm.Data["mapRoles"] = "- rolearn: arn:aws:iam::1:role/mine\n  groups: [system:masters]"
			_, err = as.CoreV1().ConfigMaps("kube-system").Update(ctx, cm, dryUpdate)
			return err
		},
		"label kube-system privileged (Pod Security)": func() error {
			ns, err := kube.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if ns.Labels == nil {
				ns.Labels = map[string]string{}
			}
			ns.Labels["pod-security.kubernetes.io/enforce"] = "privileged"
			_, err = as.CoreV1().Namespaces().Update(ctx, ns, dryUpdate)
			return err
		},
		"label a team namespace privileged (Pod Security)": func() error {
			ns, err := kube.CoreV1().Namespaces().Get(ctx, team, metav1.GetOptions{})
			if err != nil {
				return err
			}
			ns.Labels["pod-security.kubernetes.io/enforce"] = "privileged"
			_, err = as.CoreV1().Namespaces().Update(ctx, ns, dryUpdate)
			return err
		},
		"create a namespace that is not a team's": func() error {
			_, err := as.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "not-a-team-" + rand.String(5),
				Labels: map[string]string{domain.ManagedByLabel: domain.ManagedByValue}}}, dry)
			return err
		},
		"delete kube-public": func() error {
			return as.CoreV1().Namespaces().Delete(ctx, "kube-public", dryDelete)
		},
		"write a revision history": func() error {
			_, err := as.CoreV1().ConfigMaps(rbac.Namespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "planted-history"}}, dry)
			return err
		},
	}
	for name, attack := range attacks {
		err := attack()
		if err == nil {
			t.Errorf("%s: the apiserver allowed it", name)
			continue
		}
		if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
			t.Errorf("%s: refused, but not by RBAC or admission: %v", name, err)
		}
	}

	// What the console does for a team, the admin may do.
	allowed := map[string]func() error{
		"bind a member in a team namespace": func() error {
			_, err := as.RbacV1().RoleBindings(team).Create(ctx, memberBinding(team, domain.TeamMemberRole), dry)
			return err
		},
		"create a team namespace": func() error {
			_, err := as.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "hyperpod-ns-new-" + rand.String(5),
				Labels: map[string]string{domain.ManagedByLabel: domain.ManagedByValue, domain.TeamLabel: "new", podSecurityEnforce: domain.DefaultPodSecurity}}}, dry)
			return err
		},
		"delete a team namespace": func() error { return as.CoreV1().Namespaces().Delete(ctx, team, dryDelete) },
	}
	for name, do := range allowed {
		if err := do(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// The viewer role (which the README once bound to everyone) reads no
// ConfigMaps and no RoleBindings of the cluster.
func TestViewerRoleReadsOnlyWhatThePagesShow(t *testing.T) {
	ctx := context.Background()
	_, asCfg, _ := roleHolder(t, "viewer", rbac.ViewerRole)
	as := kubernetes.NewForConfigOrDie(asCfg)
	if _, err := as.CoreV1().ConfigMaps("kube-system").Get(ctx, "extension-apiserver-authentication", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("viewer reads a kube-system ConfigMap: %v", err)
	}
	if _, err := as.RbacV1().RoleBindings("").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("viewer lists RoleBindings: %v", err)
	}
	if _, err := as.CoreV1().ConfigMaps(rbac.Namespace).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("viewer lists the console's revision histories: %v", err)
	}
}

// Attacks on what the console does not manage, by a user who holds
// quota-console-admin and nothing else: shared ResourceFlavors, other
// ClusterQueues, priority classes and cohorts, and team namespaces and member
// bindings turned into something else. Every request is a server-side dry run.
// What the console itself writes for a team and the policy stays allowed.
func TestAdminRoleChangesOnlyWhatTheConsoleManages(t *testing.T) {
	ctx := context.Background()
	cfg, asCfg, _ := adminHolder(t, "admin")
	kube, kq := kubernetes.NewForConfigOrDie(cfg), kueueclient.NewForConfigOrDie(cfg)
	id := rand.String(5)
	as, asKueue := kubernetes.NewForConfigOrDie(asCfg), kueueclient.NewForConfigOrDie(asCfg)
	w := newWorld(t, kube, kq, id)
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	dryUpdate := metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}
	dryDelete := metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}
	controlPlane := corev1.Toleration{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	managed := map[string]string{domain.ManagedByLabel: domain.ManagedByValue}

	updateFlavor := func(name string, change func(*kueuev1beta2.ResourceFlavor)) error {
		rf, err := kq.KueueV1beta2().ResourceFlavors().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(rf)
		_, err = asKueue.KueueV1beta2().ResourceFlavors().Update(ctx, rf, dryUpdate)
		return err
	}
	newFlavor := func(change func(*kueuev1beta2.ResourceFlavor)) error {
		name := "ml.new-" + rand.String(5)
		rf := &kueuev1beta2.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: managed},
			Spec: kueuev1beta2.ResourceFlavorSpec{NodeLabels: map[string]string{domain.InstanceTypeLabel: name}}}
		change(rf)
		_, err := asKueue.KueueV1beta2().ResourceFlavors().Create(ctx, rf, dry)
		return err
	}
	newClusterQueue := func(change func(*kueuev1beta2.ClusterQueue)) error {
		objs := w.teamObjects(t)
		var cq kueuev1beta2.ClusterQueue
		if err := viaJSON(objs.ClusterQueue, &cq); err != nil {
			return err
		}
		change(&cq)
		_, err := asKueue.KueueV1beta2().ClusterQueues().Create(ctx, &cq, dry)
		return err
	}
	updateNamespace := func(change func(*corev1.Namespace)) error {
		ns, err := kube.CoreV1().Namespaces().Get(ctx, w.teamNamespace, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(ns)
		_, err = as.CoreV1().Namespaces().Update(ctx, ns, dryUpdate)
		return err
	}
	bindMember := func(subject rbacv1.Subject) error {
		rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "members-" + rand.String(5), Namespace: w.teamNamespace, Labels: managed},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: domain.TeamMemberRole},
			Subjects: []rbacv1.Subject{subject}}
		_, err := as.RbacV1().RoleBindings(w.teamNamespace).Create(ctx, rb, dry)
		return err
	}
	newTeamNamespace := func(labels map[string]string) error {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.settings.Namespace("new-" + rand.String(5)), Labels: labels}}
		_, err := as.CoreV1().Namespaces().Create(ctx, ns, dry)
		return err
	}

	updateQueue := func(name string, change func(*kueuev1beta2.ClusterQueue)) error {
		cq, err := kq.KueueV1beta2().ClusterQueues().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(cq)
		_, err = asKueue.KueueV1beta2().ClusterQueues().Update(ctx, cq, dryUpdate)
		return err
	}
	importLabels := func(cq *kueuev1beta2.ClusterQueue) {
		if cq.Labels == nil {
			cq.Labels = map[string]string{}
		}
		maps.Copy(cq.Labels, domain.ImportLabels(cq.Name))
	}

	attacks := map[string]func() error{
		// Importing writes labels only: a change of the queue with it would
		// reach a ClusterQueue the console did not manage.
		"import a ClusterQueue and hold it in the same write": func() error {
			return updateQueue(w.otherClusterQueue, func(cq *kueuev1beta2.ClusterQueue) {
				importLabels(cq)
				cq.Spec.StopPolicy = ptr.To(kueuev1beta2.HoldAndDrain)
			})
		},
		"put another label on a ClusterQueue the console does not manage": func() error {
			return updateQueue(w.otherClusterQueue, func(cq *kueuev1beta2.ClusterQueue) {
				cq.Labels = map[string]string{"team": "mine"}
			})
		},
		"annotate a ClusterQueue the console does not manage while importing it": func() error {
			return updateQueue(w.otherClusterQueue, func(cq *kueuev1beta2.ClusterQueue) {
				importLabels(cq)
				cq.Annotations = map[string]string{"example.com/note": "x"}
			})
		},
		// The managed-by label alone made the queue the console's without
		// importing it, so that the next write could drain or delete it.
		"label a ClusterQueue the console does not manage as the console's, not imported": func() error {
			return updateQueue(w.otherClusterQueue, func(cq *kueuev1beta2.ClusterQueue) {
				cq.Labels = map[string]string{domain.ManagedByLabel: domain.ManagedByValue}
			})
		},
		"label a ClusterQueue the console does not manage as imported but not the console's": func() error {
			return updateQueue(w.otherClusterQueue, func(cq *kueuev1beta2.ClusterQueue) {
				cq.Labels = map[string]string{domain.ImportedLabel: "true", domain.TeamLabel: cq.Name}
			})
		},
		// An imported queue is someone else's made the console's: released,
		// never deleted, and never drained (its running tasks evicted).
		// Taking the imported label off, keeping the console's, would make
		// it a queue of the console's own, which the role may delete.
		"take the imported label off an imported ClusterQueue": func() error {
			return updateQueue(w.importedClusterQueue, func(cq *kueuev1beta2.ClusterQueue) {
				delete(cq.Labels, domain.ImportedLabel)
			})
		},
		"set the imported label of an imported ClusterQueue to false": func() error {
			return updateQueue(w.importedClusterQueue, func(cq *kueuev1beta2.ClusterQueue) {
				cq.Labels[domain.ImportedLabel] = "false"
			})
		},
		"delete an imported ClusterQueue": func() error {
			return asKueue.KueueV1beta2().ClusterQueues().Delete(ctx, w.importedClusterQueue, dryDelete)
		},
		"drain an imported ClusterQueue": func() error {
			return updateQueue(w.importedClusterQueue, func(cq *kueuev1beta2.ClusterQueue) {
				cq.Spec.StopPolicy = ptr.To(kueuev1beta2.HoldAndDrain)
			})
		},
		// An owner reference lets the garbage collector delete a queue with
		// an object the admin may delete; a finalizer pins it for ever. The
		// one write the role may make to someone else's queue must not
		// carry either.
		"give a ClusterQueue the console does not manage an owner while importing it": func() error {
			return updateQueue(w.otherClusterQueue, func(cq *kueuev1beta2.ClusterQueue) {
				importLabels(cq)
				cq.OwnerReferences = append(cq.OwnerReferences, ownedBy(w.managedFlavor))
			})
		},
		"pin a ClusterQueue the console does not manage with a finalizer while importing it": func() error {
			return updateQueue(w.otherClusterQueue, func(cq *kueuev1beta2.ClusterQueue) {
				importLabels(cq)
				cq.Finalizers = append(cq.Finalizers, "example.com/never")
			})
		},
		"give an imported ClusterQueue an owner": func() error {
			return updateQueue(w.importedClusterQueue, func(cq *kueuev1beta2.ClusterQueue) {
				cq.OwnerReferences = append(cq.OwnerReferences, ownedBy(w.managedFlavor))
			})
		},
		"give a ResourceFlavor of the console an owner": func() error {
			return updateFlavor(w.managedFlavor, func(rf *kueuev1beta2.ResourceFlavor) {
				rf.OwnerReferences = append(rf.OwnerReferences, ownedBy(w.managedFlavor+"-owner"))
			})
		},
		// While imported, a queue is the console's only in what its team
		// form writes: its owner's labels and annotations, and what the form
		// keeps as it is, stay theirs (an import, an edit and a release
		// would otherwise change anything and leave no trace).
		"change the owner's label of an imported ClusterQueue": func() error {
			return updateQueue(w.importedClusterQueue, func(cq *kueuev1beta2.ClusterQueue) { cq.Labels[ownersLabel] = "me" })
		},
		"remove the owner's annotation of an imported ClusterQueue": func() error {
			return updateQueue(w.importedClusterQueue, func(cq *kueuev1beta2.ClusterQueue) { delete(cq.Annotations, ownersAnnotation) })
		},
		"annotate an imported ClusterQueue": func() error {
			return updateQueue(w.importedClusterQueue, func(cq *kueuev1beta2.ClusterQueue) { cq.Annotations["example.com/note"] = "x" })
		},
		"change an imported ClusterQueue's queueing strategy": func() error {
			return updateQueue(w.importedClusterQueue, func(cq *kueuev1beta2.ClusterQueue) { cq.Spec.QueueingStrategy = kueuev1beta2.StrictFIFO })
		},
		"let an imported ClusterQueue reclaim from any priority": func() error {
			return updateQueue(w.importedClusterQueue, func(cq *kueuev1beta2.ClusterQueue) {
				if cq.Spec.Preemption == nil {
					cq.Spec.Preemption = &kueuev1beta2.ClusterQueuePreemption{}
				}
				cq.Spec.Preemption.ReclaimWithinCohort = kueuev1beta2.PreemptionPolicyAny
			})
		},
		"change an imported ClusterQueue's flavor fungibility": func() error {
			return updateQueue(w.importedClusterQueue, func(cq *kueuev1beta2.ClusterQueue) {
				cq.Spec.FlavorFungibility = &kueuev1beta2.FlavorFungibility{WhenCanBorrow: kueuev1beta2.TryNextFlavor, WhenCanPreempt: kueuev1beta2.TryNextFlavor}
			})
		},
		"cover another resource in an imported ClusterQueue": func() error {
			return updateQueue(w.importedClusterQueue, func(cq *kueuev1beta2.ClusterQueue) {
				g := &cq.Spec.ResourceGroups[0]
				g.CoveredResources = append(g.CoveredResources, corev1.ResourceMemory)
				g.Flavors[0].Resources = append(g.Flavors[0].Resources, kueuev1beta2.ResourceQuota{Name: corev1.ResourceMemory, NominalQuota: resource.MustParse("1Gi")})
			})
		},
		"swap the flavor of an imported ClusterQueue": func() error {
			return updateQueue(w.importedClusterQueue, func(cq *kueuev1beta2.ClusterQueue) {
				cq.Spec.ResourceGroups[0].Flavors[0].Name = kueuev1beta2.ResourceFlavorReference(w.managedFlavor)
			})
		},
		"widen an imported ClusterQueue to every namespace": func() error {
			return updateQueue(w.importedClusterQueue, func(cq *kueuev1beta2.ClusterQueue) {
				cq.Spec.NamespaceSelector = &metav1.LabelSelector{}
			})
		},
		"put a cohort of the console under a cohort it does not manage": func() error {
			co := &kueuev1beta2.Cohort{ObjectMeta: metav1.ObjectMeta{Name: w.settings.Cohort + "-sub", Labels: managed},
				Spec: kueuev1beta2.CohortSpec{ParentName: kueuev1beta2.CohortReference(w.otherCohort)}}
			_, err := asKueue.KueueV1beta2().Cohorts().Create(ctx, co, dry)
			return err
		},
		// The chart's cohort is shared-pool: the policy's cohort gets no parent.
		"put the console's cohort under another": func() error {
			co := &kueuev1beta2.Cohort{ObjectMeta: metav1.ObjectMeta{Name: domain.DefaultSettings.Cohort, Labels: managed},
				Spec: kueuev1beta2.CohortSpec{ParentName: kueuev1beta2.CohortReference(w.settings.Cohort + "-sub")}}
			_, err := asKueue.KueueV1beta2().Cohorts().Create(ctx, co, dry)
			return err
		},
		"move an imported ClusterQueue to a cohort the console does not manage": func() error {
			return updateQueue(w.importedClusterQueue, func(cq *kueuev1beta2.ClusterQueue) {
				cq.Spec.CohortName = "elsewhere-" + kueuev1beta2.CohortReference(id)
			})
		},
		// Every tenant's pods of that instance type would move.
		"add a control-plane toleration and node labels to a shared ResourceFlavor": func() error {
			return updateFlavor(w.sharedFlavor, func(rf *kueuev1beta2.ResourceFlavor) {
				rf.Spec.Tolerations = append(rf.Spec.Tolerations, controlPlane)
				rf.Spec.NodeLabels["node-role.kubernetes.io/control-plane"] = ""
			})
		},
		"label a shared ResourceFlavor as the console's": func() error {
			return updateFlavor(w.sharedFlavor, func(rf *kueuev1beta2.ResourceFlavor) { rf.Labels = managed })
		},
		"delete a shared ResourceFlavor": func() error {
			return asKueue.KueueV1beta2().ResourceFlavors().Delete(ctx, w.sharedFlavor, dryDelete)
		},
		"add a control-plane toleration to a ResourceFlavor of the console": func() error {
			return updateFlavor(w.managedFlavor, func(rf *kueuev1beta2.ResourceFlavor) {
				rf.Spec.Tolerations = append(rf.Spec.Tolerations, controlPlane)
			})
		},
		"create a ResourceFlavor of the console with node taints": func() error {
			return newFlavor(func(rf *kueuev1beta2.ResourceFlavor) {
				rf.Spec.NodeTaints = []corev1.Taint{{Key: "dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule}}
			})
		},
		"create a ResourceFlavor of the console with another node label": func() error {
			return newFlavor(func(rf *kueuev1beta2.ResourceFlavor) {
				rf.Spec.NodeLabels["kubernetes.io/hostname"] = "control-plane-0"
			})
		},
		"create a ResourceFlavor of the console for another instance type": func() error {
			return newFlavor(func(rf *kueuev1beta2.ResourceFlavor) { rf.Spec.NodeLabels[domain.InstanceTypeLabel] = "ml.p5.48xlarge" })
		},
		"create a ResourceFlavor of the console with a topology": func() error {
			return newFlavor(func(rf *kueuev1beta2.ResourceFlavor) {
				rf.Spec.TopologyName = ptr.To(kueuev1beta2.TopologyReference("default"))
			})
		},
		"hold and drain a ClusterQueue the console does not manage": func() error {
			cq, err := kq.KueueV1beta2().ClusterQueues().Get(ctx, w.otherClusterQueue, metav1.GetOptions{})
			if err != nil {
				return err
			}
			cq.Spec.StopPolicy = ptr.To(kueuev1beta2.HoldAndDrain)
			_, err = asKueue.KueueV1beta2().ClusterQueues().Update(ctx, cq, dryUpdate)
			return err
		},
		"delete a ClusterQueue the console does not manage": func() error {
			return asKueue.KueueV1beta2().ClusterQueues().Delete(ctx, w.otherClusterQueue, dryDelete)
		},
		"create a ClusterQueue of the console for every namespace": func() error {
			return newClusterQueue(func(cq *kueuev1beta2.ClusterQueue) { cq.Spec.NamespaceSelector = &metav1.LabelSelector{} })
		},
		"create a ClusterQueue of the console for kube-system": func() error {
			return newClusterQueue(func(cq *kueuev1beta2.ClusterQueue) {
				cq.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "kube-system"}}
			})
		},
		"create a ClusterQueue of the console in a cohort it does not manage": func() error {
			return newClusterQueue(func(cq *kueuev1beta2.ClusterQueue) { cq.Spec.CohortName = kueuev1beta2.CohortReference(w.otherCohort) })
		},
		"change a WorkloadPriorityClass the console does not manage": func() error {
			wpc, err := kq.KueueV1beta2().WorkloadPriorityClasses().Get(ctx, w.otherPriorityClass, metav1.GetOptions{})
			if err != nil {
				return err
			}
			wpc.Value = 1_000_000
			_, err = asKueue.KueueV1beta2().WorkloadPriorityClasses().Update(ctx, wpc, dryUpdate)
			return err
		},
		"delete a WorkloadPriorityClass the console does not manage": func() error {
			return asKueue.KueueV1beta2().WorkloadPriorityClasses().Delete(ctx, w.otherPriorityClass, dryDelete)
		},
		"put a Cohort the console does not manage under another": func() error {
			c, err := kq.KueueV1beta2().Cohorts().Get(ctx, w.otherCohort, metav1.GetOptions{})
			if err != nil {
				return err
			}
			c.Spec.ParentName = kueuev1beta2.CohortReference(w.settings.Cohort)
			_, err = asKueue.KueueV1beta2().Cohorts().Update(ctx, c, dryUpdate)
			return err
		},
		"delete a Cohort the console does not manage": func() error {
			return asKueue.KueueV1beta2().Cohorts().Delete(ctx, w.otherCohort, dryDelete)
		},
		"point a team's LocalQueue at a ClusterQueue the console does not manage": func() error {
			lq := &kueuev1beta2.LocalQueue{ObjectMeta: metav1.ObjectMeta{Name: "borrowed", Namespace: w.teamNamespace, Labels: managed},
				Spec: kueuev1beta2.LocalQueueSpec{ClusterQueue: kueuev1beta2.ClusterQueueReference(w.otherClusterQueue)}}
			_, err := asKueue.KueueV1beta2().LocalQueues(w.teamNamespace).Create(ctx, lq, dry)
			return err
		},
		// The team member role creates Jobs: bound to everyone, anyone runs pods.
		"bind the team member role to system:unauthenticated": func() error {
			return bindMember(rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:unauthenticated"})
		},
		"bind the team member role to system:serviceaccounts": func() error {
			return bindMember(rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:serviceaccounts"})
		},
		"bind the team member role to a ServiceAccount": func() error {
			return bindMember(rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "default", Namespace: "kube-system"})
		},
		"bind the team member role to a system: user": func() error {
			return bindMember(rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "system:kube-scheduler"})
		},
		// A finalizer keeps a deleted team's namespace forever; an owner
		// reference lets the garbage collector delete it with another object.
		"set a finalizer on a team namespace": func() error {
			return updateNamespace(func(ns *corev1.Namespace) { ns.Finalizers = append(ns.Finalizers, "example.com/keep") })
		},
		"set an owner reference on a team namespace": func() error {
			return updateNamespace(func(ns *corev1.Namespace) {
				ns.OwnerReferences = append(ns.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: "6b1c7d1e-0000-4000-8000-000000000001"})
			})
		},
		"remove a team namespace's Pod Security label": func() error {
			return updateNamespace(func(ns *corev1.Namespace) { delete(ns.Labels, podSecurityEnforce) })
		},
		"create a team namespace without Pod Security": func() error {
			return newTeamNamespace(managed)
		},
		"create a privileged team namespace": func() error {
			return newTeamNamespace(map[string]string{domain.ManagedByLabel: domain.ManagedByValue, podSecurityEnforce: "privileged"})
		},
	}
	for name, attack := range attacks {
		err := attack()
		if err == nil {
			t.Errorf("%s: the apiserver allowed it", name)
			continue
		}
		if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
			t.Errorf("%s: refused, but not by RBAC or admission: %v", name, err)
		}
		t.Logf("%s: refused: %v", name, err)
	}

	// What the console writes for a team and for the policy, the admin may
	// write (server-side apply, as the console does).
	objs := w.teamObjects(t)
	apply := metav1.ApplyOptions{FieldManager: domain.FieldManager, Force: true, DryRun: []string{metav1.DryRunAll}}
	allowed := map[string]func() error{
		"apply the team's namespace": func() error {
			_, err := as.CoreV1().Namespaces().Apply(ctx, objs.Namespace, apply)
			return err
		},
		"create a team namespace": func() error {
			return newTeamNamespace(map[string]string{domain.ManagedByLabel: domain.ManagedByValue, podSecurityEnforce: "baseline"})
		},
		"apply a ResourceFlavor of the console": func() error {
			_, err := asKueue.KueueV1beta2().ResourceFlavors().Apply(ctx, domain.FlavorFor("ml.new-"+id), apply)
			return err
		},
		"apply the team's ClusterQueue": func() error {
			_, err := asKueue.KueueV1beta2().ClusterQueues().Apply(ctx, objs.ClusterQueue, apply)
			return err
		},
		"apply the team's LocalQueue": func() error {
			_, err := asKueue.KueueV1beta2().LocalQueues(w.teamNamespace).Apply(ctx, objs.LocalQueue, apply)
			return err
		},
		"apply the team's member binding": func() error {
			_, err := as.RbacV1().RoleBindings(w.teamNamespace).Apply(ctx, objs.Members, apply)
			return err
		},
		"apply the policy's priority classes and cohort": func() error {
			for _, wpc := range domain.BuildPriorityClasses(w.settings, w.policy) {
				if _, err := asKueue.KueueV1beta2().WorkloadPriorityClasses().Apply(ctx, wpc, apply); err != nil {
					return err
				}
			}
			cohort, err := domain.BuildCohort(w.settings, w.policy)
			if err != nil {
				return err
			}
			_, err = asKueue.KueueV1beta2().Cohorts().Apply(ctx, cohort, apply)
			return err
		},
		"delete a ResourceFlavor of the console": func() error {
			return asKueue.KueueV1beta2().ResourceFlavors().Delete(ctx, w.managedFlavor, dryDelete)
		},
		"delete the team's namespace": func() error { return as.CoreV1().Namespaces().Delete(ctx, w.teamNamespace, dryDelete) },
		"create a cohort of the console under the console's cohort": func() error {
			co := &kueuev1beta2.Cohort{ObjectMeta: metav1.ObjectMeta{Name: w.settings.Cohort + "-research", Labels: managed},
				Spec: kueuev1beta2.CohortSpec{ParentName: kueuev1beta2.CohortReference(w.settings.Cohort)}}
			_, err := asKueue.KueueV1beta2().Cohorts().Create(ctx, co, dry)
			return err
		},
		"import a ClusterQueue the console does not manage (its labels only)": func() error {
			return updateQueue(w.otherClusterQueue, importLabels)
		},
		"release an imported ClusterQueue (its labels only)": func() error {
			return updateQueue(w.importedClusterQueue, func(cq *kueuev1beta2.ClusterQueue) {
				for k := range domain.ImportLabels(cq.Name) {
					delete(cq.Labels, k)
				}
			})
		},
		"apply an edit of an imported team (hold, weight, preemption, order)": func() error {
			live, err := kq.KueueV1beta2().ClusterQueues().Get(ctx, w.importedClusterQueue, metav1.GetOptions{})
			if err != nil {
				return err
			}
			objs, err := domain.BuildImportedTeam(w.settings, domain.Team{Name: w.importedClusterQueue, FairShareWeight: 3,
				Preemption: domain.PreemptLowerPriority, Lending: domain.LendAndBorrow, BorrowLimitPercent: 100,
				Cohort: w.otherCohort, RecentUseOrder: true}, live, domain.LookupShape)
			if err != nil {
				return err
			}
			_, err = asKueue.KueueV1beta2().ClusterQueues().Apply(ctx, objs.ClusterQueue, apply)
			return err
		},
		// A release first takes off the annotations the console's edits left.
		"take the console's annotations off an imported ClusterQueue": func() error {
			return updateQueue(w.importedClusterQueue, func(cq *kueuev1beta2.ClusterQueue) {
				delete(cq.Annotations, domain.AllocationAnnotation)
			})
		},
		"change an imported ClusterQueue's quota, keeping its namespaces and cohort": func() error {
			return updateQueue(w.importedClusterQueue, func(cq *kueuev1beta2.ClusterQueue) {
				cq.Spec.ResourceGroups[0].Flavors[0].Resources[0].NominalQuota = resource.MustParse("16")
			})
		},
	}
	for name, do := range allowed {
		if err := do(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// podSecurityEnforce is the Pod Security admission's label of a namespace's level.
const podSecurityEnforce = "pod-security.kubernetes.io/enforce"

// world is what TestAdminRoleChangesOnlyWhatTheConsoleManages aims at, made
// by the sandbox's admin with names of its own: a team namespace as the
// console makes it, a ResourceFlavor of the console, and a ResourceFlavor,
// ClusterQueue, priority class and cohort someone else made.
type world struct {
	settings                              domain.Settings
	team, teamNamespace                   string
	policy                                domain.Policy
	sharedFlavor, managedFlavor           string
	otherClusterQueue, otherPriorityClass string
	otherCohort                           string
	// importedClusterQueue is a queue someone else made, imported: it keeps
	// its own namespaceSelector and cohort.
	importedClusterQueue string
}

func newWorld(t *testing.T, kube kubernetes.Interface, kq kueueclient.Interface, id string) *world {
	t.Helper()
	ctx := context.Background()
	// The console's cohorts are the chart's (shared-pool) and those named after it.
	s := domain.Settings{NamespacePrefix: "hyperpod-ns-" + id + "-", Cohort: domain.DefaultSettings.Cohort + "-" + id}
	w := &world{settings: s, team: "t", teamNamespace: s.Namespace("t"),
		policy:       domain.Policy{Prioritization: domain.TaskRanking, IdleAllocation: domain.IdleFairShare, Classes: []domain.PriorityClass{{Name: "esc-" + id, Weight: 10}}},
		sharedFlavor: "shared-" + id, managedFlavor: "ml.managed-" + id,
		otherClusterQueue: "other-" + id, otherPriorityClass: "other-" + id, otherCohort: "other-" + id, importedClusterQueue: "imported-" + id}
	create := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("creating %s: %v", what, err)
		}
	}
	objs := w.teamObjects(t)
	_, err := kube.CoreV1().Namespaces().Apply(ctx, objs.Namespace, metav1.ApplyOptions{FieldManager: "quota-console-tests"})
	create("the team namespace", err)
	t.Cleanup(func() {
		_ = kube.CoreV1().Namespaces().Delete(context.Background(), w.teamNamespace, metav1.DeleteOptions{})
	})

	flavors := kq.KueueV1beta2().ResourceFlavors()
	_, err = flavors.Create(ctx, &kueuev1beta2.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: w.sharedFlavor},
		Spec: kueuev1beta2.ResourceFlavorSpec{NodeLabels: map[string]string{domain.InstanceTypeLabel: "ml.c5.2xlarge"}}}, metav1.CreateOptions{})
	create("a shared ResourceFlavor", err)
	_, err = flavors.Apply(ctx, domain.FlavorFor(w.managedFlavor), metav1.ApplyOptions{FieldManager: "quota-console-tests"})
	create("a ResourceFlavor of the console", err)
	_, err = kq.KueueV1beta2().ClusterQueues().Create(ctx, &kueuev1beta2.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: w.otherClusterQueue},
		Spec: kueuev1beta2.ClusterQueueSpec{NamespaceSelector: &metav1.LabelSelector{}}}, metav1.CreateOptions{})
	create("a ClusterQueue", err)
	_, err = kq.KueueV1beta2().ClusterQueues().Create(ctx, &kueuev1beta2.ClusterQueue{
		ObjectMeta: metav1.ObjectMeta{Name: w.importedClusterQueue,
			Labels:      withLabels(domain.ImportLabels(w.importedClusterQueue), map[string]string{ownersLabel: "research"}),
			Annotations: map[string]string{ownersAnnotation: "research@example.com", domain.AllocationAnnotation: "{}"}},
		Spec: kueuev1beta2.ClusterQueueSpec{CohortName: kueuev1beta2.CohortReference(w.otherCohort),
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"research-group": id}},
			ResourceGroups: []kueuev1beta2.ResourceGroup{{CoveredResources: []corev1.ResourceName{corev1.ResourceCPU},
				Flavors: []kueuev1beta2.FlavorQuotas{{Name: kueuev1beta2.ResourceFlavorReference(w.sharedFlavor),
					Resources: []kueuev1beta2.ResourceQuota{{Name: corev1.ResourceCPU, NominalQuota: resource.MustParse("8")}}}}}}}}, metav1.CreateOptions{})
	create("an imported ClusterQueue", err)
	_, err = kq.KueueV1beta2().WorkloadPriorityClasses().Create(ctx, &kueuev1beta2.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: w.otherPriorityClass},
		Value: 10}, metav1.CreateOptions{})
	create("a WorkloadPriorityClass", err)
	_, err = kq.KueueV1beta2().Cohorts().Create(ctx, &kueuev1beta2.Cohort{ObjectMeta: metav1.ObjectMeta{Name: w.otherCohort}}, metav1.CreateOptions{})
	create("a Cohort", err)
	t.Cleanup(func() {
		ctx := context.Background()
		_ = flavors.Delete(ctx, w.sharedFlavor, metav1.DeleteOptions{})
		_ = flavors.Delete(ctx, w.managedFlavor, metav1.DeleteOptions{})
		_ = kq.KueueV1beta2().ClusterQueues().Delete(ctx, w.otherClusterQueue, metav1.DeleteOptions{})
		_ = kq.KueueV1beta2().ClusterQueues().Delete(ctx, w.importedClusterQueue, metav1.DeleteOptions{})
		_ = kq.KueueV1beta2().WorkloadPriorityClasses().Delete(ctx, w.otherPriorityClass, metav1.DeleteOptions{})
		_ = kq.KueueV1beta2().Cohorts().Delete(ctx, w.otherCohort, metav1.DeleteOptions{})
	})
	return w
}

// teamObjects are the objects the console builds for the world's team.
func (w *world) teamObjects(t *testing.T) domain.TeamObjects {
	t.Helper()
	gpus := int64(2)
	objs, err := domain.BuildTeam(w.settings, domain.Team{Name: w.team, Enabled: true, Preemption: domain.PreemptNever, Lending: domain.DontLend,
		Members: []domain.Member{{Kind: "User", Name: "alice"}, {Kind: "Group", Name: "ml"}},
		Quota:   []domain.QuotaInput{{InstanceType: "ml.p5.48xlarge", GPUs: &gpus}}}, domain.LookupShape)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// The owner's label and annotation on the world's imported queue.
const (
	ownersLabel      = "example.com/owner"
	ownersAnnotation = "example.com/contact"
)

func withLabels(a, b map[string]string) map[string]string {
	out := maps.Clone(a)
	maps.Copy(out, b)
	return out
}

// ownedBy is an owner reference to the ResourceFlavor named name.
func ownedBy(name string) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: kueuev1beta2.SchemeGroupVersion.String(), Kind: "ResourceFlavor", Name: name,
		UID: "6b1c7d1e-0000-4000-8000-000000000002"}
}

func viaJSON(from, to any) error {
	data, err := json.Marshal(from)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, to)
}

// The console's ServiceAccount acts as nobody else: with its token one could
// otherwise impersonate system:masters, any user or any ServiceAccount, and
// hold cluster-admin. Attempts are server-side dry runs.
func TestConsoleServiceAccountCannotImpersonate(t *testing.T) {
	ctx := context.Background()
	saCfg := testenv.ConsoleConfig(t)
	grantAll := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "taken-over-" + rand.String(5)},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "mallory"}}}
	for name, as := range map[string]rest.ImpersonationConfig{
		"group system:masters":                   {UserName: "mallory", Groups: []string{"system:masters"}},
		"a user":                                 {UserName: "alice@example.com"},
		"a ServiceAccount of kube-system":        {UserName: "system:serviceaccount:kube-system:clusterrole-aggregation-controller"},
		"a user with the groups of the platform": {UserName: "alice@example.com", Groups: []string{"platform-admins"}},
	} {
		c := rest.CopyConfig(saCfg)
		c.Impersonate = as
		_, err := kubernetes.NewForConfigOrDie(c).RbacV1().ClusterRoleBindings().Create(ctx, grantAll, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		switch {
		case err == nil:
			t.Errorf("as %s: the console's ServiceAccount made a ClusterRoleBinding to cluster-admin", name)
		case !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "cannot impersonate"):
			t.Errorf("as %s: %v, want a refused impersonation", name, err)
		}
	}
}
