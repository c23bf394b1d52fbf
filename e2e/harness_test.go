// Package e2e drives the console in headless Chromium against the test
// sandbox. Everything runs offline: Debian's Chromium and the playwright-core
// driver that e2e/setup.sh unpacks outside the clone. Set E2E_SKIP=1 (or
// SANDBOX_SKIP=1) to skip these tests.
package e2e

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/playwright-community/playwright-go"

	"github.com/openquota/console/internal/testenv"
	"github.com/openquota/console/sandbox"
	"github.com/openquota/console/sandbox/sandboxtest"
)

const (
	// playwright-go v0.5200.1 refuses any other driver version.
	driverVersion = "1.52.0"
	// axe-core, the accessibility checks (e2e/setup.sh's axe_version).
	axeVersion   = "4.11.0"
	chromiumPath = "/usr/lib/chromium/chromium"
	readyTimeout = 60 * time.Second
)

// Started lazily by the first test that needs them, stopped in TestMain.
var (
	browserOnce sync.Once
	pw          *playwright.Playwright
	browser     playwright.Browser
	browserErr  error

	consoleOnce sync.Once
	consoleBin  string
	consoleErr  error
	buildDir    string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if browser != nil {
		_ = browser.Close()
	}
	if pw != nil {
		_ = pw.Stop()
	}
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// skipIfDisabled skips tests that need the sandbox or a browser when the
// environment says they cannot run here.
func skipIfDisabled(t testing.TB) {
	t.Helper()
	for _, v := range []string{"E2E_SKIP", "SANDBOX_SKIP"} {
		if os.Getenv(v) == "1" {
			t.Skipf("%s=1: test needs the sandbox and a browser", v)
		}
	}
}

// sandboxEnv returns the running test sandbox, starting it if needed.
func sandboxEnv(t testing.TB) *sandbox.Env {
	t.Helper()
	skipIfDisabled(t)
	return sandboxtest.Env(t)
}

// startConsole runs the console against env on a free loopback port until
// the test ends and returns its base URL. extra is appended to its flags.
func startConsole(t testing.TB, env *sandbox.Env, extra ...string) string {
	t.Helper()
	return startReplica(t, env, extra...).base
}

// replica is one console process.
type replica struct {
	base   string
	cmd    *exec.Cmd
	exited chan struct{}
	out    *testenv.SyncBuffer
}

// kill ends the process at once (no graceful shutdown), as a lost node would.
func (r *replica) kill() {
	_ = r.cmd.Process.Kill()
	<-r.exited
}

// startReplica starts a console process on a free port, ready to serve.
func startReplica(t testing.TB, env *sandbox.Env, extra ...string) *replica {
	t.Helper()
	skipIfDisabled(t)
	consoleOnce.Do(func() { consoleBin, consoleErr = buildConsole() })
	if consoleErr != nil {
		t.Fatalf("building the console: %v", consoleErr)
	}
	addr, err := freeAddr()
	if err != nil {
		t.Fatalf("finding a free port: %v", err)
	}
	args := append([]string{
		"--kubeconfig", env.Kubeconfig,
		"--prometheus-url", env.PrometheusURL,
		"--listen", addr,
	}, extra...)
	if !slices.Contains(extra, "--history-store") {
		// Its own task history and Lease: not the user's file under the
		// cache folder, and not another test console's recorder.
		args = append(args, "--history-path", filepath.Join(t.TempDir(), "history.db"),
			"--leader-election-lease", "e2e-"+addr[strings.LastIndex(addr, ":")+1:])
	}
	r := &replica{base: "http://" + addr, out: &testenv.SyncBuffer{}, exited: make(chan struct{})}
	r.cmd = exec.Command(consoleBin, args...)
	r.cmd.Stdout, r.cmd.Stderr = r.out, r.out
	if err := r.cmd.Start(); err != nil {
		t.Fatalf("starting the console: %v", err)
	}
	var waitErr error
	go func() { waitErr = r.cmd.Wait(); close(r.exited) }()
	t.Cleanup(func() {
		stopProcess(r.cmd, r.exited)
		if t.Failed() {
			t.Logf("console %s output:\n%s", r.base, r.out.String())
		}
	})
	if err := waitReady(r.base+"/readyz", r.exited); err != nil {
		if errors.Is(err, errExited) {
			err = fmt.Errorf("exited before it was ready: %v", waitErr)
		}
		t.Fatalf("console at %s: %v (its output follows)", r.base, err)
	}
	return r
}

func buildConsole() (string, error) {
	root, err := sandbox.RepoRoot()
	if err != nil {
		return "", err
	}
	buildDir, err = os.MkdirTemp("", "quota-console-e2e-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(buildDir, "console")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/console")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%v\n%s", err, out)
	}
	return bin, nil
}

var errExited = errors.New("process exited")

// waitReady polls url until it answers 200, the process exits, or the
// readiness timeout passes.
func waitReady(url string, exited <-chan struct{}) error {
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.After(readyTimeout)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		last = err
		select {
		case <-exited:
			return errExited
		case <-deadline:
			return fmt.Errorf("not ready after %v: %v", readyTimeout, last)
		case <-tick.C:
		}
	}
}

// stopProcess asks the process to shut down gracefully, then kills it.
func stopProcess(cmd *exec.Cmd, exited <-chan struct{}) {
	select {
	case <-exited:
		return
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// newPage returns a fresh page in its own browser context (no cookies or
// storage shared between tests). On failure the page is screenshotted.
func newPage(t testing.TB) playwright.Page {
	t.Helper()
	return newPageWith(t, playwright.BrowserNewContextOptions{})
}

// newPageWith is newPage with the context's options (1400×900 unless
// opts says otherwise).
func newPageWith(t testing.TB, opts playwright.BrowserNewContextOptions) playwright.Page {
	t.Helper()
	skipIfDisabled(t)
	browserOnce.Do(func() { browserErr = launchBrowser() })
	if browserErr != nil {
		t.Fatalf("starting the browser: %v", browserErr)
	}
	if opts.Viewport == nil {
		opts.Viewport = &playwright.Size{Width: 1400, Height: 900}
	}
	ctx, err := browser.NewContext(opts)
	if err != nil {
		t.Fatalf("new browser context: %v", err)
	}
	page, err := ctx.NewPage()
	if err != nil {
		_ = ctx.Close()
		t.Fatalf("new page: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			screenshot(t, page, "failed-"+safeName(t.Name()))
		}
		_ = ctx.Close()
	})
	return page
}

func launchBrowser() error {
	dir, err := driverDir()
	if err != nil {
		return err
	}
	if !installed(dir) {
		if err := runSetup(); err != nil {
			return err
		}
	}
	pw, err = playwright.Run(&playwright.RunOptions{
		DriverDirectory:     dir,
		SkipInstallBrowsers: true, // never download: the machine is offline
	})
	if err != nil {
		return fmt.Errorf("playwright driver in %s: %w", dir, err)
	}
	browser, err = pw.Chromium.Launch(playwright.BrowserTypeLaunchOptions{
		ExecutablePath: playwright.String(chromiumPath),
		Headless:       playwright.Bool(true),
		// Names under example.test are the tests' own sites (security_test.go).
		Args: []string{"--disable-gpu", "--disable-sync", "--host-resolver-rules=MAP *.example.test 127.0.0.1, MAP *.other-example.test 127.0.0.1"},
	})
	if err != nil {
		return fmt.Errorf("launching %s: %w", chromiumPath, err)
	}
	return nil
}

// driverDir is where e2e/setup.sh unpacks playwright-core; it must match
// the script's ${XDG_CACHE_HOME:-$HOME/.cache}, which os.UserCacheDir
// follows on Linux.
func driverDir() (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(cache, "quota-console-sandbox", "playwright-"+driverVersion), nil
}

// axeScript is axe-core's browser bundle, where e2e/setup.sh unpacks it.
func axeScript() (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(cache, "quota-console-sandbox", "axe-core-"+axeVersion, "package", "axe.min.js"), nil
}

func installed(dir string) bool {
	axe, err := axeScript()
	if err != nil {
		return false
	}
	paths := []string{chromiumPath, filepath.Join(dir, "package", "cli.js"), axe}
	if os.Getenv("PLAYWRIGHT_NODEJS_PATH") == "" {
		paths = append(paths, filepath.Join(dir, "node"))
	}
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			return false
		}
	}
	return true
}

func runSetup() error {
	root, err := sandbox.RepoRoot()
	if err != nil {
		return err
	}
	cmd := exec.Command("bash", filepath.Join(root, "e2e", "setup.sh"))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("e2e/setup.sh: %v\n%s", err, out)
	}
	return nil
}

// screenshot saves a full-page PNG to e2e/screenshots/<name>.png for a
// person to look at; the folder is git-ignored.
func screenshot(t testing.TB, page playwright.Page, name string) {
	t.Helper()
	dir := "screenshots" // go test runs in the package folder, e2e/
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Errorf("screenshot %s: %v", name, err)
		return
	}
	path := filepath.Join(dir, name+".png")
	if _, err := page.Screenshot(playwright.PageScreenshotOptions{
		Path:     playwright.String(path),
		FullPage: playwright.Bool(true),
	}); err != nil {
		t.Errorf("screenshot %s: %v", name, err)
		return
	}
	abs, _ := filepath.Abs(path)
	t.Logf("screenshot: %s", abs)
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// safeName turns a (sub)test name into a file name.
func safeName(s string) string { return unsafeChars.ReplaceAllString(s, "_") }

// mustFor is a test's "stop here on an error".
func mustFor(t testing.TB) func(error) {
	return func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
}
