package handlers

import (
	"fmt"
	"net/http"
	"strconv"
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

// enter admits one more stream of user, or says no. user "" is not counted
// per user (auth mode none: one person, on loopback).
func (g *streamGate) enter(user string) (leave func(), ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.total >= g.limits.Total || user != "" && g.perUser[user] >= g.limits.PerUser {
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

// events streams a page's live parts (server-sent events): the page names
// itself (view=/tasks?team=nlp) and the version it shows (v); each
// "fragments" event carries the parts that changed since, as
// {"version": n, "fragments": {element id: inner HTML}}. Over the stream
// limits it answers 503, and the page falls back to a periodic refresh.
func (d Deps) events(c echo.Context) error {
	visible, _ := d.scopeOf(c)
	view, ok := viewOf(c.QueryParam("view"), visible)
	if !ok {
		return echo.NewHTTPError(http.StatusNotFound, "This page has no live parts: view must name the Tasks or a Team usage page.")
	}
	if view.team != "" && !visible.sees(view.team) {
		return echo.NewHTTPError(http.StatusForbidden, fmt.Sprintf("You may not see team %s.", view.team))
	}
	shown, _ := strconv.ParseUint(c.QueryParam("v"), 10, 64)
	who := auth.From(c).Name
	if who == "" && d.Auth.ModeOf() != auth.ModeNone {
		who = "address " + auth.ClientAddress(c.Request())
	}
	leave, ok := d.streams.enter(who)
	if !ok {
		c.Response().Header().Set("Retry-After", "30")
		return echo.NewHTTPError(http.StatusServiceUnavailable,
			"Too many live update streams are open (per user or in total); the page refreshes itself every 30 seconds instead.")
	}
	defer leave()
	watcher, err := d.hub.join(c.Request().Context(), view, shown)
	if err != nil {
		return err
	}
	defer d.hub.leave(view, watcher)

	res := c.Response()
	rc := http.NewResponseController(res.Writer)
	// The server's read timeout would end the stream: a stream reads nothing.
	_ = rc.SetReadDeadline(time.Time{})
	res.Header().Set(echo.HeaderContentType, "text/event-stream")
	res.Header().Set(echo.HeaderCacheControl, "no-cache")
	res.Header().Set("X-Accel-Buffering", "no") // proxies must not buffer the stream
	res.WriteHeader(http.StatusOK)
	write := func(chunks ...[]byte) error {
		_ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
		for _, b := range chunks {
			if _, err := res.Write(b); err != nil {
				return err
			}
		}
		return rc.Flush()
	}
	if write([]byte("retry: 2000\n\n")) != nil {
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
		case <-watcher.ready:
			if data := watcher.take(); data != nil {
				err = write([]byte("event: fragments\ndata: "), data, []byte("\n\n"))
				if d.Metrics != nil && err == nil {
					d.Metrics.LiveEvents.Inc()
				}
			}
		case <-heartbeat.C:
			err = write([]byte(": keep-alive\n\n"))
		}
		if err != nil {
			return nil
		}
	}
}
