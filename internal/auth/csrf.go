package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
)

// CSRF protection. A state-changing request (anything but GET, HEAD and
// OPTIONS) passes only
//   - from a browser that says it comes from this console's own origin
//     (Sec-Fetch-Site: same-origin); same-site (a sibling subdomain, another
//     port) and cross-site get 403 whatever cookies and fields they carry; or
//   - from a client that sends no Sec-Fetch-Site (a script, an old browser),
//     whose Origin, if it sends one, is this host, and which presents the
//     CSRF token of its session in the _csrf form field or the X-CSRF-Token
//     header.
//
// The token is an HMAC, with the console's CSRF key, of the cluster and auth
// mode (Keys.For) and what the request is bound to: the token mode's session
// id, the proxy's user, or (no sign-in, or before it) a random browser id in
// a cookie. Planting a cookie from a sibling domain gains nothing: the
// attacker cannot compute the HMAC; nor does a token from a console of
// another cluster that shares the key.

const (
	// CSRFField is the form field every POST form carries.
	CSRFField = "_csrf"
	// CSRFHeader carries the token for scripts.
	CSRFHeader = "X-CSRF-Token"
	// browserCookie holds the random browser id tokens are bound to when
	// there is no session and no proxy user.
	browserCookie  = "quota_console_browser"
	echoBrowserKey = "auth.browser"
)

// CSRFError is the answer to a refused request.
const CSRFError = "This form did not come from this console's own page, or it is too old (CSRF check failed). " +
	"Reload the page and submit it again."

// CSRF returns the middleware; skip exempts paths (probes, static files).
func (a *Authenticator) CSRF(skip func(echo.Context) bool) echo.MiddlewareFunc {
	a.init()
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			switch r.Method {
			case http.MethodGet, http.MethodHead, http.MethodOptions:
				return next(c)
			}
			if skip != nil && skip(c) {
				return next(c)
			}
			if !a.csrfAllowed(c) {
				return echo.NewHTTPError(http.StatusForbidden, CSRFError)
			}
			return next(c)
		}
	}
}

func (a *Authenticator) csrfAllowed(c echo.Context) bool {
	r := c.Request()
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" {
		return site == "same-origin"
	}
	if origin := r.Header.Get(echo.HeaderOrigin); origin != "" && !sameHost(origin, r.Host) {
		return false
	}
	got := r.Header.Get(CSRFHeader)
	if got == "" {
		got = r.PostFormValue(CSRFField) // never the URL's: logs and Referer headers keep it
	}
	binding, ok := a.csrfBinding(c, false)
	if !ok || got == "" {
		return false
	}
	return hmac.Equal([]byte(got), []byte(a.keptCSRFToken(binding)))
}

func sameHost(origin, host string) bool {
	u, err := url.Parse(origin)
	return err == nil && u.Host != "" && strings.EqualFold(u.Host, host)
}

// CSRFToken is the token the forms rendered for this request post back. It
// may set the browser-id cookie, so call it before the response is written.
func (a *Authenticator) CSRFToken(c echo.Context) string {
	a.init()
	binding, ok := a.csrfBinding(c, true)
	if !ok {
		return ""
	}
	return a.keptCSRFToken(binding)
}

func (a *Authenticator) csrfToken(binding string) string {
	return base64.RawURLEncoding.EncodeToString(mac(a.Keys.csrf, "csrf", a.Keys.bound, binding))
}

// csrfBinding is what a token is bound to: a session, a proxy's user or a
// browser id.
type csrfBinding struct {
	kind, id string
	// fresh: a browser id made for this request, which no other request
	// shares yet.
	fresh bool
}

// csrfTokens keep the tokens of the bindings that ask again and again (a
// browser's session asks on every page it loads): a token is the same
// HMAC for the same binding, so it is computed once.
type csrfTokens struct {
	mu     sync.Mutex
	tokens map[csrfBinding]string
}

// Bounds of the CSRF tokens kept: how many (past it they are all
// forgotten), and the longest id kept.
const (
	maxKeptCSRFTokens = 1024
	maxKeptCSRFID     = 256
)

// keptCSRFToken is the token of binding, computed once per binding.
func (a *Authenticator) keptCSRFToken(b csrfBinding) string {
	if b.fresh || len(b.id) > maxKeptCSRFID {
		return a.csrfToken(b.kind + "\x00" + b.id)
	}
	a.csrf.mu.Lock()
	token, ok := a.csrf.tokens[b]
	a.csrf.mu.Unlock()
	if ok {
		return token
	}
	token = a.csrfToken(b.kind + "\x00" + b.id)
	a.csrf.mu.Lock()
	if a.csrf.tokens == nil || len(a.csrf.tokens) >= maxKeptCSRFTokens {
		a.csrf.tokens = map[csrfBinding]string{}
	}
	a.csrf.tokens[b] = token
	a.csrf.mu.Unlock()
	return token
}

// csrfBinding is what the request's token is bound to; create makes a
// browser id (and its cookie) when there is none yet.
func (a *Authenticator) csrfBinding(c echo.Context, create bool) (csrfBinding, bool) {
	if s, ok := c.Get(echoSessionKey).(Session); ok {
		return csrfBinding{kind: "session", id: s.ID}, true
	}
	if a.ModeOf() == ModeProxy {
		if u := From(c); u.SignedIn() {
			return csrfBinding{kind: "user", id: u.Name}, true
		}
	}
	if id, ok := c.Get(echoBrowserKey).(string); ok {
		return csrfBinding{kind: "browser", id: id, fresh: true}, true
	}
	if ck, err := c.Cookie(a.cookieName(c.Request(), browserCookie)); err == nil && len(ck.Value) >= 20 {
		return csrfBinding{kind: "browser", id: ck.Value}, true
	}
	if !create {
		return csrfBinding{}, false
	}
	b := make([]byte, 18)
	if _, err := rand.Read(b); err != nil {
		return csrfBinding{}, false
	}
	id := base64.RawURLEncoding.EncodeToString(b)
	c.Set(echoBrowserKey, id)
	c.SetCookie(a.cookie(c.Request(), browserCookie, id, time.Now().Add(30*24*time.Hour)))
	return csrfBinding{kind: "browser", id: id, fresh: true}, true
}
