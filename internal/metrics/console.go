// Package metrics holds the console's own Prometheus metrics and, for the
// dashboards, the queries it sends to the cluster's Prometheus. It knows
// nothing of HTTP servers (the request metrics' middleware lives with the
// handlers): it must not import echo or templ, nor the console's kueue,
// write, handlers, app and web packages.
package metrics

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/openquota/console/internal/version"
)

// Console is the console's own metrics registry, served on /metrics.
type Console struct {
	Registry *prometheus.Registry
	// Cluster holds the console's figures of the cluster (RegisterCluster).
	// They name every team, so they are served apart from the pages, whose
	// /metrics anyone may read: only where Registry is served too, on an
	// address of its own (--metrics-listen).
	Cluster        *prometheus.Registry
	requests       *prometheus.CounterVec
	duration       *prometheus.HistogramVec
	InformerEvents *prometheus.CounterVec
	// requestSeries keep the series of requests by requestSeriesKey.
	requestSeries sync.Map

	// ReadModelUpdate times the read model taking in one change, by kind
	// of object ("snapshot": making a snapshot of it).
	ReadModelUpdate *prometheus.HistogramVec
	// LiveRender times rendering a view's live parts (once per snapshot and
	// watched or requested view).
	LiveRender prometheus.Histogram
	// LiveWatchers are the open live update streams.
	LiveWatchers prometheus.Gauge
	// LiveFragments counts the parts pushed to watchers (one per part and
	// watcher); LiveEvents the events sent.
	LiveFragments, LiveEvents prometheus.Counter
}

// TaskHistoryStats are the task history recorder's counters since start,
// and the state of its store.
type TaskHistoryStats struct {
	Written, Dropped, WriteErrors int64
	// Enabled: the console was started with a task history store;
	// StoreOpen: this replica has it open (it reads it, and records while
	// it holds the Lease).
	Enabled, StoreOpen bool
}

// RegisterTaskHistory exposes whether this replica holds the task history's
// Lease (quota_console_leader, 1 on the holder), whether it has a store,
// and its recorder's counters, read when scraped.
func (c *Console) RegisterTaskHistory(leader func() bool, stats func() TaskHistoryStats) {
	counter := func(name, help string, v func(TaskHistoryStats) int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(v(stats())) })
	}
	flag := func(name, help string, v func() bool) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 {
			if v() {
				return 1
			}
			return 0
		})
	}
	c.Registry.MustRegister(
		flag("quota_console_leader", "1 on the replica that holds the task history Lease and records, else 0.", leader),
		flag("quota_console_history_enabled", "1 when the console was started with a task history store (--history-store sqlite or postgres), else 0.",
			func() bool { return stats().Enabled }),
		flag("quota_console_history_store_up", "1 while this replica has its task history store open and, when it records, the store takes its writes; else 0 (off, not reachable, or refusing writes).",
			func() bool { return stats().StoreOpen }),
		counter("quota_console_history_tasks_written_total", "Task records the history recorder wrote or changed.", func(s TaskHistoryStats) int64 { return s.Written }),
		counter("quota_console_history_events_dropped_total", "Workload events the history recorder dropped (queue full, or refused by the store): recorded as gaps.", func(s TaskHistoryStats) int64 { return s.Dropped }),
		counter("quota_console_history_write_errors_total", "Failed writes to the task history store (each retried).", func(s TaskHistoryStats) int64 { return s.WriteErrors }),
	)
}

// Outcomes of the queries sent to Prometheus (ObservePrometheus).
const (
	PromOK          = "ok"
	PromUnavailable = "unavailable" // not reachable, timed out, a server error
	PromError       = "error"       // a query it rejected, an answer of the wrong kind
)

// ObservePrometheus counts p's queries by outcome
// (quota_console_prometheus_queries_total). Call it before p is used.
func (c *Console) ObservePrometheus(p *Prom) {
	queries := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "quota_console_prometheus_queries_total",
		Help: "Queries the console sent to Prometheus (pages and a probe every minute), by outcome: ok, unavailable (not reachable, timed out, a server error), error (a query it rejected).",
	}, []string{"outcome"})
	for _, o := range []string{PromOK, PromUnavailable, PromError} {
		queries.WithLabelValues(o) // every outcome from 0, so that increase() sees the first
	}
	c.Registry.MustRegister(queries)
	p.observe = func(outcome string) { queries.WithLabelValues(outcome).Inc() }
}

// NewConsole registers the console's metrics and the Go runtime collectors.
func NewConsole() *Console {
	c := &Console{
		Registry: prometheus.NewRegistry(),
		Cluster:  prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quota_console_http_requests_total", Help: "HTTP requests by route, method and status code.",
		}, []string{"route", "method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "quota_console_http_request_duration_seconds", Help: "HTTP request latency by route.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"route"}),
		InformerEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quota_console_informer_events_total", Help: "Add, update and delete events received by kind.",
		}, []string{"kind"}),
		ReadModelUpdate: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "quota_console_read_model_update_duration_seconds",
			Help:    "Time the read model takes to take in one change, by kind of object (snapshot: publishing a snapshot).",
			Buckets: []float64{.00001, .000025, .00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1},
		}, []string{"kind"}),
		LiveRender: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "quota_console_live_render_duration_seconds", Help: "Time to render the live parts of one view for one snapshot.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
		}),
		LiveWatchers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "quota_console_live_watchers", Help: "Open live update streams.",
		}),
		LiveFragments: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "quota_console_live_fragments_pushed_total", Help: "Live parts pushed to watchers (one per part and watcher).",
		}),
		LiveEvents: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "quota_console_live_events_sent_total", Help: "Live update events sent to watchers.",
		}),
	}
	buildInfo := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "quota_console_build_info", Help: "Always 1; the labels tell which build of the console is running.",
	}, []string{"version", "revision", "goversion"})
	v := version.Get()
	buildInfo.WithLabelValues(v.Version, v.Revision, v.GoVersion).Set(1)
	c.Registry.MustRegister(c.requests, c.duration, c.InformerEvents, c.ReadModelUpdate, c.LiveRender, c.LiveWatchers,
		c.LiveFragments, c.LiveEvents, buildInfo,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return c
}

// ObserveRequest counts and times one request of route. The method and
// status become labels only from a fixed set ("other" for anything else):
// a request's method is whatever its sender wrote.
func (c *Console) ObserveRequest(route, method string, status int, took time.Duration) {
	if status < 100 || status > 599 {
		status = 0 // "other"
	}
	key := requestSeriesKey{route: route, method: methodLabel(method), status: status}
	s, ok := c.requestSeries.Load(key)
	if !ok {
		s, _ = c.requestSeries.LoadOrStore(key, requestSeries{
			count:    c.requests.WithLabelValues(route, key.method, statusLabel(status)),
			duration: c.duration.WithLabelValues(route),
		})
	}
	series := s.(requestSeries)
	series.count.Inc()
	series.duration.Observe(took.Seconds())
}

// requestSeriesKey names the series of a request: its route, method label
// and status code (as few as the routes, methods and codes).
type requestSeriesKey struct {
	route, method string
	status        int
}

// requestSeries are the series a kind of request counts in, looked up once.
type requestSeries struct {
	count    prometheus.Counter
	duration prometheus.Observer
}

func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions:
		return m
	}
	return "other"
}

func statusLabel(code int) string {
	if code < 100 || code > 599 {
		return "other"
	}
	return strconv.Itoa(code)
}
