package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/openquota/console/internal/auth"
	"github.com/openquota/console/internal/write"
)

// respond answers a change: after a save, a redirect to next with the
// change's message; after anything else, the page again (rerender) with the
// outcome's status and words. The same outcome gives the same answer on
// every form.
func respond(c echo.Context, o write.Outcome, next string, rerender func(status int) error) error {
	switch o.Kind {
	case write.Saved:
		if o.Message != "" {
			auth.SetFlashOf(c, o.Message)
		}
		return c.Redirect(http.StatusSeeOther, next)
	case write.NotFound:
		return echo.NewHTTPError(http.StatusNotFound, o.Message)
	}
	return rerender(o.Status())
}
