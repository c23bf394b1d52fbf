// Package app builds the console from its parts and wires them together:
// the informer caches and the live read model (package kueue), the write
// path (package write), the users' permissions, Kueue's queue positions,
// Prometheus (package metrics), the task history with its recorder and
// Lease (packages taskhistory and leader), and the pages (package
// handlers), which get each of these through the small interfaces they
// use. cmd/console reads its flags into a Config and serves the result; the
// integration tests start the same App against the sandbox.
//
// Only the top wires: no other package of the console may import app.
package app

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/openquota/console/internal/auth"
	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/handlers"
	"github.com/openquota/console/internal/kueue"
	"github.com/openquota/console/internal/metrics"
	"github.com/openquota/console/internal/write"
)

// Config is what the console is started with.
type Config struct {
	Settings domain.Settings
	// Clients are the console's own identity: it reads the cluster and
	// makes every change with them.
	Clients kueue.Clients
	// Server is the apiserver's URL; the default task history file is
	// named after it.
	Server string
	// PrometheusURL is the Prometheus that scrapes Kueue and dcgm-exporter;
	// "" runs without.
	PrometheusURL string
	// Auth decides who each request comes from; nil is auth mode none.
	Auth        *auth.Authenticator
	TaskHistory TaskHistoryConfig
	Limits      handlers.Limits
	// KueueConfigMap is where Kueue's installation keeps its
	// configuration; zero is DefaultKueueConfigMap.
	KueueConfigMap kueue.ConfigMapRef
	Log            *slog.Logger
}

// DefaultKueueConfigMap is where Kueue's manifests and Helm chart keep its
// configuration.
var DefaultKueueConfigMap = kueue.ConfigMapRef{Namespace: "kueue-system", Name: "kueue-manager-config", Key: "controller_manager_config.yaml"}

// App is a running console: its parts, and the pages built on them.
type App struct {
	Cache       *kueue.Cache
	Live        *kueue.Live
	Metrics     *metrics.Console
	TaskHistory *TaskHistory
	pages       handlers.Config
}

// New builds the console's parts and starts them until ctx ends: the
// informers, the read model, the task history (its store, and its recorder
// while this replica holds the Lease). A Prometheus URL that does not parse
// stops it; a task history store that cannot be opened does not (it is
// tried again later).
func New(ctx context.Context, cfg Config) (*App, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.KueueConfigMap == (kueue.ConfigMapRef{}) {
		cfg.KueueConfigMap = DefaultKueueConfigMap
	}
	s, kube, kq := cfg.Settings, cfg.Clients.Kube, cfg.Clients.Kueue
	m := metrics.NewConsole()
	cache := kueue.NewCache(kube, kq, s, cfg.Log)
	cache.OnChange(func(ev kueue.Event) { m.InformerEvents.WithLabelValues(ev.Kind).Inc() })
	live := kueue.NewLive(cache, s, cfg.Log)
	live.SetObserver(func(kind string, took time.Duration) {
		m.ReadModelUpdate.WithLabelValues(kind).Observe(took.Seconds())
	})
	// The task history hooks onto the cache's events: before it starts.
	history, err := startTaskHistory(ctx, cfg.TaskHistory, recording{server: cfg.Server, kube: kube, cache: cache,
		settings: s, metrics: m, log: cfg.Log})
	if err != nil {
		return nil, err
	}
	var prom handlers.Prometheus
	if cfg.PrometheusURL != "" {
		p, err := metrics.NewProm(cfg.PrometheusURL)
		if err != nil {
			history.close()
			return nil, fmt.Errorf("--prometheus-url: %w", err)
		}
		m.ObservePrometheus(p)
		go probePrometheus(ctx, p, time.Minute)
		// Every viewer and live update reads the same figures: ask
		// Prometheus at most every 30 seconds for each.
		prom = metrics.NewCached(p, 30*time.Second)
	}
	cache.Start(ctx)
	go live.Run(ctx)

	access := kueue.NewAccess(kube)
	applier := kueue.Applier{Kube: kube, Kueue: kq, Log: cfg.Log}
	go redactMembers(ctx, cache, applier, cfg.Log)
	reads := newClusterReads(cache, applier, s, cfg.KueueConfigMap)
	// The figures of the cluster MetricsHandler exports, for alerts and
	// dashboards elsewhere: read from the read model and the caches when
	// scraped.
	m.RegisterCluster(metrics.ClusterSources{
		Snapshot: live.Snapshot,
		InstanceTypes: func() []domain.InstanceTypeCapacity {
			nodes, _ := cache.Nodes.List(labels.Everything())
			return domain.BuildOverview(s, nodes, nil).InstanceTypes
		},
		Teams: reads.Teams,
		Fleet: reads.Fleet,
	})
	a := &App{Cache: cache, Live: live, Metrics: m, TaskHistory: history}
	a.pages = handlers.Config{
		Settings: s, Log: cfg.Log, Metrics: m, Auth: cfg.Auth, Limits: cfg.Limits, Shutdown: ctx,
		Health: live, ReadModel: live, Overview: reads, Teams: reads, Policy: reads, Revisions: reads,
		Access: access,
		Writes: write.Service{Settings: s, Cache: cache, Live: live, Applier: applier, Access: access, Log: cfg.Log,
			Scheduler: reads.SchedulerConfig},
		// Never nil: a console without a task history says why on its pages.
		TaskHistory: history,
		Prometheus:  prom,
		Positions:   kueue.NewPositions(kq, 15*time.Second, cfg.Log),
		WhatIf:      reads,
		Bindings:    kueue.Bindings{Kube: kube},
		RecentUse:   reads,
	}
	return a, nil
}

// redactMembers removes, once the caches have synced, the members earlier
// versions wrote into the ClusterQueues' allocation annotations
// (kueue.Applier.RedactMembers). Every replica may: the patches are
// idempotent.
func redactMembers(ctx context.Context, cache *kueue.Cache, applier kueue.Applier, log *slog.Logger) {
	if err := wait.PollUntilContextCancel(ctx, time.Second, true, func(context.Context) (bool, error) { return cache.Synced(), nil }); err != nil {
		return
	}
	cqs, _ := cache.ClusterQueues.List(labels.Everything())
	n, err := applier.RedactMembers(ctx, cqs)
	if err != nil {
		log.Warn("the members in the teams' allocation annotations could not all be removed; the next start tries again", "err", err)
	}
	if n > 0 {
		log.Info("removed the members from the teams' allocation annotations", "clusterQueues", n)
	}
}

// probePrometheus asks Prometheus the smallest query every interval until
// ctx ends, so that quota_console_prometheus_queries_total tells whether
// the console reaches it while nobody looks at a chart.
func probePrometheus(ctx context.Context, p *metrics.Prom, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_ = p.Ping(ctx)
		}
	}
}

// MetricsHandler serves /metrics with everything the console exports: its
// own metrics and its figures of the cluster, which name every team. Serve
// it on an address of its own (--metrics-listen) that only Prometheus
// reaches, never next to the pages, whose /metrics anyone may read.
func (a *App) MetricsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(prometheus.Gatherers{a.Metrics.Registry, a.Metrics.Cluster}, promhttp.HandlerOpts{}))
	return mux
}

// Handler serves the console's pages.
func (a *App) Handler() http.Handler { return handlers.New(a.pages) }

// Close closes the task history's store, once the server has stopped and
// the context New was given has ended (the recorder has written its last
// batch then).
func (a *App) Close() error {
	if a.TaskHistory == nil {
		return nil
	}
	return a.TaskHistory.close()
}
