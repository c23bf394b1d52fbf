package metrics

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/openquota/console/internal/domain"
)

// Cached answers the dashboards' Prometheus questions from answers at most
// TTL old. Prometheus scrapes every 15 to 30 seconds, so asking again for
// every page view and every live update would only load it: many viewers
// of a page, and many concurrent requests for it, share one query. Failures
// are remembered for a shorter while, so a Prometheus that is down does not
// make every page wait for its timeout.
type Cached struct {
	Prom       *Prom
	TTL        time.Duration
	FailureTTL time.Duration
	now        func() time.Time

	mu      sync.Mutex
	answers map[string]*answer
}

type answer struct {
	done  chan struct{}
	value any
	err   error
	at    time.Time
}

// maxCachedAnswers bounds what Cached keeps: past it, old answers go.
const maxCachedAnswers = 1024

// NewCached caches p's answers for ttl (failures for 5 seconds).
func NewCached(p *Prom, ttl time.Duration) *Cached {
	return &Cached{Prom: p, TTL: ttl, FailureTTL: 5 * time.Second, now: time.Now, answers: map[string]*answer{}}
}

// ask returns a fresh enough answer to the question key, asking Prometheus
// once however many ask at the same time. The question runs without the
// asker's cancellation (others may wait for it); Prom bounds its time.
func ask[T any](ctx context.Context, c *Cached, key string, query func(context.Context) (T, error)) (T, error) {
	now := c.now()
	c.mu.Lock()
	a := c.answers[key]
	if a != nil {
		select {
		case <-a.done:
			ttl := c.TTL
			if a.err != nil {
				ttl = c.FailureTTL
			}
			if now.Sub(a.at) >= ttl {
				a = nil
			}
		default: // being asked: wait for it
		}
	}
	if a == nil {
		if len(c.answers) >= maxCachedAnswers {
			c.dropOldLocked(now)
		}
		a = &answer{done: make(chan struct{})}
		c.answers[key] = a
		c.mu.Unlock()
		a.value, a.err = query(context.WithoutCancel(ctx))
		a.at = c.now()
		close(a.done)
	} else {
		c.mu.Unlock()
	}
	select {
	case <-a.done:
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
	v, _ := a.value.(T)
	return v, a.err
}

func (c *Cached) dropOldLocked(now time.Time) {
	for k, a := range c.answers {
		select {
		case <-a.done:
			if now.Sub(a.at) >= c.TTL {
				delete(c.answers, k)
			}
		default:
		}
	}
	if len(c.answers) >= maxCachedAnswers { // all fresh: start over
		for k, a := range c.answers {
			select {
			case <-a.done:
				delete(c.answers, k)
			default:
			}
		}
	}
}

func rangeKey(r Range) string {
	return fmt.Sprintf("%d-%d-%d", r.Start.UnixNano(), r.End.UnixNano(), r.Step)
}

// TeamGPUUtilization is Prom.TeamGPUUtilization, cached.
func (c *Cached) TeamGPUUtilization(ctx context.Context, namespacePrefix string) (map[string]float64, error) {
	return ask(ctx, c, "util\x00"+namespacePrefix, func(ctx context.Context) (map[string]float64, error) {
		return c.Prom.TeamGPUUtilization(ctx, namespacePrefix)
	})
}

// ClusterUtilization is Prom.ClusterUtilization, cached.
func (c *Cached) ClusterUtilization(ctx context.Context, r Range, vcpuCapacity float64) (Charts, error) {
	key := fmt.Sprintf("cluster\x00%s\x00%g", rangeKey(r), vcpuCapacity)
	return ask(ctx, c, key, func(ctx context.Context) (Charts, error) {
		return c.Prom.ClusterUtilization(ctx, r, vcpuCapacity)
	})
}

// TeamSeries is Prom.TeamSeries, cached.
func (c *Cached) TeamSeries(ctx context.Context, s domain.Settings, team string, r Range) (TeamCharts, error) {
	key := fmt.Sprintf("team\x00%s\x00%s\x00%s\x00%s", s.NamespacePrefix, s.Cohort, team, rangeKey(r))
	return ask(ctx, c, key, func(ctx context.Context) (TeamCharts, error) {
		return c.Prom.TeamSeries(ctx, s, team, r)
	})
}

// UsageReport is Prom.UsageReport, cached.
func (c *Cached) UsageReport(ctx context.Context, s domain.Settings, from, to time.Time) ([]UsageRow, error) {
	key := fmt.Sprintf("report\x00%s\x00%s\x00%d\x00%d", s.NamespacePrefix, s.Cohort, from.UnixNano(), to.UnixNano())
	return ask(ctx, c, key, func(ctx context.Context) ([]UsageRow, error) {
		return c.Prom.UsageReport(ctx, s, from, to)
	})
}
