package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	kueueclient "sigs.k8s.io/kueue/client-go/clientset/versioned"

	"github.com/openquota/console/internal/domain"
)

// sandboxEnv is what `sandbox up` prints.
type sandboxEnv struct {
	Kubeconfig    string `json:"kubeconfig"`
	PrometheusURL string `json:"prometheusURL"`
}

// sandboxRunning reports whether the instance already runs (`sandbox
// status` exits 0).
func sandboxRunning(ctx context.Context, bin, instance string) bool {
	cmd := exec.CommandContext(ctx, bin, "status", "--instance", instance)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	return cmd.Run() == nil
}

// sandboxUp starts (or finds running) a sandbox instance.
func sandboxUp(ctx context.Context, bin, instance string) (sandboxEnv, error) {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "up", "--instance", instance)
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Run(); err != nil {
		return sandboxEnv{}, fmt.Errorf("%s up --instance %s: %w", bin, instance, err)
	}
	var env sandboxEnv
	if err := json.Unmarshal(out.Bytes(), &env); err != nil {
		return sandboxEnv{}, fmt.Errorf("reading %s up's answer: %w", bin, err)
	}
	if env.Kubeconfig == "" {
		return sandboxEnv{}, fmt.Errorf("%s up printed no kubeconfig", bin)
	}
	if env.PrometheusURL != "" {
		u, err := url.Parse(env.PrometheusURL)
		if err != nil {
			return sandboxEnv{}, fmt.Errorf("prometheus URL: %w", err)
		}
		if err := requireLoopback(u.Host); err != nil {
			return sandboxEnv{}, fmt.Errorf("prometheus: %w", err)
		}
	}
	return env, nil
}

func sandboxDown(bin, instance string) error {
	cmd := exec.Command(bin, "down", "--instance", instance)
	cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s down --instance %s: %w", bin, instance, err)
	}
	return nil
}

// cluster is the tool's client of the sandbox.
type cluster struct {
	kube kubernetes.Interface
	kq   kueueclient.Interface
}

func newCluster(kubeconfig string) (*cluster, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	u, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, fmt.Errorf("apiserver address %q: %w", cfg.Host, err)
	}
	if err := requireLoopback(u.Host); err != nil {
		return nil, fmt.Errorf("apiserver: %w", err)
	}
	cfg.QPS, cfg.Burst = 20, 40
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	kq, err := kueueclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &cluster{kube: kube, kq: kq}, nil
}

// deleteLease removes the Lease the run's console campaigned for.
func (c *cluster) deleteLease(ctx context.Context, name string) error {
	err := c.kube.CoordinationV1().Leases(domain.DefaultSettings.State()).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting Lease %s: %w", name, err)
	}
	return nil
}

// consoleArgs are what the console under test is started with.
type consoleArgs struct {
	kubeconfig, prometheusURL, listen, historyPath, lease string
}

// console is the console process under test.
type console struct {
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
	Base   string // http://127.0.0.1:port
}

// startConsole runs the console on the sandbox with a SQLite task history
// at a.historyPath, electing its recorder with a Lease of its own (so that
// another console on the sandbox does not keep it from recording), and
// waits until /readyz answers 200.
func startConsole(ctx context.Context, bin string, a consoleArgs, logPath string, ready time.Duration) (*console, error) {
	addr := a.listen
	if err := requireLoopback(addr); err != nil {
		return nil, fmt.Errorf("--listen: %w", err)
	}
	if strings.HasSuffix(addr, ":0") {
		free, err := freeLoopbackAddr(strings.TrimSuffix(addr, ":0"))
		if err != nil {
			return nil, err
		}
		addr = free
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	args := []string{"--kubeconfig", a.kubeconfig, "--listen", addr,
		"--history-store", "sqlite", "--history-path", a.historyPath, "--leader-election-lease", a.lease}
	if a.prometheusURL != "" {
		args = append(args, "--prometheus-url", a.prometheusURL)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	c := &console{cmd: cmd, exited: make(chan struct{}), Base: "http://" + addr}
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

func (c *console) waitReady(ctx context.Context, limit time.Duration) error {
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
func (c *console) Stop() {
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
func (c *console) Running() bool {
	select {
	case <-c.exited:
		return false
	default:
		return true
	}
}

func freeLoopbackAddr(host string) (string, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// requireLoopback refuses any address that is not on this machine's
// loopback: the tool creates Jobs and must not touch a real cluster.
func requireLoopback(hostport string) error {
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
