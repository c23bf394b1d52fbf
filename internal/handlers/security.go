package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/openquota/console/internal/auth"
	"github.com/openquota/console/internal/kueue"
	"github.com/openquota/console/web/templates"
)

// ContentSecurityPolicy allows only the console's own scripts, styles and
// images (no inline script or style attribute), and no framing.
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; frame-ancestors 'none'; form-action 'self'"

// MaxBodyBytes bounds a request body (forms are a few KiB).
const MaxBodyBytes = 1 << 20

// securityHeaders sets the headers every answer carries.
func securityHeaders(secure func(*http.Request) bool) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			// As Header.Set, with the values in one allocation (the names
			// are canonical).
			h := c.Response().Header()
			v := make([]string, 6)
			v[0], v[1], v[2], v[3] = ContentSecurityPolicy, "nosniff", "DENY", "same-origin"
			h["Content-Security-Policy"] = v[0:1:1]
			h[echo.HeaderXContentTypeOptions] = v[1:2:2]
			h[echo.HeaderXFrameOptions] = v[2:3:3]
			h[echo.HeaderReferrerPolicy] = v[3:4:4]
			if secure(c.Request()) {
				v[4] = "max-age=31536000"
				h[echo.HeaderStrictTransportSecurity] = v[4:5:5]
			}
			// Pages, exports and answers show teams' figures: no browser
			// history, back-forward or proxy cache keeps them past a
			// sign-out. Only the static files may be kept.
			if !strings.HasPrefix(c.Request().URL.Path, "/static/") {
				v[5] = "no-store"
				h[echo.HeaderCacheControl] = v[5:6:6]
			}
			return next(c)
		}
	}
}

// isPublic are the paths served without sign-in: probes, metrics, static
// files and the sign-in page itself.
func isPublic(c echo.Context) bool {
	return isProbeOrStatic(c) || c.Request().URL.Path == auth.SignInPath
}

// isProbeOrStatic are the paths no form posts to.
func isProbeOrStatic(c echo.Context) bool {
	p := c.Request().URL.Path
	switch p {
	case "/healthz", "/readyz", "/metrics":
		return true
	}
	return strings.HasPrefix(p, "/static/")
}

// viewerContext is the request context with what the page frame and forms
// need: the auth mode, the signed-in user and the CSRF token.
func viewerContext(c echo.Context) context.Context {
	u := auth.From(c)
	return templates.WithViewer(c.Request().Context(), templates.Viewer{
		Mode: string(auth.ModeFrom(c)), Name: u.Name, Groups: u.Groups, CSRF: auth.CSRFTokenOf(c),
	})
}

// signInRoutes serve the token mode's sign-in and sign-out.
func signInRoutes(e *echo.Echo, f frame) {
	e.GET(auth.SignInPath, func(c echo.Context) error {
		if auth.From(c).SignedIn() {
			return c.Redirect(http.StatusSeeOther, auth.SafeNext(c.QueryParam("next")))
		}
		return renderSignIn(c, http.StatusOK, auth.SafeNext(c.QueryParam("next")), "", auth.TakeFlashOf(c))
	})
	e.POST(auth.SignInPath, func(c echo.Context) error {
		next := auth.SafeNext(c.Request().PostFormValue("next"))
		u, err := f.auth.SignIn(c, c.Request().PostFormValue("token")) // never the URL's: logs keep it
		switch {
		case errors.Is(err, auth.ErrTooManySignIns):
			c.Response().Header().Set("Retry-After", "10")
			return renderSignIn(c, http.StatusTooManyRequests, next, "Too many sign-in attempts from your address: wait a few seconds and try again.", "")
		case errors.Is(err, auth.ErrTooManyAccountSignIns):
			c.Response().Header().Set("Retry-After", "60")
			return renderSignIn(c, http.StatusTooManyRequests, next, "This account signed in too many times in a short while: wait a minute and try again.", "")
		case errors.Is(err, auth.ErrSignOutsFull):
			f.log.Warn("sign-in refused: the list of signed-out accounts is full", "user", u.Name)
			c.Response().Header().Set("Retry-After", "600")
			return renderSignIn(c, http.StatusServiceUnavailable, next, "The console is not taking new sign-ins right now: it keeps every sign-out until the signed-out sessions would have ended, "+
				"and that list is full. Try again later, or ask a platform admin.", "")
		case errors.Is(err, auth.ErrSessionTooLarge):
			return renderSignIn(c, http.StatusUnprocessableEntity, next, "Your account has too many groups or attributes for the console to keep in a session cookie. Ask a platform admin to run the console with --auth proxy.", "")
		case errors.Is(err, auth.ErrTokenRejected):
			return renderSignIn(c, http.StatusUnauthorized, next, "The cluster did not accept this token: it is unknown, expired or revoked. Nothing was kept.", "")
		case err != nil:
			f.log.Error("sign-in", "err", err)
			return renderSignIn(c, http.StatusBadGateway, next, "The cluster could not check the token right now; try again in a moment.", "")
		}
		f.log.Info("signed in", "user", u.Name, "groups", u.Groups)
		return c.Redirect(http.StatusSeeOther, next)
	})
	e.POST(auth.SignOutPath, func(c echo.Context) error {
		who := auth.From(c).Name
		if err := f.auth.SignOut(c); err != nil {
			f.log.Error("sign-out: the sign-out could not be recorded for every replica", "user", who, "err", err)
			auth.SetFlashOf(c, "Signed out here, but the console could not record the sign-out for its other replicas: "+
				"your sessions in other browsers may still work. Sign in and out again, or ask a platform admin.")
		} else if who != "" {
			auth.SetFlashOf(c, "Signed out: every session of "+who+" has ended, in every browser.")
		}
		return c.Redirect(http.StatusSeeOther, auth.SignInPath)
	})
}

func renderSignIn(c echo.Context, status int, next, msg, notice string) error {
	return render(c, status, templates.SignIn(templates.SignInView{
		Page: templates.Page{Title: "Sign in", Active: ""}, Next: next, Error: msg, Notice: notice,
	}))
}

// What the forms need the user to be allowed; they are read-only otherwise.
var (
	mayEditTeams   = kueue.ChangeClusterQueues
	mayDeleteTeams = kueue.DeleteClusterQueues
	mayEditPolicy  = kueue.ChangePriorityClasses
)

// previewDenied says why the user gets no impact preview of a change, ""
// when they do: it names other teams' tasks, so only who the cluster says
// may make the change sees it, and nobody while the cluster cannot say.
func (f frame) previewDenied(c echo.Context, p kueue.Permission) string {
	why, known := f.denial(c, p)
	if !known {
		return "The cluster could not say whether you may " + p.What + ", so no preview is shown. Try again in a moment."
	}
	return why
}

// readOnly says why the user may not use a form, or "" when they may (or
// when the cluster could not say: then it decides on save).
func (f frame) readOnly(c echo.Context, p kueue.Permission) string {
	why, _ := f.denial(c, p)
	return why
}

// denial asks the cluster once whether the user may p: why not ("" when
// they may, or when it could not say), and whether it said.
func (f frame) denial(c echo.Context, p kueue.Permission) (why string, known bool) {
	id := f.identity(c)
	allowed, known := f.allowed(c.Request().Context(), id, p)
	if allowed || !known {
		return "", known
	}
	who := "The console's own Kubernetes account"
	if id.Name != "" {
		who = "Your account " + id.Name
	}
	return fmt.Sprintf("%s may not %s in this cluster, so this form is read-only. "+
		"Ask a platform admin for the quota-console-admin role to make changes.", who, p.What), true
}
