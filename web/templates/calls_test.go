package templates

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// A component call that templ parses as text (an @Call after text on the
// same line) reaches the page as "@ExportLink(...)" instead of a link: the
// generated code then holds the call inside a static string.
func TestNoComponentCallRendersAsText(t *testing.T) {
	files, err := filepath.Glob("*_templ.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no generated templates found (%v)", err)
	}
	literal := regexp.MustCompile(`WriteString\([^"]*"((?:[^"\\]|\\.)*)"\)`)
	call := regexp.MustCompile(`@[A-Z][A-Za-z0-9]*\(`)
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range literal.FindAllSubmatch(src, -1) {
			if c := call.Find(m[1]); c != nil {
				t.Errorf("%s renders %q as text: put the call on its own line", f, c)
			}
		}
	}
}
