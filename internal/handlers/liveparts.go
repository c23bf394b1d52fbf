package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/a-h/templ"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/metrics"
	"github.com/openquota/console/web/templates"
)

// Live parts are the parts of a page that change with the cluster. They are
// rendered once per snapshot and view, and shared: by every request for the
// page (which embeds them) and by every watcher of the view (to whom the
// changed parts are pushed, see liveHub). The work per change so grows
// with the number of distinct views watched, not with the number of
// viewers.

// liveView is one view of a page's live parts. What the parts show depends
// on the page, its own query parameters and what the viewer may see, and on
// nothing else (no user name, no CSRF token), so viewers of the same view
// share them.
type liveView struct {
	route string // the page's route: "/tasks", "/usage", "/usage/:team"
	team  string // the :team of the route
	query url.Values
	scope scope
}

func (v liveView) key() string {
	return v.route + "\x00" + v.team + "\x00" + v.query.Encode() + "\x00" + v.scope.key()
}

// liveParams are, for each page with live parts, the query parameters the
// parts depend on, with their defaults: a view keeps only these, so equal
// views are equal keys.
var liveParams = map[string]map[string]string{
	"/tasks":       taskParams,
	"/usage":       {"resource": "gpu"},
	"/usage/:team": nil,
}

// partsFunc renders a view's live parts at a snapshot.
type partsFunc func(ctx context.Context, v liveView, snap *domain.Snapshot) ([]templates.LivePart, error)

// liveViews render the pages' live parts, once per snapshot and view, and
// push the changed ones to the views' watchers.
type liveViews struct {
	model   ReadModel
	metrics *metrics.Console
	log     *slog.Logger
	// parts are the pages' renderings by route; registered before serving.
	parts    map[string]partsFunc
	renderer *liveRenderer
	hub      *liveHub
}

func newLiveViews(model ReadModel, m *metrics.Console, log *slog.Logger) *liveViews {
	v := &liveViews{model: model, metrics: m, log: log, parts: map[string]partsFunc{}, renderer: newLiveRenderer()}
	v.hub = &liveHub{views: v, watched: map[string]*watchedView{}}
	return v
}

// register has route's live parts rendered by parts.
func (l *liveViews) register(route string, parts partsFunc) { l.parts[route] = parts }

// viewOf is the live view of a page address ("/tasks?team=nlp"), for
// scope; ok is false for a page without live parts.
func viewOf(address string, s scope) (v liveView, ok bool) {
	u, err := url.Parse(address)
	if err != nil || u.Host != "" || u.Scheme != "" {
		return liveView{}, false
	}
	v.route = u.Path
	if team, found := strings.CutPrefix(u.Path, "/usage/"); found && team != "" && !strings.Contains(team, "/") {
		v.route, v.team = "/usage/:team", team
	}
	params, ok := liveParams[v.route]
	if !ok {
		return liveView{}, false
	}
	v.query, v.scope = canonicalQuery(u.Query(), params), s
	return v, true
}

// canonicalQuery keeps the parameters a page knows, without their defaults.
func canonicalQuery(q url.Values, params map[string]string) url.Values {
	out := url.Values{}
	for name, def := range params {
		if v := strings.TrimSpace(q.Get(name)); v != "" && v != def {
			out.Set(name, v)
		}
	}
	return out
}

// key tells scopes apart in view keys.
func (s scope) key() string {
	if s.all {
		return "all"
	}
	return "teams:" + strings.Join(s.list(), ",")
}

// list is the scope's teams, sorted.
func (s scope) list() []string {
	teams := make([]string, 0, len(s.teams))
	for t := range s.teams {
		teams = append(teams, t)
	}
	sort.Strings(teams)
	return teams
}

// part renders one live part.
func part(id string, c templ.Component) (templates.LivePart, error) {
	var b strings.Builder
	err := c.Render(context.Background(), &b)
	return templates.LivePart{ID: id, HTML: b.String()}, err
}

// partWithRows renders a part whose rows are live parts too (a table and
// its rows), so that a change of one row pushes that row alone: outer
// renders the part with the given rows; its frame is it with empty rows.
func partWithRows(id string, rows []templates.LivePart, outer func([]templates.LivePart) templ.Component) (templates.LivePart, error) {
	p, err := part(id, outer(rows))
	if err != nil {
		return p, err
	}
	empty := make([]templates.LivePart, len(rows))
	for i, r := range rows {
		empty[i] = templates.LivePart{ID: r.ID, Team: r.Team}
	}
	frame, err := part(id, outer(empty))
	p.Frame, p.Rows = frame.HTML, rows
	return p, err
}

// liveRenderer renders each view once per snapshot.
type liveRenderer struct {
	mu      sync.Mutex
	entries map[string]*rendering
}

type rendering struct {
	version uint64
	done    chan struct{}
	parts   []templates.LivePart
	body    []byte // a table as CSV (see cachedCSV)
	err     error
	used    time.Time
}

// maxRenderedViews bounds the views kept; past it the least recently used
// go.
const maxRenderedViews = 512

func newLiveRenderer() *liveRenderer { return &liveRenderer{entries: map[string]*rendering{}} }

// render gives v's parts at snap, rendering them if no one has yet.
func (l *liveViews) render(ctx context.Context, v liveView, snap *domain.Snapshot) ([]templates.LivePart, error) {
	e, err := l.renderer.once(v.key(), snap.Version, func(e *rendering) error {
		start := time.Now()
		var err error
		e.parts, err = l.renderParts(ctx, v, snap)
		l.metrics.LiveRender.Observe(time.Since(start).Seconds())
		return err
	})
	if e == nil { // a newer rendering exists: this request has an older snapshot
		return l.renderParts(ctx, v, snap)
	}
	return e.parts, err
}

// once runs build for key at a snapshot version unless someone did, and
// waits for it; nil when a newer version was built (the caller builds its
// own, uncached).
func (r *liveRenderer) once(key string, version uint64, build func(*rendering) error) (*rendering, error) {
	r.mu.Lock()
	e := r.entries[key]
	if e == nil || e.version < version {
		if e == nil && len(r.entries) >= maxRenderedViews {
			r.evictLocked()
		}
		e = &rendering{version: version, done: make(chan struct{})}
		r.entries[key] = e
		r.mu.Unlock()
		e.err = build(e)
		close(e.done)
		r.mu.Lock()
	}
	e.used = time.Now()
	r.mu.Unlock()
	if e.version > version {
		return nil, nil
	}
	<-e.done
	return e, e.err
}

// renderParts renders v's parts; a panic becomes an error, so that no
// request or watcher waits for a rendering that never ends.
func (l *liveViews) renderParts(ctx context.Context, v liveView, snap *domain.Snapshot) (parts []templates.LivePart, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("rendering %s: %v", v.route, p)
		}
	}()
	return l.parts[v.route](ctx, v, snap)
}

func (r *liveRenderer) evictLocked() {
	keys := make([]string, 0, len(r.entries))
	for k := range r.entries {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return r.entries[a].used.Compare(r.entries[b].used) })
	for _, k := range keys[:len(keys)/4+1] {
		delete(r.entries, k)
	}
}

// liveHub pushes the parts that changed to the watchers of each view, once
// per snapshot: a watcher whose view did not change receives nothing.
type liveHub struct {
	views *liveViews

	mu       sync.Mutex
	watched  map[string]*watchedView
	watchers int
	stop     context.CancelFunc // ends the loop when the last watcher leaves
}

type watchedView struct {
	view     liveView
	watchers map[*liveWatcher]struct{}
	parts    []templates.LivePart // as last pushed
}

// changes are the parts and rows of parts that changed from shown to now,
// as pushes: a part whose frame changed goes whole, else its changed rows.
func changes(shown, now []templates.LivePart) []pushedPart {
	before := map[string]templates.LivePart{}
	for _, p := range shown {
		before[p.ID] = p
	}
	var out []pushedPart
	for _, p := range now {
		old, ok := before[p.ID]
		switch {
		case !ok || old.Frame != p.Frame || len(p.Rows) == 0 && old.HTML != p.HTML:
			if !ok || old.HTML != p.HTML {
				out = append(out, pushedPart{p.ID, jsonString(p.HTML)})
			}
		default:
			rows := map[string]string{}
			for _, r := range old.Rows {
				rows[r.ID] = r.HTML
			}
			for _, r := range p.Rows {
				if rows[r.ID] != r.HTML {
					out = append(out, pushedPart{r.ID, jsonString(r.HTML)})
				}
			}
		}
	}
	return out
}

// pushedPart is an element's new inner HTML, as a JSON string.
type pushedPart struct {
	id   string
	html json.RawMessage
}

// liveWatcher is one open stream. Pushes it has not sent yet merge: it
// sends the newest HTML of every part that changed, in the order they
// changed (a part, then the rows that changed in it after).
type liveWatcher struct {
	mu      sync.Mutex
	version uint64
	asOf    string // when the snapshot was taken
	pending map[string]pendingPart
	seq     int
	ready   chan struct{}
}

type pendingPart struct {
	seq  int
	html json.RawMessage
}

// join adds a watcher of v whose page shows the snapshot version shown.
func (h *liveHub) join(ctx context.Context, v liveView, shown uint64) (*liveWatcher, error) {
	snap := h.views.model.Snapshot()
	parts, err := h.views.render(ctx, v, snap)
	if err != nil {
		return nil, err
	}
	w := &liveWatcher{pending: map[string]pendingPart{}, ready: make(chan struct{}, 1)}
	h.mu.Lock()
	defer h.mu.Unlock()
	key := v.key()
	wv := h.watched[key]
	if wv == nil {
		wv = &watchedView{view: v, watchers: map[*liveWatcher]struct{}{}, parts: parts}
		h.watched[key] = wv
	}
	wv.watchers[w] = struct{}{}
	h.watchers++
	h.views.metrics.LiveWatchers.Set(float64(h.watchers))
	if shown < snap.Version { // the page is older than what the view shows now
		w.offer(snap, changes(nil, wv.parts))
	}
	if h.stop == nil {
		loop, stop := context.WithCancel(context.Background())
		h.stop = stop
		go h.run(loop)
	}
	return w, nil
}

// leave removes a watcher.
func (h *liveHub) leave(v liveView, w *liveWatcher) {
	h.mu.Lock()
	defer h.mu.Unlock()
	key := v.key()
	if wv := h.watched[key]; wv != nil {
		delete(wv.watchers, w)
		if len(wv.watchers) == 0 {
			delete(h.watched, key)
		}
	}
	h.watchers--
	h.views.metrics.LiveWatchers.Set(float64(h.watchers))
	if h.watchers == 0 && h.stop != nil {
		h.stop()
		h.stop = nil
	}
}

func (h *liveHub) run(ctx context.Context) {
	versions, unsubscribe := h.views.model.Subscribe()
	defer unsubscribe()
	for {
		select {
		case <-ctx.Done():
			return
		case <-versions:
			h.push(ctx)
		}
	}
}

// push renders every watched view at the current snapshot and offers the
// changed parts to its watchers.
func (h *liveHub) push(ctx context.Context) {
	snap := h.views.model.Snapshot()
	h.mu.Lock()
	views := make([]*watchedView, 0, len(h.watched))
	for _, wv := range h.watched {
		views = append(views, wv)
	}
	h.mu.Unlock()
	for _, wv := range views {
		if ctx.Err() != nil {
			return
		}
		parts, err := h.views.render(ctx, wv.view, snap)
		if err != nil {
			h.views.log.Warn("rendering a live view", "route", wv.view.route, "err", err)
			continue
		}
		h.mu.Lock()
		changed := changes(wv.parts, parts)
		wv.parts = parts
		if len(changed) > 0 {
			for w := range wv.watchers {
				w.offer(snap, changed)
			}
			h.views.metrics.LiveFragments.Add(float64(len(changed) * len(wv.watchers)))
		}
		h.mu.Unlock()
	}
}

func jsonString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

func (w *liveWatcher) offer(snap *domain.Snapshot, parts []pushedPart) {
	w.mu.Lock()
	w.version, w.asOf = snap.Version, snap.Taken.Format(time.TimeOnly)
	for _, p := range parts {
		w.seq++
		w.pending[p.id] = pendingPart{w.seq, p.html}
	}
	w.mu.Unlock()
	select {
	case w.ready <- struct{}{}:
	default:
	}
}

// take is what the watcher has not sent yet, as an event's data: {"version":
// n, "asOf": "15:04:05", "fragments": {id: html}}; nil when nothing.
func (w *liveWatcher) take() []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.pending) == 0 {
		return nil
	}
	ids := make([]string, 0, len(w.pending))
	for id := range w.pending {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b string) int { return w.pending[a].seq - w.pending[b].seq })
	var b bytes.Buffer
	b.WriteString(`{"version":` + strconv.FormatUint(w.version, 10) + `,"asOf":`)
	b.Write(jsonString(w.asOf))
	b.WriteString(`,"fragments":{`)
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(jsonString(id))
		b.WriteByte(':')
		b.Write(w.pending[id].html)
	}
	b.WriteString("}}")
	clear(w.pending)
	return b.Bytes()
}
