package handlers

import (
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/openquota/console/internal/auth"
)

// StreamLimits cap the live update streams open at once, per user and in
// total: each holds a connection and a goroutine.
type StreamLimits struct{ PerUser, Total int }

// DefaultStreamLimits allow a person a few tabs, and the console a few
// hundred viewers.
var DefaultStreamLimits = StreamLimits{PerUser: 8, Total: 1000}

// streamGate counts open streams.
type streamGate struct {
	limits StreamLimits

	mu      sync.Mutex
	total   int
	perUser map[string]int
}

func newStreamGate(l StreamLimits) *streamGate {
	if l.PerUser <= 0 || l.Total <= 0 {
		l = DefaultStreamLimits
	}
	return &streamGate{limits: l, perUser: map[string]int{}}
}

// enter admits one more stream of user, or says no.
func (g *streamGate) enter(user string) (leave func(), ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.total >= g.limits.Total || g.perUser[user] >= g.limits.PerUser {
		return nil, false
	}
	g.total++
	g.perUser[user]++
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.total--
		if g.perUser[user]--; g.perUser[user] <= 0 {
			delete(g.perUser, user)
		}
	}, true
}

// streamWriteTimeout drops a stream whose client stopped reading.
const streamWriteTimeout = 30 * time.Second

// events streams a "snapshot" event (server-sent events) whenever the
// console's view of Kueue changes; pages then fetch their live parts again.
// Over the stream limits it answers 503, and the page falls back to a
// periodic refresh.
func (d Deps) events(c echo.Context) error {
	who := auth.From(c).Name
	if who == "" {
		who = "address " + auth.ClientAddress(c.Request())
	}
	leave, ok := d.streams.enter(who)
	if !ok {
		c.Response().Header().Set("Retry-After", "30")
		return echo.NewHTTPError(http.StatusServiceUnavailable,
			"Too many live update streams are open (per user or in total); the page refreshes itself every 30 seconds instead.")
	}
	defer leave()
	res := c.Response()
	rc := http.NewResponseController(res.Writer)
	// The server's read timeout would end the stream: a stream reads nothing.
	_ = rc.SetReadDeadline(time.Time{})
	res.Header().Set(echo.HeaderContentType, "text/event-stream")
	res.Header().Set(echo.HeaderCacheControl, "no-cache")
	res.Header().Set("X-Accel-Buffering", "no") // proxies must not buffer the stream
	res.WriteHeader(http.StatusOK)
	versions, stop := d.Live.Subscribe()
	defer stop()
	write := func(format string, args ...any) error {
		_ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
		if _, err := fmt.Fprintf(res, format, args...); err != nil {
			return err
		}
		return rc.Flush()
	}
	if write("retry: 2000\nevent: snapshot\ndata: %d\n\n", d.Live.Snapshot().Version) != nil {
		return nil
	}
	heartbeat := time.NewTicker(15 * time.Second)
	defer heartbeat.Stop()
	done := c.Request().Context().Done()
	var shutdown <-chan struct{}
	if d.Streams != nil {
		shutdown = d.Streams.Done()
	}
	for {
		var err error
		select {
		case <-done:
			return nil
		case <-shutdown:
			return nil
		case v := <-versions:
			err = write("event: snapshot\ndata: %d\n\n", v)
		case <-heartbeat.C:
			err = write(": keep-alive\n\n")
		}
		if err != nil {
			return nil
		}
	}
}
