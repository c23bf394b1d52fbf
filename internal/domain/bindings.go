package domain

import (
	"cmp"
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
)

// Binding is one subject a RoleBinding binds in a namespace a team's queue
// serves. An imported team's members are these: the console writes none of
// them and shows them as the cluster has them.
type Binding struct {
	Namespace string
	Binding   string // the RoleBinding's name
	Role      string // "ClusterRole edit", "Role job-runner"
	// Subject is a User, a Group or a ServiceAccount (named
	// "namespace/name").
	Subject Member
}

// PartOfLabel marks what the console's own install (its Helm chart and
// manifests) creates, such as the RoleBinding that lets it record events
// in a namespace.
const PartOfLabel = "app.kubernetes.io/part-of"

// BindingsOf lists the subjects of rbs, ordered by namespace, subject kind
// and name, then binding. The console's own bindings bind no member.
func BindingsOf(rbs []rbacv1.RoleBinding) []Binding {
	var out []Binding
	for _, rb := range rbs {
		if rb.Labels[PartOfLabel] == ManagedByValue {
			continue
		}
		role := rb.RoleRef.Kind + " " + rb.RoleRef.Name
		for _, s := range rb.Subjects {
			name := s.Name
			if s.Kind == rbacv1.ServiceAccountKind {
				ns := s.Namespace
				if ns == "" {
					ns = rb.Namespace
				}
				name = ns + "/" + s.Name
			}
			out = append(out, Binding{Namespace: rb.Namespace, Binding: rb.Name, Role: role, Subject: Member{Kind: s.Kind, Name: name}})
		}
	}
	slices.SortFunc(out, func(a, b Binding) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Subject.Kind, b.Subject.Kind),
			cmp.Compare(a.Subject.Name, b.Subject.Name), cmp.Compare(a.Binding, b.Binding))
	})
	return out
}
