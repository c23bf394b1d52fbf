package auth

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/labstack/echo/v4"
	"golang.org/x/time/rate"
	authnv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// Attack: a proxy that appends to the client's groups header instead of
// overwriting it lets the client add "platform-admins".
func TestProxyRefusesRepeatedGroupsHeader(t *testing.T) {
	trusted, _ := ParseCIDRs(DefaultProxyCIDRs)
	a := &Authenticator{Mode: ModeProxy, Proxy: Proxy{UserHeader: DefaultUserHeader, GroupsHeader: DefaultGroupsHeader, Trusted: trusted}}
	r := proxyRequest("127.0.0.1:1", map[string]string{DefaultUserHeader: "mallory", DefaultGroupsHeader: "ml"})
	r.Header.Add(DefaultGroupsHeader, "platform-admins")
	rec := serve(server(a), r)
	if rec.Code != http.StatusUnauthorized {
		t.Fatalf("two groups headers: %d %q, want 401", rec.Code, rec.Body.String())
	}
	if !strings.Contains(rec.Body.String(), "more than once") {
		t.Errorf("unclear refusal: %q", rec.Body.String())
	}
	// One header with several groups is the normal case.
	ok := proxyRequest("127.0.0.1:1", map[string]string{DefaultUserHeader: "alice", DefaultGroupsHeader: "ml, platform-admins"})
	if rec := serve(server(a), ok); rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "groups=ml,platform-admins") {
		t.Errorf("one groups header: %d %q", rec.Code, rec.Body.String())
	}
}

// Attack: DNS rebinding. A page on attacker.example, whose name the attacker
// then resolves to 127.0.0.1, reaches a console that runs without sign-in on
// loopback; the request carries Host: attacker.example.
func TestModeNoneAnswersOnlyLoopbackHosts(t *testing.T) {
	e := server(&Authenticator{Mode: ModeNone})
	for host, want := range map[string]int{
		"127.0.0.1:8080": http.StatusOK, "localhost:8080": http.StatusOK, "LOCALHOST": http.StatusOK,
		"[::1]:8080": http.StatusOK, "127.0.0.2": http.StatusOK,
		"attacker.example:8080": http.StatusMisdirectedRequest, "attacker.example": http.StatusMisdirectedRequest,
		"localhost.attacker.example": http.StatusMisdirectedRequest, "10.0.0.1:8080": http.StatusMisdirectedRequest,
		"": http.StatusMisdirectedRequest,
	} {
		for _, path := range []string{"/teams", "/healthz"} {
			r := httptest.NewRequest(http.MethodGet, path, nil)
			r.Host = host
			if rec := serve(e, r); rec.Code != want {
				t.Errorf("GET %s with Host %q: %d, want %d", path, host, rec.Code, want)
			}
		}
	}
}

// Attack: DNS rebinding, or a port-forward, into proxy mode. The console
// trusts the headers of requests from its sidecar proxy's address
// (loopback). A page on attacker.example, resolved to 127.0.0.1 on a
// machine where the console's own port is reachable (a laptop running it,
// `kubectl port-forward` to the console's port rather than the proxy's),
// sends the user header itself, with Sec-Fetch-Site: same-origin: it would
// act as any user, admins included. Requests trusted by their address are
// answered only when addressed to the proxy's public names or a loopback
// name; the shared secret, which no browser sends, proves the proxy
// wherever a request is addressed.
func TestProxyTrustsItsAddressOnlyForItsHosts(t *testing.T) {
	proxy := &Authenticator{Mode: ModeProxy, Proxy: Proxy{UserHeader: "X-User", GroupsHeader: "X-Groups",
		Trusted: mustCIDRs(t, DefaultProxyCIDRs), Hosts: []string{"quota.apps.example.com"}, Secret: []byte("s3cret-s3cret-s3cret")}}
	e := server(proxy)
	for _, tc := range []struct {
		host, remote, path string
		secret             bool
		want               int
		body               string
	}{
		{host: "attacker.example:18301", remote: "127.0.0.1:1", path: "/teams", want: http.StatusMisdirectedRequest},
		{host: "attacker.example", remote: "[::1]:1", path: "/teams", want: http.StatusMisdirectedRequest},
		{host: "quota.apps.example.com.attacker.example", remote: "127.0.0.1:1", path: "/teams", want: http.StatusMisdirectedRequest},
		{host: "", remote: "127.0.0.1:1", path: "/teams", want: http.StatusMisdirectedRequest},
		{host: "quota.apps.example.com", remote: "127.0.0.1:1", path: "/teams", want: http.StatusOK, body: "user=alice"},
		{host: "QUOTA.apps.example.com:443", remote: "127.0.0.1:1", path: "/teams", want: http.StatusOK, body: "user=alice"},
		{host: "127.0.0.1:8080", remote: "127.0.0.1:1", path: "/teams", want: http.StatusOK, body: "user=alice"},
		{host: "localhost:8080", remote: "127.0.0.1:1", path: "/teams", want: http.StatusOK, body: "user=alice"},
		// The secret proves the proxy, whatever the name.
		{host: "attacker.example", remote: "10.1.2.3:1", path: "/teams", secret: true, want: http.StatusOK, body: "user=alice"},
		// Public paths answer anyone at any name (the kubelet's probes
		// name the pod's address), without the header's user.
		{host: "10.1.2.3:8080", remote: "127.0.0.1:1", path: "/healthz", want: http.StatusOK, body: "user= "},
		{host: "attacker.example", remote: "127.0.0.1:1", path: "/healthz", want: http.StatusOK, body: "user= "},
	} {
		r := proxyRequest(tc.remote, map[string]string{"X-User": "alice", "Sec-Fetch-Site": "same-origin"})
		r.URL.Path = tc.path
		r.Host = tc.host
		if tc.secret {
			r.Header.Set(SecretHeader, "s3cret-s3cret-s3cret")
		}
		rec := serve(e, r)
		if rec.Code != tc.want || !strings.HasPrefix(rec.Body.String(), tc.body) {
			t.Errorf("GET %s from %s addressed to %q: %d %q, want %d %q", tc.path, tc.remote, tc.host, rec.Code, rec.Body.String(), tc.want, tc.body)
		}
		if tc.want == http.StatusMisdirectedRequest && !strings.Contains(rec.Body.String(), "--auth-proxy-hosts") {
			t.Errorf("the refusal of Host %q does not say how to allow a name: %q", tc.host, rec.Body.String())
		}
	}
}

func mustCIDRs(t *testing.T, s string) []netip.Prefix {
	t.Helper()
	p, err := ParseCIDRs(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// csrfServer is the middleware chain of the console around a handler that
// answers a form's token on GET and "saved" on POST.
func csrfServer(a *Authenticator) *echo.Echo {
	e := echo.New()
	e.Use(a.Middleware(func(c echo.Context) bool { return c.Request().URL.Path == SignInPath }))
	e.Use(a.CSRF(nil))
	e.GET("/form", func(c echo.Context) error { return c.String(http.StatusOK, a.CSRFToken(c)) })
	e.POST("/form", func(c echo.Context) error { return c.String(http.StatusOK, "saved") })
	return e
}

// Attack: a page on a sibling subdomain (x.apps.example.com next to
// quota.apps.example.com) plants _csrf=t for the parent domain and submits a
// form with _csrf=t; the browser says Sec-Fetch-Site: same-site.
func TestCSRFRefusesOtherSitesAndUnboundTokens(t *testing.T) {
	trusted := mustCIDRs(t, DefaultProxyCIDRs)
	for _, a := range []*Authenticator{
		{Mode: ModeNone},
		{Mode: ModeProxy, Proxy: Proxy{UserHeader: "X-User", GroupsHeader: "X-Groups", Trusted: trusted}},
	} {
		t.Run(string(a.Mode), func(t *testing.T) {
			e := csrfServer(a)
			req := func(method string, cookies []*http.Cookie, headers map[string]string, form url.Values) *httptest.ResponseRecorder {
				r := httptest.NewRequest(method, "/form", strings.NewReader(form.Encode()))
				r.Host, r.RemoteAddr = "127.0.0.1:8080", "127.0.0.1:4000"
				r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				r.Header.Set("X-User", "alice")
				for _, ck := range cookies {
					r.AddCookie(ck)
				}
				for k, v := range headers {
					r.Header.Set(k, v)
				}
				return serve(e, r)
			}
			page := req(http.MethodGet, nil, nil, nil)
			token, cookies := page.Body.String(), page.Result().Cookies()
			if len(token) < 40 {
				t.Fatalf("token %q", token)
			}
			tossed := []*http.Cookie{{Name: "_csrf", Value: "t"}, {Name: browserCookie, Value: strings.Repeat("a", 24)}}
			cases := []struct {
				name    string
				cookies []*http.Cookie
				headers map[string]string
				field   string
				want    int
			}{
				{"same-site, tossed cookie and matching field", tossed, map[string]string{"Sec-Fetch-Site": "same-site"}, "t", http.StatusForbidden},
				{"same-site with the real token", cookies, map[string]string{"Sec-Fetch-Site": "same-site"}, token, http.StatusForbidden},
				{"cross-site with the real token", cookies, map[string]string{"Sec-Fetch-Site": "cross-site"}, token, http.StatusForbidden},
				{"no fetch metadata, tossed cookie and field", tossed, nil, "t", http.StatusForbidden},
				{"no fetch metadata, no token", cookies, nil, "", http.StatusForbidden},
				{"no fetch metadata, another origin", cookies, map[string]string{"Origin": "https://x.apps.example.com"}, token, http.StatusForbidden},
				{"same-origin", nil, map[string]string{"Sec-Fetch-Site": "same-origin"}, "", http.StatusOK},
				{"script with the token", cookies, nil, token, http.StatusOK},
				{"script with the token in the header", cookies, map[string]string{CSRFHeader: token}, "", http.StatusOK},
				{"script, its own origin", cookies, map[string]string{"Origin": "http://127.0.0.1:8080"}, token, http.StatusOK},
			}
			for _, c := range cases {
				form := url.Values{}
				if c.field != "" {
					form.Set(CSRFField, c.field)
				}
				if rec := req(http.MethodPost, c.cookies, c.headers, form); rec.Code != c.want {
					t.Errorf("%s: %d, want %d", c.name, rec.Code, c.want)
				}
			}
			// Attack: the token in the URL, which logs, histories and
			// Referer headers keep: a form's token is its body's.
			r := httptest.NewRequest(http.MethodPost, "/form?"+url.Values{CSRFField: {token}}.Encode(), nil)
			r.Host, r.RemoteAddr = "127.0.0.1:8080", "127.0.0.1:4000"
			r.Header.Set("X-User", "alice")
			for _, ck := range cookies {
				r.AddCookie(ck)
			}
			if rec := serve(e, r); rec.Code != http.StatusForbidden {
				t.Errorf("the token in the URL: %d, want 403", rec.Code)
			}
		})
	}
}

// The token is bound to what the request belongs to: another session's (or
// user's) token does not work.
func TestCSRFTokenIsBoundToTheSession(t *testing.T) {
	keys := RandomKeys()
	a := &Authenticator{Mode: ModeToken, Tokens: KubeTokenReviewer{Client: fakeTokenReviews()}, Sessions: NewSessions(keys, SessionTTL, nil), Keys: keys}
	e := csrfServer(a)
	e.POST(SignInPath, func(c echo.Context) error {
		if _, err := a.SignIn(c, c.FormValue("token")); err != nil {
			return c.String(http.StatusUnauthorized, err.Error())
		}
		return c.NoContent(http.StatusSeeOther)
	})
	signIn := func() *http.Cookie {
		r := httptest.NewRequest(http.MethodPost, SignInPath, strings.NewReader("token=good-token"))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.Header.Set("Sec-Fetch-Site", "same-origin")
		rec := serve(e, r)
		for _, ck := range rec.Result().Cookies() {
			if ck.Name == SessionCookie {
				return ck
			}
		}
		t.Fatalf("sign-in: %d %q", rec.Code, rec.Body.String())
		return nil
	}
	tokenOf := func(session *http.Cookie) string {
		r := httptest.NewRequest(http.MethodGet, "/form", nil)
		r.AddCookie(session)
		return serve(e, r).Body.String()
	}
	post := func(session *http.Cookie, token string) int {
		r := httptest.NewRequest(http.MethodPost, "/form", strings.NewReader(url.Values{CSRFField: {token}}.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.AddCookie(session)
		return serve(e, r).Code
	}
	mine, theirs := signIn(), signIn()
	if post(mine, tokenOf(mine)) != http.StatusOK {
		t.Error("own token refused")
	}
	if post(mine, tokenOf(theirs)) != http.StatusForbidden {
		t.Error("another session's token accepted")
	}
}

// jwt is an unsigned token with the given expiry (the fake TokenReview
// accepts it as it accepts good-token).
func jwt(exp time.Time) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256"}`)) + "." + enc([]byte(fmt.Sprintf(`{"sub":"alice","exp":%d}`, exp.Unix()))) + ".c2ln"
}

func reviewsAccepting(tokens ...string) *k8sfake.Clientset {
	client := k8sfake.NewClientset()
	client.PrependReactor("create", "tokenreviews", func(action k8stesting.Action) (bool, runtime.Object, error) {
		tr := action.(k8stesting.CreateAction).GetObject().(*authnv1.TokenReview).DeepCopy()
		for _, tok := range tokens {
			if tr.Spec.Token == tok {
				tr.Status = authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{Username: "alice"}}
			}
		}
		return true, tr, nil
	})
	return client
}

// Attack: a token that expires in 10 minutes signed in for 8 hours.
func TestTokenSessionEndsWithTheToken(t *testing.T) {
	now := time.Now()
	short := jwt(now.Add(10 * time.Minute))
	keys := RandomKeys()
	sessions := NewSessions(keys, SessionTTL, nil)
	a := &Authenticator{Mode: ModeToken, Tokens: KubeTokenReviewer{Client: reviewsAccepting(short, "opaque-token")}, Sessions: sessions, Keys: keys}
	e := server(a)
	signIn := func(token string) *http.Cookie {
		r := httptest.NewRequest(http.MethodPost, SignInPath, strings.NewReader(url.Values{"token": {token}}.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		rec := serve(e, r)
		if rec.Code != http.StatusSeeOther {
			t.Fatalf("sign-in: %d %q", rec.Code, rec.Body.String())
		}
		return rec.Result().Cookies()[0]
	}
	ck := signIn(short)
	if d := ck.Expires.Sub(now); d > 10*time.Minute+time.Second {
		t.Errorf("the session cookie of a 10-minute token lasts %v", d)
	}
	use := func(ck *http.Cookie) int {
		r := httptest.NewRequest(http.MethodGet, "/teams", nil)
		r.AddCookie(ck)
		return serve(e, r).Code
	}
	if use(ck) != http.StatusOK {
		t.Fatal("the session does not work before the token expires")
	}
	sessions.now = func() time.Time { return now.Add(10*time.Minute + time.Second) }
	if code := use(ck); code != http.StatusUnauthorized {
		t.Errorf("after the token expired the session answers %d, want 401", code)
	}
	// A token that is not a JWT (a static token) keeps the session TTL.
	sessions.now = time.Now
	ck = signIn("opaque-token")
	if d := time.Until(ck.Expires); d < SessionTTL-time.Minute {
		t.Errorf("opaque token: session of %v, want %v", d, SessionTTL)
	}
	if got := TokenExpiry("Bearer " + short); got.Unix() != now.Add(10*time.Minute).Unix() {
		t.Errorf("TokenExpiry = %v", got)
	}
	for _, bad := range []string{"", "a.b", "a.%%%.c", jwt(time.Unix(0, 0))} {
		if got := TokenExpiry(bad); !got.IsZero() {
			t.Errorf("TokenExpiry(%q) = %v, want zero", bad, got)
		}
	}
}

// Attack: unauthenticated sign-in attempts, each a TokenReview, as fast as
// the client can send them.
func TestSignInIsRateLimited(t *testing.T) {
	var reviews int
	client := k8sfake.NewClientset()
	client.PrependReactor("create", "tokenreviews", func(action k8stesting.Action) (bool, runtime.Object, error) {
		reviews++
		return true, action.(k8stesting.CreateAction).GetObject().(*authnv1.TokenReview).DeepCopy(), nil
	})
	a := &Authenticator{Mode: ModeToken, Tokens: KubeTokenReviewer{Client: client}, Sessions: NewSessions(RandomKeys(), SessionTTL, nil)}
	e := server(a)
	codes := map[int]int{}
	for range 50 {
		r := httptest.NewRequest(http.MethodPost, SignInPath, strings.NewReader("token=guess"))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.RemoteAddr = "203.0.113.9:5000"
		rec := serve(e, r)
		codes[rec.Code]++
	}
	if reviews > DefaultSignInLimits.PerClientBurst+1 {
		t.Errorf("50 sign-ins from one address made %d TokenReviews, want at most %d", reviews, DefaultSignInLimits.PerClientBurst+1)
	}
	// Another address is not held back by the first one's attempts.
	before := reviews
	r := httptest.NewRequest(http.MethodPost, SignInPath, strings.NewReader("token=guess"))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.RemoteAddr = "198.51.100.7:5000"
	serve(e, r)
	if reviews != before+1 {
		t.Error("a second address was refused because of the first one's attempts")
	}
}

func TestLimiterForgetsClients(t *testing.T) {
	l := NewLimiter(Limits{PerClient: 1, PerClientBurst: 2, Total: 1e6, TotalBurst: 1e6, MaxClients: 100})
	for i := range 10000 {
		l.Allow(fmt.Sprintf("10.0.%d.%d", i/256, i%256))
	}
	if n := l.Clients(); n > 100 {
		t.Errorf("%d client addresses remembered, want at most 100", n)
	}
}

// Attack: signing in over and over grew the server's session map without
// bound. Sessions are sealed in their cookies: the console keeps nothing per
// sign-in, and one entry per account that signed out; a full list refuses
// the sign-ins of new accounts rather than forget a sign-out.
func TestSessionsKeepBoundedState(t *testing.T) {
	const max = 1000
	r := NewMemorySignOuts(max, SessionTTL)
	s := NewSessions(RandomKeys(), SessionTTL, r)
	ctx := context.Background()
	for i := range 5 * max {
		value, sess, err := s.Create(User{Name: "alice"}, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := s.Lookup(value); !ok || got.User.Name != "alice" {
			t.Fatalf("session %d not found", i)
		}
		if err := s.End(ctx, sess); err != nil {
			t.Fatal(err)
		}
		if _, ok := s.Lookup(value); ok {
			t.Fatalf("session %d valid after sign-out", i)
		}
	}
	if r.Len() != 1 {
		t.Errorf("one account signing in and out %d times left %d entries, want 1", 5*max, r.Len())
	}
	var kept []string
	for i := range 2 * max {
		value, sess, err := s.Create(User{Name: fmt.Sprintf("u%d", i)}, time.Time{})
		if errors.Is(err, ErrSignOutsFull) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		kept = append(kept, value)
		if err := s.End(ctx, sess); err != nil {
			t.Fatal(err)
		}
	}
	if len(kept) != max-1 || r.Len() != max {
		t.Errorf("%d accounts signed in before the list was full, %d entries kept; want %d and %d", len(kept), r.Len(), max-1, max)
	}
	for i, value := range kept {
		if _, ok := s.Lookup(value); ok {
			t.Fatalf("signed-out session %d opens again", i)
		}
	}
	// An account already in the list still signs in; its sign-out replaces
	// its entry.
	if _, _, err := s.Create(User{Name: "alice"}, time.Time{}); err != nil {
		t.Errorf("an account in the full list: %v", err)
	}
	// A day later every entry has expired: new accounts sign in again.
	r.now = func() time.Time { return time.Now().Add(SessionTTL + time.Minute) }
	if _, _, err := s.Create(User{Name: "newcomer"}, time.Time{}); err != nil {
		t.Errorf("after the entries expired: %v", err)
	}
	if r.Len() != 0 {
		t.Errorf("%d expired entries kept", r.Len())
	}

	// A forged or tampered cookie opens nothing.
	value, _, _ := s.Create(User{Name: "alice"}, time.Time{})
	raw, _ := base64.RawURLEncoding.DecodeString(value)
	raw[len(raw)-1] ^= 1
	for _, v := range []string{"", "forged", base64.RawURLEncoding.EncodeToString(raw)} {
		if _, ok := s.Lookup(v); ok {
			t.Errorf("cookie %q opened a session", v)
		}
	}
	// Another key (another console) opens nothing either.
	if _, ok := NewSessions(RandomKeys(), SessionTTL, nil).Lookup(value); ok {
		t.Error("a session sealed with another key opened")
	}
	// Same key, other replica: it opens.
	if _, ok := NewSessions(s.keys, SessionTTL, r).Lookup(value); !ok {
		t.Error("a replica with the same key does not open the session")
	}
}

// Attack: ?deleted=<anything> made the console say "Team <anything> deleted."
func TestFlashCannotBeForged(t *testing.T) {
	a := &Authenticator{Mode: ModeNone}
	e := echo.New()
	e.Use(a.Middleware(nil))
	e.POST("/set", func(c echo.Context) error {
		a.SetFlash(c, "Team nlp deleted.")
		return c.NoContent(http.StatusSeeOther)
	})
	e.GET("/show", func(c echo.Context) error { return c.String(http.StatusOK, a.TakeFlash(c)) })
	show := func(cookies ...*http.Cookie) string {
		r := httptest.NewRequest(http.MethodGet, "/show?deleted=Pwned", nil)
		r.Host = "127.0.0.1"
		for _, ck := range cookies {
			r.AddCookie(ck)
		}
		return serve(e, r).Body.String()
	}
	r := httptest.NewRequest(http.MethodPost, "/set", nil)
	r.Host = "127.0.0.1"
	ck := serve(e, r).Result().Cookies()[0]
	if got := show(ck); got != "Team nlp deleted." {
		t.Errorf("flash = %q", got)
	}
	forged := *ck
	forged.Value = base64.RawURLEncoding.EncodeToString([]byte("Team Pwned deleted.")) + strings.TrimPrefix(ck.Value, strings.Split(ck.Value, ".")[0])
	if got := show(&forged); got != "" {
		t.Errorf("forged flash shown: %q", got)
	}
	if got := show(); got != "" {
		t.Errorf("flash without a cookie: %q", got)
	}
}

// reviewsOf answers TokenReviews for the given tokens as their users.
func reviewsOf(users map[string]User) *k8sfake.Clientset {
	client := k8sfake.NewClientset()
	client.PrependReactor("create", "tokenreviews", func(action k8stesting.Action) (bool, runtime.Object, error) {
		tr := action.(k8stesting.CreateAction).GetObject().(*authnv1.TokenReview).DeepCopy()
		if u, ok := users[tr.Spec.Token]; ok {
			extra := map[string]authnv1.ExtraValue{}
			for k, v := range u.Extra {
				extra[k] = v
			}
			tr.Status = authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{Username: u.Name, UID: u.UID, Groups: u.Groups, Extra: extra}}
		}
		return true, tr, nil
	})
	return client
}

// unlimited lets every sign-in through, so that a test reaches what lies
// behind the limits.
var unlimited = Limits{PerClient: rate.Inf, PerClientBurst: 1, Total: rate.Inf, TotalBurst: 1, MaxClients: 10}

// tokenClient plays one browser against server(a): sign in with a token,
// use the session cookie, sign out with it.
type tokenClient struct {
	t *testing.T
	e http.Handler
}

func (tc tokenClient) signIn(remote, forwardedFor, token string) (int, *http.Cookie) {
	tc.t.Helper()
	r := httptest.NewRequest(http.MethodPost, SignInPath, strings.NewReader(url.Values{"token": {token}}.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.RemoteAddr = remote
	if forwardedFor != "" {
		r.Header.Set("X-Forwarded-For", forwardedFor)
	}
	rec := serve(tc.e, r)
	for _, ck := range rec.Result().Cookies() {
		if ck.Name == SessionCookie {
			return rec.Code, ck
		}
	}
	return rec.Code, nil
}

func (tc tokenClient) use(ck *http.Cookie) int {
	r := httptest.NewRequest(http.MethodGet, "/teams", nil)
	r.AddCookie(ck)
	return serve(tc.e, r).Code
}

func (tc tokenClient) signOut(ck *http.Cookie) {
	r := httptest.NewRequest(http.MethodPost, SignOutPath, nil)
	r.AddCookie(ck)
	serve(tc.e, r)
}

// Attack: a stolen session cookie, signed out by its owner, worked again
// once anyone with a valid token (a pod's service account token needs no
// console role) had signed in and out enough times to push its revocation
// out of the full sign-out list. The limits are lifted here: the sign-out
// itself must hold, at the default size of the list.
func TestSignOutCannotBeFlushed(t *testing.T) {
	keys := RandomKeys()
	sessions := NewSessions(keys, SessionTTL, NewMemorySignOuts(DefaultMaxSignOuts, SessionTTL))
	a := &Authenticator{Mode: ModeToken, Keys: keys, Sessions: sessions, SignIns: NewLimiter(unlimited), AccountSignIns: NewLimiter(unlimited),
		Tokens: KubeTokenReviewer{Client: reviewsOf(map[string]User{"victim-token": {Name: "alice"}, "pod-token": {Name: "system:serviceaccount:apps:robot"}})}}
	tc := tokenClient{t, server(a)}
	// The victim signed in an hour ago: their session ends before the flood's.
	sessions.now = func() time.Time { return time.Now().Add(-time.Hour) }
	code, stolen := tc.signIn("192.0.2.10:1000", "", "victim-token")
	sessions.now = time.Now
	if code != http.StatusSeeOther || stolen == nil {
		t.Fatalf("the victim's sign-in: %d", code)
	}
	tc.signOut(stolen)
	if code := tc.use(stolen); code != http.StatusUnauthorized {
		t.Fatalf("right after sign-out the stolen cookie answers %d, want 401", code)
	}
	for i := range DefaultMaxSignOuts + 1 {
		code, ck := tc.signIn("198.51.100.20:1000", "", "pod-token")
		if ck == nil {
			t.Logf("the flood's sign-in %d was refused (%d)", i+1, code)
			break
		}
		tc.signOut(ck)
	}
	if code := tc.use(stolen); code != http.StatusUnauthorized {
		t.Errorf("after %d sign-ins and sign-outs of another account the stolen, signed-out cookie answers %d, want 401", DefaultMaxSignOuts+1, code)
	}
}

// Attack: behind the chart's Ingress every client's TCP peer is the
// ingress controller's pod. Eleven wrong tokens from one client made every
// other client's valid sign-in answer 429; successful sign-ins counted too.
func TestOneClientCannotBlockSignInsBehindAProxy(t *testing.T) {
	var reviews int
	client := reviewsOf(map[string]User{"good-token": {Name: "alice"}, "bob-token": {Name: "bob"}})
	client.PrependReactor("create", "tokenreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
		reviews++
		return false, nil, nil
	})
	a := &Authenticator{Mode: ModeToken, Tokens: KubeTokenReviewer{Client: client}, Sessions: NewSessions(RandomKeys(), SessionTTL, nil),
		TrustedProxies: mustCIDRs(t, "10.0.0.0/8")}
	tc := tokenClient{t, server(a)}
	const ingress = "10.1.2.3:40000"
	for range DefaultSignInLimits.PerClientBurst + 1 {
		tc.signIn(ingress, "203.0.113.9", "guess")
	}
	if code, _ := tc.signIn(ingress, "198.51.100.7", "good-token"); code != http.StatusSeeOther {
		t.Errorf("a valid sign-in through the ingress after another client's %d wrong tokens: %d, want 303", DefaultSignInLimits.PerClientBurst+1, code)
	}
	// The client that guessed is held back, by its own address.
	before := reviews
	if code, _ := tc.signIn(ingress, "203.0.113.9", "guess"); code != http.StatusTooManyRequests && code != http.StatusUnauthorized {
		t.Errorf("the guessing client: %d", code)
	}
	if reviews != before {
		t.Error("the guessing client's next attempt made a TokenReview")
	}
	// Only rejected tokens count: a person who signs in a dozen times from
	// one address (tabs, devices behind one NAT) is not refused.
	for i := range DefaultSignInLimits.PerClientBurst + 2 {
		if code, _ := tc.signIn("192.0.2.44:1000", "", "bob-token"); code != http.StatusSeeOther {
			t.Fatalf("valid sign-in %d from one address: %d, want 303", i+1, code)
		}
	}
	// X-Forwarded-For from a peer that is not a trusted proxy is the
	// client's own writing: it gets no fresh allowance per forged address.
	before = reviews
	for i := range 30 {
		tc.signIn("192.0.2.99:1000", fmt.Sprintf("203.0.113.%d", i), "guess")
	}
	if n := reviews - before; n > DefaultSignInLimits.PerClientBurst+1 {
		t.Errorf("30 wrong tokens from one untrusted peer with forged X-Forwarded-For made %d TokenReviews, want at most %d", n, DefaultSignInLimits.PerClientBurst+1)
	}
}

// Attack: two consoles that share a session key (two clusters, or one
// cluster in two auth modes) accepted each other's session cookies, CSRF
// tokens and flash messages.
func TestCookiesAreBoundToTheClusterAndMode(t *testing.T) {
	shared, err := NewKeys([]byte("one-secret-for-every-cluster-0123456789"))
	if err != nil {
		t.Fatal(err)
	}
	here := shared.For("3f1c2d9e-kube-system-uid-of-cluster-a", ModeToken)
	value, _, err := NewSessions(here, SessionTTL, nil).Create(User{Name: "alice", Groups: []string{"ml"}}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	for name, keys := range map[string]Keys{
		"another cluster":              shared.For("77aa01b4-kube-system-uid-of-cluster-b", ModeToken),
		"the same cluster, proxy mode": shared.For("3f1c2d9e-kube-system-uid-of-cluster-a", ModeProxy),
	} {
		if s, ok := NewSessions(keys, SessionTTL, nil).Lookup(value); ok {
			t.Errorf("%s opened the session of %s", name, s.User.Name)
		}
		if csrfOf(keys, "user\x00alice") == csrfOf(here, "user\x00alice") {
			t.Errorf("%s accepts the CSRF token of alice made here", name)
		}
		if got := flashFromTo(here, keys, "Team nlp deleted."); got != "" {
			t.Errorf("%s shows a flash message signed here: %q", name, got)
		}
	}
	same := shared.For("3f1c2d9e-kube-system-uid-of-cluster-a", ModeToken)
	if _, ok := NewSessions(same, SessionTTL, nil).Lookup(value); !ok {
		t.Error("another replica of the same console (same key, cluster and mode) refused the session")
	}
	if got := flashFromTo(here, same, "Team nlp deleted."); got != "Team nlp deleted." {
		t.Errorf("another replica of the same console shows the flash message as %q", got)
	}
}

func csrfOf(k Keys, binding string) string {
	return (&Authenticator{Keys: k}).csrfToken(binding)
}

// flashFromTo is the message a console with keys to shows from a flash
// cookie a console with keys from set.
func flashFromTo(from, to Keys, msg string) string {
	e := echo.New()
	rec := httptest.NewRecorder()
	(&Authenticator{Mode: ModeNone, Keys: from}).SetFlash(e.NewContext(httptest.NewRequest(http.MethodPost, "/", nil), rec), msg)
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	for _, ck := range rec.Result().Cookies() {
		r.AddCookie(ck)
	}
	return (&Authenticator{Mode: ModeNone, Keys: to}).TakeFlash(e.NewContext(r, httptest.NewRecorder()))
}

// The session keeps what the cluster's authenticator said besides the name
// and groups (the user's UID and extras), so that access checks and writes
// made as the user carry them.
func TestSessionKeepsUIDAndExtras(t *testing.T) {
	s := NewSessions(RandomKeys(), SessionTTL, nil)
	u := User{Name: "system:serviceaccount:apps:robot", UID: "5b1f7c4e-0d7e-4a33-9f55-2a4f0c1e8b21", Groups: []string{"system:serviceaccounts"},
		Extra: map[string][]string{"authentication.kubernetes.io/pod-name": {"trainer-0"}, "authentication.kubernetes.io/credential-id": {"JTI=4b7c"}}}
	value, _, err := s.Create(u, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	got, ok := s.Lookup(value)
	if !ok {
		t.Fatal("the session does not open")
	}
	if diff := cmp.Diff(u, got.User); diff != "" {
		t.Errorf("the session's user (-signed in +read back):\n%s", diff)
	}
	// Too much to keep in a cookie is refused, as too many groups are.
	huge := u
	huge.Extra = map[string][]string{"example.com/claims": {strings.Repeat("x", 4000)}}
	if _, _, err := s.Create(huge, time.Time{}); !errors.Is(err, ErrSessionTooLarge) {
		t.Errorf("a 4000-byte extra: %v, want ErrSessionTooLarge", err)
	}
}

func TestClientAddress(t *testing.T) {
	ingress := mustCIDRs(t, "10.0.0.0/8, fd00::/8")
	cases := []struct {
		name, peer, forwardedFor string
		trusted                  []netip.Prefix
		want                     string
	}{
		{"no proxy", "198.51.100.7:4000", "", ingress, "198.51.100.7"},
		{"untrusted peer's header is ignored", "198.51.100.7:4000", "203.0.113.9", ingress, "198.51.100.7"},
		{"nothing trusted", "10.1.2.3:4000", "203.0.113.9", nil, "10.1.2.3"},
		{"the ingress names the client", "10.1.2.3:4000", "203.0.113.9", ingress, "203.0.113.9"},
		{"the client's own entries are skipped", "10.1.2.3:4000", "127.0.0.1, 192.0.2.1, 203.0.113.9", ingress, "203.0.113.9"},
		{"two trusted hops", "10.1.2.3:4000", "203.0.113.9, 10.9.9.9", ingress, "203.0.113.9"},
		{"every hop trusted", "10.1.2.3:4000", "10.4.4.4, 10.9.9.9", ingress, "10.4.4.4"},
		{"port and brackets", "10.1.2.3:4000", "[2001:db8::7]:5555", ingress, "2001:db8::7"},
		{"v6 ingress, v4-mapped client", "[fd00::1]:4000", "::ffff:203.0.113.9", ingress, "203.0.113.9"},
		{"garbage stops the walk", "10.1.2.3:4000", "203.0.113.9, not-an-address", ingress, "10.1.2.3"},
		{"no header from the ingress", "10.1.2.3:4000", "", ingress, "10.1.2.3"},
	}
	for _, c := range cases {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = c.peer
		if c.forwardedFor != "" {
			r.Header.Set("X-Forwarded-For", c.forwardedFor)
		}
		if got := ClientAddress(r, c.trusted); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	// Several headers are one list, in order.
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "10.1.2.3:4000"
	r.Header.Add("X-Forwarded-For", "192.0.2.1")
	r.Header.Add("X-Forwarded-For", "203.0.113.9")
	if got := ClientAddress(r, ingress); got != "203.0.113.9" {
		t.Errorf("two headers: %q", got)
	}
}

// One account signing in over and over (a script with a service account's
// token) is held back after the TokenReview, whatever address it uses; its
// refusals count against the address as rejected tokens do.
func TestSignInsPerAccountAreLimited(t *testing.T) {
	a := &Authenticator{Mode: ModeToken, Sessions: NewSessions(RandomKeys(), SessionTTL, nil),
		Tokens:         KubeTokenReviewer{Client: reviewsOf(map[string]User{"robot-token": {Name: "robot"}, "alice-token": {Name: "alice"}})},
		AccountSignIns: NewLimiter(Limits{PerClient: rate.Every(time.Hour), PerClientBurst: 3, Total: rate.Inf, TotalBurst: 1, MaxClients: 10})}
	tc := tokenClient{t, server(a)}
	var codes []int
	for i := range 5 {
		code, _ := tc.signIn(fmt.Sprintf("192.0.2.%d:1000", i), "", "robot-token")
		codes = append(codes, code)
	}
	if diff := cmp.Diff([]int{303, 303, 303, 429, 429}, codes); diff != "" {
		t.Errorf("five sign-ins of one account from five addresses (-want +got):\n%s", diff)
	}
	if code, _ := tc.signIn("192.0.2.9:1000", "", "alice-token"); code != http.StatusSeeOther {
		t.Errorf("another account: %d", code)
	}
	for range DefaultSignInLimits.PerClientBurst {
		tc.signIn("198.51.100.1:1000", "", "robot-token")
	}
	if code, _ := tc.signIn("198.51.100.1:1000", "", "alice-token"); code != http.StatusTooManyRequests {
		t.Errorf("an address whose sign-ins were all refused, with a valid token: %d, want 429", code)
	}
}

// A taken event given back restores the client's allowance, not the
// total's; giving back twice restores one.
func TestLimiterGivesBack(t *testing.T) {
	l := NewLimiter(Limits{PerClient: rate.Every(time.Hour), PerClientBurst: 2, Total: rate.Every(time.Hour), TotalBurst: 3, MaxClients: 10})
	for range 2 {
		giveBack, ok := l.Take("a")
		if !ok {
			t.Fatal("refused within the burst")
		}
		giveBack()
		giveBack()
	}
	if _, ok := l.Take("a"); !ok {
		t.Error("the client's given-back allowance is gone")
	}
	if _, ok := l.Take("b"); ok {
		t.Error("the total allowed a fourth event within its burst of 3")
	}
}

// Forty addresses, each guessing tokens as fast as its own allowance lets
// it, drained the allowance of everyone together: every sign-in, valid
// tokens included, got 429 for as long as they went on. Addresses whose
// guesses were refused now draw on an allowance of their own; an address
// in good standing still signs in.
func TestGuessersFromManyAddressesDoNotLockEveryoneOut(t *testing.T) {
	l := NewLimiter(DefaultSignInLimits)
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	l.now = func() time.Time { return now }
	var refused, taken int
	for step := range 600 { // a minute, a tenth of a second at a time
		now = now.Add(100 * time.Millisecond)
		for a := range 40 {
			for {
				if _, ok := l.Take(fmt.Sprintf("203.0.113.%d", a)); !ok {
					refused++
					break
				}
				taken++ // a rejected token: nothing is given back
			}
		}
		if step%50 == 49 {
			if _, ok := l.Take(fmt.Sprintf("198.51.100.%d", step/50)); !ok {
				t.Errorf("after %.1f s of guessing from 40 addresses, a sign-in from another address is refused", now.Sub(time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)).Seconds())
			}
		}
	}
	if taken > 40*(DefaultSignInLimits.PerClientBurst+31) {
		t.Errorf("the 40 addresses made %d guesses in a minute, beyond their own allowances", taken)
	}

	// Paced instead: each of 60 addresses guesses once every 2 s, which
	// its own allowance refills before its next guess.
	l = NewLimiter(DefaultSignInLimits)
	l.now = func() time.Time { return now }
	for step := range 600 {
		now = now.Add(100 * time.Millisecond)
		for a := range 60 {
			if step%20 == a%20 {
				l.Take(fmt.Sprintf("203.0.113.%d", a))
			}
		}
		if step%50 == 49 {
			if _, ok := l.Take(fmt.Sprintf("198.51.100.%d", 100+step/50)); !ok {
				t.Errorf("step %d of guesses paced from 60 addresses: a sign-in from another address is refused", step)
			}
		}
	}
}
