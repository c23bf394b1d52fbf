// Package handlers holds the console's HTTP server: routes, middleware
// (security headers, sign-in, CSRF, read access, metrics) and one file per
// page or action. A page reads the read model and the caches (package
// cluster) and renders a view model (package templates); a change parses its
// form, calls the write path (package write) and answers its outcome with
// respond. Handlers never call the apiserver themselves: they must not import
// client-go's clientsets or tools, Kueue's client-go, or apimachinery's error
// and wait helpers.
package handlers

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/openquota/console/internal/auth"
	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/kueue"
	"github.com/openquota/console/internal/memo"
	"github.com/openquota/console/internal/metrics"
	"github.com/openquota/console/internal/taskhistory"
	"github.com/openquota/console/internal/write"
	"github.com/openquota/console/web/static"
	"github.com/openquota/console/web/templates"
)

// Deps are what the handlers read from and write to.
type Deps struct {
	Cache   *kueue.Cache
	Live    *kueue.Live
	Prom    PromReader    // nil without --prometheus-url
	Reports UsageReporter // nil without --prometheus-url
	// Streams ends live update streams when the server shuts down.
	Streams  context.Context
	Applier  kueue.Applier
	Settings domain.Settings
	Metrics  *metrics.Console
	Log      *slog.Logger
	// KueueConfigMap is where Kueue's installation keeps its configuration.
	KueueConfigMap kueue.ConfigMapRef
	// Auth decides who each request comes from. nil is auth mode none: no
	// sign-in, writes with the console's own identity (cmd/console allows
	// it only on loopback addresses). In proxy and token mode the cluster is
	// asked what the signed-in user may see and change (SubjectAccessReviews
	// about them); the console makes the changes with its own identity.
	Auth *auth.Authenticator

	// History is the task history store, or why there is none (off, or
	// unreachable); nil: off.
	History func() (*taskhistory.Store, error)

	// StreamLimits cap live update streams; zero is DefaultStreamLimits.
	StreamLimits StreamLimits
	// StreamLifetime ends every live stream after this long.
	StreamLifetime time.Duration
	// ExportLimits cap the task history's CSV exports; zero is
	// DefaultExportLimits.
	ExportLimits ExportLimits

	// Made by New: the write path, the users' permissions (asked about them
	// and remembered), the open live update streams.
	writes   write.Service
	access   *kueue.Access
	streams  *streamGate
	renderer *liveRenderer
	hub      *liveHub
	// Reads that many requests share and that may be a few seconds old.
	fairSharing *memo.Memo[bool]
	drifted     *memo.Memo[map[string]bool]
	// The task history's answers, shared for historyTTL.
	historyFacts *memo.Memo[*taskhistory.WindowStats]
	// usageSummaries are the usage report's, shared for reportTTL.
	usageSummaries *memo.Memo[*taskhistory.UsageSummary]
	// teamPreempted are the team pages' preemption counts, shared for
	// historyTTL.
	teamPreempted *memo.Memo[preemptedBy]
	rates         *memo.Memo[taskhistory.AdmissionRates]
	// positions are Kueue's own queue positions; nil without a client.
	positions positionReader
	// exports count the task history's running CSV exports; summaries are
	// the slots of the usage summaries computed at once.
	exports   *exportGate
	summaries chan struct{}
	// historyWarnings keep a failing task history from flooding the log.
	historyWarnings *warnings
}

// PromReader is what the pages read from Prometheus (*metrics.Prom).
type PromReader interface {
	TeamGPUUtilization(ctx context.Context, namespacePrefix string) (map[string]float64, error)
	ClusterUtilization(ctx context.Context, r metrics.Range, vcpuCapacity float64) (metrics.Charts, error)
	TeamSeries(ctx context.Context, s domain.Settings, team string, r metrics.Range) (metrics.TeamCharts, error)
}

// UsageReporter computes the usage report (*metrics.Prom).
type UsageReporter interface {
	UsageReport(ctx context.Context, s domain.Settings, from, to time.Time) ([]metrics.UsageRow, error)
}

// DefaultKueueConfigMap is where Kueue's manifests and Helm chart keep its
// configuration.
var DefaultKueueConfigMap = kueue.ConfigMapRef{Namespace: "kueue-system", Name: "kueue-manager-config", Key: "controller_manager_config.yaml"}

// New builds the console's HTTP server. Every answer carries security headers
// (CSP, nosniff, no framing); request bodies are limited to MaxBodyBytes;
// every route except /healthz, /readyz, /metrics, /static and the sign-in
// page needs a user (d.Auth); every state-changing request must pass the
// CSRF check.
func New(d Deps) *echo.Echo {
	if d.Auth == nil {
		d.Auth = &auth.Authenticator{Mode: auth.ModeNone}
	}
	d.access = kueue.NewAccess(d.Applier.Kube)
	d.writes = write.Service{Settings: d.Settings, Cache: d.Cache, Live: d.Live, Applier: d.Applier, Access: d.access, Log: d.Log}
	d.streams = newStreamGate(d.StreamLimits)
	d.exports, d.summaries = newExportGate(d.ExportLimits), make(chan struct{}, summaryConcurrency)
	d.historyWarnings = &warnings{}
	if d.Live != nil && d.Metrics != nil {
		d.Live.SetObserver(func(kind string, took time.Duration) {
			d.Metrics.ReadModelUpdate.WithLabelValues(kind).Observe(took.Seconds())
		})
	}
	d.fairSharing = &memo.Memo[bool]{TTL: 30 * time.Second, FailureTTL: 5 * time.Second}
	d.drifted = &memo.Memo[map[string]bool]{TTL: 5 * time.Second, FailureTTL: 5 * time.Second}
	d.historyFacts = &memo.Memo[*taskhistory.WindowStats]{TTL: historyTTL, FailureTTL: historyTTL}
	d.rates = &memo.Memo[taskhistory.AdmissionRates]{TTL: rateTTL, FailureTTL: historyTTL}
	d.teamPreempted = &memo.Memo[preemptedBy]{TTL: historyTTL, FailureTTL: historyTTL}
	d.usageSummaries = &memo.Memo[*taskhistory.UsageSummary]{TTL: reportTTL, FailureTTL: historyTTL, Max: 64}
	if d.Applier.Kueue != nil {
		d.positions = kueue.NewPositions(d.Applier.Kueue, 15*time.Second)
	}
	d.renderer = newLiveRenderer()
	d.hub = newLiveHub(d)
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = errorHandler(d.Log)
	e.Use(middleware.Recover())
	e.Use(d.Metrics.Middleware())
	e.Use(requestLogger(d.Log))
	e.Use(securityHeaders(d.secure))
	e.Use(middleware.BodyLimit(fmt.Sprint(MaxBodyBytes)))
	e.Use(writeDeadline(DefaultTimeouts.Write))
	e.Use(d.Auth.Middleware(isPublic))
	e.Use(d.Auth.CSRF(isProbeOrStatic))
	e.Use(d.readAccess())

	if d.Auth.ModeOf() == auth.ModeToken {
		d.signInRoutes(e)
	}
	e.GET("/healthz", func(c echo.Context) error { return c.String(http.StatusOK, "ok") })
	e.GET("/readyz", d.readyz)
	e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(d.Metrics.Registry, promhttp.HandlerOpts{})))
	e.StaticFS("/static", static.FS)

	e.GET("/", d.overview)
	e.GET("/policy", d.showPolicy)
	e.POST("/policy", d.savePolicy)
	e.GET("/usage", d.usage)
	e.GET("/usage/:team", d.teamUsage)
	e.GET("/tasks", d.tasks)
	e.GET("/reports/usage", d.usageReport)
	e.GET("/preemptions", d.preemptions)
	e.GET("/events", d.events)
	e.GET("/teams", d.teams)
	e.GET("/teams/new", d.newTeam)
	e.POST("/teams", d.createTeam)
	e.GET("/teams/derive", d.deriveQuota)
	e.GET("/teams/:team/edit", d.editTeam)
	e.POST("/teams/:team", d.updateTeam)
	e.GET("/teams/:team/delete", d.confirmDeleteTeam)
	e.POST("/teams/:team/delete", d.deleteTeam)
	e.GET("/teams/:team/history", d.teamHistory)
	e.POST("/teams/:team/history/:rev/rollback", d.rollbackTeam)
	e.GET("/teams/:team/drift", d.teamDrift)
	e.POST("/teams/:team/drift/reapply", d.reapplyTeam)
	e.POST("/teams/:team/drift/adopt", d.adoptTeam)
	e.GET("/policy/history", d.policyHistory)
	e.POST("/policy/history/:rev/rollback", d.rollbackPolicy)
	e.POST("/policy/drift/reapply", d.reapplyPolicy)
	return e
}

// teamURL is the address of a team's page ("edit", "history", "drift"; ""
// for the team itself).
func teamURL(team, page string) string {
	u := "/teams/" + url.PathEscape(team)
	if page != "" {
		u += "/" + page
	}
	return u
}

func (d Deps) readyz(c echo.Context) error {
	if err := d.Cache.Ready(); err != nil {
		return c.String(http.StatusServiceUnavailable, err.Error())
	}
	return c.String(http.StatusOK, "ok")
}

// render writes a templ component with the given status.
func render(c echo.Context, status int, component templ.Component) error {
	ctx := viewerContext(c) // may set a cookie: before the header is written
	c.Response().Header().Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
	c.Response().WriteHeader(status)
	// Pages are up to a few hundred kilobytes written in small pieces: in
	// 64 KiB chunks they take a few system calls instead of a hundred.
	w := pageBuffers.Get().(*bufio.Writer)
	defer func() {
		w.Reset(nil) // keep no response in the pool
		pageBuffers.Put(w)
	}()
	w.Reset(c.Response())
	if err := component.Render(ctx, w); err != nil {
		return err
	}
	return w.Flush()
}

var pageBuffers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 64<<10) }}

// problem explains, in words, why live data is missing, incomplete or old.
func (d Deps) problem() string {
	if err := d.Cache.Ready(); err != nil {
		return "Live data is incomplete: " + err.Error() + "."
	}
	if ok, since := d.Cache.Reachable(); !ok {
		return fmt.Sprintf("The cluster has not answered since %s: the figures are as they were then (%s old).",
			since.Format(time.TimeOnly), time.Since(since).Round(time.Second))
	}
	return ""
}

func requestLogger(log *slog.Logger) echo.MiddlewareFunc {
	return middleware.RequestLoggerWithConfig(middleware.RequestLoggerConfig{
		LogStatus: true, LogURI: true, LogMethod: true, LogLatency: true, LogError: true,
		LogValuesFunc: func(c echo.Context, v middleware.RequestLoggerValues) error {
			level := slog.LevelDebug
			if v.Status >= 500 && c.Path() != "/readyz" {
				level = slog.LevelError
			}
			log.Log(c.Request().Context(), level, "request", "method", v.Method, "uri", v.URI,
				"status", v.Status, "latency", v.Latency, "err", v.Error)
			return nil
		},
	})
}

// errorHandler logs server errors and answers without leaking internals.
func errorHandler(log *slog.Logger) echo.HTTPErrorHandler {
	return func(err error, c echo.Context) {
		if c.Response().Committed {
			return
		}
		code := http.StatusInternalServerError
		msg := "Something went wrong on the console's side; the error was logged."
		if he, ok := err.(*echo.HTTPError); ok {
			code = he.Code
			if m, ok := he.Message.(string); ok {
				msg = m
			} else {
				msg = http.StatusText(code)
			}
		}
		if code >= 500 {
			log.Error("request failed", "uri", c.Request().RequestURI, "err", err)
		}
		r := c.Request()
		if r.Method == http.MethodGet && r.Header.Get("X-Live") == "" && strings.Contains(r.Header.Get(echo.HeaderAccept), "text/html") {
			_ = render(c, code, templates.ErrorPage(templates.ErrorView{Page: templates.Page{Title: http.StatusText(code)}, Message: msg}))
			return
		}
		_ = c.String(code, msg)
	}
}
