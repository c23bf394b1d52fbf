// Package version holds the console's build identity: its version and
// revision, stamped at link time by `make image`
// (-ldflags "-X github.com/openquota/console/internal/version.Version=..."),
// else taken from the Go toolchain's record of the source tree.
//
// It imports nothing of the console.
package version

import (
	"runtime"
	"runtime/debug"
)

// Set with -ldflags -X; empty in a plain `go build`.
var (
	Version  string
	Revision string
)

// Info is the build identity the console reports in --version and in the
// quota_console_build_info metric.
type Info struct {
	Version   string
	Revision  string
	GoVersion string
}

// Get returns the stamped identity; an unstamped build (make build, go run)
// falls back to the VCS revision Go records, so it still tells which commit it is.
func Get() Info {
	i := Info{Version: Version, Revision: Revision, GoVersion: runtime.Version()}
	if i.Revision == "" {
		i.Revision = vcsRevision()
	}
	if i.Version == "" {
		i.Version = "dev"
	}
	if i.Revision == "" {
		i.Revision = "unknown"
	}
	return i
}

func vcsRevision() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev != "" && modified == "true" {
		rev += "-dirty"
	}
	return rev
}

// String is the --version line: "quota-console <version> (revision <revision>, <go version>)".
func (i Info) String() string {
	return "quota-console " + i.Version + " (revision " + i.Revision + ", " + i.GoVersion + ")"
}
