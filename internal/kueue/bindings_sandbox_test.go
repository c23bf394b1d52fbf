package kueue_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/kueue"
	"github.com/openquota/console/internal/testenv"
)

// An imported team's members are read from the RoleBindings of the
// namespaces its queue serves, as the apiserver keeps them.
func TestBindingsReadTheNamespacesRoleBindings(t *testing.T) {
	c := clients(t)
	ctx := context.Background()
	a, b := testenv.Namespace(t, c.Kube, "members-a"), testenv.Namespace(t, c.Kube, "members-b")
	for _, rb := range []*rbacv1.RoleBinding{
		{ObjectMeta: metav1.ObjectMeta{Namespace: a, Name: "runners"}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "ana"}, {Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "ml-research"}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: b, Name: "ci"}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "builder", Namespace: b}}},
	} {
		if _, err := c.Kube.RbacV1().RoleBindings(rb.Namespace).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := kueue.Bindings{Kube: c.Kube}.Of(ctx, []string{b, a, "members-none-" + a})
	if err != nil {
		t.Fatal(err)
	}
	want := []domain.Binding{
		{Namespace: a, Binding: "runners", Role: "ClusterRole edit", Subject: domain.Member{Kind: "Group", Name: "ml-research"}},
		{Namespace: a, Binding: "runners", Role: "ClusterRole edit", Subject: domain.Member{Kind: "User", Name: "ana"}},
		{Namespace: b, Binding: "ci", Role: "ClusterRole view", Subject: domain.Member{Kind: "ServiceAccount", Name: b + "/builder"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("bindings (-want +got):\n%s", diff)
	}
}
