package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Live-update protocols a watcher can find.
const (
	modeRefetch = "refetch" // `snapshot` events; the page fetches itself again (X-Live: 1)
	modePush    = "push"    // `fragments` events carry the new HTML of the live parts
)

// watchKind is what a watcher watches: its page, and which probes must
// change that page and in which count.
type watchKind struct {
	Label string // the page, with <team> for the team it watches
	path  func(team string) string
	// key says which count on the page a probe of class in probeTeam
	// raises, if any.
	key func(class, watched, probeTeam string) (countKey, bool)
}

var (
	watchTasks = watchKind{Label: "/tasks",
		path: func(string) string { return "/tasks" },
		key:  func(c, _, _ string) (countKey, bool) { return countKey{Class: c}, true }}
	watchTeamTasks = watchKind{Label: "/tasks?team=<team>",
		path: func(t string) string { return "/tasks?team=" + url.QueryEscape(t) },
		key:  func(c, w, p string) (countKey, bool) { return countKey{Class: c}, w == p }}
	watchUsage = watchKind{Label: "/usage",
		path: func(string) string { return "/usage" },
		key:  func(_, _, p string) (countKey, bool) { return countKey{Team: p}, true }}
	watchTeamUsage = watchKind{Label: "/usage/<team>",
		path: func(t string) string { return "/usage/" + url.PathEscape(t) },
		key:  func(_, w, p string) (countKey, bool) { return countKey{Team: p}, w == p }}
	watchOverview = watchKind{Label: "/",
		path: func(string) string { return "/" },
		key:  func(_, _, _ string) (countKey, bool) { return countKey{}, false }}
)

// planWatchers puts tasksWatchers on the full Tasks page and spreads the
// rest over the team task pages, Team usage, team pages and the Cluster
// page; team pages take the probe teams in turn. class is the probes'
// priority class.
func planWatchers(total, tasksWatchers int, probeTeams []string, class string) []*watcher {
	others := []watchKind{watchTeamTasks, watchUsage, watchTeamUsage, watchOverview}
	var ws []*watcher
	perKind := map[string]int{}
	for i := 0; i < total; i++ {
		kind := watchTasks
		if i >= tasksWatchers {
			kind = others[(i-tasksWatchers)%len(others)]
		}
		team := probeTeams[perKind[kind.Label]%len(probeTeams)]
		perKind[kind.Label]++
		ws = append(ws, newWatcher(kind, team, probeTeams, class))
	}
	return ws
}

// watcher is one browser tab as web/static/app.js drives it, in either
// protocol: it loads its page, opens the event stream and keeps its live
// parts current, recording when each pending count first reached each
// level above where it started.
type watcher struct {
	Kind  watchKind
	Team  string
	Path  string
	class string     // the probes' priority class
	keys  []countKey // the counts probes can raise on this page

	shown atomic.Uint64 // snapshot version the page shows (refetch mode)

	mu        sync.Mutex
	base      map[countKey]int
	parts     map[string]*livePart // live parts (and pushed fragments) by element id
	partSeq   int
	firstSeen map[countKey][]time.Time // [n-1]: when the count first was base+n or more
	mode      string
	noLive    bool // the page has no live parts: app.js opens no stream
	refused   bool // the event stream answered 503 (over the console's cap)
	failed    string
	events    int
	refetches []time.Duration
	refetchKO int
	pushes    int
	pushBytes int64
	pushSizes []int // bytes of each push
	reconnect int
}

// livePart is the counts inside one element the page swaps.
type livePart struct {
	counts map[countKey]int
	seq    int // later swaps win for counts that two parts both show
}

func newWatcher(kind watchKind, team string, probeTeams []string, class string) *watcher {
	w := &watcher{Kind: kind, Team: team, Path: kind.path(team), class: class,
		base: map[countKey]int{}, parts: map[string]*livePart{}, firstSeen: map[countKey][]time.Time{}}
	seen := map[countKey]bool{}
	for _, t := range probeTeams {
		if k, ok := kind.key(class, team, t); ok && !seen[k] {
			seen[k] = true
			w.keys = append(w.keys, k)
		}
	}
	return w
}

// count is what the page now shows for k: from the part swapped last.
func (w *watcher) count(k countKey) (int, bool) {
	best, n, found := -1, 0, false
	for _, p := range w.parts {
		if v, ok := p.counts[k]; ok && p.seq > best {
			best, n, found = p.seq, v, true
		}
	}
	return n, found
}

// swap replaces one part's counts (w.mu held).
func (w *watcher) swap(id string, counts map[countKey]int) {
	w.partSeq++
	w.parts[id] = &livePart{counts: counts, seq: w.partSeq}
}

// observe records the page's counts as of at (w.mu held).
func (w *watcher) observe(at time.Time) {
	for _, k := range w.keys {
		n, ok := w.count(k)
		if !ok {
			continue
		}
		for len(w.firstSeen[k]) < n-w.base[k] {
			w.firstSeen[k] = append(w.firstSeen[k], at)
		}
	}
}

// run loads the page and follows its event stream until ctx ends. ready
// is called once: when the stream is open, or the watcher gave up.
func (w *watcher) run(ctx context.Context, client *http.Client, base string, ready func()) {
	var once sync.Once
	signal := func() { once.Do(ready) }
	defer signal()
	st, status, err := fetchPage(ctx, client, base+w.Path, false)
	if err != nil || status != http.StatusOK {
		w.fail(fmt.Sprintf("loading %s: %d %v", w.Path, status, err))
		return
	}
	w.mu.Lock()
	for id, counts := range st.Live {
		w.swap(id, counts)
	}
	for _, k := range w.keys {
		w.base[k], _ = w.count(k)
	}
	w.noLive = len(st.Live) == 0
	w.mu.Unlock()
	w.shown.Store(st.Version)
	if w.noLive {
		return
	}

	trigger := make(chan struct{}, 1)
	go w.refetchLoop(ctx, client, base, trigger)
	stream := base + "/events?view=" + url.QueryEscape(w.Path)
	retry := 3 * time.Second
	for ctx.Err() == nil {
		res, err := openStream(ctx, client, stream)
		switch {
		case err != nil:
			// A network error: EventSource reconnects.
		case res.StatusCode == http.StatusServiceUnavailable:
			res.Body.Close()
			w.mu.Lock()
			w.refused = true
			w.mu.Unlock()
			return // EventSource gives up on any answer but 200
		case res.StatusCode != http.StatusOK:
			res.Body.Close()
			w.fail("event stream answered " + res.Status)
			return
		default:
			signal()
			r := newSSEReader(res.Body)
			_ = w.follow(r, trigger) // however the stream ended, EventSource reconnects
			retry = r.Retry
			res.Body.Close()
		}
		if ctx.Err() != nil {
			return
		}
		w.mu.Lock()
		w.reconnect++
		w.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-time.After(retry):
		}
	}
}

func openStream(ctx context.Context, client *http.Client, url string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Cache-Control", "no-cache")
	return client.Do(req)
}

func (w *watcher) fail(why string) {
	w.mu.Lock()
	w.failed = why
	w.mu.Unlock()
}

// follow handles events until the stream ends. The first `snapshot` or
// `fragments` event decides the protocol.
func (w *watcher) follow(r *sseReader, trigger chan<- struct{}) error {
	for {
		ev, err := r.Next()
		if err != nil {
			return err
		}
		w.mu.Lock()
		w.events++
		if w.mode == "" && (ev.Type == "snapshot" || ev.Type == "fragments") {
			w.mode = map[string]string{"snapshot": modeRefetch, "fragments": modePush}[ev.Type]
		}
		mode := w.mode
		w.mu.Unlock()
		switch {
		case ev.Type == "snapshot" && mode == modeRefetch:
			// app.js: if (Number(ev.data) > shown) refresh();
			if v, err := strconv.ParseUint(ev.Data, 10, 64); err == nil && v > w.shown.Load() {
				select {
				case trigger <- struct{}{}:
				default: // a refetch is queued already: it will see this version too
				}
			}
		case ev.Type == "fragments" && mode == modePush:
			w.applyFragments(ev.Data, time.Now())
		}
	}
}

// fragment is one pushed part: its element id and inner HTML.
type fragment struct{ id, html string }

// readFragments reads a `fragments` event's data, {"version": n,
// "fragments": {id: html, ...}}, keeping the parts in the order sent: as
// app.js swaps them (a part, then the rows of it that changed after).
func readFragments(data string) ([]fragment, error) {
	dec := json.NewDecoder(strings.NewReader(data))
	if _, err := dec.Token(); err != nil { // {
		return nil, err
	}
	var out []fragment
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return nil, err
		}
		if key != "fragments" {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return nil, err
			}
			continue
		}
		if _, err := dec.Token(); err != nil { // {
			return nil, err
		}
		for dec.More() {
			id, err := dec.Token()
			if err != nil {
				return nil, err
			}
			var html string
			if err := dec.Decode(&html); err != nil {
				return nil, err
			}
			out = append(out, fragment{fmt.Sprint(id), html})
		}
		if _, err := dec.Token(); err != nil { // }
			return nil, err
		}
	}
	return out, nil
}

func (w *watcher) applyFragments(data string, at time.Time) {
	fragments, err := readFragments(data)
	if err != nil {
		w.mu.Lock()
		w.failed = "unreadable fragments event: " + err.Error()
		w.mu.Unlock()
		return
	}
	parsed := make([]map[countKey]int, len(fragments))
	for i, f := range fragments {
		parsed[i] = parseFragment(f.html)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pushes++
	w.pushBytes += int64(len(data))
	w.pushSizes = append(w.pushSizes, len(data))
	for i, f := range fragments {
		w.swap(f.id, parsed[i])
	}
	w.observe(at)
}

// refetchLoop is app.js's refresh(): one fetch at a time, and one more when
// events arrived meanwhile (trigger holds at most one).
func (w *watcher) refetchLoop(ctx context.Context, client *http.Client, base string, trigger <-chan struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-trigger:
		}
		start := time.Now()
		st, status, err := fetchPage(ctx, client, base+w.Path, true)
		at := time.Now()
		if ctx.Err() != nil {
			return
		}
		w.mu.Lock()
		if err != nil || status != http.StatusOK {
			w.refetchKO++
			w.mu.Unlock()
			continue
		}
		w.refetches = append(w.refetches, at.Sub(start))
		for id, counts := range st.Live {
			if _, known := w.parts[id]; known { // app.js swaps only elements the page has
				w.swap(id, counts)
			}
		}
		w.observe(at)
		w.mu.Unlock()
		if st.Version > 0 {
			w.shown.Store(st.Version)
		}
	}
}

// fetchPage loads a page (as app.js's refetch when live) and reads its
// counts as it streams in.
func fetchPage(ctx context.Context, client *http.Client, url string, live bool) (pageState, int, error) {
	ctx, cancel := context.WithTimeout(ctx, pageRequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return pageState{}, 0, err
	}
	req.Header.Set("Accept", "text/html")
	if live {
		req.Header.Set("X-Live", "1")
		req.Header.Set("Cache-Control", "no-cache")
	}
	res, err := client.Do(req)
	if err != nil {
		return pageState{}, 0, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, res.Body)
		return pageState{}, res.StatusCode, nil
	}
	st := parsePage(res.Body)
	if ctx.Err() != nil {
		return pageState{}, res.StatusCode, errors.Join(errors.New("page cut off"), ctx.Err())
	}
	return st, res.StatusCode, nil
}

// waitAllSeen waits until every watcher that can has seen every probe, or
// until the timeout.
func waitAllSeen(ctx context.Context, ws []*watcher, probes []probe, timeout time.Duration) {
	deadline := time.After(timeout)
	for {
		all := true
		for _, w := range ws {
			if !w.sawAll(probes) {
				all = false
				break
			}
		}
		if all {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-deadline:
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// sawAll reports whether the watcher saw every probe its page must show,
// or never can (no stream, refused, failed).
func (w *watcher) sawAll(probes []probe) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.noLive || w.refused || w.failed != "" {
		return true
	}
	want := map[countKey]int{}
	for _, p := range probes {
		if k, ok := w.Kind.key(w.class, w.Team, p.Team); ok {
			want[k]++
		}
	}
	for k, n := range want {
		if len(w.firstSeen[k]) < n {
			return false
		}
	}
	return true
}

// seenLatencies pairs each probe the page must show with the moment the
// page first showed it: the n-th probe of a count is seen when the count
// first reached base+n. early counts pairs seen before the probe was sent
// (the count moved for another reason).
func (w *watcher) seenLatencies(probes []probe, timeout time.Duration) (lat []time.Duration, missed, early int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	nth := map[countKey]int{}
	for _, p := range probes {
		k, ok := w.Kind.key(w.class, w.Team, p.Team)
		if !ok {
			continue
		}
		i := nth[k]
		nth[k]++
		if i >= len(w.firstSeen[k]) {
			missed++
			continue
		}
		d := w.firstSeen[k][i].Sub(p.Sent)
		switch {
		case d < 0:
			early++
		case d > timeout:
			missed++
		default:
			lat = append(lat, d)
		}
	}
	return lat, missed, early
}
