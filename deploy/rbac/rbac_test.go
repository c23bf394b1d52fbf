package rbac_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	authzv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	kueueclient "sigs.k8s.io/kueue/client-go/clientset/versioned"

	"github.com/openquota/console/deploy/rbac"
	"github.com/openquota/console/internal/kueue"
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
	if kinds["ClusterRole"] != 3 || kinds["ServiceAccount"] != 1 || kinds["ClusterRoleBinding"] != 1 {
		t.Errorf("objects by kind: %v", kinds)
	}
}

// The team member ClusterRole the admin role may bind and escalate is the one
// the console writes.
func TestAdminRoleNamesTheTeamMemberRole(t *testing.T) {
	admin := clusterRole(t, rbac.AdminRole)
	for _, verb := range []string{"bind", "escalate", "create", "patch"} {
		if !grants(admin, verb, rbacv1.GroupName, "clusterroles", kueue.TeamMemberRole) {
			t.Errorf("%s cannot %s ClusterRole %s", rbac.AdminRole, verb, kueue.TeamMemberRole)
		}
	}
	if grants(admin, "bind", rbacv1.GroupName, "clusterroles", "cluster-admin") {
		t.Errorf("%s may bind any ClusterRole", rbac.AdminRole)
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
					if rule.Verbs[0] == "impersonate" && (r == "users" || r == "groups") {
						continue // not served resources: impersonation targets
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
	bind(t, kube, viewer, rbac.ViewerRole)
	bind(t, kube, admin, rbac.AdminRole)
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
			{"impersonate", "", "users", "", "alice", true},
			{"impersonate", "", "groups", "", "ml-platform", true},
			{"create", "authentication.k8s.io", "tokenreviews", "", "", true},
			{"create", "authorization.k8s.io", "subjectaccessreviews", "", "", true},
			{"get", "", "configmaps", "kueue-system", "kueue-manager-config", true},
			// It writes nothing by itself.
			{"patch", "kueue.x-k8s.io", "clusterqueues", "", "", false},
			{"create", "", "namespaces", "", "", false},
			{"get", "", "secrets", "kube-system", "", false},
			{"get", "", "configmaps", "kueue-system", "other", false},
		},
		viewer: {
			{"list", "kueue.x-k8s.io", "clusterqueues", "", "", true},
			{"list", "kueue.x-k8s.io", "workloads", "", "", true},
			{"patch", "kueue.x-k8s.io", "clusterqueues", "", "", false},
			{"patch", "kueue.x-k8s.io", "workloadpriorityclasses", "", "", false},
			{"delete", "", "namespaces", "", "", false},
			{"get", "", "configmaps", "team-ns", "team-ns-clusterqueue-history", true},
			{"list", "", "configmaps", "team-ns", "", false},
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
			{"bind", rbacv1.GroupName, "clusterroles", "", kueue.TeamMemberRole, true},
			{"escalate", rbacv1.GroupName, "clusterroles", "", kueue.TeamMemberRole, true},
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
			res, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
				User: user, Groups: groups,
				ResourceAttributes: &authzv1.ResourceAttributes{Verb: c.verb, Group: c.group, Resource: c.resource, Namespace: c.ns, Name: c.name},
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
	cache := kueue.NewCache(kubernetes.NewForConfigOrDie(saCfg), kueueclient.NewForConfigOrDie(saCfg), log)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cache.Start(cctx)
	if err := wait.PollUntilContextTimeout(cctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return cache.Ready() == nil, nil
	}); err != nil {
		t.Errorf("informers as the console's service account never synced: %v", cache.Ready())
	}
}

func bind(t *testing.T, kube kubernetes.Interface, user, role string) {
	t.Helper()
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user + "-" + role},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(context.Background(), crb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), crb.Name, metav1.DeleteOptions{})
	})
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
