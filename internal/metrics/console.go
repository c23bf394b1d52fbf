// Package metrics holds the console's own Prometheus metrics and, for the
// dashboards, the queries it sends to the cluster's Prometheus. It must not
// import the console's cluster, write, handlers and web packages.
package metrics

import (
	"net/http"
	"strconv"
	"sync"
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

// Middleware counts and times requests by route template and method. Every
// label comes from a fixed set (the registered routes, the standard methods,
// status codes), "other" standing for anything else, so that requests, which
// anyone can send before signing in, cannot create series without bound.
func (c *Console) Middleware() echo.MiddlewareFunc {
	var once sync.Once
	routes := map[string]bool{}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(ctx echo.Context) error {
			once.Do(func() {
				for _, r := range ctx.Echo().Routes() {
					routes[r.Path] = true
				}
			})
			start := time.Now()
			err := next(ctx)
			status := ctx.Response().Status
			if he, ok := err.(*echo.HTTPError); ok {
				status = he.Code
			}
			route := ctx.Path()
			if !routes[route] {
				route = "other"
			}
			c.requests.WithLabelValues(route, methodLabel(ctx.Request().Method), statusLabel(status)).Inc()
			c.duration.WithLabelValues(route).Observe(time.Since(start).Seconds())
			return err
		}
	}
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
