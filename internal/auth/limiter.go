package auth

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Limits are a rate per key (a client address, an account) and for everyone
// together.
type Limits struct {
	PerClient      rate.Limit
	PerClientBurst int
	Total          rate.Limit
	TotalBurst     int
	// MaxClients bounds the keys remembered at once.
	MaxClients int
}

// DefaultSignInLimits let a person retry a mistyped token at once, and slow
// a script to a few TokenReviews a second: per client address 1 rejected
// token every 2 s after 10; for everyone 20 attempts a second after 50.
var DefaultSignInLimits = Limits{PerClient: 0.5, PerClientBurst: 10, Total: 20, TotalBurst: 50, MaxClients: 10000}

// DefaultAccountLimits bound the sign-ins of one account (after the
// TokenReview said whose the token is): 20 at once, then one a minute. A
// person never meets them; a script signing in and out over and over does.
var DefaultAccountLimits = Limits{PerClient: rate.Every(time.Minute), PerClientBurst: 20, Total: rate.Inf, TotalBurst: 1, MaxClients: 10000}

// Limiter allows events at Limits. Each key has a bucket of PerClientBurst
// events that refills at PerClient; a taken event can be given back. A key
// draws on the total, unless it took an event it did not give back within
// suspectFor: then on an allowance of the same size for such keys, so that
// keys spending theirs, even paced to their own allowance, cannot spend
// everyone's.
type Limiter struct {
	limits Limits
	now    func() time.Time

	mu sync.Mutex
	// total is everyone's allowance; suspect is that of the clients who
	// spent some of their own (refused tokens are not given back): guesses
	// from many addresses, each within its allowance, drain suspect and
	// leave total to everyone else.
	total, suspect bucket
	clients        map[string]*bucket
}

// bucket is a token bucket: tokens as of at. suspectUntil is, for a client,
// until when its events draw on the suspects' allowance: for suspectFor
// after one it took and did not give back (a refused token).
type bucket struct {
	tokens       float64
	at           time.Time
	suspectUntil time.Time
}

// suspectFor is how long a client whose event was not given back draws on
// the suspects' allowance: guesses paced to its own allowance (one every
// 2 s) stay there.
const suspectFor = time.Minute

// fill brings b to now at rate r, up to burst.
func (b *bucket) fill(now time.Time, r rate.Limit, burst int) {
	if r == rate.Inf {
		b.tokens = float64(burst)
	} else if d := now.Sub(b.at); d > 0 {
		b.tokens = math.Min(float64(burst), b.tokens+d.Seconds()*float64(r))
	}
	b.at = now
}

// NewLimiter applies l.
func NewLimiter(l Limits) *Limiter {
	return &Limiter{limits: l, now: time.Now, total: bucket{tokens: float64(l.TotalBurst)}, suspect: bucket{tokens: float64(l.TotalBurst)},
		clients: map[string]*bucket{}}
}

// Allow takes one event for client; false when over either limit.
func (l *Limiter) Allow(client string) bool {
	_, ok := l.Take(client)
	return ok
}

// Take takes one event for client, or none and false when over either
// limit. giveBack returns the client's share of it (an attempt that turned
// out not to count against the client); the total keeps it.
func (l *Limiter) Take(client string) (giveBack func(), ok bool) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.clients[client]
	if c == nil {
		if len(l.clients) >= l.limits.MaxClients {
			l.forgetIdle(now)
		}
		c = &bucket{tokens: float64(l.limits.PerClientBurst), at: now}
		l.clients[client] = c
	}
	c.fill(now, l.limits.PerClient, l.limits.PerClientBurst)
	shared := &l.total
	if now.Before(c.suspectUntil) {
		shared = &l.suspect
	}
	shared.fill(now, l.limits.Total, l.limits.TotalBurst)
	if c.tokens < 1 || shared.tokens < 1 {
		return nil, false
	}
	c.tokens--
	shared.tokens--
	wasSuspect := c.suspectUntil
	c.suspectUntil = now.Add(suspectFor)
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if c := l.clients[client]; c != nil {
				c.fill(l.now(), l.limits.PerClient, l.limits.PerClientBurst)
				c.tokens = math.Min(float64(l.limits.PerClientBurst), c.tokens+1)
				c.suspectUntil = wasSuspect // an event that counted for nothing
			}
		})
	}, true
}

// forgetIdle drops clients whose allowance is full again (they are as good
// as new), and if that is not enough, every client: a burst from many
// addresses must not grow the map without bound.
func (l *Limiter) forgetIdle(now time.Time) {
	for k, c := range l.clients {
		if c.fill(now, l.limits.PerClient, l.limits.PerClientBurst); c.tokens >= float64(l.limits.PerClientBurst) && !now.Before(c.suspectUntil) {
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
