package handlers

import (
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
)

// events streams a "snapshot" event (server-sent events) whenever the
// console's view of Kueue changes; pages then fetch their live parts again.
func events(d Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		res := c.Response()
		res.Header().Set(echo.HeaderContentType, "text/event-stream")
		res.Header().Set(echo.HeaderCacheControl, "no-cache")
		res.Header().Set("X-Accel-Buffering", "no") // proxies must not buffer the stream
		res.WriteHeader(http.StatusOK)
		versions, stop := d.Live.Subscribe()
		defer stop()
		fmt.Fprintf(res, "retry: 2000\nevent: snapshot\ndata: %d\n\n", d.Live.Snapshot().Version)
		res.Flush()
		heartbeat := time.NewTicker(15 * time.Second)
		defer heartbeat.Stop()
		done := c.Request().Context().Done()
		var shutdown <-chan struct{}
		if d.Streams != nil {
			shutdown = d.Streams.Done()
		}
		for {
			select {
			case <-done:
				return nil
			case <-shutdown:
				return nil
			case v := <-versions:
				fmt.Fprintf(res, "event: snapshot\ndata: %d\n\n", v)
			case <-heartbeat.C:
				fmt.Fprint(res, ": keep-alive\n\n")
			}
			res.Flush()
		}
	}
}
