// Command console serves the GPU quota governance console.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	kueueclient "sigs.k8s.io/kueue/client-go/clientset/versioned"

	"github.com/openquota/console/internal/handlers"
	"github.com/openquota/console/internal/kueue"
	"github.com/openquota/console/internal/metrics"
)

type options struct {
	kubeconfig    string
	prometheusURL string
	listen        string
	logFormat     string
	logLevel      string
	settings      kueue.Settings
}

func parseFlags(args []string) (options, error) {
	// Our own FlagSet: Kueue's packages register a global --kubeconfig flag.
	fs := flag.NewFlagSet("console", flag.ContinueOnError)
	var o options
	fs.StringVar(&o.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig file (default: $KUBECONFIG, else in-cluster config)")
	fs.StringVar(&o.prometheusURL, "prometheus-url", "", "base URL of the Prometheus that scrapes Kueue and dcgm-exporter")
	fs.StringVar(&o.listen, "listen", "127.0.0.1:8080", "address to serve HTTP on")
	fs.StringVar(&o.settings.NamespacePrefix, "namespace-prefix", kueue.DefaultSettings.NamespacePrefix, "prefix of team namespaces (team t gets <prefix>t)")
	fs.StringVar(&o.settings.Cohort, "cohort", kueue.DefaultSettings.Cohort, "the cohort every team's ClusterQueue joins")
	fs.StringVar(&o.logFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.logFormat != "text" && o.logFormat != "json" {
		return o, fmt.Errorf("--log-format must be text or json, not %q", o.logFormat)
	}
	return o, nil
}

func main() {
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	log := newLogger(o)
	if err := run(o, log); err != nil {
		log.Error("console stopped", "err", err)
		os.Exit(1)
	}
}

func newLogger(o options) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(o.logLevel))
	hopts := &slog.HandlerOptions{Level: level}
	if o.logFormat == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, hopts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, hopts))
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		return rest.InClusterConfig()
	}
	return clientcmd.BuildConfigFromFlags("", kubeconfig)
}

func run(o options, log *slog.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	cfg, err := restConfig(o.kubeconfig)
	if err != nil {
		return fmt.Errorf("kubernetes config: %w", err)
	}
	cfg.UserAgent = "quota-console"
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	kq, err := kueueclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	consoleMetrics := metrics.NewConsole()
	cache := kueue.NewCache(kube, kq, log)
	cache.OnChange(func(kind string) { consoleMetrics.InformerEvents.WithLabelValues(kind).Inc() })
	cache.Start(ctx)

	var prom handlers.PromReader
	var reports handlers.UsageReporter
	if o.prometheusURL != "" {
		p, err := metrics.NewProm(o.prometheusURL)
		if err != nil {
			return fmt.Errorf("--prometheus-url: %w", err)
		}
		prom, reports = p, p
	}
	live := kueue.NewLive(cache, o.settings, log)
	go live.Run(ctx)

	// Live update streams end when the server shuts down, or Shutdown would
	// wait for them until its timeout.
	streams, endStreams := context.WithCancel(context.Background())
	defer endStreams()
	e := handlers.New(handlers.Deps{
		Cache: cache, Live: live, Prom: prom, Reports: reports, Applier: kueue.Applier{Kube: kube, Kueue: kq}, Settings: o.settings,
		Metrics: consoleMetrics, Log: log, KueueConfigMap: handlers.DefaultKueueConfigMap, Streams: streams,
	})
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: e, ReadHeaderTimeout: 10 * time.Second}
	srv.RegisterOnShutdown(endStreams)
	log.Info("console listening", "url", "http://"+ln.Addr().String(), "kubernetes", cfg.Host, "prometheus", o.prometheusURL)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()

	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Shutdown waits for in-flight requests; live streams end with the context.
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
