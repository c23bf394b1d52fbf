package domain

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestBindingsOf(t *testing.T) {
	rb := func(ns, name, roleKind, role string, subjects ...rbacv1.Subject) rbacv1.RoleBinding {
		return rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			RoleRef: rbacv1.RoleRef{Kind: roleKind, Name: role}, Subjects: subjects}
	}
	user := func(n string) rbacv1.Subject { return rbacv1.Subject{Kind: rbacv1.UserKind, Name: n} }
	group := func(n string) rbacv1.Subject { return rbacv1.Subject{Kind: rbacv1.GroupKind, Name: n} }
	tests := []struct {
		name string
		in   []rbacv1.RoleBinding
		want []Binding
	}{
		{name: "none"},
		{
			name: "two namespaces, sorted by namespace, kind and name",
			in: []rbacv1.RoleBinding{
				rb("team-b", "runners", "ClusterRole", "edit", user("zoe"), group("ml"), user("al")),
				rb("team-a", "readers", "Role", "job-reader", user("bo")),
			},
			want: []Binding{
				{Namespace: "team-a", Binding: "readers", Role: "Role job-reader", Subject: Member{Kind: "User", Name: "bo"}},
				{Namespace: "team-b", Binding: "runners", Role: "ClusterRole edit", Subject: Member{Kind: "Group", Name: "ml"}},
				{Namespace: "team-b", Binding: "runners", Role: "ClusterRole edit", Subject: Member{Kind: "User", Name: "al"}},
				{Namespace: "team-b", Binding: "runners", Role: "ClusterRole edit", Subject: Member{Kind: "User", Name: "zoe"}},
			},
		},
		{
			name: "a service account is named with its namespace, the binding's when it has none",
			in: []rbacv1.RoleBinding{rb("team-a", "ci", "ClusterRole", "edit",
				rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "builder"},
				rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: "ci", Name: "runner"})},
			want: []Binding{
				{Namespace: "team-a", Binding: "ci", Role: "ClusterRole edit", Subject: Member{Kind: "ServiceAccount", Name: "ci/runner"}},
				{Namespace: "team-a", Binding: "ci", Role: "ClusterRole edit", Subject: Member{Kind: "ServiceAccount", Name: "team-a/builder"}},
			},
		},
		{name: "a binding without subjects binds no one", in: []rbacv1.RoleBinding{rb("team-a", "empty", "ClusterRole", "view")}},
		{
			name: "the console's own install binds no member",
			in: func() []rbacv1.RoleBinding {
				own := rb("default", "quota-console-events", "Role", "quota-console-events",
					rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: "quota-console", Name: "quota-console"})
				own.Labels = map[string]string{"app.kubernetes.io/part-of": "quota-console"}
				return []rbacv1.RoleBinding{own, rb("default", "runners", "ClusterRole", "edit", user("al"))}
			}(),
			want: []Binding{{Namespace: "default", Binding: "runners", Role: "ClusterRole edit", Subject: Member{Kind: "User", Name: "al"}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, BindingsOf(tt.in)); diff != "" {
				t.Errorf("BindingsOf (-want +got):\n%s", diff)
			}
		})
	}
}
