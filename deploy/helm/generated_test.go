package helm

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the manifests rendered from the chart (make manifests)")

const generatedNotice = "# Generated from the Helm chart deploy/helm/quota-console by `make manifests`: edit the chart, not this file.\n"

// renderedFile is a file outside the chart that is the chart's output: the
// default values, release quota-console in namespace quota-console, plus set
// and only the templates in show (all when empty), in that order.
type renderedFile struct {
	path   string // from this folder
	header string // after generatedNotice
	set    []string
	show   []string
}

// renderedFiles are deploy/rbac (embedded by the Go package deploy/rbac, which
// the sandbox and the tests apply) and the whole install for kubectl apply.
var renderedFiles = []renderedFile{
	{path: "../rbac/console.yaml", set: []string{"createNamespace=true"},
		show: []string{"templates/namespace.yaml", "templates/serviceaccount.yaml", "templates/rbac-console.yaml"}},
	{path: "../rbac/admin.yaml", show: []string{"templates/rbac-admin.yaml"}},
	{path: "../rbac/admin-scope.yaml", show: []string{"templates/rbac-admin-scope.yaml"}},
	{path: "../rbac/member.yaml", show: []string{"templates/rbac-member.yaml"}},
	{path: "../rbac/viewer.yaml", show: []string{"templates/rbac-viewer.yaml"}},
	{path: "../manifests/quota-console.yaml",
		header: `# The quota console's whole install as plain manifests, for kubectl apply:
# the chart with its default values (token sign-in, two replicas), release
# quota-console in namespace quota-console, which it creates. The session key
# comes from a Secret you create once:
#
#   kubectl apply -f deploy/manifests/quota-console.yaml
#   kubectl -n quota-console create secret generic quota-console-session-key \
#     --from-literal=key="$(head -c 48 /dev/urandom | base64)"
#   kubectl -n quota-console set image deployment/quota-console \
#     console=registry.example.com/team/quota-console:<version>
#
# For other settings (Prometheus URL, proxy sign-in, Ingress, ...) render the
# chart with your values instead: helm template quota-console
# deploy/helm/quota-console --namespace quota-console --set createNamespace=true ...
`,
		set: []string{"createNamespace=true", "sessionKey.existingSecret=quota-console-session-key"}},
}

func (f renderedFile) render(t *testing.T) string {
	t.Helper()
	args := []string{"template", "quota-console", chartDir, "--namespace", "quota-console"}
	for _, s := range f.set {
		args = append(args, "--set", s)
	}
	for _, s := range f.show {
		args = append(args, "--show-only", s)
	}
	out, err := runHelm(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	return generatedNotice + f.header + out
}

// The files rendered from the chart are what the chart renders now. With
// -update (make manifests) the test writes them instead.
func TestGeneratedManifests(t *testing.T) {
	for _, f := range renderedFiles {
		t.Run(filepath.Base(f.path), func(t *testing.T) {
			want := f.render(t)
			if *update {
				if err := os.MkdirAll(filepath.Dir(f.path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(f.path, []byte(want), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			got, err := os.ReadFile(f.path)
			if err != nil {
				t.Fatalf("%v: run make manifests", err)
			}
			if diff := cmp.Diff(strings.Split(want, "\n"), strings.Split(string(got), "\n")); diff != "" {
				t.Errorf("%s differs from the chart's output; run make manifests (-chart +file):\n%s", f.path, diff)
			}
		})
	}
}

// Every template is in a rendered file or meant for helm only, so a new
// RBAC template cannot be left out of deploy/rbac.
func TestEveryRBACTemplateIsRendered(t *testing.T) {
	shown := map[string]bool{}
	for _, f := range renderedFiles {
		for _, s := range f.show {
			shown[s] = true
		}
	}
	templates, err := filepath.Glob(filepath.Join(chartDir, "templates", "rbac-*.yaml"))
	if err != nil || len(templates) == 0 {
		t.Fatalf("no RBAC templates: %v", err)
	}
	for _, path := range templates {
		name := "templates/" + filepath.Base(path)
		if !shown[name] {
			t.Errorf("%s is in no file of deploy/rbac", name)
		}
	}
}
