// Package sandbox starts a real, offline Kubernetes control plane with Kueue,
// KWOK fake GPU nodes, a dcgm-exporter stand-in, Prometheus and PostgreSQL on
// 127.0.0.1.
//
// Every process is started detached and recorded by PID in the instance's state
// folder, so the sandbox outlives the command (or test) that started it and a
// later Up is a no-op. Down stops only the processes recorded there.
//
// It must not import the console's web side (internal/app, internal/handlers,
// web), its write path, task history or sign-in: tests drive those against
// it.
package sandbox

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Options select a sandbox instance. Two instances (the demo and the test one)
// can run side by side: each has its own ports and state folder.
type Options struct {
	Name     string // instance name: "demo" or "test"
	PortBase int    // first of the instance's 16 ports
	Demo     bool   // seed demo teams and keep a trickle of jobs running
	// ReleaseEvicted makes the agent clear the quota reservation of evicted
	// Workloads no job owns, as a job controller would (see release.go).
	ReleaseEvicted bool
	Log            io.Writer
}

// Demo and Test are the two instances the Makefile and tests use; Load is
// an empty one for the load generator (make load), which fills it with
// thousands of Workloads.
var (
	Demo = Options{Name: "demo", PortBase: 17100, Demo: true}
	Test = Options{Name: "test", PortBase: 17200}
	Load = Options{Name: "load", PortBase: 17300, ReleaseEvicted: true}
)

// Env is what a running sandbox hands to its users.
type Env struct {
	Name          string `json:"name"`
	Kubeconfig    string `json:"kubeconfig"`
	APIServerURL  string `json:"apiServerURL"`
	PrometheusURL string `json:"prometheusURL"`
	DCGMURL       string `json:"dcgmURL"`
	Token         string `json:"token"`
	StateDir      string `json:"stateDir"`
	// PostgresDSN reaches the instance's PostgreSQL server (database
	// "postgres", superuser "sandbox"); tests create their own databases.
	PostgresDSN string `json:"postgresDSN"`
}

// ports of one instance, as offsets from PortBase.
const (
	portEtcd = iota
	portEtcdPeer
	portAPIServer
	portControllerManager
	portScheduler
	portKueueWebhook
	portKueueMetrics
	portKueueHealth
	portKueueVisibility
	portKWOK
	portDCGM
	portPrometheus
	portPostgres
)

type instance struct {
	opts  Options
	state string // state folder of this instance
	bin   string // folder of the built binaries
	log   io.Writer
}

// StateRoot is where instances keep data, logs, certificates and PIDs: outside
// the clone, so a fresh clone on the same machine finds a running sandbox.
func StateRoot() string {
	if d := os.Getenv("SANDBOX_STATE"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "quota-console-sandbox", "state")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "quota-console-sandbox", "state")
}

func newInstance(opts Options) *instance {
	log := opts.Log
	if log == nil {
		log = os.Stderr
	}
	return &instance{opts: opts, state: filepath.Join(StateRoot(), opts.Name), log: log}
}

func (in *instance) port(offset int) int { return in.opts.PortBase + offset }
func (in *instance) addr(offset int) string {
	return "127.0.0.1:" + strconv.Itoa(in.port(offset))
}
func (in *instance) path(parts ...string) string {
	return filepath.Join(append([]string{in.state}, parts...)...)
}
func (in *instance) logf(format string, args ...any) {
	fmt.Fprintf(in.log, "sandbox[%s]: "+format+"\n", append([]any{in.opts.Name}, args...)...)
}

func (in *instance) env() *Env {
	return &Env{
		Name:          in.opts.Name,
		Kubeconfig:    in.path("kubeconfig"),
		APIServerURL:  "https://" + in.addr(portAPIServer),
		PrometheusURL: "http://" + in.addr(portPrometheus),
		DCGMURL:       "http://" + in.addr(portDCGM) + "/metrics",
		Token:         adminToken,
		StateDir:      in.state,
		PostgresDSN:   in.postgresDSN(),
	}
}

// adminToken is the static bearer token of the sandbox's admin (system:masters).
// The sandbox listens on loopback only; the token is not a secret.
const adminToken = "sandbox-admin-token"

// Up starts the instance unless it is already running and healthy, and returns
// its Env. It holds a file lock so that parallel test packages start it once.
func Up(ctx context.Context, opts Options) (*Env, error) {
	in := newInstance(opts)
	if err := os.MkdirAll(in.state, 0o755); err != nil {
		return nil, err
	}
	unlock, err := lockFile(in.path("lock"))
	if err != nil {
		return nil, err
	}
	defer unlock()
	if in.healthy(ctx) {
		return in.env(), nil
	}
	// Every process alive but a check failed: on a busy machine an answer can
	// take longer than the check's timeout. Never restart a sandbox other
	// tests are using for that; give it time.
	if in.allAlive(coreComponents) && in.waitFor(ctx, "", 90*time.Second, func(ctx context.Context) error {
		if !in.coreHealthy(ctx) {
			return errors.New("not healthy yet")
		}
		return nil
	}) == nil {
		return in.ensurePostgres(ctx)
	}
	if !RunningAsCommand {
		return nil, errNotCommand
	}
	// Something is missing or broken: stop what is left, keep the data, start again.
	in.stopAll()
	bin, err := Binaries(ctx, in.log)
	if err != nil {
		return nil, err
	}
	in.bin = bin
	start := time.Now()
	if err := in.start(ctx); err != nil {
		return nil, fmt.Errorf("sandbox %s: %w (logs in %s)", opts.Name, err, in.path("logs"))
	}
	in.logf("ready in %s", time.Since(start).Round(100*time.Millisecond))
	return in.writeEnv()
}

var errNotCommand = errors.New("the sandbox is not running and only the sandbox command can start it (go run ./cmd/sandbox up)")

// ensurePostgres starts PostgreSQL alone in an instance whose other processes
// are healthy (one started before the sandbox had it, or whose server died),
// so that their data and the tests using them are left alone.
func (in *instance) ensurePostgres(ctx context.Context) (*Env, error) {
	if _, ok := in.alive("postgres"); ok && in.waitFor(ctx, "postgres", 30*time.Second, in.postgresReady) == nil {
		return in.env(), nil
	}
	if !RunningAsCommand {
		return nil, errNotCommand
	}
	in.stop("postgres")
	start := time.Now()
	if err := in.startPostgres(ctx, pki{dir: in.path("pki")}); err != nil {
		return nil, fmt.Errorf("sandbox %s: postgres: %w (logs in %s)", in.opts.Name, err, in.path("logs"))
	}
	in.logf("postgres up (%s)", time.Since(start).Round(10*time.Millisecond))
	return in.writeEnv()
}

func (in *instance) writeEnv() (*Env, error) {
	env := in.env()
	data, _ := json.MarshalIndent(env, "", "  ")
	if err := os.WriteFile(in.path("env.json"), data, 0o644); err != nil {
		return nil, err
	}
	return env, nil
}

// Down stops the processes the instance started, newest first.
func Down(opts Options) error {
	in := newInstance(opts)
	if err := os.MkdirAll(in.state, 0o755); err != nil {
		return err
	}
	unlock, err := lockFile(in.path("lock"))
	if err != nil {
		return err
	}
	defer unlock()
	in.stopAll()
	return nil
}

// Status reports whether the instance is running and healthy.
func Status(ctx context.Context, opts Options) (*Env, bool) {
	in := newInstance(opts)
	return in.env(), in.healthy(ctx)
}

// Binaries builds (or finds) the sandbox binaries and returns their folder.
func Binaries(ctx context.Context, log io.Writer) (string, error) {
	if d := os.Getenv("SANDBOX_BIN"); d != "" {
		return d, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, "sandbox", "build.sh"))
	cmd.Stderr = log
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("building sandbox binaries: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// RepoRoot finds the clone's top folder from the working directory (tests run
// in their package folder).
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "sandbox", "build.sh")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("cannot find sandbox/build.sh above the working directory")
		}
		dir = parent
	}
}

// components lists the processes in start order; stop goes in reverse.
// PostgreSQL comes last and stands apart: nothing else depends on it, so it
// can be added to an instance that runs without it.
var (
	coreComponents = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kueue", "kwok", "agent", "prometheus"}
	components     = append(coreComponents[:len(coreComponents):len(coreComponents)], "postgres")
)

// stopSignals are the components that stop on another signal than SIGTERM:
// PostgreSQL's SIGTERM waits for every client to leave, SIGINT does not.
var stopSignals = map[string]syscall.Signal{"postgres": syscall.SIGINT}

func (in *instance) allAlive(names []string) bool {
	for _, name := range names {
		if _, ok := in.alive(name); !ok {
			return false
		}
	}
	return true
}

func (in *instance) coreHealthy(ctx context.Context) bool {
	return in.allAlive(coreComponents) && in.get(ctx, in.env().APIServerURL+"/readyz") == nil &&
		in.get(ctx, in.env().PrometheusURL+"/-/ready") == nil
}

func (in *instance) healthy(ctx context.Context) bool {
	if !in.coreHealthy(ctx) {
		return false
	}
	_, ok := in.alive("postgres")
	return ok && in.postgresReady(ctx) == nil
}

type step struct {
	name string
	fn   func(context.Context, pki) error
}

func (in *instance) start(ctx context.Context) error {
	for _, d := range []string{"logs", "pids", "etcd", "kueue-certs", "prometheus"} {
		if err := os.MkdirAll(in.path(d), 0o755); err != nil {
			return err
		}
	}
	p := pki{dir: in.path("pki")}
	if err := p.ensure(); err != nil {
		return err
	}
	if err := in.writeAuthFiles(p); err != nil {
		return err
	}
	steps := []step{
		{"etcd", in.startEtcd},
		{"kube-apiserver", in.startAPIServer},
		{"kube-controller-manager and kube-scheduler", in.startControllers},
		{"kueue", in.startKueue},
		{"kwok and fake nodes", in.startKWOK},
	}
	if in.opts.Demo {
		steps = append(steps, step{"demo policy and teams", in.seedDemo})
	}
	steps = append(steps, step{"agent (dcgm-exporter, demo jobs)", in.startAgent}, step{"prometheus", in.startPrometheus},
		step{"postgres", in.startPostgres})
	for _, s := range steps {
		t := time.Now()
		if err := s.fn(ctx, p); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		in.logf("%s up (%s)", s.name, time.Since(t).Round(10*time.Millisecond))
	}
	return nil
}

func (in *instance) writeAuthFiles(p pki) error {
	tokens := fmt.Sprintf("%s,sandbox-admin,sandbox-admin,\"system:masters\"\n", adminToken)
	if err := os.WriteFile(in.path("tokens.csv"), []byte(tokens), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(in.path("admin.token"), []byte(adminToken), 0o600); err != nil {
		return err
	}
	ca, err := os.ReadFile(p.path("ca.crt"))
	if err != nil {
		return err
	}
	kubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: sandbox-%[1]s
  cluster:
    server: https://%[2]s
    certificate-authority-data: %[3]s
users:
- name: sandbox-admin
  user:
    token: %[4]s
contexts:
- name: sandbox-%[1]s
  context:
    cluster: sandbox-%[1]s
    user: sandbox-admin
current-context: sandbox-%[1]s
`, in.opts.Name, in.addr(portAPIServer), base64Std(ca), adminToken)
	return os.WriteFile(in.path("kubeconfig"), []byte(kubeconfig), 0o600)
}

// launch starts a detached process, records its PID and returns at once.
func (in *instance) launch(name, binary string, args []string, extraEnv ...string) error {
	return in.launchAs(name, binary, args, nil, extraEnv...)
}

// launchAs is launch with another user or capabilities (attr; nil: as the
// sandbox command). A process of another user is not moved into the state
// folder: it may not be allowed to enter it by its path.
func (in *instance) launchAs(name, binary string, args []string, attr *syscall.SysProcAttr, extraEnv ...string) error {
	logFile, err := os.OpenFile(in.path("logs", name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close()
	fmt.Fprintf(logFile, "\n=== %s %s %s\n", time.Now().Format(time.RFC3339), binary, strings.Join(args, " "))
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(), extraEnv...)
	if attr == nil {
		cmd.Dir = in.state
		attr = &syscall.SysProcAttr{}
	} else {
		attr = &syscall.SysProcAttr{Credential: attr.Credential, AmbientCaps: attr.AmbientCaps}
	}
	attr.Setsid = true
	cmd.SysProcAttr = attr
	if err := cmd.Start(); err != nil {
		return err
	}
	record := fmt.Sprintf("%d %s\n", cmd.Process.Pid, binary)
	if err := os.WriteFile(in.path("pids", name), []byte(record), 0o644); err != nil {
		_ = cmd.Process.Kill()
		return err
	}
	return cmd.Process.Release()
}

// alive reports the PID of a recorded component if that PID still runs the
// binary it was started with (a reused PID is never signalled).
func (in *instance) alive(name string) (int, bool) {
	data, err := os.ReadFile(in.path("pids", name))
	if err != nil {
		return 0, false
	}
	fields := strings.Fields(string(data))
	if len(fields) != 2 {
		return 0, false
	}
	pid, err := strconv.Atoi(fields[0])
	if err != nil {
		return 0, false
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil || strings.TrimSuffix(exe, " (deleted)") != fields[1] {
		return 0, false
	}
	return pid, true
}

func (in *instance) stopAll() {
	for i := len(components) - 1; i >= 0; i-- {
		in.stop(components[i])
	}
}

// stop ends one recorded component, if it runs, and forgets its PID.
func (in *instance) stop(name string) {
	pid, ok := in.alive(name)
	if !ok {
		_ = os.Remove(in.path("pids", name))
		return
	}
	sig, ok := stopSignals[name]
	if !ok {
		sig = syscall.SIGTERM
	}
	_ = syscall.Kill(pid, sig)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if _, ok := in.alive(name); !ok {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, ok := in.alive(name); ok {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		time.Sleep(100 * time.Millisecond)
	}
	_ = os.Remove(in.path("pids", name))
	in.logf("stopped %s (pid %d)", name, pid)
}

// waitFor polls check until it succeeds, the process dies or the timeout passes.
func (in *instance) waitFor(ctx context.Context, component string, timeout time.Duration, check func(context.Context) error) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		if last = check(ctx); last == nil {
			return nil
		}
		if component != "" {
			if _, ok := in.alive(component); !ok {
				return fmt.Errorf("%s exited: see %s (last check: %v)", component, in.path("logs", component+".log"), last)
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %s: %w", timeout, last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

var insecureClient = &http.Client{
	Timeout:   3 * time.Second,
	Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // loopback sandbox
}

// get succeeds on a 2xx answer; it sends the admin token to every sandbox port.
func (in *instance) get(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := insecureClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { _ = unix.Flock(int(f.Fd()), unix.LOCK_UN); f.Close() }, nil
}
