package handlers

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/a-h/templ"
)

// A body is rendered once per view and key, again when the key changes, and
// the bodies kept are forgotten past maxBodyBytes.
func TestBodiesAreKeptPerViewAndKey(t *testing.T) {
	var b bodies
	builds := 0
	body := func(html string) func() templ.Component {
		return func() templ.Component {
			builds++
			return templ.ComponentFunc(func(_ context.Context, w io.Writer) error {
				_, err := io.WriteString(w, html)
				return err
			})
		}
	}
	get := func(view, key string, build func() templ.Component) string {
		t.Helper()
		c, err := b.get(view, key, build)
		if err != nil {
			t.Fatal(err)
		}
		var s strings.Builder
		if err := c.Render(context.Background(), &s); err != nil {
			t.Fatal(err)
		}
		return s.String()
	}
	for _, step := range []struct {
		view, key, html, want string
		builds                int
	}{
		{"all\x00/a", "1", "first", "first", 1},
		{"all\x00/a", "1", "not built", "first", 1},
		{"teams:x\x00/a", "1", "x's", "x's", 2},
		{"all\x00/a", "2", "second", "second", 3},
		{"teams:x\x00/a", "1", "not built", "x's", 3},
	} {
		if got := get(step.view, step.key, body(step.html)); got != step.want || builds != step.builds {
			t.Errorf("%q at %q: %q after %d builds, want %q after %d", step.view, step.key, got, builds, step.want, step.builds)
		}
	}
	big := strings.Repeat("x", maxBodyBytes/2+1)
	get("big1", "1", body(big))
	get("big2", "1", body(big)) // past the bound: the others are forgotten
	if b.bytes != len(big) || len(b.byView) != 1 {
		t.Errorf("%d bodies of %d bytes kept, want only the last one", len(b.byView), b.bytes)
	}
	if get("all\x00/a", "2", body("again")) != "again" {
		t.Errorf("a forgotten body was not rendered again")
	}
}

// While a request builds a scope's tables for a new key, get gives the
// others the tables of the key before; exact waits for the new ones.
func TestKeptExactNeverGivesAnotherKeysTables(t *testing.T) {
	var k kept[string]
	built := func(v string) func() (string, error) { return func() (string, error) { return v, nil } }
	if got, _ := k.get("s", "1", built("one")); got != "one" {
		t.Fatalf("first tables %q", got)
	}
	started, release := make(chan struct{}), make(chan struct{})
	go func() {
		_, _ = k.get("s", "2", func() (string, error) {
			close(started)
			<-release
			return "two", nil
		})
	}()
	<-started
	if got, _ := k.get("s", "2", built("not built")); got != "one" {
		t.Errorf("get while key 2 is built: %q, want the tables before (one)", got)
	}
	exact := make(chan string)
	go func() {
		got, _ := k.exact("s", "2", built("built twice"))
		exact <- got
	}()
	close(release)
	if got := <-exact; got != "two" {
		t.Errorf("exact while key 2 is built: %q, want two", got)
	}
}
