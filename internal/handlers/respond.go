package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/openquota/console/internal/auth"
	"github.com/openquota/console/internal/kueue"
	"github.com/openquota/console/internal/write"
)

// identity is whom the request's changes and access checks are for: the
// signed-in user, as the authenticator named them, or the console itself in
// auth mode none. Handlers resolve it once per request.
func (d Deps) identity(c echo.Context) kueue.Identity {
	if !d.Auth.Impersonates() {
		return kueue.Identity{}
	}
	u := auth.From(c)
	return kueue.Identity{Name: u.Name, Groups: u.Groups, UID: u.UID, Extra: u.Extra}
}

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
