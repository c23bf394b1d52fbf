package auth

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Limits are a rate per client address and for everyone together.
type Limits struct {
	PerClient      rate.Limit
	PerClientBurst int
	Total          rate.Limit
	TotalBurst     int
	// MaxClients bounds the addresses remembered at once.
	MaxClients int
}

// DefaultSignInLimits let a person retry a mistyped token at once, and slow
// a script to a few TokenReviews a second: per address 1 every 2 s after 10
// at once; for everyone 20 a second after 50.
var DefaultSignInLimits = Limits{PerClient: 0.5, PerClientBurst: 10, Total: 20, TotalBurst: 50, MaxClients: 10000}

// Limiter allows events at Limits. Behind a proxy every client shares the
// proxy's address, so the per-client limit becomes a second total one.
type Limiter struct {
	limits Limits
	now    func() time.Time

	mu      sync.Mutex
	total   *rate.Limiter
	clients map[string]*rate.Limiter
}

// NewLimiter applies l.
func NewLimiter(l Limits) *Limiter {
	return &Limiter{limits: l, now: time.Now, total: rate.NewLimiter(l.Total, l.TotalBurst), clients: map[string]*rate.Limiter{}}
}

// Allow takes one event for client; false when over either limit.
func (l *Limiter) Allow(client string) bool {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.clients[client]
	if c == nil {
		if len(l.clients) >= l.limits.MaxClients {
			l.forgetIdle(now)
		}
		c = rate.NewLimiter(l.limits.PerClient, l.limits.PerClientBurst)
		l.clients[client] = c
	}
	if !c.AllowN(now, 1) {
		return false
	}
	return l.total.AllowN(now, 1)
}

// forgetIdle drops clients whose allowance is full again (they are as good
// as new), and if that is not enough, every client: a burst from many
// addresses must not grow the map without bound.
func (l *Limiter) forgetIdle(now time.Time) {
	for k, c := range l.clients {
		if c.TokensAt(now) >= float64(l.limits.PerClientBurst) {
			delete(l.clients, k)
		}
	}
	if len(l.clients) >= l.limits.MaxClients {
		clear(l.clients)
	}
}

// Clients is how many client addresses are remembered.
func (l *Limiter) Clients() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.clients)
}
