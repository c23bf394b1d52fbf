package metrics

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/openquota/console/internal/domain"
	"slices"
)

// ErrUnavailable marks every error that means "the dashboards cannot get
// data from Prometheus right now": no URL configured, connection refused,
// timeout, server error. Panels test it with errors.Is and show
// "Prometheus unavailable" instead of a chart.
var ErrUnavailable = errors.New("prometheus unavailable")

// DefaultTimeout bounds every single query sent to Prometheus.
const DefaultTimeout = 3 * time.Second

// Prom queries the cluster's Prometheus for the dashboards. A nil *Prom or
// one made from an empty URL answers every call with ErrUnavailable.
type Prom struct {
	api promv1.API
	// Timeout bounds each query (0 means DefaultTimeout).
	Timeout time.Duration
	// ReportStep is the resolution of the usage report's range queries
	// (0 means DefaultReportStep).
	ReportStep time.Duration
	// observe is told each query's outcome (Console.ObservePrometheus).
	observe func(outcome string)
}

// NewProm returns a Prom for the Prometheus at url (e.g.
// "http://prometheus:9090"). An empty url gives a Prom whose every method
// returns ErrUnavailable; a malformed one is an error. NewProm does not
// connect: an unreachable Prometheus shows up as ErrUnavailable per query.
func NewProm(rawURL string) (*Prom, error) {
	if rawURL == "" {
		return &Prom{}, nil
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("prometheus url %q: %w", rawURL, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("prometheus url %q: want http(s)://host[:port][/path]", rawURL)
	}
	client, err := promapi.NewClient(promapi.Config{Address: rawURL})
	if err != nil {
		return nil, fmt.Errorf("prometheus url %q: %w", rawURL, err)
	}
	return &Prom{api: promv1.NewAPI(client)}, nil
}

// Point is one sample of a series.
type Point struct {
	T time.Time
	V float64
}

// Series is one line of a chart: a display name and its samples in time
// order (the chart says the unit).
type Series struct {
	Name   string
	Points []Point
}

// Range is the time window and resolution of a chart.
type Range struct {
	Start, End time.Time
	Step       time.Duration
}

var ranges = []struct {
	name      string
	dur, step time.Duration
}{
	{"1h", time.Hour, 15 * time.Second},          // 241 points
	{"6h", 6 * time.Hour, 90 * time.Second},      // 241 points
	{"24h", 24 * time.Hour, 5 * time.Minute},     // 289 points
	{"7d", 7 * 24 * time.Hour, 40 * time.Minute}, // 253 points
}

// RangeNames are the names RangeFor accepts, shortest first.
func RangeNames() []string {
	names := make([]string, len(ranges))
	for i, r := range ranges {
		names[i] = r.name
	}
	return names
}

// RangeFor is the range called name ("1h", "6h", "24h" or "7d") ending at
// now, with a step that gives at most about 300 points. End is now rounded
// down to the step, so that charts drawn a few seconds apart sample the same
// instants. ok is false for an unknown name.
func RangeFor(name string, now time.Time) (r Range, ok bool) {
	for _, c := range ranges {
		if c.name == name {
			end := now.Truncate(c.step)
			return Range{Start: end.Add(-c.dur), End: end, Step: c.step}, true
		}
	}
	return Range{}, false
}

// Charts are the cluster-wide utilization series.
type Charts struct {
	// GPUUtilization is the hardware utilization averaged over all GPUs, in %.
	GPUUtilization Series
	// GPUMemory is the framebuffer memory in use over all GPUs, in %.
	GPUMemory Series
	// VCPUAllocation is the vCPU admitted by Kueue as a share of the vCPU
	// capacity the caller passed, in %: an allocation, not a measured load.
	VCPUAllocation Series
}

// TeamCharts are one team's series.
type TeamCharts struct {
	// Quota is the team's nominal quota of its resource (TeamQueue)
	// summed over flavors; InUse what its admitted workloads hold of it.
	// Both in the resource's units, for one chart.
	Quota, InUse Series
	// Borrowed is what the team uses beyond its nominal quota, per flavor,
	// summed over flavors.
	Borrowed Series
	// Utilization is the hardware utilization averaged over the GPUs the
	// team's pods hold, in %.
	Utilization Series
}

// PromQL of the dashboards. Kueue's gauges are read without the followers
// of a replicated Kueue (replica_role="follower"), which would count twice.
const (
	// metricGPUUtil is dcgm-exporter's per-GPU utilization (0-100).
	metricGPUUtil = "DCGM_FI_DEV_GPU_UTIL"
	// wholeGPU selects the series of whole GPUs: a MIG partition's have the
	// label GPU_I_PROFILE (its utilization is metricEngineActive's), and
	// counted as GPUs they would weigh a seventh of a GPU as much as one.
	wholeGPU = `GPU_I_PROFILE=""`
	// queryClusterGPUUtil averages the utilization of every whole GPU, idle or held.
	queryClusterGPUUtil = `avg(` + metricGPUUtil + `{` + wholeGPU + `})`
	// queryClusterGPUMemory is the framebuffer in use as a share of all framebuffer.
	queryClusterGPUMemory = `100 * sum(DCGM_FI_DEV_FB_USED) / (sum(DCGM_FI_DEV_FB_USED) + sum(DCGM_FI_DEV_FB_FREE))`
	// queryAdmittedVCPU is the vCPU admitted by Kueue over all ClusterQueues and flavors.
	queryAdmittedVCPU = `sum(kueue_cluster_queue_resource_usage{resource="cpu",replica_role!="follower"})`
)

// vcpuAllocationQuery is queryAdmittedVCPU as a percentage of capacity vCPUs.
func vcpuAllocationQuery(capacity float64) string {
	return "100 * " + queryAdmittedVCPU + " / " + strconv.FormatFloat(capacity, 'f', -1, 64)
}

// quoted is s as a PromQL string literal (PromQL strings use Go's escapes).
func quoted(s string) string { return strconv.Quote(s) }

// readingsQueries are the sum and the count of a per-GPU (or
// per-partition) figure by the labels of by, over the GPUs held by pods
// (those dcgm-exporter names a namespace for).
func readingsQueries(figure, by string) (sum, count string) {
	return "sum by (" + by + ") (" + figure + ")", "count by (" + by + ") (" + figure + ")"
}

// heldGPUUtil is the utilization of each whole GPU a pod holds.
const heldGPUUtil = metricGPUUtil + `{namespace!="",` + wholeGPU + `}`

// heldGPUUtilOver is the utilization of each GPU a pod holds now,
// averaged over window. Only GPUs held now: the series of a pod that ended
// within the window still has readings there, and counted it would make
// GPUs idle that no one holds.
func heldGPUUtilOver(window time.Duration) string {
	return `avg_over_time(` + heldGPUUtil + `[` + model.Duration(window).String() + `]) and ` + heldGPUUtil
}

// metricEngineActive is dcgm-exporter's ratio of time the graphics engine
// is active (0-1): the utilization it reports for a MIG partition, which
// DCGM_FI_DEV_GPU_UTIL does not cover.
const metricEngineActive = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"

// heldPartitionActivity is, in %, the activity of each MIG partition a
// pod holds.
const heldPartitionActivity = `100 * ` + metricEngineActive + `{namespace!="",GPU_I_PROFILE!=""}`

// namespacesGPUUtilQuery averages the utilization of the whole GPUs held by
// pods of the namespaces.
func namespacesGPUUtilQuery(namespaces []string) string {
	quotedNames := make([]string, len(namespaces))
	for i, ns := range namespaces {
		quotedNames[i] = regexp.QuoteMeta(ns)
	}
	return `avg(` + metricGPUUtil + `{namespace=~` + quoted(strings.Join(quotedNames, "|")) + `,` + wholeGPU + `})`
}

// kueueGPUSelector selects a Kueue gauge's series for nvidia.com/gpu, of
// one ClusterQueue when clusterQueue is not empty.
func kueueGPUSelector(metric, clusterQueue string) string {
	return kueueSelector(metric, domain.ResourceGPU.String(), clusterQueue)
}

// kueueSelector selects a Kueue gauge's series for resource, of one
// ClusterQueue when clusterQueue is not empty.
func kueueSelector(metric, resource, clusterQueue string) string {
	sel := metric + `{resource=` + quoted(resource) + `,replica_role!="follower"`
	if clusterQueue != "" {
		sel += `,cluster_queue=` + quoted(clusterQueue)
	}
	return sel + "}"
}

const (
	metricNominalQuota  = "kueue_cluster_queue_nominal_quota"
	metricResourceUsage = "kueue_cluster_queue_resource_usage"
)

// inUnits is a query of a resource's amounts in the units the pages show
// it in: memory, which Kueue counts in bytes, in GiB.
func inUnits(resource, query string) string {
	if resource == "memory" {
		return query + " / 1073741824"
	}
	return query
}

// queueQuotaQuery is a ClusterQueue's nominal quota of resource summed over flavors.
func queueQuotaQuery(resource, clusterQueue string) string {
	return inUnits(resource, "sum("+kueueSelector(metricNominalQuota, resource, clusterQueue)+")")
}

// queueUsageQuery is what a ClusterQueue's admitted workloads hold of
// resource, summed over flavors.
func queueUsageQuery(resource, clusterQueue string) string {
	return inUnits(resource, "sum("+kueueSelector(metricResourceUsage, resource, clusterQueue)+")")
}

// queueBorrowedQuery is a ClusterQueue's use of resource above nominal
// quota, floored at 0 per flavor (a team can borrow one flavor while
// another flavor's quota lies idle), summed over flavors.
func queueBorrowedQuery(resource, clusterQueue string) string {
	return inUnits(resource, "sum(clamp_min(sum by (flavor) ("+kueueSelector(metricResourceUsage, resource, clusterQueue)+
		") - sum by (flavor) ("+kueueSelector(metricNominalQuota, resource, clusterQueue)+"), 0))")
}

func (p *Prom) available() error {
	if p == nil || p.api == nil {
		return fmt.Errorf("%w: no Prometheus URL configured", ErrUnavailable)
	}
	return nil
}

func (p *Prom) timeout() time.Duration {
	if p.Timeout > 0 {
		return p.Timeout
	}
	return DefaultTimeout
}

// queryError wraps an API error: a query Prometheus rejects as malformed is
// the console's bug; anything else (transport, timeout, server) means
// Prometheus is unavailable.
func queryError(query string, err error) error {
	var apiErr *promv1.Error
	if errors.As(err, &apiErr) && apiErr.Type == promv1.ErrBadData {
		return fmt.Errorf("prometheus rejected %s: %w", query, err)
	}
	return fmt.Errorf("%w: %s: %w", ErrUnavailable, query, err)
}

// instant runs an instant query at now. Warnings and infos are dropped:
// the panels have nowhere to show them.
func (p *Prom) instant(ctx context.Context, query string) (model.Vector, error) {
	return run[model.Vector](ctx, p, query, "a vector", func(ctx context.Context) (model.Value, v1Warnings, error) {
		v, w, _, err := p.api.Query(ctx, query, time.Now())
		return v, w, err
	})
}

// matrix runs a range query.
func (p *Prom) matrix(ctx context.Context, query string, r Range) (model.Matrix, error) {
	return run[model.Matrix](ctx, p, query, "a matrix", func(ctx context.Context) (model.Value, v1Warnings, error) {
		v, w, _, err := p.api.QueryRange(ctx, query, promv1.Range{Start: r.Start, End: r.End, Step: r.Step})
		return v, w, err
	})
}

type v1Warnings = promv1.Warnings

// run sends one query, bounded by the timeout, and checks the kind of its
// answer.
func run[T model.Value](ctx context.Context, p *Prom, query, want string, send func(context.Context) (model.Value, v1Warnings, error)) (T, error) {
	var none T
	if err := p.available(); err != nil {
		return none, err
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout())
	defer cancel()
	v, _, err := send(ctx)
	if err != nil {
		err = queryError(query, err)
		if errors.Is(err, ErrUnavailable) {
			p.observed(PromUnavailable)
		} else {
			p.observed(PromError)
		}
		return none, err
	}
	got, ok := v.(T)
	if !ok {
		p.observed(PromError)
		return none, fmt.Errorf("%s: want %s, got %s", query, want, v.Type())
	}
	p.observed(PromOK)
	return got, nil
}

func (p *Prom) observed(outcome string) {
	if p.observe != nil {
		p.observe(outcome)
	}
}

// Ping sends Prometheus the smallest query there is, to learn whether it
// answers (ErrUnavailable when it does not).
func (p *Prom) Ping(ctx context.Context) error {
	_, err := p.instant(ctx, "vector(1)")
	return err
}

// series runs a range query whose result has at most one series (an
// aggregation without "by") and names it.
func (p *Prom) series(ctx context.Context, name, query string, r Range) (Series, error) {
	m, err := p.matrix(ctx, query, r)
	if err != nil {
		return Series{Name: name}, err
	}
	if len(m) > 1 {
		return Series{Name: name}, fmt.Errorf("%s: want one series, got %d", query, len(m))
	}
	s := Series{Name: name}
	if len(m) == 1 {
		s.Points = points(m[0].Values)
	}
	return s, nil
}

// points converts samples, dropping NaN and infinities (0/0 when a
// denominator is empty).
func points(values []model.SamplePair) []Point {
	out := make([]Point, 0, len(values))
	for _, sp := range values {
		v := float64(sp.Value)
		if math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		out = append(out, Point{T: sp.Timestamp.Time(), V: v})
	}
	return out
}

// all runs fns concurrently and returns the first error, so that a page's
// queries take the time of the slowest, not of their sum.
func all(fns ...func() error) error {
	errs := make([]error, len(fns))
	var wg sync.WaitGroup
	for i, fn := range fns {
		wg.Go(func() { errs[i] = fn() })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// ClusterUtilization returns the cluster-wide GPU utilization, GPU memory
// use and vCPU allocation over r. vcpuCapacity is the vCPUs of the Ready
// nodes (the sandbox, like many clusters, has no node exporter, so vCPU is
// shown as Kueue-admitted vCPU over capacity); with vcpuCapacity <= 0 the
// vCPU series is left empty.
func (p *Prom) ClusterUtilization(ctx context.Context, r Range, vcpuCapacity float64) (Charts, error) {
	c := Charts{
		GPUUtilization: Series{Name: "GPU utilization"},
		GPUMemory:      Series{Name: "GPU memory used"},
		VCPUAllocation: Series{Name: "vCPU allocated (Kueue-admitted)"},
	}
	if err := p.available(); err != nil {
		return c, err
	}
	fns := []func() error{
		func() (err error) {
			c.GPUUtilization, err = p.series(ctx, c.GPUUtilization.Name, queryClusterGPUUtil, r)
			return err
		},
		func() (err error) {
			c.GPUMemory, err = p.series(ctx, c.GPUMemory.Name, queryClusterGPUMemory, r)
			return err
		},
	}
	if vcpuCapacity > 0 {
		fns = append(fns, func() (err error) {
			c.VCPUAllocation, err = p.series(ctx, c.VCPUAllocation.Name, vcpuAllocationQuery(vcpuCapacity), r)
			return err
		})
	}
	return c, all(fns...)
}

// NamespaceGPUUtilization is the current hardware utilization of the GPUs
// pods hold, by namespace (namespaces whose pods hold none are absent).
func (p *Prom) NamespaceGPUUtilization(ctx context.Context) (map[string]domain.Readings, error) {
	return p.namespaceReadings(ctx, heldGPUUtil)
}

// NamespaceGPUUtilizationOver is the utilization of each whole GPU pods
// hold, averaged over the window that ends now (over the part of it its pod
// held it), by namespace: one reading a GPU, sorted.
func (p *Prom) NamespaceGPUUtilizationOver(ctx context.Context, window time.Duration) (map[string][]float64, error) {
	if err := p.available(); err != nil {
		return nil, err
	}
	v, err := p.instant(ctx, heldGPUUtilOver(window))
	if err != nil {
		return nil, err
	}
	out := map[string][]float64{}
	for _, s := range v {
		ns, val := string(s.Metric["namespace"]), float64(s.Value)
		if ns == "" || math.IsNaN(val) {
			continue
		}
		out[ns] = append(out[ns], val)
	}
	for _, vals := range out {
		slices.Sort(vals)
	}
	return out, nil
}

// NamespacePartitionUtilization is the current activity of the MIG
// partitions pods hold, by namespace and profile ("mig-1g.10gb").
func (p *Prom) NamespacePartitionUtilization(ctx context.Context) (map[string]map[string]domain.Readings, error) {
	byKey, err := p.readings(ctx, heldPartitionActivity, "namespace", "GPU_I_PROFILE")
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]domain.Readings{}
	for key, r := range byKey {
		if out[key[0]] == nil {
			out[key[0]] = map[string]domain.Readings{}
		}
		// dcgm-exporter names the profile without the device plugin's "mig-".
		out[key[0]]["mig-"+key[1]] = r
	}
	return out, nil
}

// namespaceReadings are figure's readings by namespace.
func (p *Prom) namespaceReadings(ctx context.Context, figure string) (map[string]domain.Readings, error) {
	byKey, err := p.readings(ctx, figure, "namespace", "")
	if err != nil {
		return nil, err
	}
	out := make(map[string]domain.Readings, len(byKey))
	for key, r := range byKey {
		out[key[0]] = r
	}
	return out, nil
}

// readings asks the sum and the count of figure by the labels a and b (b
// may be "") and joins them.
func (p *Prom) readings(ctx context.Context, figure string, a, b model.LabelName) (map[[2]string]domain.Readings, error) {
	by := string(a)
	if b != "" {
		by += ", " + string(b)
	}
	sumQ, countQ := readingsQueries(figure, by)
	var sum, count model.Vector
	if err := all(
		func() (err error) { sum, err = p.instant(ctx, sumQ); return err },
		func() (err error) { count, err = p.instant(ctx, countQ); return err },
	); err != nil {
		return nil, err
	}
	return joinReadings(sum, count, a, b), nil
}

// joinReadings joins a sum and a count vector by the labels a and b (b
// may be ""), leaving out NaN sums and zero counts.
func joinReadings(sum, count model.Vector, a, b model.LabelName) map[[2]string]domain.Readings {
	key := func(m model.Metric) [2]string { return [2]string{string(m[a]), string(m[b])} }
	counts := make(map[[2]string]float64, len(count))
	for _, s := range count {
		counts[key(s.Metric)] = float64(s.Value)
	}
	out := make(map[[2]string]domain.Readings, len(sum))
	for _, s := range sum {
		k := key(s.Metric)
		v, n := float64(s.Value), counts[k]
		if math.IsNaN(v) || n <= 0 || k[0] == "" {
			continue
		}
		out[k] = domain.Readings{Sum: v, Count: n}
	}
	return out
}

// TeamQueue names what a team's charts are drawn from: its ClusterQueue,
// the resource its quota charts count, and the namespaces whose pods count
// for it alone (domain.TeamNamespaces).
type TeamQueue struct {
	ClusterQueue string
	// Resource is the Kubernetes resource the quota charts count
	// ("nvidia.com/gpu", "cpu", "memory" in GiB …); "" for GPUs.
	Resource   string
	Namespaces []string
}

// Key names q in a cache key.
func (q TeamQueue) Key() string {
	return q.ClusterQueue + "\x00" + q.Resource + "\x00" + strings.Join(q.Namespaces, ",")
}

// TeamSeries returns one team's quota, use and borrowing of its resource
// (GPUs unless q names another) and the hardware utilization of its
// namespaces' GPUs over r.
func (p *Prom) TeamSeries(ctx context.Context, q TeamQueue, r Range) (TeamCharts, error) {
	cq, res := q.ClusterQueue, q.Resource
	if res == "" {
		res = domain.ResourceGPU.String()
	}
	c := TeamCharts{
		Quota:       Series{Name: "Quota"},
		InUse:       Series{Name: "In use"},
		Borrowed:    Series{Name: "Borrowed"},
		Utilization: Series{Name: "GPU utilization"},
	}
	if err := p.available(); err != nil {
		return c, err
	}
	err := all(
		func() (err error) {
			c.Quota, err = p.series(ctx, c.Quota.Name, queueQuotaQuery(res, cq), r)
			return err
		},
		func() (err error) {
			c.InUse, err = p.series(ctx, c.InUse.Name, queueUsageQuery(res, cq), r)
			return err
		},
		func() (err error) {
			c.Borrowed, err = p.series(ctx, c.Borrowed.Name, queueBorrowedQuery(res, cq), r)
			return err
		},
		func() (err error) {
			if len(q.Namespaces) == 0 {
				return nil
			}
			c.Utilization, err = p.series(ctx, c.Utilization.Name, namespacesGPUUtilQuery(q.Namespaces), r)
			return err
		},
	)
	return c, err
}
