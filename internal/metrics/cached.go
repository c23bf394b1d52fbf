package metrics

import (
	"context"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/memo"
)

// Cached answers the dashboards' Prometheus questions from answers at most
// TTL old. Prometheus scrapes every 15 to 30 seconds, so asking again for
// every page view and every live update would only load it: many viewers
// of a page, and many concurrent requests for it, share one query. Failures
// are remembered for a few seconds, so a Prometheus that is down does not
// make every page wait for its timeout.
type Cached struct {
	Prom    *Prom
	answers memo.Memo[any]
}

// NewCached caches p's answers for ttl (failures for 5 seconds).
func NewCached(p *Prom, ttl time.Duration) *Cached {
	return &Cached{Prom: p, answers: memo.Memo[any]{TTL: ttl, FailureTTL: 5 * time.Second}}
}

func ask[T any](ctx context.Context, c *Cached, key string, query func(context.Context) (T, error)) (T, error) {
	v, err := c.answers.Get(ctx, key, func(ctx context.Context) (any, error) { return query(ctx) })
	t, _ := v.(T)
	return t, err
}

func rangeKey(r Range) string {
	return fmt.Sprintf("%d-%d-%d", r.Start.UnixNano(), r.End.UnixNano(), r.Step)
}

// NamespaceGPUUtilization is Prom.NamespaceGPUUtilization, cached.
func (c *Cached) NamespaceGPUUtilization(ctx context.Context) (map[string]domain.Readings, error) {
	return ask(ctx, c, "util", c.Prom.NamespaceGPUUtilization)
}

// NamespaceGPUUtilizationOver is Prom.NamespaceGPUUtilizationOver, cached.
func (c *Cached) NamespaceGPUUtilizationOver(ctx context.Context, window time.Duration) (map[string][]float64, error) {
	return ask(ctx, c, "util-over\x00"+window.String(), func(ctx context.Context) (map[string][]float64, error) {
		return c.Prom.NamespaceGPUUtilizationOver(ctx, window)
	})
}

// NamespacePartitionUtilization is Prom.NamespacePartitionUtilization, cached.
func (c *Cached) NamespacePartitionUtilization(ctx context.Context) (map[string]map[string]domain.Readings, error) {
	return ask(ctx, c, "partitions", c.Prom.NamespacePartitionUtilization)
}

// ClusterUtilization is Prom.ClusterUtilization, cached.
func (c *Cached) ClusterUtilization(ctx context.Context, r Range, vcpuCapacity float64) (Charts, error) {
	key := fmt.Sprintf("cluster\x00%s\x00%g", rangeKey(r), vcpuCapacity)
	return ask(ctx, c, key, func(ctx context.Context) (Charts, error) {
		return c.Prom.ClusterUtilization(ctx, r, vcpuCapacity)
	})
}

// TeamSeries is Prom.TeamSeries, cached.
func (c *Cached) TeamSeries(ctx context.Context, q TeamQueue, r Range) (TeamCharts, error) {
	key := fmt.Sprintf("team\x00%s\x00%s", q.Key(), rangeKey(r))
	return ask(ctx, c, key, func(ctx context.Context) (TeamCharts, error) {
		return c.Prom.TeamSeries(ctx, q, r)
	})
}

// UsageReport is Prom.UsageReport, cached.
func (c *Cached) UsageReport(ctx context.Context, s domain.Settings, namespaces map[string]string, from, to time.Time) (Report, error) {
	key := fmt.Sprintf("report\x00%s\x00%s\x00%s\x00%d\x00%d", s.NamespacePrefix, s.Cohort, namespacesKey(namespaces), from.UnixNano(), to.UnixNano())
	return ask(ctx, c, key, func(ctx context.Context) (Report, error) {
		return c.Prom.UsageReport(ctx, s, namespaces, from, to)
	})
}

// namespacesKey names a namespace → team map in a cache key: a hash of its
// sorted pairs.
func namespacesKey(m map[string]string) string {
	h := fnv.New64a()
	for _, ns := range slices.Sorted(maps.Keys(m)) {
		h.Write([]byte(ns + "\x00" + m[ns] + "\x00"))
	}
	return strconv.FormatUint(h.Sum64(), 16)
}
