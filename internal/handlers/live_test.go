package handlers_test

import (
	"bufio"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	kueuefake "sigs.k8s.io/kueue/client-go/clientset/versioned/fake"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/handlers"
	"github.com/openquota/console/internal/kueue"
	"github.com/openquota/console/internal/kueuetest"
	"github.com/openquota/console/internal/metrics"
)

// pushed is one "fragments" event of a live stream.
type pushed struct {
	Version   uint64            `json:"version"`
	AsOf      string            `json:"asOf"`
	Fragments map[string]string `json:"fragments"`
}

// watch opens a live stream of a page view and sends its events to the
// returned channel until the test ends; the channel closes when the stream
// ends.
func watch(t *testing.T, srv *httptest.Server, view string, shown uint64) <-chan pushed {
	t.Helper()
	return watchWith(t, srv, view, shown, nil)
}

// watchWith is watch with request headers (a session cookie, a proxy's).
func watchWith(t *testing.T, srv *httptest.Server, view string, shown uint64, header map[string]string) <-chan pushed {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, srv.URL+"/events?view="+url.QueryEscape(view)+"&v="+strconv.FormatUint(shown, 10), nil)
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
	events := make(chan pushed, 64)
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
				var p pushed
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

var pendingAttr = regexp.MustCompile(`id="team-summary" data-team="[^"]*" data-pending="(\d+)"`)

// A change reaches the watchers of the views it changes, as the HTML of the
// parts that changed, and no other watcher: rendered once per view, not
// once per watcher.
func TestLiveUpdatesGoOnlyToTheViewsThatChange(t *testing.T) {
	c := newConsoleWith(t, nil, func(d *handlers.Deps) { d.StreamLimits = handlers.StreamLimits{PerUser: 50, Total: 50} })
	for _, team := range []string{"busy", "quiet"} {
		if code, _, body := c.post(t, "/teams", teamForm(team, "2")); code != 303 {
			t.Fatalf("create %s: %d\n%s", team, code, body)
		}
		t.Cleanup(func() { c.post(t, "/teams/"+team+"/delete", url.Values{}) })
	}
	srv := httptest.NewServer(c.h)
	t.Cleanup(srv.Close)
	shown := c.live.Snapshot().Version
	const busyWatchers = 12
	var busy []<-chan pushed
	for range busyWatchers {
		busy = append(busy, watch(t, srv, "/usage/busy", shown))
	}
	quiet := watch(t, srv, "/usage/quiet", shown)
	// The page they loaded may be older than the stream's start: each gets
	// the parts as they are now, once.
	drain := func(ch <-chan pushed) {
		for {
			select {
			case <-ch:
			case <-time.After(500 * time.Millisecond):
				return
			}
		}
	}
	for _, ch := range append(busy, quiet) {
		drain(ch)
	}
	renders := func() float64 { return histogramCount(t, c.h, "quota_console_live_render_duration_seconds_count") }
	before, versionBefore := renders(), c.live.Snapshot().Version

	c.submit(t, "busy", "waits", 8) // more than the team's quota: stays pending

	for i, ch := range busy {
		deadline := time.After(30 * time.Second)
	wait:
		for {
			select {
			case p := <-ch:
				html, ok := p.Fragments["team-live"]
				if m := pendingAttr.FindStringSubmatch(html); ok && m != nil && m[1] == "1" {
					if diff := cmp.Diff([]string{"team-live"}, keys(p.Fragments)); diff != "" {
						t.Errorf("watcher %d got parts beyond the changed one (-want +got):\n%s", i, diff)
					}
					break wait
				}
			case <-deadline:
				t.Fatalf("watcher %d of /usage/busy never saw the pending task", i)
			}
		}
	}
	select {
	case p := <-quiet:
		t.Errorf("the watcher of an unchanged view received %v", keys(p.Fragments))
	case <-time.After(2 * time.Second):
	}
	// Each snapshot renders each watched view at most once, whatever the
	// number of its watchers.
	snapshots := float64(c.live.Snapshot().Version - versionBefore)
	if rendered := renders() - before; rendered > 2*snapshots+2 {
		t.Errorf("%v renders for %v snapshots and 2 watched views (%d watchers): views are rendered per watcher", rendered, snapshots, busyWatchers+1)
	}
	// An operator sees it in /metrics.
	_, body := get(t, c.h, "/metrics")
	mustContain(t, "/metrics", body, `quota_console_read_model_update_duration_seconds_count{kind="Workload"}`,
		`quota_console_read_model_update_duration_seconds_count{kind="snapshot"}`,
		"quota_console_live_watchers "+strconv.Itoa(busyWatchers+1), "quota_console_live_fragments_pushed_total ",
		`quota_console_http_request_duration_seconds_count{route="/metrics"}`)
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// histogramCount reads one sample of the console's /metrics.
func histogramCount(t *testing.T, h http.Handler, name string) float64 {
	t.Helper()
	_, body := get(t, h, "/metrics")
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

// syntheticServer serves the pages from a read model of a synthetic cluster
// (200 teams, n Workloads): the task list's paging, sorting and search are
// the read model's, whatever cluster it reads.
func syntheticServer(t testing.TB, n int) http.Handler {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cache := kueue.NewCache(k8sfake.NewClientset(), kueuefake.NewSimpleClientset(), domain.DefaultSettings, log)
	live := kueue.NewLive(cache, domain.DefaultSettings, log)
	now := time.Now()
	live.Publish(domain.BuildSnapshot(inputOf(domain.DefaultSettings, kueuetest.Cluster(domain.DefaultSettings, domain.DefaultSettings.Cohort, 200, n, now)), now))
	return atLoopback(handlers.New(handlers.Deps{Cache: cache, Live: live, Settings: domain.DefaultSettings, Metrics: metrics.NewConsole(), Log: log}))
}

var taskRowRE = regexp.MustCompile(`<tr data-task="([^"]+)"`)

func listed(body string) []string {
	var names []string
	for _, m := range taskRowRE.FindAllStringSubmatch(body, -1) {
		names = append(names, m[1][strings.Index(m[1], "/")+1:])
	}
	return names
}

func TestTaskListPagesSortsAndSearches(t *testing.T) {
	h := syntheticServer(t, 2_000) // team-007 has 10 tasks; the whole list 2 000

	code, body := get(t, h, "/tasks?state=all&sort=name&page=2")
	if code != 200 {
		t.Fatalf("GET = %d", code)
	}
	var want []string
	for i := 50; i < 100; i++ {
		want = append(want, "job-"+pad(i))
	}
	if diff := cmp.Diff(want, listed(body)); diff != "" {
		t.Errorf("page 2 by name (-want +got):\n%s", diff)
	}
	mustContain(t, "page 2", body, "Tasks 51–100 of 2000 (page 2 of 40).",
		`href="/tasks?page=3&amp;sort=name&amp;state=all" rel="next"`, `href="/tasks?sort=name&amp;state=all" rel="prev"`,
		// The current sort's heading sorts the other way round; the others by themselves, from page 1.
		`aria-sort="ascending"><a href="/tasks?desc=1&amp;sort=name&amp;state=all">Task</a>`,
		`<a href="/tasks?sort=gpus&amp;state=all">GPUs</a>`)

	_, body = get(t, h, "/tasks?state=all&sort=name&desc=1")
	if got := listed(body); len(got) != 50 || got[0] != "job-001999" || got[49] != "job-001950" {
		t.Errorf("by name, descending: %v … (%d)", got[:1], len(got))
	}

	_, body = get(t, h, "/tasks?state=all&q=JOB-00123")
	if diff := cmp.Diff([]string{"job-001230", "job-001231", "job-001232", "job-001233", "job-001234", "job-001235",
		"job-001236", "job-001237", "job-001238", "job-001239"}, sortedCopy(listed(body))); diff != "" {
		t.Errorf("search (-want +got):\n%s", diff)
	}
	mustContain(t, "search", body, "Tasks 1–10 of 10 (page 1 of 1).", `value="JOB-00123"`)

	// Past the last page: the last page.
	_, body = get(t, h, "/tasks?team=team-007&state=all&page=9")
	mustContain(t, "one team", body, "Tasks 1–10 of 10 (page 1 of 1).")

	// The CSV has every task of the view, in its order, not one page.
	_, csvBody := get(t, h, "/tasks?format=csv&table=tasks&state=all&sort=name")
	lines := strings.Split(strings.TrimSpace(csvBody), "\n")
	if len(lines) != 2_001 || !strings.Contains(lines[1], ",job-000000,") || !strings.Contains(lines[2000], ",job-001999,") {
		t.Errorf("CSV: %d lines, first %q, last %q", len(lines), lines[1], lines[len(lines)-1])
	}
}

func pad(i int) string { return strings.Repeat("0", 6-len(strconv.Itoa(i))) + strconv.Itoa(i) }

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}
