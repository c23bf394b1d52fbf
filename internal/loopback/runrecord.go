package loopback

import (
	"os"
	"os/exec"
	"strings"
)

// CommandLine is the run's command as typed: the tool's path in bin/ and
// its arguments.
func CommandLine(tool string) string {
	return strings.Join(append([]string{"bin/" + tool}, os.Args[1:]...), " ")
}

// GitCommit names the checkout the run measured, if it is one, with
// "-dirty" when tracked files have changes.
func GitCommit() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return ""
	}
	commit := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
		commit += "-dirty"
	}
	return commit
}
