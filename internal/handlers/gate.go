package handlers

import "sync"

// Concurrency caps how many of a kind of long request (live streams, exports of
// the task history) run at once, per user and in all: each holds a
// connection and a goroutine, an export a store connection too.
type Concurrency struct{ PerUser, Total int }

// StreamLimits cap the live update streams open at once.
type StreamLimits = Concurrency

// ExportLimits cap the CSV exports of the task history running at once:
// each one reads the store and may last as long as its client takes to
// read it (up to the write timeout).
type ExportLimits = Concurrency

// DefaultStreamLimits allow a person a few tabs, and the console a few
// hundred viewers.
var DefaultStreamLimits = StreamLimits{PerUser: 8, Total: 1000}

// DefaultExportLimits let a person download a couple of reports at once,
// and keep the store's connections for the pages and the recorder.
var DefaultExportLimits = ExportLimits{PerUser: 2, Total: 8}

// gate counts what runs, per user and in all.
type gate struct {
	limits Concurrency
	// perUserSkipsNoUser: user "" is not counted per user.
	perUserSkipsNoUser bool

	mu      sync.Mutex
	total   int
	perUser map[string]int
}

// newGate is a gate of limits, or of defaults when limits are unset.
func newGate(limits, defaults Concurrency) *gate {
	if limits.PerUser <= 0 || limits.Total <= 0 {
		limits = defaults
	}
	return &gate{limits: limits, perUser: map[string]int{}}
}

// gateFull says which limit a refused entry met.
type gateFull int

const (
	gateOpen gateFull = iota
	userFull
	totalFull
)

// enter admits one more of user, with its leave (which may be called more
// than once), or says which limit is met.
func (g *gate) enter(user string) (leave func(), full gateFull) {
	g.mu.Lock()
	defer g.mu.Unlock()
	counted := user != "" || !g.perUserSkipsNoUser
	switch {
	case counted && g.perUser[user] >= g.limits.PerUser:
		return nil, userFull
	case g.total >= g.limits.Total:
		return nil, totalFull
	}
	g.total++
	if counted {
		g.perUser[user]++
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			defer g.mu.Unlock()
			g.total--
			if !counted {
				return
			}
			if g.perUser[user]--; g.perUser[user] <= 0 {
				delete(g.perUser, user)
			}
		})
	}, gateOpen
}

// running is how many of user run.
func (g *gate) running(user string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.perUser[user]
}
