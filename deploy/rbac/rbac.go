// Package rbac holds the console's RBAC manifests (the YAML files next to
// this one) and applies them, for tests and for scripted installs. The files
// are rendered from the Helm chart (deploy/helm/quota-console, templates
// rbac-*.yaml) by `make manifests`, with the default values, release
// quota-console in namespace quota-console; a test in deploy/helm fails when
// they differ:
//
//   - console.yaml: the console's Namespace, ServiceAccount and minimal
//     ClusterRole (read what the informers watch and Kueue's queue
//     positions, token and access reviews; no impersonation), its binding to
//     quota-console-admin (the changes it makes for users who may), the Roles
//     for its own records (ConfigMaps in its namespace, its leader election
//     Lease, Events), with bindings;
//   - admin.yaml: ClusterRole quota-console-admin, for people who change
//     allocations and the policy;
//   - admin-scope.yaml: the ValidatingAdmissionPolicy that narrows the admin
//     role (and so the console) to what the console manages: team namespaces
//     and their member bindings, and the Kueue objects labelled as its own;
//   - member.yaml: ClusterRole quota-console-team-member, which the console
//     binds the members of each team to in the team's namespace;
//   - viewer.yaml: ClusterRole quota-console-viewer, read-only.
//
// `kubectl apply -f deploy/rbac/` installs the same.
//
// Of the console it imports internal/manifest only.
package rbac

import (
	"context"
	"embed"
	"fmt"
	"sort"
	"time"

	"github.com/openquota/console/internal/manifest"
	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Names of the ClusterRoles people are bound to.
const (
	AdminRole  = "quota-console-admin"
	ViewerRole = "quota-console-viewer"
	// ServiceAccount and Namespace of the console's own identity.
	ServiceAccount = "quota-console"
	Namespace      = "quota-console"
	// LeaderLease is the Lease in Namespace the console's Role may read and
	// renew, for leader election between replicas.
	LeaderLease = "quota-console-leader"
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
	return manifest.ReadFiles(files.ReadFile, names...)
}

// Apply writes the manifests with server-side apply and strict field
// validation (a misspelled field is an error), as fieldManager.
func Apply(ctx context.Context, cfg *rest.Config, fieldManager string) error {
	objs, err := Objects()
	if err != nil {
		return err
	}
	a, err := manifest.NewApplier(cfg, fieldManager)
	if err != nil {
		return err
	}
	a.FieldValidation = "Strict"
	return a.Apply(ctx, objs...)
}

// AsConsole is cfg authenticating as the console's ServiceAccount instead,
// with a token of the TokenRequest API valid for ttl (what `kubectl create
// token` gives): the identity the console's pods run with. cfg must be allowed
// to create tokens for it.
func AsConsole(ctx context.Context, cfg *rest.Config, ttl time.Duration) (*rest.Config, error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	seconds := int64(ttl / time.Second)
	tr, err := kube.CoreV1().ServiceAccounts(Namespace).CreateToken(ctx, ServiceAccount,
		&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: &seconds}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("a token of %s/%s: %w", Namespace, ServiceAccount, err)
	}
	sa := rest.AnonymousClientConfig(cfg)
	sa.BearerToken = tr.Status.Token
	sa.QPS, sa.Burst = cfg.QPS, cfg.Burst
	return sa, nil
}
