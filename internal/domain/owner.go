// This file says who manages a Kueue object: the console, or someone else
// (a person with kubectl, a GitOps tool, Kueue's own install).

package domain

import (
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ManagedByConsole reports whether the console manages obj (its managed-by
// label).
func ManagedByConsole(obj metav1.Object) bool {
	return obj.GetLabels()[ManagedByLabel] == ManagedByValue
}

// QueueManager names who manages an object the console does not: the
// value of its managed-by label, else the field managers that wrote its
// spec (from managedFields, status writers such as Kueue's controllers left
// out), else "unknown".
func QueueManager(obj metav1.Object) string {
	if m := obj.GetLabels()[ManagedByLabel]; m != "" {
		return m
	}
	if ms := SpecManagers(obj); len(ms) > 0 {
		return strings.Join(ms, ", ")
	}
	return "unknown"
}

// SpecManagers are the field managers that own fields of obj's spec,
// sorted, without the console.
func SpecManagers(obj metav1.Object) []string {
	var out []string
	for _, e := range obj.GetManagedFields() {
		if e.Subresource != "" || e.Manager == FieldManager || e.FieldsV1 == nil {
			continue
		}
		if !strings.Contains(e.FieldsV1.GetRawString(), `"f:spec"`) {
			continue
		}
		if !slices.Contains(out, e.Manager) {
			out = append(out, e.Manager)
		}
	}
	slices.Sort(out)
	return out
}

// gitOpsManagers are field managers of tools that keep objects as a
// repository says: they undo changes made by anyone else.
var gitOpsManagers = []string{"argocd", "flux", "kustomize-controller", "helm-controller", "fleet", "gitops"}

// ReconciledBy names the tool that keeps obj as a repository says (a GitOps
// controller among its spec's field managers, or its managed-by label), ""
// when none does. Such a tool undoes what the console writes.
func ReconciledBy(obj metav1.Object) string {
	candidates := append([]string{obj.GetLabels()[ManagedByLabel]}, SpecManagers(obj)...)
	for _, m := range candidates {
		lower := strings.ToLower(m)
		if lower == "" || lower == ManagedByValue {
			continue
		}
		for _, g := range gitOpsManagers {
			if strings.Contains(lower, g) {
				return m
			}
		}
	}
	return ""
}
