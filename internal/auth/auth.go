// Package auth decides who a request comes from. Three modes:
//
//   - none: nobody in particular; the console writes with its own identity.
//     Allowed only when the console listens on a loopback address.
//   - proxy: an authenticating proxy (oauth2-proxy style) names the user and
//     groups in request headers; the console believes them only from trusted
//     source addresses or with the proxy's shared secret.
//   - token: the user pastes a Kubernetes bearer token on a sign-in page; a
//     TokenReview says whose it is, and a session sealed in a cookie keeps the
//     answer for 8 hours, or until the token expires. The token itself is not
//     kept. Signing out ends every session of the account (SignOuts).
//
// It also owns what protects the forms and cookies: keys bound to the
// cluster and the auth mode, CSRF tokens bound to the session, signed flash
// messages, the sign-in limits per client address (behind trusted proxies,
// the address they forward) and per account. The middleware puts
// the User in the echo context and in the request's context; From and
// FromContext read it back. It must not import the console's other packages.
package auth

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"
)

// Mode is how the console learns who the user is.
type Mode string

// The auth modes (flag --auth).
const (
	ModeNone  Mode = "none"
	ModeProxy Mode = "proxy"
	ModeToken Mode = "token"
)

// ParseMode reads the --auth flag.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeNone, ModeProxy, ModeToken:
		return m, nil
	}
	return "", fmt.Errorf("--auth must be none, proxy or token, not %q", s)
}

// User is who a request comes from. In mode none it is the zero User: the
// console acts as itself.
type User struct {
	Name   string
	Groups []string
	// UID and Extra are what the cluster's authenticator said besides the
	// name and groups (TokenReview status.user); access checks pass them on,
	// since authorizers and admission may decide on them.
	UID   string
	Extra map[string][]string
}

// SignedIn reports whether the user has a name (proxy and token modes).
func (u User) SignedIn() bool { return u.Name != "" }

type contextKey struct{}

// Where the middleware keeps the User and the mode in the echo context.
const (
	echoKey     = "auth.user"
	echoModeKey = "auth.mode"
)

// ModeFrom is the auth mode the middleware ran in; "" without the middleware.
func ModeFrom(c echo.Context) Mode {
	m, _ := c.Get(echoModeKey).(Mode)
	return m
}

// WithUser returns ctx carrying u.
func WithUser(ctx context.Context, u User) context.Context {
	return context.WithValue(ctx, contextKey{}, u)
}

// FromContext returns the User that WithUser (or the middleware) recorded.
func FromContext(ctx context.Context) (User, bool) {
	u, ok := ctx.Value(contextKey{}).(User)
	return u, ok
}

// From returns the request's User; the zero User when there is none (mode
// none, or a public path nobody signed in to).
func From(c echo.Context) User {
	if u, ok := c.Get(echoKey).(User); ok {
		return u
	}
	u, _ := FromContext(c.Request().Context())
	return u
}

// set records u in the echo context and in the request's context, where
// templates and the apply path (kueue.WithActor) find it.
func set(c echo.Context, u User) {
	c.Set(echoKey, u)
	c.SetRequest(c.Request().WithContext(WithUser(c.Request().Context(), u)))
}

// IsLoopback reports whether a --listen address only accepts connections
// from this machine: a loopback IP or "localhost". An empty host (":8080")
// listens on every interface.
func IsLoopback(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// CheckListen refuses mode none on an address other machines can reach:
// without sign-in anyone who reaches the console writes with its identity.
func CheckListen(m Mode, listen string) error {
	if m == ModeNone && !IsLoopback(listen) {
		return fmt.Errorf("refusing to serve %s without sign-in: --auth none is only allowed on a loopback address "+
			"(127.0.0.1, ::1, localhost); use --auth proxy behind an authenticating proxy or --auth token, "+
			"or listen on 127.0.0.1", listen)
	}
	return nil
}

// SplitGroups reads a comma-separated list of group names, trimmed, without
// empty names or repeats, in order.
func SplitGroups(values ...string) []string {
	var out []string
	for _, v := range values {
		for _, g := range strings.Split(v, ",") {
			g = strings.TrimSpace(g)
			if g != "" && !slices.Contains(out, g) {
				out = append(out, g)
			}
		}
	}
	return out
}

// SecureRequest is whether cookies set on r's response must be Secure: the
// request came over TLS, or the console is told (--secure-cookies) that a
// TLS-terminating proxy is in front of it.
func SecureRequest(r *http.Request, force bool) bool {
	return force || r.TLS != nil
}
