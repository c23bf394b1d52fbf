// Package layout checks the console's package rules: what each package may
// import. The rules are the ones the packages' doc comments state.
package layout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/openquota/console/"

// forbidden lists, per package, the console's packages it must not depend
// on, directly or through others.
var forbidden = map[string][]string{
	"internal/domain": {module + "internal/kueue", module + "internal/handlers", module + "internal/write", module + "internal/form", module + "web"},
	"internal/form":   {module + "internal/kueue", module + "internal/handlers", module + "internal/write", module + "web"},
	"internal/kueue":  {module + "internal/handlers", module + "internal/write", module + "web"},
	"internal/write":  {module + "internal/handlers", module + "web"},
	// Templates get view models only.
	"web/templates": {module + "internal/"},
	// A utility: nothing of the console.
	"internal/memo": {module + "internal/", module + "web"},
}

// forbiddenDirect lists import path prefixes a package must not import
// itself (Kueue's API types bring client-go along; what counts is that the
// package does not use clients).
var forbiddenDirect = map[string][]string{
	// The domain is pure: no clients, informers, listers, HTTP or templates.
	"internal/domain": {"k8s.io/client-go/kubernetes", "k8s.io/client-go/informers", "k8s.io/client-go/listers",
		"k8s.io/client-go/tools", "k8s.io/client-go/rest", "sigs.k8s.io/kueue/client-go/clientset",
		"sigs.k8s.io/kueue/client-go/informers", "sigs.k8s.io/kueue/client-go/listers", "github.com/labstack/echo", "github.com/a-h/templ"},
	"internal/form": {"k8s.io/client-go", "github.com/labstack/echo", "github.com/a-h/templ"},
	// The cluster side and the write path know nothing of HTTP or pages.
	"internal/kueue": {"github.com/labstack/echo", "github.com/a-h/templ"},
	"internal/write": {"github.com/labstack/echo", "github.com/a-h/templ"},
	// Handlers reach the cluster only through the cluster and write
	// packages, never with clients or apiserver calls of their own (the
	// client configuration they are given is passed on).
	"internal/handlers": {"k8s.io/client-go/kubernetes", "k8s.io/client-go/tools", "sigs.k8s.io/kueue/client-go",
		"k8s.io/apimachinery/pkg/util/wait", "k8s.io/apimachinery/pkg/api/errors"},
}

func deps(t *testing.T, pkg string, direct bool) []string {
	t.Helper()
	args := []string{"list", "-deps", module + pkg}
	if direct {
		args = []string{"list", "-f", `{{join .Imports "\n"}}`, module + pkg}
	}
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		t.Fatalf("go list %s: %v", pkg, err)
	}
	return strings.Fields(string(out))
}

func TestPackagesImportOnlyWhatTheyMay(t *testing.T) {
	check := func(rules map[string][]string, direct bool) {
		for pkg, bad := range rules {
			for _, dep := range deps(t, pkg, direct) {
				for _, b := range bad {
					if strings.HasPrefix(dep, b) && dep != module+pkg {
						t.Errorf("%s depends on %s", pkg, dep)
					}
				}
			}
		}
	}
	check(forbidden, false)
	check(forbiddenDirect, true)
}

// The domain has no clock: the time is passed in, so its figures are
// reproducible in tests.
func TestDomainReadsNoClock(t *testing.T) {
	files, err := filepath.Glob("../domain/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("domain sources: %v", err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "time" && (sel.Sel.Name == "Now" || sel.Sel.Name == "Since" || sel.Sel.Name == "Until") {
				t.Errorf("%s: time.%s", fset.Position(sel.Pos()), sel.Sel.Name)
			}
			return true
		})
	}
}
