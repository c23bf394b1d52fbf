package handlers

import (
	"context"
	"encoding/binary"
	"hash/fnv"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/a-h/templ"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/web/templates"
)

// pieces are parts of pages rendered once and kept while they show the same
// figures: a table row keyed by its view model (a comparable value, which
// names its team), a chart by a hash of its figures. A page picks the rows
// its viewer may see on every request and renders only its frame; it never
// keeps a whole page, which carries the viewer's name and CSRF token.
type pieces struct {
	mu    sync.Mutex
	html  map[any]string
	bytes int
}

// maxPieceBytes bounds the pieces kept; past it they are all forgotten
// (and rendered again as asked).
const maxPieceBytes = 8 << 20

func newPieces() *pieces { return &pieces{html: map[any]string{}} }

// of is c as rendered for key: the kept rendering, or c rendered now and
// kept. Two keys of different types never meet.
func (p *pieces) of(key any, c templ.Component) templ.Component {
	p.mu.Lock()
	h, ok := p.html[key]
	p.mu.Unlock()
	if ok {
		return templ.Raw(h)
	}
	var b strings.Builder
	if err := c.Render(context.Background(), &b); err != nil {
		return c // rendered again with the page, which reports the error
	}
	h = b.String()
	p.mu.Lock()
	if p.bytes+len(h) > maxPieceBytes {
		clear(p.html)
		p.bytes = 0
	}
	if _, ok := p.html[key]; !ok {
		p.html[key] = h
		p.bytes += len(h)
	}
	p.mu.Unlock()
	return templ.Raw(h)
}

// renderNow is c rendered now, to be written as it is by every page
// that shows it until what it shows changes.
func renderNow(c templ.Component) (templ.Component, error) {
	var b strings.Builder
	if err := c.Render(context.Background(), &b); err != nil {
		return nil, err
	}
	return templ.Raw(b.String()), nil
}

// chartKey identifies a chart by everything it draws.
type chartKey uint64

// chart is c drawn once per figures.
func (p *pieces) chart(c templates.ChartModel) templ.Component {
	h := fnv.New64a()
	word := func(s string) {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	var n [8]byte
	number := func(v uint64) {
		binary.LittleEndian.PutUint64(n[:], v)
		h.Write(n[:])
	}
	word(c.ID)
	word(c.Title)
	word(c.Unit)
	word(c.Unavailable)
	number(math.Float64bits(c.YMax))
	for _, s := range c.Series {
		word(s.Name)
		number(uint64(len(s.Points)))
		for _, pt := range s.Points {
			number(uint64(pt.T.UnixNano()))
			number(math.Float64bits(pt.V))
		}
	}
	return p.of(chartKey(h.Sum64()), templates.LineChart(c))
}

// kept keeps a page's tables for each viewer scope while what they are
// made of stays (key: the change counts of their inputs): the requests
// between two changes share one computation and rendering. After a change
// one request builds the new tables; the others show the previous ones
// meanwhile rather than build them too.
type kept[V any] struct {
	mu      sync.Mutex
	byScope map[string]*keptTables[V]
}

type keptTables[V any] struct {
	key      string
	tables   V
	ok       bool          // tables were built (for some key)
	building chan struct{} // closed when the build under way ends
}

// maxKeptScopes bounds the scopes kept; past it they are all forgotten.
const maxKeptScopes = 512

// get is the tables of scope for key, built when there are none for it (a
// failure is not kept); while another request builds them, the tables kept
// before, for another key.
func (k *kept[V]) get(scope, key string, build func() (V, error)) (V, error) {
	return k.tablesOf(scope, key, build, true)
}

// exact is get without the tables of another key: for what is kept in
// turn, which must not keep them.
func (k *kept[V]) exact(scope, key string, build func() (V, error)) (V, error) {
	return k.tablesOf(scope, key, build, false)
}

func (k *kept[V]) tablesOf(scope, key string, build func() (V, error), previous bool) (V, error) {
	for {
		k.mu.Lock()
		if k.byScope == nil || len(k.byScope) >= maxKeptScopes {
			k.byScope = map[string]*keptTables[V]{}
		}
		t := k.byScope[scope]
		if t == nil {
			t = &keptTables[V]{}
			k.byScope[scope] = t
		}
		switch {
		case t.ok && t.key == key, previous && t.ok && t.building != nil:
			tables := t.tables
			k.mu.Unlock()
			return tables, nil
		case t.building != nil:
			done := t.building
			k.mu.Unlock()
			<-done
			continue
		}
		done := make(chan struct{})
		t.building = done
		k.mu.Unlock()

		tables, err := build()

		k.mu.Lock()
		t.building = nil
		close(done)
		if err == nil {
			t.key, t.tables, t.ok = key, tables, true
		}
		k.mu.Unlock()
		return tables, err
	}
}

// bodies keep pages' bodies (what a page shows inside its layout) rendered
// once per view, the viewer's teams and the page's query, while what they
// are made of stays (key): a page whose every part is kept still spent most
// of a request writing those parts into one page, and a report page is
// about a hundred kilobytes. The layout, which carries the viewer's name, is
// rendered for each request.
type bodies struct {
	mu     sync.Mutex
	byView map[string]storedBody
	bytes  int
}

type storedBody struct{ key, html string }

// maxBodyBytes bounds the bodies kept; past it they are all forgotten.
const maxBodyBytes = 8 << 20

// get is view's body for key: the kept one, or build's rendered now and
// kept. Requests that miss at once each render it: it is made of kept
// parts, and a miss comes only with a change.
func (b *bodies) get(view, key string, build func() templ.Component) (templ.Component, error) {
	b.mu.Lock()
	k, ok := b.byView[view]
	b.mu.Unlock()
	if ok && k.key == key {
		return templ.Raw(k.html), nil
	}
	var h strings.Builder
	if err := build().Render(context.Background(), &h); err != nil {
		return nil, err
	}
	html := h.String()
	b.mu.Lock()
	if b.byView == nil || b.bytes+len(html) > maxBodyBytes {
		b.byView, b.bytes = map[string]storedBody{}, 0
	}
	b.bytes += len(html) - len(b.byView[view].html)
	b.byView[view] = storedBody{key: key, html: html}
	b.mu.Unlock()
	return templ.Raw(html), nil
}

// teamFilters are a page's team filter (FilterSelect) as rendered for a
// scope and a choice: a list of 200 teams is the same for every request
// until a team comes or goes, and making it again for each request made
// most of a page's garbage.
type teamFilters struct {
	label string

	mu       sync.Mutex
	names    []string // the teams the renderings list
	rendered map[string]templ.Component
	// generation counts the changes of names: equal generations, equal
	// renderings.
	generation uint64
}

// maxTeamFilters bounds the renderings kept (scopes and choices).
const maxTeamFilters = 256

func newTeamFilters(label string) *teamFilters {
	return &teamFilters{label: label, rendered: map[string]templ.Component{}}
}

// of is the filter of snap's teams that visible may see, selected chosen,
// and the generation of the teams it lists.
func (f *teamFilters) of(snap *domain.Snapshot, visible scope, selected string) (templ.Component, uint64) {
	names := snap.TeamNames()
	key := visible.key() + "\x00" + selected
	f.mu.Lock()
	if !sameList(names, f.names) {
		if !slices.Equal(names, f.names) {
			clear(f.rendered)
			f.generation++
		}
		f.names = names
	}
	c, ok := f.rendered[key]
	generation := f.generation
	f.mu.Unlock()
	if ok {
		return c, generation
	}
	filter := templates.FilterSelect("team", f.label, teamChoices(snap, visible, selected))
	c, err := renderNow(filter)
	if err != nil {
		return filter, generation // rendered with the page, which reports the error
	}
	f.mu.Lock()
	if len(f.rendered) >= maxTeamFilters {
		clear(f.rendered)
	}
	if f.generation == generation { // else it lists teams that changed since
		f.rendered[key] = c
	}
	f.mu.Unlock()
	return c, generation
}

// sameList reports whether a and b are the same slice (a snapshot lists
// its teams once).
func sameList(a, b []string) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}
