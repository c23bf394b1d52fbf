package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/informers"
)

// The agent is the sandbox's own long-running helper process: it serves the
// dcgm-exporter stand-in and, for the demo instance, keeps jobs flowing; for
// the load instance it finishes the evictions of its job-less Workloads.
// It runs as the sandbox command itself ("sandbox agent"), copied into the
// state folder so that rebuilding the command never pulls it from under it.

// RunningAsCommand is set by the sandbox command: only it can run the agent,
// so only it may start processes (a test binary calls the command instead).
var RunningAsCommand bool

func (in *instance) startAgent(ctx context.Context, _ pki) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	agent := in.path("bin", "sandbox-agent")
	if err := os.MkdirAll(filepath.Dir(agent), 0o755); err != nil {
		return err
	}
	if err := copyFile(self, agent+".new", 0o755); err != nil {
		return err
	}
	if err := os.Rename(agent+".new", agent); err != nil {
		return err
	}
	args := []string{"agent", "--instance", in.opts.Name, "--port-base", fmt.Sprint(in.opts.PortBase)}
	if in.opts.Demo {
		args = append(args, "--demo")
	}
	if in.opts.ReleaseEvicted {
		args = append(args, "--release-evicted")
	}
	if err := in.launch("agent", agent, args); err != nil {
		return err
	}
	return in.waitFor(ctx, "agent", 30*time.Second, func(ctx context.Context) error {
		return in.get(ctx, in.env().DCGMURL)
	})
}

// RunAgent is the body of "sandbox agent"; it returns when ctx ends.
func RunAgent(ctx context.Context, opts Options) error {
	in := newInstance(opts)
	c, err := in.clients()
	if err != nil {
		return err
	}
	kube := c.kube
	factory := informers.NewSharedInformerFactory(kube, 0)
	collector := &dcgmCollector{
		nodes: factory.Core().V1().Nodes().Lister(),
		pods:  factory.Core().V1().Pods().Lister(),
		now:   time.Now,
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())

	reg := prometheus.NewRegistry()
	reg.MustRegister(collector)
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Addr: in.addr(portDCGM), Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 3)
	go func() { errc <- srv.ListenAndServe() }()
	if opts.Demo {
		go func() { errc <- runDemoLoad(ctx, kube, in.log) }()
	}
	if opts.ReleaseEvicted {
		go func() { errc <- runReleaseEvicted(ctx, c.rest, c.kueue, in.log) }()
	}
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutdownCtx)
	if errors.Is(err, http.ErrServerClosed) || errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
