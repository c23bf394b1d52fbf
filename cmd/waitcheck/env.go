package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	kueueclient "sigs.k8s.io/kueue/client-go/clientset/versioned"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/loopback"
)

// sandboxEnv is what `sandbox up` prints.
type sandboxEnv = loopback.Sandbox

// sandboxRunning reports whether the instance already runs (`sandbox
// status` exits 0).
func sandboxRunning(ctx context.Context, bin, instance string) bool {
	cmd := exec.CommandContext(ctx, bin, "status", "--instance", instance)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	return cmd.Run() == nil
}

func sandboxUp(ctx context.Context, bin, instance string) (sandboxEnv, error) {
	return loopback.SandboxUp(ctx, bin, instance)
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
	cfg, err := loopback.RESTConfig(kubeconfig)
	if err != nil {
		return nil, err
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
type console = loopback.Console

// startConsole runs the console on the sandbox with a SQLite task history
// at a.historyPath, electing its recorder with a Lease of its own (so that
// another console on the sandbox does not keep it from recording), and
// waits until /readyz answers 200.
func startConsole(ctx context.Context, bin string, a consoleArgs, logPath string, ready time.Duration) (*console, error) {
	args := []string{"--kubeconfig", a.kubeconfig,
		"--history-store", "sqlite", "--history-path", a.historyPath, "--leader-election-lease", a.lease}
	if a.prometheusURL != "" {
		args = append(args, "--prometheus-url", a.prometheusURL)
	}
	return loopback.StartConsole(ctx, bin, args, a.listen, logPath, ready)
}

func requireLoopback(hostport string) error { return loopback.Require(hostport) }
