package auth

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
)

// Paths of the token mode's sign-in and sign-out.
const (
	SignInPath  = "/auth/sign-in"
	SignOutPath = "/auth/sign-out"
)

// Authenticator is the configured auth mode. A nil *Authenticator is mode none.
type Authenticator struct {
	Mode  Mode
	Proxy Proxy // mode proxy
	// Tokens and Sessions: mode token.
	Tokens   TokenReviewer
	Sessions *Sessions
	// SecureCookies marks cookies Secure even on plain HTTP (behind a
	// TLS-terminating proxy); they are Secure on TLS requests anyway.
	SecureCookies bool
}

// ModeOf is a's mode; nil is mode none.
func (a *Authenticator) ModeOf() Mode {
	if a == nil || a.Mode == "" {
		return ModeNone
	}
	return a.Mode
}

// Impersonates reports whether writes run as the signed-in user (proxy and
// token modes) rather than as the console itself (mode none).
func (a *Authenticator) Impersonates() bool { return a.ModeOf() != ModeNone }

// Secure is whether cookies on r's response are Secure.
func (a *Authenticator) Secure(r *http.Request) bool {
	return SecureRequest(r, a != nil && a.SecureCookies)
}

// Middleware puts the request's User in the context, or refuses the
// request: 401 in proxy mode; in token mode a page request is sent to the
// sign-in page and anything else gets 401. Requests for which public is true
// (health, metrics, static files, the sign-in page) pass without a user,
// though a user who is signed in is still recognised there.
func (a *Authenticator) Middleware(public func(c echo.Context) bool) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			isPublic := public != nil && public(c)
			c.Set(echoModeKey, a.ModeOf())
			switch a.ModeOf() {
			case ModeNone:
				set(c, User{})
				return next(c)
			case ModeProxy:
				u, err := a.Proxy.Authenticate(c.Request())
				if err == nil {
					set(c, u)
					return next(c)
				}
				if isPublic {
					return next(c)
				}
				msg := "Sign-in required: this console accepts users only through its authenticating proxy."
				if errors.Is(err, ErrNoUser) {
					msg = "Sign-in required: the authenticating proxy did not say who you are."
				}
				return echo.NewHTTPError(http.StatusUnauthorized, msg)
			case ModeToken:
				if u, ok := a.sessionUser(c); ok {
					set(c, u)
					return next(c)
				}
				if isPublic {
					return next(c)
				}
				r := c.Request()
				if (r.Method == http.MethodGet || r.Method == http.MethodHead) && wantsPage(r) {
					return c.Redirect(http.StatusSeeOther, SignInPath+"?next="+url.QueryEscape(r.URL.RequestURI()))
				}
				return echo.NewHTTPError(http.StatusUnauthorized, "Sign-in required: sign in at "+SignInPath+".")
			}
			return echo.NewHTTPError(http.StatusInternalServerError, "unknown auth mode")
		}
	}
}

// wantsPage tells a browser's page load from scripts and streams, which get
// 401 rather than a redirect to a page.
func wantsPage(r *http.Request) bool {
	return r.Header.Get("X-Live") == "" && strings.Contains(r.Header.Get(echo.HeaderAccept), "text/html")
}

func (a *Authenticator) sessionUser(c echo.Context) (User, bool) {
	if a.Sessions == nil {
		return User{}, false
	}
	ck, err := c.Cookie(SessionCookie)
	if err != nil {
		return User{}, false
	}
	return a.Sessions.Lookup(ck.Value)
}

// SignIn checks token with the TokenReviewer and, if the cluster accepts it,
// starts a session and sets its cookie. The token is not kept.
func (a *Authenticator) SignIn(c echo.Context, token string) (User, error) {
	if a.ModeOf() != ModeToken || a.Tokens == nil || a.Sessions == nil {
		return User{}, errors.New("sign-in with a token is not enabled (--auth token)")
	}
	u, err := a.Tokens.Review(c.Request().Context(), token)
	if err != nil {
		return User{}, err
	}
	// A new id at every sign-in: a session id planted before sign-in is worthless.
	if old, err := c.Cookie(SessionCookie); err == nil {
		a.Sessions.Delete(old.Value)
	}
	id, expires, err := a.Sessions.Create(u)
	if err != nil {
		return User{}, err
	}
	c.SetCookie(a.cookie(c.Request(), id, expires))
	set(c, u)
	return u, nil
}

// SignOut ends the session and clears its cookie.
func (a *Authenticator) SignOut(c echo.Context) {
	if a == nil || a.Sessions == nil {
		return
	}
	if ck, err := c.Cookie(SessionCookie); err == nil {
		a.Sessions.Delete(ck.Value)
	}
	ck := a.cookie(c.Request(), "", time.Unix(0, 0))
	ck.MaxAge = -1
	c.SetCookie(ck)
}

func (a *Authenticator) cookie(r *http.Request, value string, expires time.Time) *http.Cookie {
	return &http.Cookie{
		Name:     SessionCookie,
		Value:    value,
		Path:     "/",
		Expires:  expires,
		HttpOnly: true,
		Secure:   a.Secure(r),
		SameSite: http.SameSiteLaxMode,
	}
}

// SafeNext is where to go after sign-in: a path on this console, never
// another site ("//evil.example", "https://…", "/\evil").
func SafeNext(next string) string {
	if next == "" || !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, `/\`) {
		return "/"
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil {
		return "/"
	}
	if strings.HasPrefix(u.Path, SignInPath) || strings.HasPrefix(u.Path, SignOutPath) {
		return "/"
	}
	return next
}
