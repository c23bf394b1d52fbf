package domain

import (
	rbacv1 "k8s.io/api/rbac/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
)

// TeamMemberRole is the ClusterRole the console binds team members to in
// their namespace (submit and watch jobs, read their Workloads). The
// console's install provides it (deploy/rbac/member.yaml); the console never
// writes it.
const TeamMemberRole = "quota-console-team-member"

// MemberBinding binds the team's users and groups to TeamMemberRole in the
// team namespace. It is written even when empty, so removing the last member
// removes their access.
func MemberBinding(s Settings, t Team) *rbacv1ac.RoleBindingApplyConfiguration {
	rb := rbacv1ac.RoleBinding(TeamMemberRole, s.Namespace(t.Name)).
		WithLabels(map[string]string{ManagedByLabel: ManagedByValue, TeamLabel: t.Name}).
		WithRoleRef(rbacv1ac.RoleRef().WithAPIGroup(rbacv1.GroupName).WithKind("ClusterRole").WithName(TeamMemberRole))
	for _, m := range t.Members {
		kind := rbacv1.UserKind
		if m.Kind == "Group" {
			kind = rbacv1.GroupKind
		}
		rb.WithSubjects(rbacv1ac.Subject().WithKind(kind).WithAPIGroup(rbacv1.GroupName).WithName(m.Name))
	}
	return rb
}
