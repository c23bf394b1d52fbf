// Package webtest drives the console's HTTP handler in tests as a browser
// would, and reads what it answers: pages (their tables, hidden fields,
// markup that must not be there), CSV exports, live update streams and
// /metrics. The handlers' own tests (on in-memory fakes) and the
// integration tests (package app, on the sandbox) share it.
//
// It is for tests only, and imports nothing of the console.
package webtest

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// AtLoopback addresses httptest's requests (Host example.com) to 127.0.0.1,
// as a client of a console on loopback does.
func AtLoopback(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Host == "example.com" {
			r.Host = "127.0.0.1:8080"
		}
		h.ServeHTTP(w, r)
	})
}

// Get sends a GET without cookies or headers.
func Get(t testing.TB, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code, rec.Body.String()
}

// Browser plays one user's browser: it sends its headers (a proxy's user
// header, say), keeps cookies, and posts forms with the CSRF token of the
// last page it loaded.
type Browser struct {
	T       testing.TB
	H       http.Handler
	Remote  string
	Headers map[string]string
	Cookies map[string]*http.Cookie
	CSRF    string
}

// NewBrowser is a browser at 127.0.0.1 sending headers.
func NewBrowser(t testing.TB, h http.Handler, headers map[string]string) *Browser {
	if headers == nil {
		headers = map[string]string{}
	}
	return &Browser{T: t, H: h, Remote: "127.0.0.1:40000", Headers: headers, Cookies: map[string]*http.Cookie{}}
}

var csrfField = regexp.MustCompile(`name="_csrf" value="([^"]*)"`)

// Do sends r as the browser: its address, headers and cookies; it keeps
// the cookies set (and drops the ones removed) and the page's CSRF token.
func (b *Browser) Do(r *http.Request) *httptest.ResponseRecorder {
	b.T.Helper()
	r.RemoteAddr = b.Remote
	for k, v := range b.Headers {
		r.Header.Set(k, v)
	}
	for _, ck := range b.Cookies {
		r.AddCookie(ck)
	}
	rec := httptest.NewRecorder()
	b.H.ServeHTTP(rec, r)
	for _, ck := range rec.Result().Cookies() {
		if ck.MaxAge < 0 {
			delete(b.Cookies, ck.Name)
		} else {
			b.Cookies[ck.Name] = ck
		}
	}
	if m := csrfField.FindStringSubmatch(rec.Body.String()); m != nil {
		b.CSRF = html.UnescapeString(m[1])
	}
	return rec
}

// Get loads a page.
func (b *Browser) Get(path string) (int, string) {
	b.T.Helper()
	rec := b.Do(httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code, rec.Body.String()
}

// Post sends a form with the CSRF token unless the form names its own
// _csrf; it returns the status, the Location and the body.
func (b *Browser) Post(path string, form url.Values) (int, string, string) {
	b.T.Helper()
	form = CloneValues(form)
	if _, ok := form["_csrf"]; !ok {
		form.Set("_csrf", b.CSRF)
	}
	r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rec := b.Do(r)
	return rec.Code, rec.Header().Get("Location"), rec.Body.String()
}

// CookieHeader is the browser's cookies as a request header.
func (b *Browser) CookieHeader() map[string]string {
	var parts []string
	for _, ck := range b.Cookies {
		parts = append(parts, ck.Name+"="+ck.Value)
	}
	return map[string]string{"Cookie": strings.Join(parts, "; ")}
}

// CloneValues is a deep copy of form values.
func CloneValues(v url.Values) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}

// Hidden reads a hidden field's value from a page.
func Hidden(t testing.TB, body, name string) string {
	t.Helper()
	m := regexp.MustCompile(`name="` + regexp.QuoteMeta(name) + `" value="([^"]*)"`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no hidden field %s on the page", name)
	}
	return html.UnescapeString(m[1])
}

// MustContain fails unless body contains every one of wants.
func MustContain(t testing.TB, what, body string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(body, w) {
			t.Errorf("%s lacks %q", what, w)
		}
	}
}

// MustNotContain fails if body contains any of unwanted.
func MustNotContain(t testing.TB, what, body string, unwanted ...string) {
	t.Helper()
	for _, w := range unwanted {
		if strings.Contains(body, w) {
			t.Errorf("%s has %q", what, w)
		}
	}
}

// ReadCSV parses a CSV answer into its header and rows.
func ReadCSV(t testing.TB, path string, code int, body string) (header []string, rows [][]string) {
	t.Helper()
	if code != http.StatusOK {
		t.Fatalf("GET %s = %d\n%.500s", path, code, body)
	}
	records, err := csv.NewReader(strings.NewReader(body)).ReadAll()
	if err != nil || len(records) == 0 {
		t.Fatalf("GET %s: not CSV (%v):\n%.500s", path, err, body)
	}
	return records[0], records[1:]
}

// CSVRecords are a CSV's rows as maps by column, keyed by key ("" leaves a
// row out).
func CSVRecords(header []string, rows [][]string, key func(map[string]string) string) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, r := range rows {
		m := map[string]string{}
		for i, h := range header {
			m[h] = r[i]
		}
		if k := key(m); k != "" {
			out[k] = m
		}
	}
	return out
}

// MetricValue reads one sample of the console's /metrics ("" name and
// labels as written there); 0 when absent.
func MetricValue(t testing.TB, h http.Handler, sample string) float64 {
	t.Helper()
	_, body := Get(t, h, "/metrics")
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

// Pushed is one "fragments" event of a live update stream.
type Pushed struct {
	Version   uint64            `json:"version"`
	AsOf      string            `json:"asOf"`
	Fragments map[string]string `json:"fragments"`
}

// IDs are the element ids of the fragments pushed, sorted.
func (p Pushed) IDs() []string {
	var out []string
	for k := range p.Fragments {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Watch opens a live stream of a page view on server base (with request
// headers: a session cookie, a proxy's) and sends its events to the
// returned channel until the test ends; the channel closes when the stream
// ends.
func Watch(t testing.TB, base, view string, shown uint64, header map[string]string) <-chan Pushed {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+"/events?view="+url.QueryEscape(view)+"&v="+strconv.FormatUint(shown, 10), nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		t.Fatalf("stream of %s: %d", view, res.StatusCode)
	}
	t.Cleanup(func() { res.Body.Close() })
	events := make(chan Pushed, 64)
	go func() {
		defer close(events)
		r := bufio.NewReader(res.Body)
		var name string
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			line = strings.TrimRight(line, "\n")
			switch {
			case strings.HasPrefix(line, "event: "):
				name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: ") && name == "fragments":
				var p Pushed
				if json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &p) == nil {
					events <- p
				}
			case line == "":
				name = ""
			}
		}
	}()
	return events
}

// OpenStream asks base for the live stream of view as user (named in the
// header userHeader, as an authenticating proxy does); it returns the status,
// and on 200 keeps the stream open until the test ends.
func OpenStream(t testing.TB, base, view, userHeader, user string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/events?view="+url.QueryEscape(view), nil)
	req.Header.Set(userHeader, user)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		res.Body.Close()
		return res.StatusCode
	}
	t.Cleanup(func() { res.Body.Close() })
	_, _ = bufio.NewReader(res.Body).ReadString('\n') // the stream is open
	return res.StatusCode
}

var teamPending = regexp.MustCompile(`id="team-summary" data-team="[^"]*" data-pending="(\d+)"`)

// AwaitOnlyPending waits until every watcher of a team's usage page is
// pushed its "team-live" part showing one pending task, and fails if that
// push carries other parts: a change reaches the part it changes only.
func AwaitOnlyPending(t testing.TB, watchers []<-chan Pushed, within time.Duration, view string) {
	t.Helper()
	for i, ch := range watchers {
		deadline := time.After(within)
	wait:
		for {
			select {
			case p := <-ch:
				html, ok := p.Fragments["team-live"]
				if m := teamPending.FindStringSubmatch(html); ok && m != nil && m[1] == "1" {
					if ids := p.IDs(); len(ids) != 1 {
						t.Errorf("watcher %d of %s got parts beyond the changed one: %v", i, view, ids)
					}
					break wait
				}
			case <-deadline:
				t.Fatalf("watcher %d of %s never saw the pending task", i, view)
			}
		}
	}
}

// AwaitPart waits, at most within, for a push of the part id whose HTML
// satisfies ok, and fails (saying what it waited for) if none comes.
func AwaitPart(t testing.TB, watcher <-chan Pushed, within time.Duration, id, what string, ok func(html string) bool) {
	t.Helper()
	timeout := time.After(within)
	for {
		select {
		case p, open := <-watcher:
			if !open {
				t.Fatalf("%s: the stream ended", what)
			}
			if html, pushed := p.Fragments[id]; pushed && ok(html) {
				return
			}
		case <-timeout:
			t.Fatalf("%s: %s never pushed", what, id)
		}
	}
}

// Quiet fails if the watcher of view is pushed anything within d.
func Quiet(t testing.TB, watcher <-chan Pushed, d time.Duration, view string) {
	t.Helper()
	select {
	case p := <-watcher:
		t.Errorf("the watcher of %s, which did not change, received %v", view, p.IDs())
	case <-time.After(d):
	}
}
