package handlers

import (
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/openquota/console/internal/metrics"
)

// requestMetrics counts and times requests by route template and method.
// A route the server did not register counts as "other", so that requests,
// which anyone can send before signing in, cannot create series without
// bound (the metrics bound methods and status codes the same way).
func requestMetrics(m *metrics.Console) echo.MiddlewareFunc {
	var once sync.Once
	routes := map[string]bool{}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			once.Do(func() {
				for _, r := range c.Echo().Routes() {
					routes[r.Path] = true
				}
			})
			start := time.Now()
			err := next(c)
			status := c.Response().Status
			if he, ok := err.(*echo.HTTPError); ok {
				status = he.Code
			}
			route := c.Path()
			if !routes[route] {
				route = "other"
			}
			m.ObserveRequest(route, c.Request().Method, status, time.Since(start))
			return err
		}
	}
}
