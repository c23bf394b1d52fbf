package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	krand "k8s.io/apimachinery/pkg/util/rand"

	_ "github.com/jackc/pgx/v5/stdlib" // the task history's PostgreSQL driver

	"github.com/openquota/console/internal/auth"
	"github.com/openquota/console/internal/testenv"
)

// roundRobin is one address in front of several replicas, as a Service is:
// each request goes to the next one.
func roundRobin(t *testing.T, backends ...*replica) (base string, served func(i int) int64) {
	t.Helper()
	var next atomic.Int64
	counts := make([]atomic.Int64, len(backends))
	proxies := make([]*httputil.ReverseProxy, len(backends))
	for i, b := range backends {
		u, _ := url.Parse(b.base)
		proxies[i] = httputil.NewSingleHostReverseProxy(u)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := int(next.Add(1)-1) % len(backends)
		counts[i].Add(1)
		proxies[i].ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func(i int) int64 { return counts[i].Load() }
}

// browserClient keeps cookies and does not follow redirects: the test reads
// them.
func browserClient(t *testing.T) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, Timeout: 15 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func do(t *testing.T, c *http.Client, method, target string, form url.Values, header map[string]string) (int, string, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, target, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/html")
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header.Get("Location"), string(b)
}

var csrfField = regexp.MustCompile(`name="_csrf" value="([^"]+)"`)

// Two replicas with the chart's settings (a shared session key, sign-outs in
// the cluster) behind one address: a session started on one works on the
// other and survives a restart; a CSRF token from one passes on the other;
// signing out on one ends the session on both.
func TestReplicasShareSessions(t *testing.T) {
	env := sandboxEnv(t)
	kube := testenv.SandboxClients(t, env).Kube
	id := krand.String(5)
	state := "qc-replicas-" + id
	t.Cleanup(func() { _ = kube.CoreV1().Namespaces().Delete(context.Background(), state, metav1.DeleteOptions{}) })
	// A key as an admin makes one (openssl rand -hex 32): text, and a
	// newline the console drops.
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "session-key")
	if err := os.WriteFile(keyFile, []byte(hex.EncodeToString(secret)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"--auth", "token", "--session-key-file", keyFile, "--state-namespace", state,
		"--namespace-prefix", "r" + id + "-", "--cohort", "replicas-" + id}
	a, b := startReplica(t, env, args...), startReplica(t, env, args...)
	base, served := roundRobin(t, a, b)
	c := browserClient(t)
	sameOrigin := map[string]string{"Sec-Fetch-Site": "same-origin"}

	code, location, body := do(t, c, http.MethodPost, base+auth.SignInPath, url.Values{"token": {env.Token}, "next": {"/teams/new"}}, sameOrigin)
	if code != http.StatusSeeOther || location != "/teams/new" {
		t.Fatalf("sign-in: %d %q\n%s", code, location, body)
	}
	signedIn := func(what string) {
		t.Helper()
		for i := range 6 { // three requests on each replica
			if code, location, _ := do(t, c, http.MethodGet, base+"/teams/new", nil, nil); code != http.StatusOK {
				t.Fatalf("%s, request %d: %d %q, want the page (the session works on every replica)", what, i, code, location)
			}
		}
	}
	signedIn("after sign-in")
	if served(0) == 0 || served(1) == 0 {
		t.Fatalf("requests reached replicas %d and %d: the test did not use both", served(0), served(1))
	}

	// A form's CSRF token from one replica passes on the other: a request
	// without Sec-Fetch-Site (an older browser) is checked by its token.
	_, _, page := do(t, a.client(), http.MethodGet, a.base+"/teams/new", nil, cookieHeader(c, a.base))
	m := csrfField.FindStringSubmatch(page)
	if m == nil {
		t.Fatal("no CSRF field on the team form")
	}
	form := url.Values{auth.CSRFField: {m[1]}, "name": {""}}
	header := cookieHeader(c, b.base)
	header["Origin"] = b.base
	if code, _, body := do(t, b.client(), http.MethodPost, b.base+"/teams", form, header); code != http.StatusUnprocessableEntity {
		t.Errorf("a form from replica A posted to B: %d, want 422 (the CSRF check passes, the empty name does not)\n%.300s", code, body)
	}

	// A restart keeps the session (sealed with the shared key).
	a.kill()
	a2 := startReplica(t, env, args...)
	if code, location, _ := do(t, a2.client(), http.MethodGet, a2.base+"/teams/new", nil, cookieHeader(c, a2.base)); code != http.StatusOK {
		t.Errorf("after a restart: %d %q, want the page", code, location)
	}

	// Sign out through B: the session ends on every replica.
	if code, location, _ := do(t, b.client(), http.MethodPost, b.base+auth.SignOutPath, url.Values{}, merge(cookieHeader(c, b.base), sameOrigin)); code != http.StatusSeeOther || location != auth.SignInPath {
		t.Fatalf("sign-out: %d %q", code, location)
	}
	stolen := cookieHeader(c, a2.base) // the cookie as it was: a copy survives sign-out in the browser
	deadline := time.Now().Add(5 * time.Second)
	for {
		code, _, _ := do(t, a2.client(), http.MethodGet, a2.base+"/teams/new", nil, stolen)
		if code == http.StatusSeeOther {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the other replica still accepts the signed-out session after 5 s: %d", code)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// client is a plain client that does not follow redirects, for requests
// sent straight to one replica.
func (r *replica) client() *http.Client {
	return &http.Client{Timeout: 15 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// cookieHeader is the Cookie header c's jar sends to base.
func cookieHeader(c *http.Client, base string) map[string]string {
	u, _ := url.Parse(base)
	var parts []string
	for _, ck := range c.Jar.Cookies(u) {
		parts = append(parts, ck.Name+"="+ck.Value)
	}
	return map[string]string{"Cookie": strings.Join(parts, "; ")}
}

func merge(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// leaderGauge reads quota_console_leader from a replica's /metrics: 1 on the
// replica that holds the Lease and records the task history.
func leaderGauge(r *replica) (float64, bool) {
	res, err := http.Get(r.base + "/metrics")
	if err != nil {
		return 0, false
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "quota_console_leader "); ok {
			return map[string]float64{"0": 0, "1": 1}[strings.TrimSpace(v)], true
		}
	}
	return 0, false
}

// Two replicas sharing a PostgreSQL task history elect one recorder through
// a Lease; when it is killed (no chance to release the Lease), the other
// takes over. How long it took is logged: the Lease's timings bound it to
// 8 to 12.4 s (internal/leader).
func TestAKilledLeaderIsReplaced(t *testing.T) {
	env := sandboxEnv(t)
	if env.PostgresDSN == "" {
		t.Fatal("the sandbox has no PostgreSQL")
	}
	kube := testenv.SandboxClients(t, env).Kube
	id := krand.String(5)
	state := "qc-lease-" + id
	t.Cleanup(func() { _ = kube.CoreV1().Namespaces().Delete(context.Background(), state, metav1.DeleteOptions{}) })
	dsnFile := filepath.Join(t.TempDir(), "dsn")
	if err := os.WriteFile(dsnFile, []byte(testenv.FreshPostgresOn(t, env.PostgresDSN)), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"--state-namespace", state, "--namespace-prefix", "k" + id + "-", "--cohort", "lease-" + id,
		"--history-store", "postgres", "--history-dsn-file", dsnFile, "--leader-election-lease", "history-recorder"}
	replicas := []*replica{startReplica(t, env, args...), startReplica(t, env, args...)}

	leaderOf := func(within time.Duration) (int, time.Duration) {
		start := time.Now()
		for time.Since(start) < within {
			for i, r := range replicas {
				if r == nil {
					continue
				}
				if v, ok := leaderGauge(r); ok && v == 1 {
					return i, time.Since(start)
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
		return -1, within
	}
	holder, _ := leaderOf(30 * time.Second)
	if holder < 0 {
		t.Fatal("no replica took the Lease within 30 s")
	}
	other := 1 - holder
	if v, _ := leaderGauge(replicas[other]); v != 0 {
		t.Fatal("both replicas say they hold the Lease")
	}
	replicas[holder].kill()
	replicas[holder] = nil
	took := time.Now()
	next, _ := leaderOf(30 * time.Second)
	if next != other {
		t.Fatalf("after the holder was killed, no other replica took the Lease within 30 s")
	}
	elapsed := time.Since(took)
	t.Logf("the other replica took over %.1f s after the holder was killed", elapsed.Seconds())
}
