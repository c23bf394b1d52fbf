package cluster

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/openquota/console/internal/domain"
	"k8s.io/apimachinery/pkg/labels"
)

// Live keeps the current Snapshot: rebuilt shortly after informer events
// (coalescing bursts) and every few seconds anyway, since wait and run times
// grow with the clock. Subscribers learn of each new version, which is how
// pages update without reload.
type Live struct {
	cache    *Cache
	settings domain.Settings
	log      *slog.Logger

	// Debounce waits this long after an event for more; MinInterval spaces
	// rebuilds under constant churn; Refresh rebuilds when nothing happens.
	Debounce, MinInterval, Refresh time.Duration

	dirty chan struct{}
	mu    sync.RWMutex
	snap  *domain.Snapshot
	subs  map[chan uint64]struct{}
}

// NewLive watches cache for changes; Run builds snapshots.
func NewLive(cache *Cache, s domain.Settings, log *slog.Logger) *Live {
	l := &Live{cache: cache, settings: s, log: log,
		Debounce: 100 * time.Millisecond, MinInterval: 250 * time.Millisecond, Refresh: 5 * time.Second,
		dirty: make(chan struct{}, 1), subs: map[chan uint64]struct{}{},
		snap: &domain.Snapshot{}}
	cache.OnChange(func(kind string) {
		if kind == "Node" {
			return // node heartbeats would rebuild all the time; nodes are read directly
		}
		select {
		case l.dirty <- struct{}{}:
		default:
		}
	})
	return l
}

// domain.Snapshot returns the latest snapshot (never nil).
func (l *Live) Snapshot() *domain.Snapshot {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.snap
}

// Subscribe returns a channel that receives each new snapshot version (the
// newest only, when the reader is slow) and a function to stop.
func (l *Live) Subscribe() (<-chan uint64, func()) {
	ch := make(chan uint64, 1)
	l.mu.Lock()
	l.subs[ch] = struct{}{}
	l.mu.Unlock()
	return ch, func() {
		l.mu.Lock()
		delete(l.subs, ch)
		l.mu.Unlock()
	}
}

// Run rebuilds snapshots until ctx ends.
func (l *Live) Run(ctx context.Context) {
	refresh := time.NewTicker(l.Refresh)
	defer refresh.Stop()
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.dirty:
			// Coalesce a burst of events into one rebuild.
			timer := time.NewTimer(max(l.Debounce, l.MinInterval-time.Since(last)))
			select {
			case <-ctx.Done():
				timer.Stop()
				return
			case <-timer.C:
			}
			select {
			case <-l.dirty:
			default:
			}
		case <-refresh.C:
		}
		if !l.cache.Synced() {
			continue
		}
		l.rebuild()
		last = time.Now()
	}
}

func (l *Live) rebuild() {
	in := domain.SnapshotInput{Settings: l.settings}
	var err error
	if in.ClusterQueues, err = l.cache.ClusterQueues.List(labels.Everything()); err != nil {
		l.log.Error("snapshot", "err", err)
		return
	}
	in.LocalQueues, _ = l.cache.LocalQueues.List(labels.Everything())
	in.Workloads, _ = l.cache.Workloads.List(labels.Everything())
	in.Classes, _ = l.cache.WorkloadPriorityClasses.List(labels.Everything())
	in.Cohort, _ = l.cache.Cohorts.Get(l.settings.Cohort)
	snap := domain.BuildSnapshot(in, time.Now())

	l.mu.Lock()
	snap.Version = l.snap.Version + 1
	l.snap = snap
	for ch := range l.subs {
		select {
		case ch <- snap.Version:
		default:
			// The reader has not taken the previous version: replace it.
			select {
			case <-ch:
			default:
			}
			ch <- snap.Version
		}
	}
	l.mu.Unlock()
}

// Publish makes snap the current snapshot, as a rebuild would (for
// benchmarks and tests that start from hand-built objects).
func (l *Live) Publish(snap *domain.Snapshot) {
	l.mu.Lock()
	snap.Version = l.snap.Version + 1
	l.snap = snap
	l.mu.Unlock()
}

// Fresh reports whether the current snapshot was built at or after t: it
// shows what the caches held at t.
func (l *Live) Fresh(t time.Time) bool { return !l.Snapshot().Taken.Before(t) }
