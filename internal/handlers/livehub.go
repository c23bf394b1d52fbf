package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/web/templates"
)

// liveHub pushes the parts that changed to the watchers of each view: on
// each change of the read model or of a feed, it renders again the views
// the change affects (once each, whatever their number of watchers) and
// offers their watchers the parts whose content changed. A watcher whose
// view did not change receives nothing; nothing is rendered on a timer
// but the clock's figures (domain.ClockCadence) and the feeds' schedules.
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
	parts, snap, err := h.views.current(ctx, v, h.views.model.Snapshot(), true)
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

// run follows the read model's changes and the feeds' schedules while
// anyone watches.
func (h *liveHub) run(ctx context.Context) {
	changed, unsubscribe := h.views.model.Subscribe()
	defer unsubscribe()
	feeds := time.NewTicker(feedTick)
	defer feeds.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case c := <-changed:
			h.push(ctx, liveChange{model: c})
		case <-feeds.C:
			h.tellWatched()
			if c, ok := h.views.feeds.refresh(ctx, h.views.model.Snapshot()); ok {
				h.push(ctx, c)
			}
		}
	}
}

// tellWatched tells the routes that want to know that their views are
// watched.
func (h *liveHub) tellWatched() {
	h.mu.Lock()
	routes := map[string]bool{}
	for _, wv := range h.watched {
		routes[wv.view.route] = true
	}
	h.mu.Unlock()
	for route := range routes {
		if r := h.views.routes[route]; r.watched != nil {
			r.watched()
		}
	}
}

// push renders again the watched views c affects, at the current snapshot,
// and offers the changed parts to their watchers. Views render side by
// side, as many at once as there are processors: a cheap view's watchers
// need not wait for the full Tasks view.
func (h *liveHub) push(ctx context.Context, c liveChange) {
	snap := h.views.model.Snapshot()
	h.mu.Lock()
	views := make([]*watchedView, 0, len(h.watched))
	for _, wv := range h.watched {
		if h.views.affects(wv.view, c) {
			views = append(views, wv)
		}
	}
	h.mu.Unlock()
	slots := make(chan struct{}, runtime.GOMAXPROCS(0))
	var rendering sync.WaitGroup
	for _, wv := range views {
		if ctx.Err() != nil {
			break
		}
		slots <- struct{}{}
		rendering.Go(func() {
			defer func() { <-slots }()
			h.pushView(ctx, wv, snap)
		})
	}
	rendering.Wait()
}

// pushView renders one watched view and offers its changed parts.
func (h *liveHub) pushView(ctx context.Context, wv *watchedView, snap *domain.Snapshot) {
	parts, shown, err := h.views.current(ctx, wv.view, snap, true)
	if err != nil {
		h.views.log.Warn("rendering a live view", "route", wv.view.route, "err", err)
		return
	}
	// Only this push writes the view's parts (joins read them): the
	// differences are made outside the hub's lock.
	h.mu.Lock()
	shownBefore := wv.parts
	h.mu.Unlock()
	changed := changes(shownBefore, parts)
	h.mu.Lock()
	defer h.mu.Unlock()
	wv.parts = parts
	if len(changed) > 0 {
		for w := range wv.watchers {
			w.offer(shown, changed)
		}
		h.views.metrics.LiveFragments.Add(float64(len(changed) * len(wv.watchers)))
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
	size := 64
	for id, p := range w.pending {
		size += len(id) + len(p.html) + 4
	}
	var b bytes.Buffer
	b.Grow(size) // an event of a whole table's rows, made once per watcher
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
