package auth

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
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
	// With sign-in the Host is the operator's business (ingress names).
	proxy := &Authenticator{Mode: ModeProxy, Proxy: Proxy{UserHeader: "X-User", GroupsHeader: "X-Groups", Trusted: mustCIDRs(t, DefaultProxyCIDRs)}}
	r := proxyRequest("127.0.0.1:1", map[string]string{"X-User": "alice"})
	r.Host = "quota.apps.example.com"
	if rec := serve(server(proxy), r); rec.Code != http.StatusOK {
		t.Errorf("proxy mode, ingress host: %d", rec.Code)
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
// bound. Sessions are sealed in their cookies now: the console keeps
// nothing per sign-in, and what it keeps per sign-out is bounded.
func TestSessionsKeepBoundedState(t *testing.T) {
	r := NewMemoryRevocations(1000)
	s := NewSessions(RandomKeys(), SessionTTL, r)
	ctx := context.Background()
	for i := range 5000 {
		value, sess, err := s.Create(User{Name: fmt.Sprintf("u%d", i)}, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		got, ok := s.Lookup(value)
		if !ok || got.User.Name != sess.User.Name {
			t.Fatalf("session %d not found", i)
		}
		if err := s.End(ctx, sess); err != nil {
			t.Fatal(err)
		}
		if _, ok := s.Lookup(value); ok {
			t.Fatalf("session %d valid after sign-out", i)
		}
	}
	if r.Len() > 1000 {
		t.Errorf("%d revocations kept, want at most 1000", r.Len())
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
	if _, ok := (&Sessions{keys: s.keys, ttl: SessionTTL, now: time.Now, revocations: r}).Lookup(value); !ok {
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
