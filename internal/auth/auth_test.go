package auth

import (
	"context"
	"crypto/tls"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/labstack/echo/v4"
	authnv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestParseMode(t *testing.T) {
	for _, s := range []string{"none", "proxy", "token"} {
		if m, err := ParseMode(s); err != nil || string(m) != s {
			t.Errorf("ParseMode(%q) = %q, %v", s, m, err)
		}
	}
	if _, err := ParseMode("basic"); err == nil {
		t.Error("ParseMode(basic) accepted")
	}
}

func TestModeNoneOnlyOnLoopback(t *testing.T) {
	cases := map[string]bool{
		"127.0.0.1:8080": true, "[::1]:8080": true, "localhost:8080": true, "127.0.0.2:80": true,
		":8080": false, "0.0.0.0:8080": false, "[::]:8080": false, "10.0.0.5:8080": false,
		"console.example:8080": false, "garbage": false,
	}
	for listen, ok := range cases {
		if got := IsLoopback(listen); got != ok {
			t.Errorf("IsLoopback(%q) = %v, want %v", listen, got, ok)
		}
		err := CheckListen(ModeNone, listen)
		if (err == nil) != ok {
			t.Errorf("CheckListen(none, %q) = %v", listen, err)
		}
		if err != nil && !strings.Contains(err.Error(), "loopback") {
			t.Errorf("unclear refusal: %v", err)
		}
		for _, m := range []Mode{ModeProxy, ModeToken} {
			if err := CheckListen(m, listen); err != nil {
				t.Errorf("CheckListen(%s, %q) = %v", m, listen, err)
			}
		}
	}
}

func TestParseCIDRs(t *testing.T) {
	got, err := ParseCIDRs(DefaultProxyCIDRs + ", 10.1.2.3 ,fd00::/8,")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"127.0.0.1/32", "::1/128", "10.1.2.3/32", "fd00::/8"}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Errorf("prefix %d = %s, want %s", i, got[i], want[i])
		}
	}
	if got, err := ParseCIDRs(""); err != nil || len(got) != 0 {
		t.Errorf("empty: %v %v", got, err)
	}
	if _, err := ParseCIDRs("10.0.0.0/33"); err == nil {
		t.Error("bad prefix accepted")
	}
	if _, err := ParseCIDRs("proxy.local"); err == nil {
		t.Error("host name accepted")
	}
}

func TestParseHosts(t *testing.T) {
	got, err := ParseHosts(" Quota.Example.com, quota.internal:8443 ,,10.0.0.5,[fd00::1]:443")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"quota.example.com", "quota.internal", "10.0.0.5", "fd00::1"}, got); diff != "" {
		t.Errorf("hosts (-want +got):\n%s", diff)
	}
	p := Proxy{Hosts: got}
	for host, want := range map[string]bool{"QUOTA.example.com": true, "[fd00::1]:8080": true, "fd00::1": true, "10.0.0.5:80": true,
		"localhost": true, "example.com": false, "quota.example.com.evil": false} {
		if p.addressedToIt(host) != want {
			t.Errorf("addressed to %q: %v, want %v", host, !want, want)
		}
	}
	for _, bad := range []string{"https://quota.example.com", "*.example.com", "quota.example.com/path", "user@quota", "a b"} {
		if _, err := ParseHosts(bad); err == nil || !strings.Contains(err.Error(), "--auth-proxy-hosts") {
			t.Errorf("ParseHosts(%q) = %v, want an error naming the flag", bad, err)
		}
	}
}

func TestSplitGroups(t *testing.T) {
	got := SplitGroups(" ml, platform ,,ml", "ops")
	if !reflect.DeepEqual(got, []string{"ml", "platform", "ops"}) {
		t.Errorf("got %q", got)
	}
}

func proxyRequest(remote string, headers map[string]string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/teams", nil)
	r.RemoteAddr = remote
	r.Host = "127.0.0.1:8080" // a sidecar proxy's request to the console
	for k, v := range headers {
		r.Header.Set(k, v)
	}
	return r
}

func TestProxyTrustsOnlyItsAddressesOrTheSecret(t *testing.T) {
	trusted, _ := ParseCIDRs(DefaultProxyCIDRs)
	p := Proxy{UserHeader: DefaultUserHeader, GroupsHeader: DefaultGroupsHeader, Trusted: trusted, Secret: []byte("s3cret-s3cret-s3cret")}
	user := map[string]string{DefaultUserHeader: "alice", DefaultGroupsHeader: "ml, platform"}
	withSecret := func(secret string) map[string]string {
		h := map[string]string{SecretHeader: secret}
		for k, v := range user {
			h[k] = v
		}
		return h
	}
	cases := []struct {
		name    string
		req     *http.Request
		wantErr error
	}{
		{"loopback", proxyRequest("127.0.0.1:5555", user), nil},
		{"loopback v6", proxyRequest("[::1]:5555", user), nil},
		{"v4-mapped loopback", proxyRequest("[::ffff:127.0.0.1]:5555", user), nil},
		{"other address", proxyRequest("10.0.0.7:5555", user), ErrUntrustedProxy},
		{"other address, X-Forwarded-For loopback", proxyRequest("10.0.0.7:5555", map[string]string{
			DefaultUserHeader: "alice", "X-Forwarded-For": "127.0.0.1", "X-Real-Ip": "127.0.0.1"}), ErrUntrustedProxy},
		{"other address, secret", proxyRequest("10.0.0.7:5555", withSecret("s3cret-s3cret-s3cret")), nil},
		{"other address, wrong secret", proxyRequest("10.0.0.7:5555", withSecret("s3cret-s3cret-s3creT")), ErrUntrustedProxy},
		{"other address, prefix of the secret", proxyRequest("10.0.0.7:5555", withSecret("s3cret")), ErrUntrustedProxy},
		{"loopback, no user", proxyRequest("127.0.0.1:5555", nil), ErrNoUser},
	}
	for _, c := range cases {
		u, err := p.Authenticate(c.req)
		if !errors.Is(err, c.wantErr) {
			t.Errorf("%s: err %v, want %v", c.name, err, c.wantErr)
			continue
		}
		if err == nil && (u.Name != "alice" || !reflect.DeepEqual(u.Groups, []string{"ml", "platform"})) {
			t.Errorf("%s: user %+v", c.name, u)
		}
	}

	// No secret configured: the header alone counts for nothing.
	noSecret := p
	noSecret.Secret = nil
	if _, err := noSecret.Authenticate(proxyRequest("10.0.0.7:5555", withSecret(""))); !errors.Is(err, ErrUntrustedProxy) {
		t.Errorf("empty secret header trusted: %v", err)
	}
	// No trusted address: only the secret.
	secretOnly := p
	secretOnly.Trusted = nil
	if _, err := secretOnly.Authenticate(proxyRequest("127.0.0.1:5555", user)); !errors.Is(err, ErrUntrustedProxy) {
		t.Errorf("loopback trusted without the secret although no address is: %v", err)
	}
	// Two user headers (one perhaps the client's): refused.
	r := proxyRequest("127.0.0.1:5555", user)
	r.Header.Add(DefaultUserHeader, "mallory")
	if _, err := p.Authenticate(r); !errors.Is(err, ErrNoUser) {
		t.Errorf("two user headers: %v", err)
	}
	// Kubernetes system groups and names are never taken from headers.
	u, err := p.Authenticate(proxyRequest("127.0.0.1:5555", map[string]string{DefaultUserHeader: "alice", DefaultGroupsHeader: "system:masters,ml"}))
	if err != nil || !reflect.DeepEqual(u.Groups, []string{"ml"}) {
		t.Errorf("system group kept: %+v %v", u, err)
	}
	if _, err := p.Authenticate(proxyRequest("127.0.0.1:5555", map[string]string{DefaultUserHeader: "system:admin"})); !errors.Is(err, ErrNoUser) {
		t.Errorf("system user accepted: %v", err)
	}
}

func TestReadSecret(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	if err := os.WriteFile(good, []byte("  0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if s, err := ReadSecret(good); err != nil || string(s) != "0123456789abcdef" {
		t.Errorf("ReadSecret = %q, %v", s, err)
	}
	short := filepath.Join(dir, "short")
	if err := os.WriteFile(short, []byte("abc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadSecret(short); err == nil {
		t.Error("short secret accepted")
	}
	if _, err := ReadSecret(filepath.Join(dir, "missing")); err == nil {
		t.Error("missing file accepted")
	}
}

// fakeTokenReviews answers TokenReviews like an apiserver whose token file
// knows one token.
func fakeTokenReviews() *k8sfake.Clientset {
	client := k8sfake.NewClientset()
	client.PrependReactor("create", "tokenreviews", func(action k8stesting.Action) (bool, runtime.Object, error) {
		tr := action.(k8stesting.CreateAction).GetObject().(*authnv1.TokenReview).DeepCopy()
		if tr.Spec.Token == "good-token" {
			tr.Status = authnv1.TokenReviewStatus{Authenticated: true,
				User: authnv1.UserInfo{Username: "alice", Groups: []string{"ml", "system:authenticated"}}}
		} else {
			tr.Status = authnv1.TokenReviewStatus{Authenticated: false, Error: "invalid bearer token"}
		}
		return true, tr, nil
	})
	return client
}

func TestKubeTokenReviewer(t *testing.T) {
	r := KubeTokenReviewer{Client: fakeTokenReviews()}
	u, err := r.Review(context.Background(), "  Bearer good-token\n")
	if err != nil || u.Name != "alice" || !reflect.DeepEqual(u.Groups, []string{"ml", "system:authenticated"}) {
		t.Errorf("good token: %+v %v", u, err)
	}
	for _, tok := range []string{"bad-token", "", "   "} {
		if _, err := r.Review(context.Background(), tok); !errors.Is(err, ErrTokenRejected) {
			t.Errorf("token %q: %v, want ErrTokenRejected", tok, err)
		}
	}
	failing := k8sfake.NewClientset()
	failing.PrependReactor("create", "tokenreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("connection refused")
	})
	if _, err := (KubeTokenReviewer{Client: failing}).Review(context.Background(), "good-token"); err == nil || errors.Is(err, ErrTokenRejected) {
		t.Errorf("apiserver down: %v, want an error other than ErrTokenRejected", err)
	}
}

func TestSafeNext(t *testing.T) {
	cases := map[string]string{
		"":                       "/",
		"/teams/x/edit":          "/teams/x/edit",
		"/tasks?team=a&window=1": "/tasks?team=a&window=1",
		"//evil.example/x":       "/",
		`/\evil.example`:         "/",
		"https://evil.example/":  "/",
		"teams":                  "/",
		"/auth/sign-out":         "/",
		"/auth/sign-in?next=/x":  "/",
	}
	for in, want := range cases {
		if got := SafeNext(in); got != want {
			t.Errorf("SafeNext(%q) = %q, want %q", in, got, want)
		}
	}
}

// server is an echo server with the middleware and handlers that echo the user.
func server(a *Authenticator) *echo.Echo {
	e := echo.New()
	e.Use(a.Middleware(func(c echo.Context) bool {
		return c.Request().URL.Path == "/healthz" || c.Request().URL.Path == SignInPath
	}))
	who := func(c echo.Context) error {
		u := From(c)
		ctxUser, _ := FromContext(c.Request().Context())
		if !reflect.DeepEqual(u, ctxUser) {
			return c.String(http.StatusInternalServerError, "context and echo disagree")
		}
		return c.String(http.StatusOK, "user="+u.Name+" groups="+strings.Join(u.Groups, ",")+" mode="+string(ModeFrom(c)))
	}
	e.GET("/healthz", who)
	e.GET("/teams", who)
	e.POST("/teams", who)
	e.POST(SignInPath, func(c echo.Context) error {
		if _, err := a.SignIn(c, c.FormValue("token")); errors.Is(err, ErrTooManySignIns) || errors.Is(err, ErrTooManyAccountSignIns) {
			return c.String(http.StatusTooManyRequests, err.Error())
		} else if err != nil {
			return c.String(http.StatusUnauthorized, err.Error())
		}
		return c.NoContent(http.StatusSeeOther)
	})
	e.POST(SignOutPath, func(c echo.Context) error { _ = a.SignOut(c); return c.NoContent(http.StatusSeeOther) })
	return e
}

func serve(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec
}

func TestMiddlewareModeNone(t *testing.T) {
	var a *Authenticator // nil is mode none
	r := httptest.NewRequest(http.MethodGet, "/teams", nil)
	r.Host = "127.0.0.1:8080"
	rec := serve(server(a), r)
	if rec.Code != http.StatusOK || rec.Body.String() != "user= groups= mode=none" {
		t.Errorf("%d %q", rec.Code, rec.Body.String())
	}
	if a.Impersonates() {
		t.Error("mode none impersonates")
	}
}

func TestMiddlewareModeProxy(t *testing.T) {
	trusted, _ := ParseCIDRs(DefaultProxyCIDRs)
	a := &Authenticator{Mode: ModeProxy, Proxy: Proxy{UserHeader: "X-User", GroupsHeader: "X-Groups", Trusted: trusted}}
	e := server(a)
	ok := proxyRequest("127.0.0.1:1", map[string]string{"X-User": "alice", "X-Groups": "ml,ops"})
	if rec := serve(e, ok); rec.Code != http.StatusOK || rec.Body.String() != "user=alice groups=ml,ops mode=proxy" {
		t.Errorf("trusted: %d %q", rec.Code, rec.Body.String())
	}
	if rec := serve(e, proxyRequest("192.168.1.9:1", map[string]string{"X-User": "alice"})); rec.Code != http.StatusUnauthorized {
		t.Errorf("untrusted: %d", rec.Code)
	}
	if rec := serve(e, proxyRequest("127.0.0.1:1", nil)); rec.Code != http.StatusUnauthorized {
		t.Errorf("no user: %d", rec.Code)
	}
	// Public paths pass without a user.
	r := proxyRequest("192.168.1.9:1", map[string]string{"X-User": "mallory"})
	r.URL.Path = "/healthz"
	if rec := serve(e, r); rec.Code != http.StatusOK || rec.Body.String() != "user= groups= mode=proxy" {
		t.Errorf("public path: %d %q", rec.Code, rec.Body.String())
	}
	if !a.Impersonates() {
		t.Error("proxy mode does not impersonate")
	}
}

func TestMiddlewareModeTokenSignInAndOut(t *testing.T) {
	a := &Authenticator{Mode: ModeToken, Tokens: KubeTokenReviewer{Client: fakeTokenReviews()}, Sessions: NewSessions(RandomKeys(), SessionTTL, nil)}
	e := server(a)

	// Not signed in: a page load goes to the sign-in page, scripts get 401.
	page := httptest.NewRequest(http.MethodGet, "/teams?x=1", nil)
	page.Header.Set("Accept", "text/html,application/xhtml+xml")
	rec := serve(e, page)
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != SignInPath+"?next="+url.QueryEscape("/teams?x=1") {
		t.Errorf("page: %d %q", rec.Code, rec.Header().Get("Location"))
	}
	if rec := serve(e, httptest.NewRequest(http.MethodGet, "/teams", nil)); rec.Code != http.StatusUnauthorized {
		t.Errorf("script: %d", rec.Code)
	}
	if rec := serve(e, httptest.NewRequest(http.MethodPost, "/teams", nil)); rec.Code != http.StatusUnauthorized {
		t.Errorf("post: %d", rec.Code)
	}

	signIn := func(token string, secure bool) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, SignInPath, strings.NewReader(url.Values{"token": {token}}.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if secure {
			r.TLS = &tls.ConnectionState{}
		}
		return serve(e, r)
	}
	if rec := signIn("bad-token", false); rec.Code != http.StatusUnauthorized || len(rec.Result().Cookies()) != 0 {
		t.Errorf("bad token: %d, cookies %v", rec.Code, rec.Result().Cookies())
	}
	rec = signIn("good-token", false)
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("good token: %d %s", rec.Code, rec.Body.String())
	}
	cookie := rec.Result().Cookies()[0]
	if cookie.Name != SessionCookie || !cookie.HttpOnly || cookie.SameSite != http.SameSiteLaxMode || cookie.Secure || cookie.Path != "/" {
		t.Errorf("cookie %+v", cookie)
	}
	if d := time.Until(cookie.Expires); d < 8*time.Hour-time.Minute || d > 8*time.Hour+time.Minute {
		t.Errorf("cookie expires in %v, want 8 h", d)
	}
	if strings.Contains(cookie.Value, "good-token") || strings.Contains(cookie.Value, "alice") {
		t.Error("the cookie carries the token or the user")
	}
	withCookie := func(method, path string, ck *http.Cookie) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, path, nil)
		r.AddCookie(ck)
		return serve(e, r)
	}
	if rec := withCookie(http.MethodGet, "/teams", cookie); rec.Code != http.StatusOK || rec.Body.String() != "user=alice groups=ml,system:authenticated mode=token" {
		t.Errorf("signed in: %d %q", rec.Code, rec.Body.String())
	}
	forged := *cookie
	forged.Value = "forged"
	if rec := withCookie(http.MethodGet, "/teams", &forged); rec.Code != http.StatusUnauthorized {
		t.Errorf("forged cookie: %d", rec.Code)
	}

	// Over TLS (or with SecureCookies) the cookie is Secure.
	if ck := signIn("good-token", true).Result().Cookies()[0]; !ck.Secure {
		t.Error("cookie not Secure on a TLS request")
	}
	a.SecureCookies = true
	if ck := signIn("good-token", false).Result().Cookies()[0]; !ck.Secure || ck.Name != "__Host-"+SessionCookie {
		t.Errorf("cookie with SecureCookies: %+v, want Secure and __Host-", ck)
	}
	a.SecureCookies = false

	// Sign-out ends the session on the server: the old cookie is worthless.
	rec = withCookie(http.MethodPost, SignOutPath, cookie)
	if cleared := rec.Result().Cookies(); len(cleared) != 1 || cleared[0].MaxAge >= 0 {
		t.Errorf("sign-out did not clear the cookie: %v", cleared)
	}
	if rec := withCookie(http.MethodGet, "/teams", cookie); rec.Code != http.StatusUnauthorized {
		t.Errorf("after sign-out: %d", rec.Code)
	}
}

func TestProxyTrustsAddressesNotHeaders(t *testing.T) {
	// A prefix list that includes the v4-mapped form works on the unmapped address.
	p := Proxy{UserHeader: "U", Trusted: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}
	if !p.Trusts(proxyRequest("[::ffff:10.1.2.3]:1", nil)) {
		t.Error("v4-mapped address not matched")
	}
	if p.Trusts(proxyRequest("not-an-address", nil)) {
		t.Error("unparsable RemoteAddr trusted")
	}
}
