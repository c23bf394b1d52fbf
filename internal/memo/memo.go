// Package memo remembers answers for a while, and asks once however many
// ask at the same time: for reads that many viewers share and that may be a
// little old (Prometheus figures, Kueue's configuration, drift). It imports
// none of the console's packages.
package memo

import (
	"context"
	"sync"
	"time"
)

// Memo remembers answers by key for TTL, failures for FailureTTL.
type Memo[V any] struct {
	TTL, FailureTTL time.Duration
	// Max bounds the answers kept (0: 1024); past it, old ones go.
	Max int
	// Now is the clock (time.Now when nil).
	Now func() time.Time

	mu      sync.Mutex
	answers map[string]*answer[V]
}

type answer[V any] struct {
	done  chan struct{}
	value V
	err   error
	at    time.Time
	// prev is the answer this one replaces, while it is asked (Latest).
	prev *answer[V]
}

func (m *Memo[V]) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

// Get returns a fresh enough answer to key, calling ask when there is none.
// ask runs without the caller's cancellation, since others may wait for
// it: it must bound its own time.
func (m *Memo[V]) Get(ctx context.Context, key string, ask func(context.Context) (V, error)) (V, error) {
	now := m.now()
	m.mu.Lock()
	if m.answers == nil {
		m.answers = map[string]*answer[V]{}
	}
	a := m.answers[key]
	if a != nil && m.stale(a, now) {
		a = nil
	}
	if a == nil {
		m.dropOldLocked(now)
		a = &answer[V]{done: make(chan struct{})}
		m.answers[key] = a
		m.mu.Unlock()
		a.value, a.err = ask(context.WithoutCancel(ctx))
		a.at = m.now()
		close(a.done)
	} else {
		m.mu.Unlock()
	}
	select {
	case <-a.done:
		return a.value, a.err
	case <-ctx.Done():
		var zero V
		return zero, ctx.Err()
	}
}

// Latest returns at once the newest answer to key, fresh or not, and ok
// false when there is none yet (or the newest failed). When the answer is
// missing or stale, ask runs in the background (once, however many call):
// for reads a page can do without, that must never make it wait.
func (m *Memo[V]) Latest(ctx context.Context, key string, ask func(context.Context) (V, error)) (value V, ok bool) {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.answers == nil {
		m.answers = map[string]*answer[V]{}
	}
	a := m.answers[key]
	latest := a
	if a != nil && !answered(a) {
		latest = a.prev
	}
	if a == nil || m.stale(a, now) {
		m.dropOldLocked(now)
		next := &answer[V]{done: make(chan struct{}), prev: latest}
		m.answers[key] = next
		go func() {
			next.value, next.err = ask(context.WithoutCancel(ctx))
			next.at = m.now()
			close(next.done)
			m.mu.Lock()
			next.prev = nil
			m.mu.Unlock()
		}()
	}
	if latest == nil || latest.err != nil {
		return value, false
	}
	return latest.value, true
}

// Peek is Latest that also tells a failure from an answer still being
// asked, waiting at most grace for a first answer (a source that is down
// fails at once). pending is true while the first answer to key is still
// being asked; err is the newest answer's failure.
func (m *Memo[V]) Peek(ctx context.Context, key string, grace time.Duration, ask func(context.Context) (V, error)) (value V, pending bool, err error) {
	if v, ok := m.Latest(ctx, key, ask); ok {
		return v, false, nil
	}
	m.mu.Lock()
	a := m.answers[key]
	first := a != nil && !answered(a) && a.prev == nil // prev is written under the lock
	m.mu.Unlock()
	if first {
		t := time.NewTimer(grace)
		select {
		case <-a.done:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if a = m.answers[key]; a != nil && !answered(a) {
		a = a.prev
	}
	if a == nil {
		return value, true, nil
	}
	return a.value, false, a.err
}

// Recent is Get for answers that may be older than the TTL while a fresh
// one is asked: a stale answer is returned at once and refreshed in the
// background; only when there is none (or it failed) does the caller wait.
func (m *Memo[V]) Recent(ctx context.Context, key string, ask func(context.Context) (V, error)) (V, error) {
	if v, ok := m.Latest(ctx, key, ask); ok {
		return v, nil
	}
	return m.Get(ctx, key, ask)
}

func answered[V any](a *answer[V]) bool {
	select {
	case <-a.done:
		return true
	default:
		return false
	}
}

// stale: answered, and older than its TTL. An answer being asked is never
// stale: callers wait for it.
func (m *Memo[V]) stale(a *answer[V], now time.Time) bool {
	select {
	case <-a.done:
	default:
		return false
	}
	ttl := m.TTL
	if a.err != nil {
		ttl = m.FailureTTL
	}
	return now.Sub(a.at) >= ttl
}

func (m *Memo[V]) dropOldLocked(now time.Time) {
	max := m.Max
	if max <= 0 {
		max = 1024
	}
	if len(m.answers) < max {
		return
	}
	for k, a := range m.answers {
		if m.stale(a, now) {
			delete(m.answers, k)
		}
	}
	for k, a := range m.answers { // all fresh: keep only those being asked
		if len(m.answers) < max {
			break
		}
		select {
		case <-a.done:
			delete(m.answers, k)
		default:
		}
	}
}
