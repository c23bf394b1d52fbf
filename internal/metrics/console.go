// Package metrics holds the console's own Prometheus metrics and, for the
// dashboards, the queries it sends to the cluster's Prometheus.
package metrics

import (
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/openquota/console/internal/version"
)

// Console is the console's own metrics registry, served on /metrics.
type Console struct {
	Registry       *prometheus.Registry
	requests       *prometheus.CounterVec
	duration       *prometheus.HistogramVec
	InformerEvents *prometheus.CounterVec
}

// NewConsole registers the console's metrics and the Go runtime collectors.
func NewConsole() *Console {
	c := &Console{
		Registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quota_console_http_requests_total", Help: "HTTP requests by route, method and status code.",
		}, []string{"route", "method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "quota_console_http_request_duration_seconds", Help: "HTTP request latency by route.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"route"}),
		InformerEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quota_console_informer_events_total", Help: "Add, update and delete events received by kind.",
		}, []string{"kind"}),
	}
	buildInfo := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "quota_console_build_info", Help: "Always 1; the labels tell which build of the console is running.",
	}, []string{"version", "revision", "goversion"})
	v := version.Get()
	buildInfo.WithLabelValues(v.Version, v.Revision, v.GoVersion).Set(1)
	c.Registry.MustRegister(c.requests, c.duration, c.InformerEvents, buildInfo,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return c
}

// Middleware counts and times requests by route pattern (not raw path, which
// would give one series per team).
func (c *Console) Middleware() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(ctx echo.Context) error {
			start := time.Now()
			err := next(ctx)
			status := ctx.Response().Status
			if he, ok := err.(*echo.HTTPError); ok {
				status = he.Code
			}
			route := ctx.Path()
			if route == "" {
				route = "unmatched"
			}
			c.requests.WithLabelValues(route, ctx.Request().Method, strconv.Itoa(status)).Inc()
			c.duration.WithLabelValues(route).Observe(time.Since(start).Seconds())
			return err
		}
	}
}
