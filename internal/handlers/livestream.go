package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/openquota/console/internal/auth"
	"github.com/openquota/console/internal/metrics"
)

// newStreamGate counts open streams. user "" is not counted per user (auth
// mode none: one person, on loopback).
func newStreamGate(l StreamLimits) *gate {
	g := newGate(l, DefaultStreamLimits)
	g.perUserSkipsNoUser = true
	return g
}

// streamWriteTimeout drops a stream whose client stopped reading.
const streamWriteTimeout = 30 * time.Second

// DefaultStreamLifetime ends every stream after a while: the page
// reconnects through the sign-in and read checks of a new request.
const DefaultStreamLifetime = 10 * time.Minute

// DefaultStreamHeartbeat is how often a live stream says it is alive.
const DefaultStreamHeartbeat = 15 * time.Second

// scopeRecheck is how often a stream asks again what its viewer may see
// (the access checks remember answers for 30 seconds).
const scopeRecheck = 5 * time.Second

// events streams a page's live parts (server-sent events): the page names
// itself (view=/tasks?team=nlp) and the version it shows (v); each
// "fragments" event carries the parts that changed since, as
// {"version": n, "fragments": {element id: inner HTML}}. Over the stream
// limits it answers 503, and the page falls back to a periodic refresh.
//
// Before it sends anything the stream checks that the viewer is still
// signed in (the session neither expired nor signed out) and may still see
// what the view shows; otherwise, and after its lifetime, it ends, and the
// page's reconnection passes the checks of a new request.
// liveStreams serve the live update streams of the pages' views.
type liveStreams struct {
	frame
	live     *liveViews
	gate     *gate
	lifetime time.Duration
	// heartbeat is Limits.StreamHeartbeat.
	heartbeat time.Duration
	// shutdown ends every stream when the server shuts down.
	shutdown context.Context
	metrics  *metrics.Console
}

func (s liveStreams) serve(c echo.Context) error {
	visible, _ := s.scopeOf(c)
	view, ok := viewOf(c.QueryParam("view"), visible)
	if _, served := s.live.routes[view.route]; !ok || !served {
		return echo.NewHTTPError(http.StatusNotFound, "This page has no live parts: view must name the Tasks, Insights or a Team usage page.")
	}
	if view.team != "" && !visible.sees(view.team) {
		return echo.NewHTTPError(http.StatusForbidden, fmt.Sprintf("You may not see team %s.", view.team))
	}
	shown, _ := strconv.ParseUint(c.QueryParam("v"), 10, 64)
	who := auth.From(c).Name
	if who == "" && s.auth.ModeOf() != auth.ModeNone {
		who = "address " + s.auth.ClientAddress(c.Request())
	}
	leave, full := s.gate.enter(who)
	if full != gateOpen {
		c.Response().Header().Set("Retry-After", "30")
		return echo.NewHTTPError(http.StatusServiceUnavailable,
			"Too many live update streams are open (per user or in total); the page refreshes itself every 30 seconds instead.")
	}
	defer leave()
	watcher, err := s.live.hub.join(c.Request().Context(), view, shown)
	if err != nil {
		return err
	}
	defer s.live.hub.leave(view, watcher)

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
	every := s.heartbeat
	if every <= 0 {
		every = DefaultStreamHeartbeat
	}
	heartbeat := time.NewTicker(every)
	defer heartbeat.Stop()
	end := time.NewTimer(s.streamEnd(c))
	defer end.Stop()
	done := c.Request().Context().Done()
	var shutdown <-chan struct{}
	if s.shutdown != nil {
		shutdown = s.shutdown.Done()
	}
	entitled := s.streamEntitlement(c, view)
	for {
		var err error
		select {
		case <-done:
			return nil
		case <-shutdown:
			return nil
		case <-end.C:
			return nil
		case <-watcher.ready:
			if !entitled() {
				return nil
			}
			if data := watcher.take(); data != nil {
				err = write([]byte("event: fragments\ndata: "), data, []byte("\n\n"))
				if err == nil {
					s.metrics.LiveEvents.Inc()
				}
			}
		case <-heartbeat.C:
			if !entitled() {
				return nil
			}
			// The heartbeat carries the banner of what is missing (the
			// cluster not answering, say), so that an open page does not
			// go on showing figures as live: "" clears it.
			banner, _ := json.Marshal(s.problem())
			err = write([]byte("event: problem\ndata: "), banner, []byte("\n\n"))
		}
		if err != nil {
			return nil
		}
	}
}

// streamEnd is how long c's stream may last: its lifetime, or until the
// session expires if that is sooner.
func (s liveStreams) streamEnd(c echo.Context) time.Duration {
	life := s.lifetime
	if life <= 0 {
		life = DefaultStreamLifetime
	}
	if expires := s.auth.SessionExpires(c); !expires.IsZero() && time.Until(expires) < life {
		life = time.Until(expires)
	}
	return life
}

// streamEntitlement tells whether c's viewer may still receive view: the
// sign-in holds (asked each time) and the scope is the one the view was
// made for (asked at most every scopeRecheck). A scope that changed ends
// the stream, so that the page reconnects into the view of its new scope.
func (s liveStreams) streamEntitlement(c echo.Context, view liveView) func() bool {
	checked := time.Now()
	return func() bool {
		if !s.auth.Current(c) {
			return false
		}
		if time.Since(checked) < scopeRecheck {
			return true
		}
		checked = time.Now()
		c.Set(echoScopeKey, nil) // ask again, not the request's first answer
		now, known := s.scopeOf(c)
		return known && now.key() == view.scope.key()
	}
}
