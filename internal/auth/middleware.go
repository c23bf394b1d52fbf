package auth

import (
	"errors"
	"net"
	"net/http"
	"net/netip"
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
	// SignIns limits sign-in attempts (each costs a TokenReview): rejected
	// tokens per client address, all attempts in total; nil uses
	// DefaultSignInLimits.
	SignIns *Limiter
	// AccountSignIns limits the sign-ins of each account; nil uses
	// DefaultAccountLimits.
	AccountSignIns *Limiter
	// TrustedProxies are the addresses of proxies in front of the console
	// (an Ingress controller): from them, the client is the address they
	// add to X-Forwarded-For (see ClientAddress).
	TrustedProxies []netip.Prefix
	// SecureCookies marks cookies Secure (and __Host-) even on plain HTTP
	// (behind a TLS-terminating proxy); on TLS requests they are anyway.
	SecureCookies bool
	// Keys sign CSRF tokens and flash messages; zero means keys of this
	// process only (see RandomKeys).
	Keys Keys

	once sync.Once
	csrf csrfTokens
}

func (a *Authenticator) init() {
	a.once.Do(func() {
		if a.Keys == (Keys{}) {
			a.Keys = RandomKeys()
		}
		if a.SignIns == nil {
			a.SignIns = NewLimiter(DefaultSignInLimits)
		}
		if a.AccountSignIns == nil {
			a.AccountSignIns = NewLimiter(DefaultAccountLimits)
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
				case errors.Is(err, ErrForeignHost):
					return echo.NewHTTPError(http.StatusMisdirectedRequest, a.Proxy.foreignHostWords())
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

// Errors of SignIn beyond the TokenReview's.
var (
	// ErrTooManySignIns is a client address over its rate of rejected
	// tokens, or everyone over the total rate of attempts.
	ErrTooManySignIns = errors.New("too many sign-in attempts")
	// ErrTooManyAccountSignIns is an account over its rate of sign-ins.
	ErrTooManyAccountSignIns = errors.New("too many sign-ins of this account")
)

// SignIn checks token with the TokenReviewer and, if the cluster accepts it,
// starts a session and sets its cookie. The session ends when the token
// expires, if sooner than SessionTTL. The token is not kept. A client
// address over its rate of rejected tokens (or everyone over the total rate)
// gets ErrTooManySignIns without a TokenReview; an accepted token counts
// against its account, not against the address. A refusal after the
// TokenReview returns the user with its error.
func (a *Authenticator) SignIn(c echo.Context, token string) (User, error) {
	a.init()
	if a.ModeOf() != ModeToken || a.Tokens == nil || a.Sessions == nil {
		return User{}, errors.New("sign-in with a token is not enabled (--auth token)")
	}
	forgive, ok := a.SignIns.Take(a.ClientAddress(c.Request()))
	if !ok {
		return User{}, ErrTooManySignIns
	}
	u, err := a.Tokens.Review(c.Request().Context(), token)
	if err != nil {
		if !errors.Is(err, ErrTokenRejected) {
			forgive() // the cluster could not answer: not the client's doing
		}
		return User{}, err
	}
	if !a.AccountSignIns.Allow(u.Name) {
		return u, ErrTooManyAccountSignIns
	}
	forgive()
	// A session planted before sign-in (cookie tossing), or the browser's
	// previous one, is replaced.
	value, sess, err := a.Sessions.Create(u, TokenExpiry(token))
	if err != nil {
		return u, err
	}
	c.SetCookie(a.cookie(c.Request(), SessionCookie, value, sess.Expires))
	c.Set(echoSessionKey, sess)
	set(c, u)
	return u, nil
}

// SignOut ends every session of the request's account, in every browser
// and on every replica, and clears its cookie.
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

// Current reports whether the request's sign-in still holds: in token mode
// its session has not expired and its account has not signed out since. A
// request that lasts (a live stream) asks before it sends more; in the
// other modes nothing ends a sign-in (the proxy vouches for each request).
func (a *Authenticator) Current(c echo.Context) bool {
	if a.ModeOf() != ModeToken {
		return true
	}
	s, ok := c.Get(echoSessionKey).(Session)
	return ok && a.Sessions != nil && a.Sessions.Current(s)
}

// SessionExpires is when the request's session ends by itself; zero
// outside token mode.
func (a *Authenticator) SessionExpires(c echo.Context) time.Time {
	s, _ := c.Get(echoSessionKey).(Session)
	return s.Expires
}

// ClientAddress is the address r comes from (see ClientAddress), for a's
// trusted proxies.
func (a *Authenticator) ClientAddress(r *http.Request) string {
	if a == nil {
		return ClientAddress(r, nil)
	}
	return ClientAddress(r, a.TrustedProxies)
}

// ClientAddress is the address r comes from: the TCP peer; or, when the
// peer is one of the trusted proxies, the address X-Forwarded-For names
// last that is not itself a trusted proxy (each proxy appends the address
// it received the request from, so what lies left of that is the client's
// own writing). X-Forwarded-For from any other peer is ignored.
func ClientAddress(r *http.Request, trusted []netip.Prefix) string {
	peer := r.RemoteAddr
	if h, _, err := net.SplitHostPort(peer); err == nil {
		peer = h
	}
	addr, err := netip.ParseAddr(peer)
	if err != nil || !containsAddr(trusted, addr) {
		return peer
	}
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	client := addr
	for i := len(hops) - 1; i >= 0; i-- {
		hop, err := parseHop(hops[i])
		if err != nil {
			break
		}
		client = hop
		if !containsAddr(trusted, hop) {
			break
		}
	}
	return client.String()
}

// parseHop reads one X-Forwarded-For entry: an address, perhaps with a port.
func parseHop(s string) (netip.Addr, error) {
	s = strings.TrimSpace(s)
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), nil
	}
	a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"))
	return a.Unmap(), err
}

func containsAddr(prefixes []netip.Prefix, a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
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
