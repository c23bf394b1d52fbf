// Package manifest reads Kubernetes YAML manifests and applies them with
// server-side apply, whatever their kinds: the console's RBAC for scripted
// installs and tests, and the sandbox's Kueue, KWOK and fleet objects. It
// must not import the console's other packages.
package manifest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

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

// Decode reads every object of a YAML (or JSON) stream; name is for errors.
func Decode(name string, data []byte) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if len(obj) > 0 {
			out = append(out, &unstructured.Unstructured{Object: obj})
		}
	}
}

// ReadFiles decodes every object of the named files, read with read (a
// file system's ReadFile), in order.
func ReadFiles(read func(name string) ([]byte, error), names ...string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, name := range names {
		data, err := read(name)
		if err != nil {
			return nil, err
		}
		objs, err := Decode(name, data)
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return out, nil
}

// Applier applies objects of any kind, finding their resources by discovery
// (again when a kind was just installed, such as a CRD's).
type Applier struct {
	// FieldValidation is the apiserver's check of unknown fields: "Strict"
	// makes a misspelled field an error; "" leaves the server's default.
	FieldValidation string

	dynamic      dynamic.Interface
	mapper       *restmapper.DeferredDiscoveryRESTMapper
	fieldManager string
}

// NewApplier applies as fieldManager with the clients of cfg.
func NewApplier(cfg *rest.Config, fieldManager string) (*Applier, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Applier{dynamic: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)), fieldManager: fieldManager}, nil
}

// Dynamic is the applier's client for objects of any kind.
func (a *Applier) Dynamic() dynamic.Interface { return a.dynamic }

// Apply server-side applies the objects in order, forcing the applier's
// ownership.
func (a *Applier) Apply(ctx context.Context, objs ...*unstructured.Unstructured) error {
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			a.mapper.Reset()
			if m, err = a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
				return fmt.Errorf("%s %s: %w", gvk.Kind, obj.GetName(), err)
			}
		}
		data, err := json.Marshal(obj.Object)
		if err != nil {
			return err
		}
		var ri dynamic.ResourceInterface = a.dynamic.Resource(m.Resource)
		if m.Scope.Name() == apimeta.RESTScopeNameNamespace {
			ri = a.dynamic.Resource(m.Resource).Namespace(obj.GetNamespace())
		}
		force := true
		if _, err := ri.Patch(ctx, obj.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{
			FieldManager: a.fieldManager, Force: &force, FieldValidation: a.FieldValidation,
		}); err != nil {
			return fmt.Errorf("%s %s: %w", gvk.Kind, obj.GetName(), err)
		}
	}
	return nil
}
