// Package sandboxtest gives tests the running test sandbox, starting it first
// if needed. Tests never start sandbox processes themselves: they run the
// sandbox command, which records every process it starts.
//
// Like package sandbox, it must not import the console's web side, write
// path, task history or sign-in.
package sandboxtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/openquota/console/sandbox"
)

var (
	once   sync.Once
	env    *sandbox.Env
	envErr error
)

// Env returns the test instance's Env, starting the instance if it is not
// running. Set SANDBOX_SKIP=1 to skip tests that need it.
func Env(t testing.TB) *sandbox.Env {
	t.Helper()
	if os.Getenv("SANDBOX_SKIP") == "1" {
		t.Skip("SANDBOX_SKIP=1: test needs the sandbox")
	}
	once.Do(func() { env, envErr = up() })
	if envErr != nil {
		t.Fatalf("sandbox: %v", envErr)
	}
	return env
}

func up() (*sandbox.Env, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	if e, ok := sandbox.Status(ctx, sandbox.Test); ok {
		return e, nil
	}
	root, err := sandbox.RepoRoot()
	if err != nil {
		return nil, err
	}
	tool := filepath.Join(os.TempDir(), fmt.Sprintf("quota-console-sandbox-%d", os.Getpid()))
	defer os.Remove(tool)
	build := exec.CommandContext(ctx, "go", "build", "-o", tool, "./cmd/sandbox")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building the sandbox command: %v\n%s", err, out)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, tool, "up", "--instance", sandbox.Test.Name)
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("sandbox up: %v\n%s", err, stderr.String())
	}
	var e sandbox.Env
	if err := json.Unmarshal(stdout.Bytes(), &e); err != nil {
		return nil, fmt.Errorf("sandbox up printed %q: %v", stdout.String(), err)
	}
	return &e, nil
}
