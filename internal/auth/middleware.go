package auth

import (
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
)

// Paths of the token mode's sign-in and sign-out.
const (
	SignInPath  = "/auth/sign-in"
	SignOutPath = "/auth/sign-out"
)

// Authenticator is the configured auth mode. A nil *Authenticator is mode
// none with keys of its own (handlers.New makes one).
type Authenticator struct {
	Mode  Mode
	Proxy Proxy // mode proxy
	// Tokens and Sessions: mode token.
	Tokens   TokenReviewer
	Sessions *Sessions
	// SignIns limits sign-in attempts (each costs a TokenReview); nil uses
	// DefaultSignInLimits.
	SignIns *Limiter
	// SecureCookies marks cookies Secure (and __Host-) even on plain HTTP
	// (behind a TLS-terminating proxy); on TLS requests they are anyway.
	SecureCookies bool
	// Keys sign CSRF tokens and flash messages; zero means keys of this
	// process only (see RandomKeys).
	Keys Keys

	once sync.Once
}

func (a *Authenticator) init() {
	a.once.Do(func() {
		if a.Keys == (Keys{}) {
			a.Keys = RandomKeys()
		}
		if a.SignIns == nil {
			a.SignIns = NewLimiter(DefaultSignInLimits)
		}
	})
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

// cookieName is name with the __Host- prefix on secure requests: a browser
// then refuses the cookie from anyone but this exact origin, so a sibling
// subdomain cannot plant or overwrite it.
func (a *Authenticator) cookieName(r *http.Request, name string) string {
	if a.Secure(r) {
		return "__Host-" + name
	}
	return name
}

func (a *Authenticator) cookie(r *http.Request, name, value string, expires time.Time) *http.Cookie {
	return &http.Cookie{
		Name:     a.cookieName(r, name),
		Value:    value,
		Path:     "/",
		Expires:  expires,
		HttpOnly: true,
		Secure:   a.Secure(r),
		SameSite: http.SameSiteLaxMode,
	}
}

func (a *Authenticator) clearCookie(c echo.Context, name string) {
	ck := a.cookie(c.Request(), name, "", time.Unix(0, 0))
	ck.MaxAge = -1
	c.SetCookie(ck)
}

const (
	echoSessionKey       = "auth.session"
	echoAuthenticatorKey = "auth.authenticator"
)

// CSRFTokenOf is the CSRF token of the request (see CSRFToken); "" outside
// the middleware.
func CSRFTokenOf(c echo.Context) string {
	if a, ok := c.Get(echoAuthenticatorKey).(*Authenticator); ok {
		return a.CSRFToken(c)
	}
	return ""
}

// SetFlashOf leaves msg for the next page (see SetFlash).
func SetFlashOf(c echo.Context, msg string) {
	if a, ok := c.Get(echoAuthenticatorKey).(*Authenticator); ok {
		a.SetFlash(c, msg)
	}
}

// TakeFlashOf reads the message SetFlashOf left (see TakeFlash).
func TakeFlashOf(c echo.Context) string {
	if a, ok := c.Get(echoAuthenticatorKey).(*Authenticator); ok {
		return a.TakeFlash(c)
	}
	return ""
}

// Middleware puts the request's User in the context, or refuses the
// request: 401 in proxy mode; in token mode a page request is sent to the
// sign-in page and anything else gets 401. Requests for which public is true
// (health, metrics, static files, the sign-in page) pass without a user,
// though a user who is signed in is still recognised there. In mode none
// only requests addressed to a loopback name pass (see LoopbackHost).
func (a *Authenticator) Middleware(public func(c echo.Context) bool) echo.MiddlewareFunc {
	if a == nil {
		a = &Authenticator{Mode: ModeNone}
	}
	a.init()
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			isPublic := public != nil && public(c)
			c.Set(echoModeKey, a.ModeOf())
			c.Set(echoAuthenticatorKey, a)
			switch a.ModeOf() {
			case ModeNone:
				if !LoopbackHost(c.Request().Host) {
					return echo.NewHTTPError(http.StatusMisdirectedRequest,
						"This console runs without sign-in and answers only requests addressed to localhost or a loopback address.")
				}
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
				switch {
				case errors.Is(err, ErrNoUser):
					msg = "Sign-in required: the authenticating proxy did not say who you are."
				case errors.Is(err, ErrRepeatedGroups):
					msg = "Sign-in refused: the request named your groups more than once, so the console cannot tell which the proxy set."
				}
				return echo.NewHTTPError(http.StatusUnauthorized, msg)
			case ModeToken:
				if s, ok := a.session(c); ok {
					c.Set(echoSessionKey, s)
					set(c, s.User)
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

// LoopbackHost reports whether a request's Host names this machine:
// localhost or a loopback address, with any port. Without sign-in this is
// what keeps a web page elsewhere from reaching the console through DNS
// rebinding (a name of the attacker's that resolves to 127.0.0.1).
func LoopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// wantsPage tells a browser's page load from scripts and streams, which get
// 401 rather than a redirect to a page.
func wantsPage(r *http.Request) bool {
	return r.Header.Get("X-Live") == "" && strings.Contains(r.Header.Get(echo.HeaderAccept), "text/html")
}

func (a *Authenticator) session(c echo.Context) (Session, bool) {
	if a.Sessions == nil {
		return Session{}, false
	}
	ck, err := c.Cookie(a.cookieName(c.Request(), SessionCookie))
	if err != nil {
		return Session{}, false
	}
	return a.Sessions.Lookup(ck.Value)
}

// ErrTooManySignIns is a client over its sign-in rate.
var ErrTooManySignIns = errors.New("too many sign-in attempts")

// SignIn checks token with the TokenReviewer and, if the cluster accepts it,
// starts a session and sets its cookie. The session ends when the token
// expires, if sooner than SessionTTL. The token is not kept. A client over
// its sign-in rate gets ErrTooManySignIns without a TokenReview.
func (a *Authenticator) SignIn(c echo.Context, token string) (User, error) {
	a.init()
	if a.ModeOf() != ModeToken || a.Tokens == nil || a.Sessions == nil {
		return User{}, errors.New("sign-in with a token is not enabled (--auth token)")
	}
	if !a.SignIns.Allow(ClientAddress(c.Request())) {
		return User{}, ErrTooManySignIns
	}
	u, err := a.Tokens.Review(c.Request().Context(), token)
	if err != nil {
		return User{}, err
	}
	// A session planted before sign-in (cookie tossing) is replaced, and ended.
	if old, ok := a.session(c); ok {
		_ = a.Sessions.End(c.Request().Context(), old)
	}
	value, sess, err := a.Sessions.Create(u, TokenExpiry(token))
	if err != nil {
		return User{}, err
	}
	c.SetCookie(a.cookie(c.Request(), SessionCookie, value, sess.Expires))
	c.Set(echoSessionKey, sess)
	set(c, u)
	return u, nil
}

// SignOut ends the session everywhere (its id is revoked) and clears its cookie.
func (a *Authenticator) SignOut(c echo.Context) error {
	if a == nil || a.Sessions == nil {
		return nil
	}
	var err error
	if s, ok := a.session(c); ok {
		err = a.Sessions.End(c.Request().Context(), s)
	}
	a.clearCookie(c, SessionCookie)
	return err
}

// ClientAddress is the TCP peer's address without the port (never a
// forwarded-for header, which the client writes).
func ClientAddress(r *http.Request) string {
	if h, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return h
	}
	return r.RemoteAddr
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
