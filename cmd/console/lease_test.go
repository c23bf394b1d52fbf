package main

import (
	"slices"
	"testing"

	"github.com/openquota/console/deploy/rbac"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// A plain `kubectl apply -f deploy/rbac/` install runs the binary with its
// defaults: the Lease it elects its recorder with must be the one the
// console's Role lets it read and renew, or no replica ever leads.
func TestDefaultLeaseIsTheOneTheRBACGrants(t *testing.T) {
	o, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := rbac.Objects()
	if err != nil {
		t.Fatal(err)
	}
	var granted []string // Leases a Role in the console's namespace may get and update by name
	for _, u := range objs {
		if u.GetKind() != "Role" || u.GetNamespace() != rbac.Namespace {
			continue
		}
		var role rbacv1.Role
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &role); err != nil {
			t.Fatalf("Role %s: %v", u.GetName(), err)
		}
		for _, r := range role.Rules {
			if slices.Contains(r.APIGroups, "coordination.k8s.io") && slices.Contains(r.Resources, "leases") &&
				slices.Contains(r.Verbs, "get") && slices.Contains(r.Verbs, "update") {
				granted = append(granted, r.ResourceNames...)
			}
		}
	}
	if len(granted) == 0 {
		t.Fatalf("no Role in namespace %s of deploy/rbac lets the console get and update a Lease", rbac.Namespace)
	}
	if !slices.Contains(granted, o.taskHistory.lease) {
		t.Errorf("--leader-election-lease defaults to %q, but deploy/rbac lets the console renew only %q", o.taskHistory.lease, granted)
	}
	if o.settings.StateNamespace != rbac.Namespace {
		t.Errorf("--state-namespace defaults to %q, but deploy/rbac grants the Lease in %q", o.settings.StateNamespace, rbac.Namespace)
	}
}
