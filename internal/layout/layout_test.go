// Package layout checks the console's package rules: what each package may
// import. Every package of the module has a rule here, and its doc comment
// says it in words; a new package without one fails the test. It imports
// nothing of the console.
package layout

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/openquota/console/"

// rule is what one package may import. Console packages are named relative
// to the module ("internal/domain"); a name covers the packages under it.
type rule struct {
	// only are the console packages it may depend on, directly or through
	// others (nil: any but those of not).
	only []string
	// not are console packages it must not depend on at all.
	not []string
	// notDirect are import path prefixes it must not import itself (Kueue's
	// API types bring client-go along; what counts is that the package does
	// not use clients).
	notDirect []string
}

var (
	// The test sandbox's helpers and the measuring tools: never in the
	// console itself.
	testOnly = []string{"internal/kueuetest", "internal/webtest", "internal/testenv", "internal/loopback", "sandbox", "deploy"}
	// The web side: HTTP, pages, and their wiring.
	web = []string{"internal/app", "internal/handlers", "web"}
	// Clients of the cluster: only the cluster side (and the tools) hold
	// them.
	clients = []string{"k8s.io/client-go/kubernetes", "k8s.io/client-go/informers", "k8s.io/client-go/listers",
		"k8s.io/client-go/tools", "k8s.io/client-go/rest", "k8s.io/client-go/dynamic", "sigs.k8s.io/kueue/client-go/clientset",
		"sigs.k8s.io/kueue/client-go/informers", "sigs.k8s.io/kueue/client-go/listers"}
	httpAndPages = []string{"github.com/labstack/echo", "github.com/a-h/templ"}
	databases    = []string{"database/sql", "github.com/jackc/pgx", "modernc.org/sqlite"}
)

// rules are the packages' doc comments, checkable.
var rules = map[string]rule{
	// The console's own packages, from the bottom up.
	"internal/memo":         {only: []string{}},
	"internal/version":      {only: []string{}},
	"internal/domain":       {only: []string{}, notDirect: append(slices.Clone(clients), httpAndPages...)},
	"internal/form":         {only: []string{"internal/domain"}, notDirect: append([]string{"k8s.io/client-go"}, httpAndPages...)},
	"internal/auth":         {only: []string{}, notDirect: []string{"github.com/a-h/templ"}},
	"internal/leader":       {only: []string{}},
	"internal/manifest":     {only: []string{}},
	"internal/kueue":        {only: []string{"internal/domain", "internal/memo", "internal/kueue/impact"}, notDirect: httpAndPages},
	"internal/kueue/impact": {only: []string{}, notDirect: httpAndPages},
	"internal/write":        {only: []string{"internal/domain", "internal/form", "internal/kueue", "internal/memo"}, notDirect: httpAndPages},
	"internal/metrics":      {only: []string{"internal/domain", "internal/memo", "internal/version"}, notDirect: httpAndPages},
	"internal/taskhistory":  {only: []string{"internal/domain"}, notDirect: httpAndPages},
	// Templates get view models only.
	"web/templates": {only: []string{}},
	"web/static":    {only: []string{}},
	// Handlers reach the cluster, the task history and Prometheus only
	// through the interfaces package app fills.
	"internal/handlers": {only: []string{"internal/auth", "internal/domain", "internal/form", "internal/kueue", "internal/memo",
		"internal/metrics", "internal/taskhistory", "internal/version", "internal/write", "web"},
		notDirect: append(append(slices.Clone(clients), databases...), "k8s.io/apimachinery/pkg/util/wait", "k8s.io/apimachinery/pkg/api/errors")},
	// The top: wiring, and the binary.
	"internal/app": {not: testOnly},
	"cmd/console":  {not: testOnly},

	// Test helpers, tools and tests.
	"internal/kueuetest":  {only: []string{}},
	"internal/webtest":    {only: []string{}},
	"internal/testenv":    {not: append(append([]string{"internal/write", "internal/taskhistory"}, web...), "internal/auth")},
	"internal/loopback":   {only: []string{}},
	"internal/layout":     {only: []string{}},
	"sandbox":             {not: append([]string{"internal/write", "internal/taskhistory", "internal/auth"}, web...)},
	"sandbox/sandboxtest": {not: append([]string{"internal/write", "internal/taskhistory", "internal/auth"}, web...)},
	"deploy/rbac":         {only: []string{"internal/manifest"}},
	"deploy/helm":         {only: []string{}},
	// The measuring tools and the browser tests run the console's binary:
	// they measure and test what is deployed, not an in-process copy.
	"cmd/loadgen":     {not: append([]string{"internal/write", "internal/taskhistory", "internal/auth"}, web...)},
	"cmd/loadtest":    {not: append([]string{"internal/write", "internal/taskhistory", "internal/auth"}, web...)},
	"cmd/waitcheck":   {not: append([]string{"internal/write", "internal/taskhistory", "internal/auth"}, web...)},
	"cmd/sandbox":     {not: append([]string{"internal/write", "internal/taskhistory", "internal/auth"}, web...)},
	"e2e":             {not: append([]string{"internal/write", "internal/taskhistory"}, web...)},
	"tools/imagetest": {only: []string{}},
}

// listed is one package as go list describes it.
type listed struct {
	ImportPath, Dir           string
	Imports, Deps             []string
	TestImports, XTestImports []string
	GoFiles                   []string
}

// packages are the module's packages.
func packages(t *testing.T) []listed {
	t.Helper()
	out, err := exec.Command("go", "list", "-json", module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []listed
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p listed
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// under reports whether the console package path is name or below it.
func under(path, name string) bool {
	p := strings.TrimPrefix(path, module)
	return p == name || strings.HasPrefix(p, name+"/")
}

func TestEveryPackageImportsOnlyWhatItMay(t *testing.T) {
	stale := maps.Clone(rules) // rules of packages that are gone
	for _, p := range packages(t) {
		name := strings.TrimPrefix(p.ImportPath, module)
		delete(stale, name)
		r, ok := rules[name]
		if !ok {
			t.Errorf("package %s has no import rule: state it in its doc comment and add it to the rules here", name)
			continue
		}
		for _, dep := range p.Deps {
			if !strings.HasPrefix(dep, module) || dep == p.ImportPath {
				continue
			}
			switch {
			case r.only != nil && !slices.ContainsFunc(r.only, func(o string) bool { return under(dep, o) }):
				t.Errorf("%s depends on %s, which it may not (it may depend on %v only)", name, strings.TrimPrefix(dep, module), r.only)
			case slices.ContainsFunc(r.not, func(o string) bool { return under(dep, o) }):
				t.Errorf("%s depends on %s, which it must not", name, strings.TrimPrefix(dep, module))
			}
		}
		for _, imp := range p.Imports {
			for _, bad := range r.notDirect {
				if strings.HasPrefix(imp, bad) {
					t.Errorf("%s imports %s itself, which it must not", name, imp)
				}
			}
		}
		// A package of tests only: what its tests import.
		if len(p.GoFiles) == 0 {
			for _, imp := range append(p.TestImports, p.XTestImports...) {
				if strings.HasPrefix(imp, module) && slices.ContainsFunc(r.not, func(o string) bool { return under(imp, o) }) {
					t.Errorf("the tests of %s import %s, which they must not", name, strings.TrimPrefix(imp, module))
				}
			}
		}
	}
	for name := range stale {
		t.Errorf("there is a rule for package %s, which does not exist: remove it", name)
	}
}

// Each package's doc comment says what it may import: the rule above in
// words, for whoever changes the package.
func TestEveryPackageStatesItsImportRule(t *testing.T) {
	fset := token.NewFileSet()
	for _, p := range packages(t) {
		var doc string
		for _, f := range p.GoFiles {
			file, err := parser.ParseFile(fset, filepath.Join(p.Dir, f), nil, parser.ParseComments|parser.PackageClauseOnly)
			if err != nil {
				t.Fatal(err)
			}
			if file.Doc != nil {
				doc += file.Doc.Text()
			}
		}
		if len(p.GoFiles) == 0 {
			continue // tests only: the rule above says it
		}
		if !strings.Contains(strings.ToLower(doc), "import") {
			t.Errorf("the doc comment of %s does not say what it may import", strings.TrimPrefix(p.ImportPath, module))
		}
	}
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
