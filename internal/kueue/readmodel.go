package kueue

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/domain"
)

// Live keeps the read model (domain.Model) current from the cache's events,
// one object change at a time, and publishes a Snapshot shortly after a
// change (coalescing bursts), and every domain.ClockCadence anyway, so
// figures that grow with the clock move on the pages. Subscribers receive
// what changed with each new snapshot (domain.Changes), which is how pages
// update without reload, showing again only what depends on the change.
type Live struct {
	cache    *Cache
	settings domain.Settings
	log      *slog.Logger

	// Debounce waits this long after an event for more; MinInterval spaces
	// snapshots under constant churn; Refresh takes one when nothing happens
	// (the clock's figures).
	Debounce, MinInterval, Refresh time.Duration
	observe                        atomic.Pointer[func(kind string, d time.Duration)]

	dirty chan struct{}

	modelMu sync.Mutex
	model   *domain.Model
	// applied are the resourceVersions of the queues, classes and cohort the
	// model took in, and when: what Fresh compares with the cache.
	applied map[string]appliedVersion

	mu   sync.RWMutex
	snap *domain.Snapshot
	subs map[chan domain.Changes]struct{}
	// published: a snapshot was published (read without mu: Ready is asked
	// while pages render, some of them under Publish's lock).
	published atomic.Bool
}

type appliedVersion struct {
	resourceVersion string
	change          uint64
}

// NewLive takes in cache's events; Run publishes snapshots.
func NewLive(cache *Cache, s domain.Settings, log *slog.Logger) *Live {
	l := &Live{cache: cache, settings: s, log: log,
		Debounce: 100 * time.Millisecond, MinInterval: 250 * time.Millisecond, Refresh: domain.ClockCadence,
		dirty: make(chan struct{}, 1), subs: map[chan domain.Changes]struct{}{},
		model: domain.NewModel(s), applied: map[string]appliedVersion{}}
	l.snap = l.model.Snapshot(time.Time{}) // empty until the caches sync
	cache.OnChange(l.take)
	return l
}

// SetObserver has fn told how long the model took to take in each change,
// by kind of object, and to make each snapshot (kind "snapshot").
func (l *Live) SetObserver(fn func(kind string, d time.Duration)) { l.observe.Store(&fn) }

func (l *Live) observed(kind string, start time.Time) {
	if fn := l.observe.Load(); fn != nil {
		(*fn)(kind, time.Since(start))
	}
}

// take applies one cache event to the model.
func (l *Live) take(ev Event) {
	start := time.Now()
	l.modelMu.Lock()
	switch o := ev.Object.(type) {
	case *WorkloadTask:
		if ev.Deleted {
			l.model.DeleteWorkload(o.Namespace, o.Name)
		} else {
			l.model.SetTask(o.Task)
		}
	case *kueuev1beta2.ClusterQueue:
		if ev.Deleted {
			l.model.DeleteClusterQueue(o.Name)
		} else {
			l.model.SetClusterQueue(o)
		}
		l.track(ev.Kind, o.Namespace, o.Name, o.ResourceVersion, ev.Deleted)
	case *kueuev1beta2.LocalQueue:
		if ev.Deleted {
			l.model.DeleteLocalQueue(o.Namespace, o.Name)
		} else {
			l.model.SetLocalQueue(o)
		}
		l.track(ev.Kind, o.Namespace, o.Name, o.ResourceVersion, ev.Deleted)
	case *corev1.Namespace:
		// Not tracked for Fresh: a team's own namespace is admitted by its
		// name, which needs no labels.
		if ev.Deleted {
			l.model.DeleteNamespace(o.Name)
		} else {
			l.model.SetNamespace(o.Name, o.Labels)
		}
	case *kueuev1beta2.WorkloadPriorityClass:
		l.takePolicy()
		l.track(ev.Kind, "", o.Name, o.ResourceVersion, ev.Deleted)
	case *kueuev1beta2.Cohort:
		if ev.Deleted {
			l.model.DeleteCohort(o.Name)
		} else {
			l.model.SetCohort(o)
		}
		if o.Name == l.settings.Cohort {
			l.takePolicy()
			l.track(ev.Kind, "", o.Name, o.ResourceVersion, ev.Deleted)
		}
	default: // nodes and flavors: pages read them from the cache
		l.modelMu.Unlock()
		return
	}
	if _, task := ev.Object.(*WorkloadTask); !task {
		l.cache.PlaceTasksWith(l.model.Placement())
	}
	l.modelMu.Unlock()
	l.observed(ev.Kind, start)
	select {
	case l.dirty <- struct{}{}:
	default:
	}
}

// takePolicy reads the policy objects again from the cache (which already
// holds the change).
func (l *Live) takePolicy() {
	classes, _ := l.cache.WorkloadPriorityClasses.List(labels.Everything())
	cohort, _ := l.cache.Cohorts.Get(l.settings.Cohort)
	l.model.SetPolicyObjects(cohort, classes)
}

func (l *Live) track(kind, namespace, name, rv string, deleted bool) {
	key := kind + "/" + namespace + "/" + name
	if deleted {
		delete(l.applied, key)
		return
	}
	l.applied[key] = appliedVersion{rv, l.model.Changes()}
}

// Snapshot returns the latest snapshot (never nil).
func (l *Live) Snapshot() *domain.Snapshot {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.snap
}

// Subscribe returns a channel that receives what changed with each new
// snapshot (when the reader is slow, the changes since the last it took,
// merged) and a function to stop.
func (l *Live) Subscribe() (<-chan domain.Changes, func()) {
	ch := make(chan domain.Changes, 1)
	l.mu.Lock()
	l.subs[ch] = struct{}{}
	l.mu.Unlock()
	return ch, func() {
		l.mu.Lock()
		delete(l.subs, ch)
		l.mu.Unlock()
	}
}

// Run publishes snapshots until ctx ends.
func (l *Live) Run(ctx context.Context) {
	refresh := time.NewTicker(l.Refresh)
	defer refresh.Stop()
	// Until the caches sync, look often: the first snapshot is published
	// as soon as they have, not at the next event or refresh.
	untilSynced := time.NewTicker(100 * time.Millisecond)
	defer untilSynced.Stop()
	syncing := untilSynced.C
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-syncing:
			if !l.cache.Synced() {
				continue
			}
			syncing = nil
		case <-l.dirty:
			// Coalesce a burst of events into one snapshot.
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
		l.publish()
		last = time.Now()
	}
}

func (l *Live) publish() {
	start := time.Now()
	l.modelMu.Lock()
	snap := l.model.Snapshot(start)
	l.modelMu.Unlock()
	l.observed("snapshot", start)
	l.Publish(snap)
}

// Publish makes snap the current snapshot and tells subscribers what
// changed.
func (l *Live) Publish(snap *domain.Snapshot) {
	l.mu.Lock()
	defer l.mu.Unlock()
	snap.Version = l.snap.Version + 1
	var prev *domain.Snapshot
	if l.snap.Version > 0 && !l.snap.Taken.IsZero() {
		prev = l.snap
	}
	changed := domain.Follow(prev, snap)
	l.snap = snap
	l.published.Store(true)
	for ch := range l.subs {
		select {
		case ch <- changed:
		default:
			// The reader has not taken the previous changes: add these.
			merged := changed
			select {
			case earlier := <-ch:
				merged = earlier
				merged.Add(changed)
			default:
			}
			ch <- merged
		}
	}
}

// Ready is nil once the pages can show the whole cluster: the caches hold
// it, the read model has taken it in, and its first snapshot is published
// (a page asked before would not find a team that exists).
func (l *Live) Ready() error {
	if err := l.cache.Ready(); err != nil {
		return err
	}
	if !l.cache.Synced() || !l.published.Load() {
		return errors.New("the read model is still taking in the cluster's objects")
	}
	return nil
}

// Reachable is the cache's: whether the apiserver answers, and since when it
// has not.
func (l *Live) Reachable() (bool, time.Time) { return l.cache.Reachable() }

// Fresh reports whether the current snapshot was taken at or after t and
// shows every queue, priority class and cohort as the cache holds them now:
// what a write changes is on the next page.
func (l *Live) Fresh(t time.Time) bool {
	snap := l.Snapshot()
	if snap.Taken.Before(t) {
		return false
	}
	l.modelMu.Lock()
	defer l.modelMu.Unlock()
	held := 0
	shows := func(kind, namespace, name, rv string) bool {
		held++
		a, ok := l.applied[kind+"/"+namespace+"/"+name]
		return ok && a.resourceVersion == rv && a.change <= snap.Changes()
	}
	cqs, _ := l.cache.ClusterQueues.List(labels.Everything())
	for _, o := range cqs {
		if !shows("ClusterQueue", o.Namespace, o.Name, o.ResourceVersion) {
			return false
		}
	}
	lqs, _ := l.cache.LocalQueues.List(labels.Everything())
	for _, o := range lqs {
		if !shows("LocalQueue", o.Namespace, o.Name, o.ResourceVersion) {
			return false
		}
	}
	classes, _ := l.cache.WorkloadPriorityClasses.List(labels.Everything())
	for _, o := range classes {
		if !shows("WorkloadPriorityClass", o.Namespace, o.Name, o.ResourceVersion) {
			return false
		}
	}
	if o, err := l.cache.Cohorts.Get(l.settings.Cohort); err == nil && !shows("Cohort", o.Namespace, o.Name, o.ResourceVersion) {
		return false
	}
	return held == len(l.applied) // and no deletion is still on its way
}
