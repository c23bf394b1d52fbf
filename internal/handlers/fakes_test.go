package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/auth"
	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/form"
	"github.com/openquota/console/internal/handlers"
	"github.com/openquota/console/internal/kueue"
	"github.com/openquota/console/internal/kueuetest"
	"github.com/openquota/console/internal/metrics"
	"github.com/openquota/console/internal/taskhistory"
	"github.com/openquota/console/internal/webtest"
	"github.com/openquota/console/internal/write"
)

// The pages' tests run on in-memory fakes of the interfaces the handlers
// use (this file); the integration tests of package app run the same pages
// on the sandbox.

// readModel is a read model whose snapshots the test publishes.
type readModel struct {
	mu   sync.Mutex
	snap *domain.Snapshot
	subs map[chan domain.Changes]struct{}
}

func newReadModel(snap *domain.Snapshot) *readModel {
	m := &readModel{subs: map[chan domain.Changes]struct{}{}}
	m.publish(snap)
	return m
}

func (m *readModel) Snapshot() *domain.Snapshot {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.snap
}

func (m *readModel) Subscribe() (<-chan domain.Changes, func()) {
	ch := make(chan domain.Changes, 1)
	m.mu.Lock()
	m.subs[ch] = struct{}{}
	m.mu.Unlock()
	return ch, func() {
		m.mu.Lock()
		delete(m.subs, ch)
		m.mu.Unlock()
	}
}

// publish makes snap the next version and tells the subscribers what
// changed, as kueue.Live does.
func (m *readModel) publish(snap *domain.Snapshot) {
	m.mu.Lock()
	defer m.mu.Unlock()
	snap.Version = 1
	if m.snap != nil {
		snap.Version = m.snap.Version + 1
	}
	changed := domain.ChangesBetween(m.snap, snap)
	m.snap = snap
	for ch := range m.subs {
		select {
		case earlier := <-ch:
			earlier.Add(changed)
			ch <- earlier
		default:
			ch <- changed
		}
	}
}

// cluster is what the pages read of the cluster: health, capacity, the
// managed teams, the policy and the revisions.
type cluster struct {
	mu        sync.Mutex
	ready     error
	reachable bool
	since     time.Time
	overview  domain.Overview
	teams     []domain.TeamState
	available map[string]int
	drifted   map[string]bool
	cohorts   []string
	policy    domain.Policy
	drift     []domain.Drift
	// fairSharing and managesJobsWithoutQueue are Kueue's settings;
	// fairSharingErr why they cannot be read.
	fairSharing, managesJobsWithoutQueue bool
	fairSharingErr                       error
	// recentUse is Kueue's admission fair sharing; uses the LocalQueues'
	// recent use by ClusterQueue.
	recentUse     *domain.RecentUseConfig
	uses          map[string][]domain.LocalQueueUse
	teamRevisions map[string][]domain.TeamRevision
	policyRevs    []domain.PolicyRevision
	revisionsErr  error
	// Tests change the fields above as they like: unless unchanged says
	// they will not, every read counts as a change.
	unchanged bool
	changes   atomic.Uint64
}

func (c *cluster) Ready() error { return c.ready }
func (c *cluster) Changes() uint64 {
	if c.unchanged {
		return c.changes.Load()
	}
	return c.changes.Add(1)
}
func (c *cluster) Redefinitions() uint64 { return c.Changes() }
func (c *cluster) Reachable() (bool, time.Time) {
	return c.reachable, c.since
}
func (c *cluster) Overview() (domain.Overview, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.overview, nil
}
func (c *cluster) Teams() []domain.TeamState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]domain.TeamState(nil), c.teams...)
}
func (c *cluster) Team(name string) (*kueuev1beta2.ClusterQueue, domain.Team, bool) {
	for _, t := range c.Teams() {
		if t.Name == name {
			return t.ClusterQueue, t.Team, true
		}
	}
	return nil, domain.Team{}, false
}
func (c *cluster) Fleet() (domain.ShapeLookup, map[string]int) {
	return domain.LookupShape, c.available
}
func (c *cluster) DriftedTeams() map[string]bool        { return c.drifted }
func (c *cluster) Cohorts() []string                    { return c.cohorts }
func (c *cluster) Policy() domain.Policy                { return c.policy }
func (c *cluster) PolicyDrift() ([]domain.Drift, error) { return c.drift, nil }
func (c *cluster) KueueSettings(context.Context) (domain.KueueSettings, error) {
	return domain.KueueSettings{FairSharing: c.fairSharing, ManagesJobsWithoutQueue: c.managesJobsWithoutQueue}, c.fairSharingErr
}
func (c *cluster) TeamRevisions(_ context.Context, team string) ([]domain.TeamRevision, error) {
	return c.teamRevisions[team], c.revisionsErr
}
func (c *cluster) PolicyRevisions(context.Context) ([]domain.PolicyRevision, error) {
	return c.policyRevs, c.revisionsErr
}

// addTeam makes team one the console manages.
func (c *cluster) addTeam(s domain.Settings, t domain.Team) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.teams = append(c.teams, domain.TeamState{Team: t, ClusterQueue: kueuetest.MakeClusterQueue(s.ClusterQueue(t.Name)).Obj()})
}

// access answers what each user may do: the permissions they hold, by
// user name ("" is the console itself); unknown users may do nothing.
type access struct {
	mu      sync.Mutex
	allowed map[string][]kueue.Permission
	// unknown: the cluster does not answer; unsure: it does not answer
	// about these (verb and resource).
	unknown bool
	unsure  []kueue.Permission
}

func (a *access) Allowed(_ context.Context, id kueue.Identity, p kueue.Permission) (bool, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.unknown || slices.ContainsFunc(a.unsure, func(u kueue.Permission) bool { return u.Verb == p.Verb && u.Resource == p.Resource }) {
		return false, false
	}
	for _, held := range a.allowed[id.Name] {
		if held.Verb == p.Verb && held.Group == p.Group && held.Resource == p.Resource && (held.Namespace == "" || held.Namespace == p.Namespace) {
			return true, true
		}
	}
	return false, true
}

// grant lets user do perms.
func (a *access) grant(user string, perms ...kueue.Permission) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.allowed == nil {
		a.allowed = map[string][]kueue.Permission{}
	}
	a.allowed[user] = append(a.allowed[user], perms...)
}

// The rights of the roles, as the pages ask for them.
var (
	listClusterQueues = kueue.Permission{Verb: "list", Group: "kueue.x-k8s.io", Resource: "clusterqueues"}
	editTeams         = kueue.Permission{Verb: "patch", Group: "kueue.x-k8s.io", Resource: "clusterqueues"}
	deleteTeams       = kueue.Permission{Verb: "delete", Group: "kueue.x-k8s.io", Resource: "clusterqueues"}
	editPolicy        = kueue.Permission{Verb: "patch", Group: "kueue.x-k8s.io", Resource: "workloadpriorityclasses"}
)

func listWorkloads(namespace string) kueue.Permission {
	return kueue.Permission{Verb: "list", Group: "kueue.x-k8s.io", Resource: "workloads", Namespace: namespace}
}

// writes is the write path: it records each change asked for, by whom,
// and answers outcome (Saved with a message by default).
type writes struct {
	mu      sync.Mutex
	calls   []string
	outcome *write.Outcome
	// impact is what a preview answers; previews are the ones asked.
	impact   domain.Impact
	previews []string
	// served are the namespaces an import plan names, by queue.
	served map[string][]string
}

// preview records a preview (it writes nothing, so it is no change made).
func (w *writes) preview(call string) (domain.Impact, write.Outcome) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.previews = append(w.previews, call)
	if w.outcome != nil && w.outcome.Kind != write.Saved {
		return domain.Impact{}, *w.outcome
	}
	return w.impact, write.Outcome{}
}

func (w *writes) PreviewTeam(_ context.Context, req write.TeamSave) (domain.Impact, write.Outcome) {
	return w.preview("PreviewTeam " + req.Form.Name)
}
func (w *writes) PreviewDeleteTeam(_ context.Context, team string) (domain.Impact, write.Outcome) {
	return w.preview("PreviewDeleteTeam " + team)
}
func (w *writes) PreviewCohort(context.Context, form.CohortForm) (domain.Impact, write.Outcome) {
	return w.preview("PreviewCohort")
}
func (w *writes) PreviewPolicy(context.Context, form.PolicyForm) (domain.Impact, write.Outcome) {
	return w.preview("PreviewPolicy")
}

func (w *writes) answer(call string, who kueue.Identity) write.Outcome {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls = append(w.calls, call+" by "+who.Name)
	if w.outcome != nil {
		return *w.outcome
	}
	return write.Outcome{Kind: write.Saved, Message: call + " done."}
}

func (w *writes) made() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.calls...)
}

func (w *writes) SaveTeam(_ context.Context, who kueue.Identity, req write.TeamSave) write.Outcome {
	return w.answer("save team "+req.Form.Name, who)
}
func (w *writes) DeleteTeam(_ context.Context, who kueue.Identity, team string) write.Outcome {
	return w.answer("delete team "+team, who)
}
func (w *writes) RollbackTeam(_ context.Context, who kueue.Identity, team string, _ int) write.Outcome {
	return w.answer("roll back team "+team, who)
}
func (w *writes) RollbackPolicy(_ context.Context, who kueue.Identity, _ int) write.Outcome {
	return w.answer("roll back the policy", who)
}
func (w *writes) ReapplyPolicy(_ context.Context, who kueue.Identity) write.Outcome {
	return w.answer("re-apply the policy", who)
}
func (w *writes) Adoption(string) (write.Adoption, write.Outcome) {
	return write.Adoption{}, write.Outcome{}
}
func (w *writes) ReapplyTeam(_ context.Context, who kueue.Identity, team string) write.Outcome {
	return w.answer("re-apply team "+team, who)
}
func (w *writes) AdoptTeam(_ context.Context, who kueue.Identity, team, _ string) write.Outcome {
	return w.answer("adopt team "+team, who)
}
func (w *writes) ImportPlan(queue string) (domain.QueueImport, write.Outcome) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return domain.QueueImport{ClusterQueue: queue, Team: domain.Team{Name: queue}, Fingerprint: "fp-" + queue, Namespaces: w.served[queue],
		Writes: []domain.FieldWrite{{Object: "ClusterQueue " + queue, Field: "metadata.labels[app.kubernetes.io/managed-by]", Before: "(none)", After: `"quota-console"`}}}, write.Outcome{}
}
func (w *writes) ImportQueues(_ context.Context, who kueue.Identity, queues []write.QueuePreviewed) write.Outcome {
	var names []string
	for _, q := range queues {
		names = append(names, q.Queue+" as previewed in "+q.Fingerprint)
	}
	return w.answer("import "+strings.Join(names, ", "), who)
}
func (w *writes) ReleasePlan(queue string) (string, []domain.FieldWrite, write.Outcome) {
	return queue, []domain.FieldWrite{{Object: "ClusterQueue " + queue, Field: "metadata.labels[app.kubernetes.io/managed-by]", Before: `"quota-console"`, After: "none"}}, write.Outcome{}
}
func (w *writes) ReleaseQueue(_ context.Context, who kueue.Identity, queue string) write.Outcome {
	return w.answer("release "+queue, who)
}
func (w *writes) SaveCohort(_ context.Context, who kueue.Identity, f form.CohortForm) write.Outcome {
	return w.answer("save cohort "+f.Suffix+" under "+f.Parent, who)
}
func (w *writes) DeleteCohort(_ context.Context, who kueue.Identity, name string) write.Outcome {
	return w.answer("delete cohort "+name, who)
}
func (w *writes) CohortForEdit(name string) (domain.CohortAllocation, write.Outcome) {
	return domain.CohortAllocation{Name: name, Parent: domain.DefaultSettings.Cohort}, write.Outcome{}
}
func (w *writes) SavePolicy(_ context.Context, who kueue.Identity, _ form.PolicyForm) write.Outcome {
	return w.answer("save the policy", who)
}

func (w *writes) SetRecentUseOrder(_ context.Context, who kueue.Identity, on bool) write.Outcome {
	return w.answer(fmt.Sprintf("order every team by recent use %v", on), who)
}

// taskHistory answers the pages' queries from memory, or fails with err.
type taskHistory struct {
	err         error
	stats       taskhistory.WindowStats
	rates       taskhistory.AdmissionRates
	preemptions []taskhistory.Preemption
	byTeam      []taskhistory.PreemptedBy
	summary     taskhistory.UsageSummary
	report      []taskhistory.ReportRow
	summaries   atomic.Int64 // UsageSummary calls
	// preemptionQuery is the last query of Preemptions; reportQuery of
	// TaskReport.
	preemptionQuery taskhistory.PreemptionQuery
	reportQuery     taskhistory.ReportQuery
	// recording is why the recorder cannot write (nil: it can).
	recording error
}

func (h *taskHistory) Available() error { return h.err }
func (h *taskHistory) Recording() error { return h.recording }
func (h *taskHistory) TaskStats(context.Context, taskhistory.Window) (*taskhistory.WindowStats, error) {
	if h.err != nil {
		return nil, h.err
	}
	st := h.stats
	return &st, nil
}
func (h *taskHistory) AdmissionRates(context.Context, taskhistory.Window) (taskhistory.AdmissionRates, error) {
	return h.rates, h.err
}
func (h *taskHistory) Preemptions(_ context.Context, q taskhistory.PreemptionQuery) (*taskhistory.PreemptionPage, error) {
	if h.err != nil {
		return nil, h.err
	}
	h.preemptionQuery = q
	page := &taskhistory.PreemptionPage{}
	for _, p := range h.preemptions {
		if (q.Team == "" || p.Task.Team == q.Team) && (q.Teams == nil || contains(q.Teams, p.Task.Team)) {
			page.Preemptions = append(page.Preemptions, p)
		}
	}
	page.Total = int64(len(page.Preemptions))
	return page, nil
}
func (h *taskHistory) PreemptionsByTeam(context.Context, taskhistory.Window, string) ([]taskhistory.PreemptedBy, []taskhistory.Period, error) {
	return h.byTeam, nil, h.err
}
func (h *taskHistory) UsageSummary(_ context.Context, w taskhistory.Window) (*taskhistory.UsageSummary, error) {
	if h.err != nil {
		return nil, h.err
	}
	h.summaries.Add(1)
	in := func(day time.Time) bool { return !day.Before(w.From.Truncate(24*time.Hour)) && day.Before(w.To) }
	s := taskhistory.UsageSummary{UpTo: h.summary.UpTo}
	for _, r := range h.summary.Rows {
		if in(r.Day) {
			s.Rows = append(s.Rows, r)
		}
	}
	for _, d := range h.summary.Days {
		if in(d.Day) {
			s.Days = append(s.Days, d)
		}
	}
	return &s, nil
}
func (h *taskHistory) TaskReport(_ context.Context, q taskhistory.ReportQuery, each func(taskhistory.ReportRow) error) (string, []taskhistory.Period, error) {
	if h.err != nil {
		return "", nil, h.err
	}
	h.reportQuery = q
	for _, r := range h.report {
		if err := each(r); err != nil {
			return "", nil, err
		}
	}
	return "", nil, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// positions are Kueue's own queue positions, by ClusterQueue.
type positions map[string]map[string]int

func (p positions) Known(_ context.Context, clusterQueue string) (map[string]int, bool) {
	pos, ok := p[clusterQueue]
	return pos, ok
}

// whatIfs answers every what-if with answer, or fails with err, and
// records the jobs asked about.
type whatIfs struct {
	mu     sync.Mutex
	answer domain.WhatIfAnswer
	err    error
	asked  []domain.WhatIf
}

func (w *whatIfs) WhatIf(_ context.Context, job domain.WhatIf) (domain.WhatIfAnswer, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.asked = append(w.asked, job)
	return w.answer, w.err
}

func (w *whatIfs) jobs() []domain.WhatIf {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]domain.WhatIf(nil), w.asked...)
}

// prometheus answers its figures, or fails with err: each namespace's
// utilization as one GPU's reading.
type prometheus struct {
	err        error
	util       map[string]float64            // by namespace
	partitions map[string]map[string]float64 // by namespace and MIG profile
	// over is each GPU's utilization over the idle window, by namespace;
	// nil answers util, as one GPU's reading a namespace.
	over map[string][]float64
	// report is the usage report it answers.
	report metrics.Report
}

func (p prometheus) ClusterUtilization(context.Context, metrics.Range, float64) (metrics.Charts, error) {
	return metrics.Charts{}, p.err
}
func (p prometheus) NamespaceGPUUtilization(context.Context) (map[string]domain.Readings, error) {
	return oneGPUEach(p.util), p.err
}
func (p prometheus) NamespacePartitionUtilization(context.Context) (map[string]map[string]domain.Readings, error) {
	out := map[string]map[string]domain.Readings{}
	for ns, profiles := range p.partitions {
		out[ns] = oneGPUEach(profiles)
	}
	return out, p.err
}
func (p prometheus) NamespaceGPUUtilizationOver(context.Context, time.Duration) (map[string][]float64, error) {
	if p.over != nil || p.util == nil {
		return p.over, p.err
	}
	out := make(map[string][]float64, len(p.util))
	for ns, v := range p.util {
		out[ns] = []float64{v}
	}
	return out, p.err
}

func oneGPUEach(m map[string]float64) map[string]domain.Readings {
	if m == nil {
		return nil
	}
	out := make(map[string]domain.Readings, len(m))
	for k, v := range m {
		out[k] = domain.Readings{Sum: v, Count: 1}
	}
	return out
}

func (p prometheus) TeamSeries(context.Context, metrics.TeamQueue, metrics.Range) (metrics.TeamCharts, error) {
	return metrics.TeamCharts{}, p.err
}
func (p prometheus) UsageReport(context.Context, domain.Settings, map[string]string, time.Time, time.Time) (metrics.Report, error) {
	return p.report, p.err
}

// fixture is a console on fakes: a synthetic cluster of teams and
// Workloads, every team managed, no sign-in; a test changes what it needs
// before handler.
type fixture struct {
	settings domain.Settings
	cfg      handlers.Config
	model    *readModel
	cluster  *cluster
	access   *access
	writes   *writes
	whatIf   *whatIfs
}

// newFixture is a console on a synthetic cluster of teams teams and
// workloads Workloads (see kueuetest.Cluster).
func newFixture(t testing.TB, teams, workloads int) *fixture {
	t.Helper()
	s := domain.DefaultSettings
	now := time.Now()
	objs := kueuetest.Cluster(s, s.Cohort, teams, workloads, now)
	f := &fixture{settings: s, model: newReadModel(snapshotOf(s, objs, now)), cluster: &cluster{reachable: true,
		available: map[string]int{"ml.p5.48xlarge": 4}}, access: &access{}, writes: &writes{}, whatIf: &whatIfs{}}
	f.cluster.overview = domain.BuildOverview(s, nil, objs.ClusterQueues)
	for _, cq := range objs.ClusterQueues {
		team := s.TeamOfClusterQueue(cq)
		f.cluster.addTeam(s, domain.Team{Name: team, Enabled: true, FairShareWeight: 10, Preemption: domain.PreemptLowerPriority,
			Lending: domain.LendAndBorrow, BorrowLimitPercent: 50})
	}
	f.cfg = handlers.Config{Settings: s, Shutdown: context.Background(),
		Health: f.cluster, ReadModel: f.model, Overview: f.cluster, Teams: f.cluster, Policy: f.cluster, Revisions: f.cluster,
		Access: f.access, Writes: f.writes, WhatIf: f.whatIf}
	return f
}

// snapshotOf is the read model's snapshot of a synthetic cluster.
func snapshotOf(s domain.Settings, o kueuetest.Objects, now time.Time) *domain.Snapshot {
	return domain.BuildSnapshot(domain.SnapshotInput{Settings: s, ClusterQueues: o.ClusterQueues, LocalQueues: o.LocalQueues,
		Workloads: o.Workloads, Classes: o.Classes}, now)
}

// handler is the console's HTTP handler on the fixture, addressed on
// loopback.
func (f *fixture) handler() http.Handler { return webtest.AtLoopback(handlers.New(f.cfg)) }

// withProxy signs users in by the proxy's headers from loopback.
func (f *fixture) withProxy() *fixture {
	trusted, _ := auth.ParseCIDRs(auth.DefaultProxyCIDRs)
	f.cfg.Auth = &auth.Authenticator{Mode: auth.ModeProxy, Proxy: auth.Proxy{UserHeader: auth.DefaultUserHeader,
		GroupsHeader: auth.DefaultGroupsHeader, Trusted: trusted}}
	return f
}

// user is the browser of a user behind the proxy.
func user(t testing.TB, h http.Handler, name string) *webtest.Browser {
	return webtest.NewBrowser(t, h, map[string]string{auth.DefaultUserHeader: name})
}

// bindings are the RoleBindings of namespaces; asked records the
// namespaces each read asked for.
type bindings struct {
	mu    sync.Mutex
	of    map[string][]domain.Binding
	asked [][]string
}

func (b *bindings) Of(_ context.Context, namespaces []string) ([]domain.Binding, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.asked = append(b.asked, slices.Clone(namespaces))
	var out []domain.Binding
	for _, ns := range namespaces {
		out = append(out, b.of[ns]...)
	}
	return out, nil
}

func mayListRoleBindings(namespace string) kueue.Permission {
	return kueue.Permission{Verb: "list", Group: "rbac.authorization.k8s.io", Resource: "rolebindings", Namespace: namespace}
}

func (c *cluster) KueueRecentUse(context.Context) (*domain.RecentUseConfig, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.recentUse, nil
}

func (c *cluster) LocalQueueUses(_ context.Context, clusterQueue string) ([]domain.LocalQueueUse, *domain.RecentUseConfig, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.uses[clusterQueue], c.recentUse, true
}
