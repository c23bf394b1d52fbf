package handlers

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/a-h/templ"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/metrics"
	"github.com/openquota/console/web/templates"
)

// Live parts are the parts of a page that change with the cluster. Each
// view keeps its parts as last rendered; when the read model changes, only
// the parts (and rows of parts) that depend on what changed are rendered
// again, once for every request for the page (which embeds them) and every
// watcher of the view (to whom the changed parts are pushed, see liveHub).
// Figures from Prometheus and Kueue's visibility API come from feeds with
// schedules of their own (liveFeeds), never from a rendering; figures that
// grow with the clock are shown at the snapshot's Clock.

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
	"/insights":    {"team": ""},
}

// liveChange is what may have changed for the live views: the read
// model's changes and the feeds' figures.
type liveChange struct {
	model domain.Changes
	// utilization: the teams' hardware utilization (Prometheus) changed.
	utilization bool
	// positions are the teams whose queues' positions (Kueue's) changed.
	positions map[string]bool
	// insights: the insights the rules find changed.
	insights bool
}

// liveRoute is how a page's live parts are made: affects tells whether a
// change can alter a view's parts at all (the hub leaves the others
// alone), parts renders them.
type liveRoute struct {
	affects func(v liveView, c liveChange) bool
	parts   func(r *liveRender) ([]templates.LivePart, error)
	// watched, when set, is told before each look at the feeds that a view
	// of the route is watched (a feed that runs only for open pages).
	watched func()
}

// liveViews render the pages' live parts and keep each view's, and push the
// changed ones to the views' watchers.
type liveViews struct {
	model   ReadModel
	feeds   *liveFeeds
	metrics *metrics.Console
	log     *slog.Logger
	// routes are the pages' live parts by route; registered before serving.
	routes map[string]liveRoute
	hub    *liveHub

	mu     sync.Mutex
	states map[string]*viewState
	swept  time.Time
	csv    *renderedOnce
}

func newLiveViews(model ReadModel, feeds *liveFeeds, m *metrics.Console, log *slog.Logger) *liveViews {
	v := &liveViews{model: model, feeds: feeds, metrics: m, log: log, routes: map[string]liveRoute{},
		states: map[string]*viewState{}, csv: newRenderedOnce()}
	v.hub = &liveHub{views: v, watched: map[string]*watchedView{}}
	return v
}

// register has route's live parts made by r.
func (l *liveViews) register(route string, r liveRoute) { l.routes[route] = r }

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

// liveRender is one rendering of a view's parts at a snapshot: what
// changed since the view's previous rendering, whose parts and rows it
// reuses where the change cannot have altered them.
type liveRender struct {
	ctx    context.Context
	view   liveView
	snap   *domain.Snapshot
	change liveChange
	feeds  *liveFeeds
	// fresh: nothing to reuse (the view's first rendering).
	fresh bool
	prev  map[string]templates.LivePart // the previous parts and their rows, by id
}

// reuse is id's previous rendering, unless the change affects it.
func (r *liveRender) reuse(id string, affected bool) (templates.LivePart, bool) {
	if r.fresh || affected || r.change.model.Everything {
		return templates.LivePart{}, false
	}
	p, ok := r.prev[id]
	return p, ok
}

// part renders one live part.
func part(id string, c templ.Component) (templates.LivePart, error) {
	var b strings.Builder
	err := c.Render(context.Background(), &b)
	return templates.LivePart{ID: id, HTML: b.String()}, err
}

// rowSlot stands for a row in a table's frame: the frame is rendered once
// with slots, and the part's HTML is the frame with its rows in them.
const rowSlot = "\x00live-row\x00"

// table makes a part whose rows are live parts too (a table and its rows),
// so that a change of one row pushes that row alone. outer renders the part
// around the given rows; it is rendered again only when the rows' ids
// change or frameAffected.
func (r *liveRender) table(id string, frameAffected bool, rows []templates.LivePart, outer func([]templates.LivePart) templ.Component) (templates.LivePart, error) {
	frame := ""
	if old, ok := r.reuse(id, frameAffected); ok && sameRows(old.Rows, rows) {
		frame = old.Frame
	} else {
		p, err := part(id, outer(withSlots(rows)))
		if err != nil {
			return p, err
		}
		if n := strings.Count(p.HTML, rowSlot); n != len(rows) {
			return p, fmt.Errorf("live part %s shows %d of its %d rows", id, n, len(rows))
		}
		frame = p.HTML
	}
	var b strings.Builder
	size := len(frame)
	for _, r := range rows {
		size += len(r.HTML)
	}
	b.Grow(size) // a table of 200 rows, written once
	fill(&b, frame, rows)
	return templates.LivePart{ID: id, Frame: frame, Rows: rows, HTML: b.String()}, nil
}

// withSlots are parts standing in for parts: each a rowSlot, for a frame
// to be rendered once and filled with the parts (fill).
func withSlots(parts []templates.LivePart) []templates.LivePart {
	slots := make([]templates.LivePart, len(parts))
	for i, p := range parts {
		slots[i] = templates.LivePart{ID: p.ID, Team: p.Team, HTML: rowSlot}
	}
	return slots
}

// fill writes frame with its slots filled by parts, in order.
func fill(w io.StringWriter, frame string, parts []templates.LivePart) error {
	rest := frame
	for _, p := range parts {
		before, after, _ := strings.Cut(rest, rowSlot)
		if _, err := w.WriteString(before); err != nil {
			return err
		}
		if _, err := w.WriteString(p.HTML); err != nil {
			return err
		}
		rest = after
	}
	_, err := w.WriteString(rest)
	return err
}

func sameRows(a, b []templates.LivePart) bool {
	return slices.EqualFunc(a, b, func(x, y templates.LivePart) bool { return x.ID == y.ID && x.Team == y.Team })
}

// viewState is a view's parts as last rendered, and from what.
type viewState struct {
	mu    sync.Mutex
	snap  *domain.Snapshot
	feeds feedVersions
	parts []templates.LivePart
	used  time.Time
	// rendering is closed when the rendering under way ends; nil when none.
	rendering chan struct{}
	// body is the page around the parts, with a slot for each.
	body keptBody
}

// keptBody is a page's body rendered around slots for its live parts: what
// the body shows besides them depends on the view and the snapshot alone.
type keptBody struct {
	version uint64 // of the snapshot
	ids     string // of the parts, in order
	with    any    // what else the body shows (page's with)
	frame   string
}

// maxRenderedViews bounds the views kept; past it the least recently used
// go. Views nobody asked for in viewsKept go too: their parts are rendered
// again when asked.
const (
	maxRenderedViews = 512
	viewsKept        = 2 * time.Minute
)

func (l *liveViews) state(key string) *viewState {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now := time.Now(); now.Sub(l.swept) > viewsKept/4 {
		l.swept = now
		for k, st := range l.states {
			if now.Sub(st.used) > viewsKept {
				delete(l.states, k)
			}
		}
	}
	st := l.states[key]
	if st == nil {
		if len(l.states) >= maxRenderedViews {
			l.evictLocked()
		}
		st = &viewState{}
		l.states[key] = st
	}
	st.used = time.Now()
	return st
}

func (l *liveViews) evictLocked() {
	keys := make([]string, 0, len(l.states))
	for k := range l.states {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return l.states[a].used.Compare(l.states[b].used) })
	for _, k := range keys[:len(keys)/4+1] {
		delete(l.states, k)
	}
}

// render gives v's parts at snap, and the snapshot they show: the view's
// kept parts when nothing changed since (or they show a newer snapshot),
// else rendered again where the changes reach. While another request
// renders the view, a page shows the parts it kept rather than wait (its
// stream brings it the newer ones); the hub waits (pushes).
func (l *liveViews) render(ctx context.Context, v liveView, snap *domain.Snapshot) ([]templates.LivePart, *domain.Snapshot, error) {
	return l.current(ctx, v, snap, false)
}

func (l *liveViews) current(ctx context.Context, v liveView, snap *domain.Snapshot, wait bool) ([]templates.LivePart, *domain.Snapshot, error) {
	st := l.state(v.key())
	for {
		st.mu.Lock()
		versions := l.feeds.versions()
		upToDate := st.snap != nil && (st.snap.Version == snap.Version && st.feeds == versions || st.snap.Version > snap.Version)
		if upToDate || st.rendering != nil && !wait && st.snap != nil {
			parts, shown := st.parts, st.snap
			st.mu.Unlock()
			return parts, shown, nil
		}
		if done := st.rendering; done != nil {
			st.mu.Unlock()
			select {
			case <-done:
				continue
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
		}
		// Others may wait for this rendering: it outlives the request.
		r := &liveRender{ctx: context.WithoutCancel(ctx), view: v, snap: snap, feeds: l.feeds, fresh: st.snap == nil}
		if !r.fresh {
			r.change = liveChange{model: domain.ChangesBetween(st.snap, snap),
				utilization: st.feeds.utilization != versions.utilization, positions: l.positionsSince(st.feeds.positions, versions.positions, snap),
				insights: st.feeds.insights != versions.insights}
			r.prev = make(map[string]templates.LivePart, len(st.parts))
			for _, p := range st.parts {
				r.prev[p.ID] = p
				for _, row := range p.Rows {
					r.prev[row.ID] = row
				}
			}
		}
		done := make(chan struct{})
		st.rendering = done
		st.mu.Unlock()

		parts, err := l.renderParts(r)

		st.mu.Lock()
		st.rendering = nil
		close(done)
		if err == nil {
			st.snap, st.feeds, st.parts = snap, versions, parts
		}
		st.mu.Unlock()
		if err != nil {
			return nil, nil, err
		}
		return parts, snap, nil
	}
}

// positionsSince are the teams whose queues' positions changed from the
// feed's version shown to now.
func (l *liveViews) positionsSince(shown, now uint64, snap *domain.Snapshot) map[string]bool {
	if shown == now {
		return nil
	}
	return teamsOfQueues(snap, l.feeds.positions.changedSince(shown))
}

// positionsMoved reports whether Kueue's positions changed in a queue of
// a team sees reports true for.
func (c liveChange) positionsMoved(sees func(team string) bool) bool {
	for team := range c.positions {
		if sees(team) {
			return true
		}
	}
	return false
}

// page is the body of v's page at snap: body renders it around the view's
// live parts (as render gives them) and the snapshot they show. What the
// body shows besides the parts depends on the view, that snapshot and with
// alone (a comparable value naming the other figures it shows, such as the
// answers of feeds it was drawn from; nil for none), never on the viewer's
// name or CSRF token (the layout around the body has those): it is
// rendered once per snapshot and with, kept with the view, and each
// request only writes it with the parts filled in.
func (l *liveViews) page(ctx context.Context, v liveView, snap *domain.Snapshot, with any,
	body func(parts []templates.LivePart, shown *domain.Snapshot) templ.Component) (templ.Component, *domain.Snapshot, error) {
	parts, shown, err := l.render(ctx, v, snap)
	if err != nil {
		return nil, nil, err
	}
	var ids strings.Builder
	for _, p := range parts {
		ids.WriteString(p.ID)
		ids.WriteByte(0)
	}
	st := l.state(v.key())
	st.mu.Lock()
	kept := st.body
	st.mu.Unlock()
	if kept.version != shown.Version || kept.ids != ids.String() || kept.with != with {
		framed, err := part("", body(withSlots(parts), shown))
		if err != nil {
			return nil, nil, err
		}
		if strings.Count(framed.HTML, rowSlot) != len(parts) {
			// A slot's bytes in the body's own text (a search for
			// them): this page is rendered whole, and not kept.
			return body(parts, shown), shown, nil
		}
		kept = keptBody{version: shown.Version, ids: ids.String(), with: with, frame: framed.HTML}
		st.mu.Lock()
		if st.body.version <= kept.version {
			st.body = kept
		}
		st.mu.Unlock()
	}
	return templ.ComponentFunc(func(_ context.Context, w io.Writer) error {
		return fill(stringWriter{w}, kept.frame, parts)
	}), shown, nil
}

// stringWriter writes strings to a writer, without copies when it can.
type stringWriter struct{ io.Writer }

func (w stringWriter) WriteString(s string) (int, error) { return io.WriteString(w.Writer, s) }

// renderParts renders v's parts; a panic becomes an error, so that no
// request or watcher waits for a rendering that never ends.
func (l *liveViews) renderParts(r *liveRender) (parts []templates.LivePart, err error) {
	start := time.Now()
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("rendering %s: %v", r.view.route, p)
		}
		l.metrics.LiveRender.Observe(time.Since(start).Seconds())
	}()
	return l.routes[r.view.route].parts(r)
}

// affects reports whether c can change v's parts.
func (l *liveViews) affects(v liveView, c liveChange) bool {
	route, ok := l.routes[v.route]
	return ok && (c.model.Everything || route.affects(v, c))
}

// renderedOnce keeps what is rendered once per snapshot and key (a table
// as CSV).
type renderedOnce struct {
	mu      sync.Mutex
	entries map[string]*rendering
}

type rendering struct {
	version uint64
	done    chan struct{}
	body    []byte
	err     error
	used    time.Time
}

func newRenderedOnce() *renderedOnce { return &renderedOnce{entries: map[string]*rendering{}} }

// once runs build for key at a snapshot version unless someone did, and
// waits for it; nil when a newer version was built (the caller builds its
// own, uncached).
func (r *renderedOnce) once(key string, version uint64, build func(*rendering) error) (*rendering, error) {
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

func (r *renderedOnce) evictLocked() {
	keys := make([]string, 0, len(r.entries))
	for k := range r.entries {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return r.entries[a].used.Compare(r.entries[b].used) })
	for _, k := range keys[:len(keys)/4+1] {
		delete(r.entries, k)
	}
}
