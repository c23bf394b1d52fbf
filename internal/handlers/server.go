// Package handlers holds the console's HTTP server: routes, middleware
// (security headers, sign-in, CSRF, read access, request metrics) and one
// file per page or action. A page reads what it shows through the two or
// three small interfaces of its page type (a read model snapshot, the
// teams, the task history's queries, Prometheus) and renders a view model
// (package templates); a change parses its form, calls the write path
// (package write, behind the Writes interface) and answers its outcome
// with respond. The console's parts are built and wired by package app;
// tests give the pages in-memory fakes of the same interfaces.
//
// Handlers never call the apiserver, the task history's database or
// Prometheus themselves: they must not import client-go's clientsets or
// tools, Kueue's client-go, apimachinery's error and wait helpers, or
// database drivers, and not the console's app package.
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
	"unsafe"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/auth"
	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/form"
	"github.com/openquota/console/internal/kueue"
	"github.com/openquota/console/internal/metrics"
	"github.com/openquota/console/internal/taskhistory"
	"github.com/openquota/console/internal/write"
	"github.com/openquota/console/web/static"
	"github.com/openquota/console/web/templates"
)

// Config is what the pages read from and write to, each source as one
// small interface; package app gives them the console's real parts.
type Config struct {
	Settings domain.Settings
	Log      *slog.Logger
	Metrics  *metrics.Console
	// Auth decides who each request comes from. nil is auth mode none: no
	// sign-in, writes with the console's own identity (cmd/console allows
	// it only on loopback addresses). In proxy and token mode the cluster is
	// asked what the signed-in user may see and change; the console makes
	// the changes with its own identity.
	Auth   *auth.Authenticator
	Limits Limits
	// Shutdown ends live update streams when the server shuts down.
	Shutdown context.Context

	Health    Health
	ReadModel ReadModel
	Overview  ClusterOverview
	Teams     Teams
	Policy    Policy
	Revisions Revisions
	Access    Access
	Writes    Writes
	// TaskHistory is nil when the console has none at all; otherwise its
	// queries answer, or say why they cannot.
	TaskHistory TaskHistory
	// Prometheus is nil without --prometheus-url.
	Prometheus Prometheus
	// Positions are Kueue's own queue positions; nil without them.
	Positions QueuePositions
	WhatIf    WhatIf
	// Bindings read the RoleBindings of an imported team's namespaces;
	// nil pages say they cannot.
	Bindings TeamBindings
	// RecentUse is the LocalQueues' recent use, for teams that order by it;
	// nil shows none.
	RecentUse RecentUse
}

// Limits bound what one request or user may hold; zero values are the
// defaults.
type Limits struct {
	// Streams cap live update streams.
	Streams StreamLimits
	// StreamLifetime ends every live stream after this long.
	StreamLifetime time.Duration
	// StreamHeartbeat is how often a live stream says it is alive, with
	// the page's banner of what is missing (DefaultStreamHeartbeat when 0).
	StreamHeartbeat time.Duration
	// Exports cap the task history's CSV exports.
	Exports ExportLimits
}

// Health says whether the cluster's figures are complete and current
// (kueue.Cache).
type Health interface {
	// Ready is nil once the caches hold the whole cluster, else why not.
	Ready() error
	// Reachable says whether the apiserver answers, and since when it has
	// not.
	Reachable() (bool, time.Time)
}

// ReadModel is the live read model the dashboards show (kueue.Live).
type ReadModel interface {
	Snapshot() *domain.Snapshot
	// Subscribe tells what changed with every new snapshot (merged while
	// the reader is busy) until its stop is called.
	Subscribe() (changed <-chan domain.Changes, stop func())
}

// ClusterOverview is the cluster's capacity by instance type and its
// ClusterQueues.
type ClusterOverview interface {
	Overview() (domain.Overview, error)
	changeCount
}

// changeCount counts the changes of what the cache holds of the teams and
// the nodes: while it stays, so do the teams, their queues and the fleet,
// and a page keeps what it rendered of them.
type changeCount interface {
	Changes() uint64
	// Redefinitions counts only the changes of what the teams, their queues
	// and the nodes are, not of their status (the queues' usage): a page
	// of quotas keeps its rendering through Kueue's admissions.
	Redefinitions() uint64
}

// teamList is the teams the console manages, as the cache holds them.
type teamList interface {
	Teams() []domain.TeamState
}

// fleet is the instance shapes and how many instances of each type can
// take tasks.
type fleet interface {
	Fleet() (domain.ShapeLookup, map[string]int)
}

// teamLookup finds one managed team.
type teamLookup interface {
	// Team is a managed team with the allocation the console acts on; ok
	// is false when there is none.
	Team(name string) (cq *kueuev1beta2.ClusterQueue, team domain.Team, ok bool)
}

// Teams are the teams the console manages (the cache, through app).
type Teams interface {
	teamList
	teamLookup
	fleet
	changeCount
	// DriftedTeams names the teams whose Kueue objects were changed by hand.
	DriftedTeams() map[string]bool
	// Cohorts are the cohorts a team may be put in: the console's own and
	// those it created under it, by name.
	Cohorts() []string
}

// Policy is the stored cluster policy and what Kueue makes of it.
type Policy interface {
	Policy() domain.Policy
	// PolicyDrift is how the priority classes differ from the stored policy.
	PolicyDrift() ([]domain.Drift, error)
	// KueueSettings is what of Kueue's configuration the policy page
	// warns about (read at most every 30 seconds).
	KueueSettings(ctx context.Context) (domain.KueueSettings, error)
	kueueRecentUse
}

// kueueRecentUse is how Kueue counts recent use (its configuration's
// admissionFairSharing, read at most every 30 seconds); nil when it has
// none.
type kueueRecentUse interface {
	KueueRecentUse(ctx context.Context) (*domain.RecentUseConfig, error)
}

// RecentUse is the recent use of the LocalQueues feeding a ClusterQueue,
// least used first, as Kueue keeps it; known is false when Kueue's
// configuration could not be read.
type RecentUse interface {
	LocalQueueUses(ctx context.Context, clusterQueue string) (uses []domain.LocalQueueUse, cfg *domain.RecentUseConfig, known bool)
}

// Revisions are the revisions admins saved, newest first.
type Revisions interface {
	TeamRevisions(ctx context.Context, team string) ([]domain.TeamRevision, error)
	PolicyRevisions(ctx context.Context) ([]domain.PolicyRevision, error)
}

// Access answers whether a user may do something (kueue.Access:
// SubjectAccessReviews about them, remembered a while); known is false
// when the cluster could not say.
type Access interface {
	Allowed(ctx context.Context, id kueue.Identity, p kueue.Permission) (allowed, known bool)
}

// Writes are the changes the forms make (write.Service, the one write
// path).
type Writes interface {
	teamWrites
	revisionWrites
	driftWrites
	policyWrites
	importWrites
	cohortWrites
}

type teamWrites interface {
	SaveTeam(ctx context.Context, who kueue.Identity, req write.TeamSave) write.Outcome
	DeleteTeam(ctx context.Context, who kueue.Identity, team string) write.Outcome
	PreviewTeam(ctx context.Context, req write.TeamSave) (domain.Impact, write.Outcome)
	PreviewDeleteTeam(ctx context.Context, team string) (domain.Impact, write.Outcome)
}

type revisionWrites interface {
	RollbackTeam(ctx context.Context, who kueue.Identity, team string, revision int) write.Outcome
	RollbackPolicy(ctx context.Context, who kueue.Identity, revision int) write.Outcome
	ReapplyPolicy(ctx context.Context, who kueue.Identity) write.Outcome
}

type driftWrites interface {
	Adoption(team string) (write.Adoption, write.Outcome)
	ReapplyTeam(ctx context.Context, who kueue.Identity, team string) write.Outcome
	AdoptTeam(ctx context.Context, who kueue.Identity, team, fingerprint string) write.Outcome
}

type policyWrites interface {
	SavePolicy(ctx context.Context, who kueue.Identity, f form.PolicyForm) write.Outcome
	PreviewPolicy(ctx context.Context, f form.PolicyForm) (domain.Impact, write.Outcome)
	// SetRecentUseOrder sets every team's order of waiting tasks
	// (admission fair sharing) from the policy page.
	SetRecentUseOrder(ctx context.Context, who kueue.Identity, on bool) write.Outcome
}

// WhatIf answers what Kueue would do with a job if it were submitted now
// (Kueue's scheduler over the cache's copy of the cluster, through app).
type WhatIf interface {
	WhatIf(ctx context.Context, job domain.WhatIf) (domain.WhatIfAnswer, error)
}

// TaskHistory is the task history's queries (taskhistory.Store, through
// app). Each answers an error when there is no store to ask, and
// Available says so without asking.
type TaskHistory interface {
	taskhistoryAvailability
	taskStatistics
	preemptionHistory
	teamPreemptionCounts
	usageHistory
}

type taskhistoryAvailability interface {
	// Available is nil when there is a store to ask, else why there is none.
	Available() error
	// Recording is nil unless this replica records and the store refuses
	// or does not answer its writes: the pages still read what it holds.
	Recording() error
}

type taskStatistics interface {
	taskhistoryAvailability
	TaskStats(ctx context.Context, w taskhistory.Window) (*taskhistory.WindowStats, error)
	AdmissionRates(ctx context.Context, w taskhistory.Window) (taskhistory.AdmissionRates, error)
}

type preemptionHistory interface {
	Preemptions(ctx context.Context, q taskhistory.PreemptionQuery) (*taskhistory.PreemptionPage, error)
}

type teamPreemptionCounts interface {
	PreemptionsByTeam(ctx context.Context, w taskhistory.Window, team string) ([]taskhistory.PreemptedBy, []taskhistory.Period, error)
}

type usageHistory interface {
	taskhistoryAvailability
	UsageSummary(ctx context.Context, w taskhistory.Window) (*taskhistory.UsageSummary, error)
	TaskReport(ctx context.Context, q taskhistory.ReportQuery, each func(taskhistory.ReportRow) error) (next string, gaps []taskhistory.Period, err error)
}

// Prometheus is what the pages read from Prometheus (metrics.Cached).
type Prometheus interface {
	clusterCharts
	teamUtilization
	teamCharts
	usageReports
}

type clusterCharts interface {
	ClusterUtilization(ctx context.Context, r metrics.Range, vcpuCapacity float64) (metrics.Charts, error)
}

// teamUtilization are the held GPUs' and partitions' utilization by
// namespace (the handlers read them by team).
type teamUtilization interface {
	NamespaceGPUUtilization(ctx context.Context) (map[string]domain.Readings, error)
	NamespacePartitionUtilization(ctx context.Context) (map[string]map[string]domain.Readings, error)
	NamespaceGPUUtilizationOver(ctx context.Context, window time.Duration) (map[string][]float64, error)
}

type teamCharts interface {
	TeamSeries(ctx context.Context, q metrics.TeamQueue, r metrics.Range) (metrics.TeamCharts, error)
}

type usageReports interface {
	UsageReport(ctx context.Context, s domain.Settings, namespaces map[string]string, from, to time.Time) (metrics.Report, error)
}

// QueuePositions are Kueue's own queue positions (kueue.Positions, from its
// visibility API): the position of each pending Workload of a ClusterQueue
// by LocalQueue key; ok is false when Kueue did not answer.
type QueuePositions interface {
	Known(ctx context.Context, clusterQueue string) (positions map[string]int, ok bool)
}

// New builds the console's HTTP server. Every answer carries security headers
// (CSP, nosniff, no framing); request bodies are limited to MaxBodyBytes;
// every route except /healthz, /readyz, /metrics, /static and the sign-in
// page needs a user (cfg.Auth); every state-changing request must pass the
// CSRF check.
func New(cfg Config) *echo.Echo {
	if cfg.Auth == nil {
		cfg.Auth = &auth.Authenticator{Mode: auth.ModeNone}
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.NewConsole()
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	f := frame{settings: cfg.Settings, log: cfg.Log, auth: cfg.Auth, access: cfg.Access, teams: cfg.Teams,
		queues: cfg.ReadModel, health: cfg.Health, warnings: &warnings{}}
	var history TaskHistory = noTaskHistory{}
	if cfg.TaskHistory != nil {
		history = cfg.TaskHistory
	}
	var prom Prometheus = noPrometheus{}
	if cfg.Prometheus != nil {
		prom = cfg.Prometheus
	}
	feeds := &liveFeeds{utilization: &utilizationFeed{source: prom, log: cfg.Log},
		positions: &positionsFeed{source: cfg.Positions, queues: map[string]*askedPositions{}}}
	live := newLiveViews(cfg.ReadModel, feeds, cfg.Metrics, cfg.Log)
	exports := newExportGate(cfg.Limits.Exports)

	pieces, charts := newPieces(), newChartFeeds(prom)
	trees := &cohortTrees{overview: cfg.Overview}
	var insights *insightRules
	if cfg.ReadModel != nil && cfg.Overview != nil {
		insights = newInsightRules(cfg.ReadModel, cfg.Overview, feeds.utilization, history, cfg.Policy)
		feeds.insights = insights.latest
	}
	overview := overviewPage{frame: f, overview: cfg.Overview, trees: trees, model: cfg.ReadModel, charts: charts, pieces: pieces, kept: &kept[overviewTables]{},
		insights: insights}
	usage := usagePages{frame: f, model: cfg.ReadModel, live: live, charts: charts, preemptions: newTeamPreemptions(history), pieces: pieces, trees: trees,
		recentUse: cfg.RecentUse, insights: insights, drawn: &drawnCharts{}}
	tasks := newTasksPage(f, cfg.ReadModel, live, history)
	live.register("/tasks", liveRoute{affects: tasks.affects, parts: tasks.parts})
	live.register("/usage", liveRoute{affects: usage.usageAffects, parts: usage.usageParts})
	live.register("/usage/:team", liveRoute{affects: usage.teamUsageAffects, parts: usage.teamUsageParts})
	insightsList := insightsPage{frame: f, rules: insights, model: cfg.ReadModel, live: live}
	if insights != nil {
		live.register("/insights", liveRoute{affects: insightsList.insightsAffects, parts: insightsList.insightsParts, watched: feeds.insights.watched})
	}
	preemptions := preemptionsPage{frame: f, model: cfg.ReadModel, taskHistory: history, exports: exports}
	report := reportPage{frame: f, model: cfg.ReadModel, taskHistory: history, prometheus: prom, exports: exports, summaries: newSummaries(history), taskPages: newTaskPages(history),
		summaryRows: &kept[[]templ.Component]{}, summaryFacts: &kept[summaryFacts]{}, pieces: pieces, teamFilters: newTeamFilters("Team"), bodies: &bodies{}}
	teams := teamPages{frame: f, teams: cfg.Teams, model: cfg.ReadModel, writes: cfg.Writes, bindings: cfg.Bindings, kueueConfig: cfg.Policy,
		pieces: pieces, kept: &kept[teamsTables]{}}
	revisions := revisionPages{frame: f, teams: cfg.Teams, revisions: cfg.Revisions, policy: cfg.Policy, writes: cfg.Writes}
	drift := driftPages{frame: f, writes: cfg.Writes}
	imports := queueImportPages{frame: f, writes: cfg.Writes, model: cfg.ReadModel, bindings: cfg.Bindings}
	cohorts := cohortPages{frame: f, overview: cfg.Overview, teams: cfg.Teams, writes: cfg.Writes}
	policy := policyPage{frame: f, policy: cfg.Policy, writes: cfg.Writes, orders: &recentUseOrders{}}
	whatIf := whatIfPage{frame: f, teams: cfg.Teams, whatIf: cfg.WhatIf, rates: newAdmissionRates(history)}
	streams := liveStreams{frame: f, live: live, gate: newStreamGate(cfg.Limits.Streams), lifetime: cfg.Limits.StreamLifetime, heartbeat: cfg.Limits.StreamHeartbeat,
		shutdown: cfg.Shutdown, metrics: cfg.Metrics}

	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = errorHandler(cfg.Log)
	e.Pre(headAsGet)
	e.Use(middleware.Recover())
	e.Use(requestMetrics(cfg.Metrics))
	e.Use(requestLogger(cfg.Log))
	e.Use(securityHeaders(cfg.Auth.Secure))
	e.Use(middleware.BodyLimit(fmt.Sprint(MaxBodyBytes)))
	e.Use(writeDeadline(DefaultTimeouts.Write))
	e.Use(cfg.Auth.Middleware(isPublic))
	e.Use(cfg.Auth.CSRF(isProbeOrStatic))
	e.Use(f.readAccess())

	if cfg.Auth.ModeOf() == auth.ModeToken {
		signInRoutes(e, f)
	}
	e.GET("/healthz", func(c echo.Context) error { return c.String(http.StatusOK, "ok") })
	e.GET("/readyz", f.readyz)
	e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(cfg.Metrics.Registry, promhttp.HandlerOpts{})))
	e.StaticFS("/static", static.FS)

	liveCSV := f.liveExport
	e.GET("/", overview.show, liveCSV)
	if insights != nil {
		e.GET("/insights", insightsList.show, liveCSV)
	}
	e.GET("/policy", policy.show)
	e.POST("/policy", policy.save)
	e.POST("/policy/recent-use", policy.setRecentUse)
	e.GET("/usage", usage.usage, liveCSV)
	e.GET("/usage/:team", usage.teamUsage, liveCSV)
	e.GET("/tasks", tasks.show, liveCSV)
	e.GET("/whatif", whatIf.show)
	e.GET("/reports/usage", report.show)
	e.GET("/preemptions", preemptions.show)
	e.GET("/events", streams.serve)
	e.GET("/teams", teams.list, liveCSV)
	e.GET("/teams/new", teams.newTeam)
	e.POST("/teams", teams.createTeam)
	e.GET("/teams/derive", teams.deriveQuota)
	e.GET("/teams/:team/edit", teams.editTeam)
	e.POST("/teams/:team", teams.updateTeam)
	e.GET("/teams/:team/delete", teams.confirmDelete)
	e.POST("/teams/:team/delete", teams.deleteTeam)
	e.GET("/teams/:team/history", revisions.teamRevisions)
	e.POST("/teams/:team/history/:rev/rollback", revisions.rollbackTeam)
	e.GET("/teams/:team/drift", drift.show)
	e.POST("/teams/:team/drift/reapply", drift.reapply)
	e.POST("/teams/:team/drift/adopt", drift.adopt)
	cohortsOnly, importsOnly := f.platformOnly("The cohorts page"), f.platformOnly("Importing and releasing ClusterQueues")
	e.GET("/cohorts", cohorts.list, cohortsOnly, liveCSV)
	e.POST("/cohorts", cohorts.save, cohortsOnly)
	e.GET("/cohorts/:cohort/edit", cohorts.edit, cohortsOnly)
	e.POST("/cohorts/:cohort/delete", cohorts.remove, cohortsOnly)
	e.GET("/queues/:queue/import", imports.showImport, importsOnly)
	e.GET("/queues/import", imports.showImport, importsOnly)
	e.POST("/queues/import", imports.importQueues, importsOnly)
	e.GET("/queues/:queue/release", imports.showRelease, importsOnly)
	e.POST("/queues/:queue/release", imports.releaseQueue, importsOnly)
	e.GET("/policy/history", revisions.policyRevisions)
	e.POST("/policy/history/:rev/rollback", revisions.rollbackPolicy)
	e.POST("/policy/drift/reapply", revisions.reapplyPolicy)
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

// importURL is the preview of importing a ClusterQueue the console does not
// manage.
func importURL(clusterQueue string) string {
	return "/queues/" + url.PathEscape(clusterQueue) + "/import"
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
	w.Reset(bodyWriter{c.Response()})
	if err := component.Render(ctx, pageWriter{w}); err != nil {
		return err
	}
	return w.Flush()
}

// directBytes is the length from which a string does not fit in the page
// buffer's rest goes to the response as it is, after what is buffered.
const directBytes = 16 << 10

// pageWriter is the page buffer, which copies no large string: a page's
// kept parts (up to hundreds of kilobytes) go to the response as they are.
type pageWriter struct{ *bufio.Writer }

func (w pageWriter) WriteString(s string) (int, error) {
	if len(s) >= directBytes && len(s) > w.Available() && w.Buffered() > 0 {
		if err := w.Flush(); err != nil {
			return 0, err
		}
	}
	return w.Writer.WriteString(s) // with nothing buffered, bufio passes s on
}

var pageBuffers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 64<<10) }}

// bodyWriter writes strings to the response as they are, so that the page
// buffer can pass them on.
type bodyWriter struct{ r *echo.Response }

func (w bodyWriter) Write(p []byte) (int, error) { return w.r.Write(p) }

// WriteString gives the response the string's own bytes: a writer must
// neither change nor keep what it is given (io.Writer).
func (w bodyWriter) WriteString(s string) (int, error) {
	return w.r.Write(unsafe.Slice(unsafe.StringData(s), len(s)))
}

func requestLogger(log *slog.Logger) echo.MiddlewareFunc {
	return middleware.RequestLoggerWithConfig(middleware.RequestLoggerConfig{
		LogStatus: true, LogURI: true, LogMethod: true, LogLatency: true, LogError: true,
		LogValuesFunc: func(c echo.Context, v middleware.RequestLoggerValues) error {
			level := slog.LevelDebug
			if v.Status >= 500 && c.Path() != "/readyz" {
				level = slog.LevelError
			}
			if !log.Enabled(c.Request().Context(), level) {
				return nil
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

// headAsGet answers HEAD wherever GET answers (RFC 9110; monitors probe
// with it): the request is routed as a GET (echo routes the request the
// server holds, so its method is changed in place) and its body is not
// sent. The live stream, which would stay open, is left out.
func headAsGet(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if r := c.Request(); r.Method == http.MethodHead && r.URL.Path != "/events" {
			r.Method = http.MethodGet
			c.Response().Writer = noBody{c.Response().Writer}
		}
		return next(c)
	}
}

// noBody sends a response's headers and drops its body.
type noBody struct{ http.ResponseWriter }

func (noBody) Write(p []byte) (int, error) { return len(p), nil }

// Unwrap lets http.ResponseController reach the server's writer.
func (w noBody) Unwrap() http.ResponseWriter { return w.ResponseWriter }
