package main

import (
	"bytes"
	"io"
	"strconv"

	"golang.org/x/net/html"
)

// countKey names one pending count on a page: a statistics row of the Tasks
// page (class, and team for the team × class table) or a team's row of the
// Team usage pages (Class empty).
type countKey struct{ Class, Team string }

// pageState is what a watcher reads from a page: the snapshot version it
// shows and, for each live part (element with data-live and an id), the
// pending counts inside it.
type pageState struct {
	Version uint64
	Live    map[string]map[countKey]int
}

// voidElements never have an end tag, so they do not open a level.
var voidElements = map[string]bool{"area": true, "base": true, "br": true, "col": true, "embed": true, "hr": true,
	"img": true, "input": true, "link": true, "meta": true, "source": true, "track": true, "wbr": true}

// parsePage reads a whole page as app.js sees it: <main data-snapshot> and
// the counts inside each live part. Counts outside live parts are not
// updated by live updates, so they are left out.
func parsePage(r io.Reader) pageState {
	st := pageState{Live: map[string]map[countKey]int{}}
	type open struct {
		id    string
		depth int
	}
	var lives []open
	var rows rowContext
	depth := 0
	z := html.NewTokenizer(r)
	for {
		tt := z.Next()
		switch tt {
		case html.ErrorToken:
			return st
		case html.StartTagToken, html.SelfClosingTagToken:
			name, _ := z.TagName()
			a := readAttrs(z)
			if tt == html.StartTagToken && !voidElements[string(name)] {
				depth++
				if a.live && a.id != "" {
					lives = append(lives, open{a.id, depth})
					st.Live[a.id] = map[countKey]int{}
				}
			}
			if string(name) == "main" && a.snapshot != "" {
				st.Version, _ = strconv.ParseUint(a.snapshot, 10, 64)
			}
			if len(lives) > 0 {
				rows.add(a, st.Live[lives[len(lives)-1].id])
			}
		case html.EndTagToken:
			name, _ := z.TagName()
			if string(name) == "tr" {
				rows.reset()
			}
			if len(lives) > 0 && lives[len(lives)-1].depth == depth {
				lives = lives[:len(lives)-1]
			}
			depth--
		}
	}
}

// parseFragment reads the counts in the inner HTML of one live part, as the
// new protocol pushes it.
func parseFragment(fragment string) map[countKey]int {
	counts := map[countKey]int{}
	var rows rowContext
	z := html.NewTokenizer(bytes.NewReader([]byte(fragment)))
	for {
		switch z.Next() {
		case html.ErrorToken:
			return counts
		case html.StartTagToken, html.SelfClosingTagToken:
			rows.add(readAttrs(z), counts)
		case html.EndTagToken:
			if name, _ := z.TagName(); string(name) == "tr" {
				rows.reset()
			}
		}
	}
}

// tagAttrs are the attributes the watcher cares about.
type tagAttrs struct {
	id, snapshot                  string
	live                          bool
	class, team, pending          string
	hasClass, hasTeam, hasPending bool
	total                         bool
}

func readAttrs(z *html.Tokenizer) tagAttrs {
	var a tagAttrs
	for more := true; more; {
		var k, v []byte
		k, v, more = z.TagAttr()
		switch string(k) {
		case "":
			return a
		case "id":
			a.id = string(v)
		case "data-live":
			a.live = true
		case "data-snapshot":
			a.snapshot = string(v)
		case "data-class":
			a.class, a.hasClass = string(v), true
		case "data-team":
			a.team, a.hasTeam = string(v), true
		case "data-pending":
			a.pending, a.hasPending = string(v), true
		case "data-total":
			a.total = true
		}
	}
	return a
}

// rowContext remembers the statistics row (data-class, data-team) whose
// pending cell (data-pending) comes later.
type rowContext struct {
	key countKey
	set bool
}

func (r *rowContext) reset() { r.set = false }

func (r *rowContext) add(a tagAttrs, into map[countKey]int) {
	if a.hasClass {
		r.key, r.set = countKey{Class: a.class, Team: a.team}, true
	}
	if !a.hasPending {
		return
	}
	n, err := strconv.Atoi(a.pending)
	if err != nil {
		return
	}
	switch {
	case a.hasClass:
		into[countKey{Class: a.class, Team: a.team}] = n
	case a.hasTeam:
		into[countKey{Team: a.team}] = n
	case a.total:
		// the totals row counts every team: no probe is attributed to it
	case r.set:
		into[r.key] = n
	}
}
