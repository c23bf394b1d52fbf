package version

import (
	"runtime"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestGet(t *testing.T) {
	for _, tc := range []struct {
		name              string
		version, revision string
		want              Info
	}{
		{"stamped", "v1.2.0-3-gabc1234", "abc1234def", Info{"v1.2.0-3-gabc1234", "abc1234def", runtime.Version()}},
		// A test binary records no VCS revision: the fallbacks show.
		{"unstamped", "", "", Info{"dev", "unknown", runtime.Version()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			Version, Revision = tc.version, tc.revision
			t.Cleanup(func() { Version, Revision = "", "" })
			if diff := cmp.Diff(tc.want, Get()); diff != "" {
				t.Errorf("Get() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestString(t *testing.T) {
	got := Info{Version: "v1.2.0", Revision: "abc123", GoVersion: "go1.26.8"}.String()
	if want := "quota-console v1.2.0 (revision abc123, go1.26.8)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
