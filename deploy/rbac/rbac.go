// Package rbac holds the console's RBAC manifests (the YAML files next to
// this one) and applies them, for tests and for scripted installs:
//
//   - console.yaml: the console's ServiceAccount and its minimal ClusterRole
//     (read what the informers watch, impersonate users, token and access
//     reviews), the Roles for its own records (revision histories in its
//     namespace, Events), with bindings;
//   - admin.yaml: ClusterRole quota-console-admin, for people who change
//     allocations and the policy;
//   - admin-scope.yaml: the ValidatingAdmissionPolicy that narrows the admin
//     role to team namespaces and the team member role;
//   - member.yaml: ClusterRole quota-console-team-member, which the console
//     binds the members of each team to in the team's namespace;
//   - viewer.yaml: ClusterRole quota-console-viewer, read-only.
//
// `kubectl apply -f deploy/rbac/` installs the same.
package rbac

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// Names of the ClusterRoles people are bound to.
const (
	AdminRole   = "quota-console-admin"
	ViewerRole  = "quota-console-viewer"
	MemberRole  = "quota-console-team-member"
	ConsoleRole = "quota-console"
	// ServiceAccount and Namespace of the console's own identity.
	ServiceAccount = "quota-console"
	Namespace      = "quota-console"
)

//go:embed *.yaml
var files embed.FS

// Objects are the manifests' objects: console.yaml first (its Namespace is
// where the other Roles live), then the others by file name.
func Objects() ([]*unstructured.Unstructured, error) {
	entries, err := files.ReadDir(".")
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Slice(names, func(i, j int) bool {
		if (names[i] == "console.yaml") != (names[j] == "console.yaml") {
			return names[i] == "console.yaml"
		}
		return names[i] < names[j]
	})
	var out []*unstructured.Unstructured
	for _, name := range names {
		data, err := files.ReadFile(name)
		if err != nil {
			return nil, err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			var obj map[string]any
			if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			if len(obj) == 0 {
				continue
			}
			out = append(out, &unstructured.Unstructured{Object: obj})
		}
	}
	return out, nil
}

// Apply writes the manifests with server-side apply and strict field
// validation (a misspelled field is an error), as fieldManager.
func Apply(ctx context.Context, cfg *rest.Config, fieldManager string) error {
	objs, err := Objects()
	if err != nil {
		return err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("%s %s: %w", gvk.Kind, obj.GetName(), err)
		}
		data, err := json.Marshal(obj.Object)
		if err != nil {
			return err
		}
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == apimeta.RESTScopeNameNamespace {
			ri = dyn.Resource(m.Resource).Namespace(obj.GetNamespace())
		}
		force := true
		if _, err := ri.Patch(ctx, obj.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{
			FieldManager: fieldManager, Force: &force, FieldValidation: "Strict",
		}); err != nil {
			return fmt.Errorf("%s %s: %w", gvk.Kind, obj.GetName(), err)
		}
	}
	return nil
}
