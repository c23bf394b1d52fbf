package handlers

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
)

// Timeouts bound how long a client may hold a connection without making
// progress: slow headers, slow bodies, idle keep-alive connections, and
// answers it does not read.
type Timeouts struct {
	ReadHeader, Read, Idle, Write time.Duration
}

// DefaultTimeouts fit forms of a few KiB and CSV downloads of tens of MB.
var DefaultTimeouts = Timeouts{ReadHeader: 10 * time.Second, Read: 30 * time.Second, Idle: 2 * time.Minute, Write: 2 * time.Minute}

// MaxHeaderBytes bounds a request's header.
const MaxHeaderBytes = 64 << 10

// NewHTTPServer serves h with t. The write timeout is set per request (see
// writeDeadline) because live update streams must outlive it.
func NewHTTPServer(h http.Handler, t Timeouts) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: t.ReadHeader,
		ReadTimeout:       t.Read,
		IdleTimeout:       t.Idle,
		MaxHeaderBytes:    MaxHeaderBytes,
	}
}

// writeDeadline gives every answer t.Write to be written; a live update
// stream replaces it with a deadline per event.
func writeDeadline(d time.Duration) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if d > 0 {
				_ = http.NewResponseController(c.Response().Writer).SetWriteDeadline(time.Now().Add(d))
			}
			return next(c)
		}
	}
}
