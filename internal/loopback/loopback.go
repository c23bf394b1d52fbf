// Package loopback is the plumbing the measuring tools (cmd/loadtest,
// cmd/waitcheck) share: they start a sandbox and a console process and talk
// to them on this machine's loopback only, since they create Workloads and
// send thousands of requests. It imports none of the console's packages.
package loopback

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Require refuses any address that is not on this machine's loopback.
func Require(hostport string) error {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("%q is not a loopback address (127.0.0.1, ::1 or localhost): the measurement runs on loopback only", hostport)
}

// FreeAddr is a free port on host.
func FreeAddr(host string) (string, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// Sandbox is what `sandbox up` prints of an instance.
type Sandbox struct {
	Kubeconfig    string `json:"kubeconfig"`
	APIServerURL  string `json:"apiServerURL"`
	PrometheusURL string `json:"prometheusURL"`
}

// SandboxUp starts (or finds running) a sandbox instance with the sandbox
// command bin.
func SandboxUp(ctx context.Context, bin, instance string) (Sandbox, error) {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "up", "--instance", instance)
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Run(); err != nil {
		return Sandbox{}, fmt.Errorf("%s up --instance %s: %w", bin, instance, err)
	}
	var env Sandbox
	if err := json.Unmarshal(out.Bytes(), &env); err != nil {
		return Sandbox{}, fmt.Errorf("reading %s up's answer: %w", bin, err)
	}
	if env.Kubeconfig == "" {
		return Sandbox{}, fmt.Errorf("%s up printed no kubeconfig", bin)
	}
	if env.PrometheusURL != "" {
		u, err := url.Parse(env.PrometheusURL)
		if err != nil {
			return Sandbox{}, fmt.Errorf("prometheus URL: %w", err)
		}
		if err := Require(u.Host); err != nil {
			return Sandbox{}, fmt.Errorf("prometheus: %w", err)
		}
	}
	return env, nil
}

// RESTConfig reads kubeconfig and refuses an apiserver off loopback.
func RESTConfig(kubeconfig string) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	u, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, fmt.Errorf("apiserver address %q: %w", cfg.Host, err)
	}
	if err := Require(u.Host); err != nil {
		return nil, fmt.Errorf("apiserver: %w", err)
	}
	return cfg, nil
}

// Console is a console process the tool started.
type Console struct {
	Base string // http://<addr>
	PID  int

	cmd    *exec.Cmd
	exited chan struct{}
	err    error
}

// StartConsole runs the console binary bin with args and --listen addr (a
// loopback address; port 0 picks a free one), logging to logPath, and
// waits up to ready until /readyz answers 200.
func StartConsole(ctx context.Context, bin string, args []string, addr, logPath string, ready time.Duration) (*Console, error) {
	if err := Require(addr); err != nil {
		return nil, fmt.Errorf("--listen: %w", err)
	}
	if strings.HasSuffix(addr, ":0") {
		free, err := FreeAddr(strings.TrimSuffix(addr, ":0"))
		if err != nil {
			return nil, err
		}
		addr = free
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, append(append([]string{}, args...), "--listen", addr)...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	c := &Console{cmd: cmd, exited: make(chan struct{}), Base: "http://" + addr, PID: cmd.Process.Pid}
	go func() {
		c.err = cmd.Wait()
		logFile.Close()
		close(c.exited)
	}()
	if err := c.waitReady(ctx, ready); err != nil {
		c.Stop()
		return nil, fmt.Errorf("console (log: %s): %w", logPath, err)
	}
	return c, nil
}

func (c *Console) waitReady(ctx context.Context, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	last := "no answer"
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.Base+"/readyz", nil)
		if res, err := client.Do(req); err == nil {
			body, _ := io.ReadAll(io.LimitReader(res.Body, 512))
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("%d %s", res.StatusCode, bytes.TrimSpace(body))
		}
		select {
		case <-c.exited:
			return fmt.Errorf("exited before it was ready: %v", c.err)
		case <-ctx.Done():
			return fmt.Errorf("not ready after %s (/readyz: %s)", limit, last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// Stop ends the console: SIGTERM, then SIGKILL after 10 s.
func (c *Console) Stop() {
	if c == nil {
		return
	}
	select {
	case <-c.exited:
		return
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
}

// Running reports whether the console is still up.
func (c *Console) Running() bool {
	select {
	case <-c.exited:
		return false
	default:
		return true
	}
}

// Save writes a run's result as out.json (v) and out.md (md).
func Save(out string, v any, md string) error {
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(out+".json", append(js, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(out+".md", []byte(md), 0o644)
}

// Main runs a measuring tool: log lines prefixed with its name, options
// parsed from the command line (exit 2 when they are wrong), then run until
// it ends or is interrupted (exit 1 when it fails).
func Main[O any](name string, parse func([]string) (O, error), run func(context.Context, O) error) {
	log.SetFlags(log.Ltime)
	log.SetPrefix(name + ": ")
	o, err := parse(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		log.Print(err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err = run(ctx, o)
	stop()
	if err != nil {
		log.Print(err)
		os.Exit(1)
	}
}
