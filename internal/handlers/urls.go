package handlers

import (
	"net/url"
	"slices"
	"strings"
)

// pageURL is the address of path with a query of name, value pairs: a later
// pair replaces an earlier one of the same name, and empty values and
// defaults are left out, so that a page has one address per view. The
// query is url.Values' encoding (names in order, escaped), built without
// its map: pages make a dozen of these links a request.
func pageURL(path string, defaults map[string]string, pairs ...string) string {
	var room [16]queryParam
	q := room[:0]
	for i := 0; i+1 < len(pairs); i += 2 {
		name, value := pairs[i], pairs[i+1]
		for j := range q {
			if q[j].name == name {
				q = slices.Delete(q, j, j+1)
				break
			}
		}
		if value != "" && value != defaults[name] {
			q = append(q, queryParam{name, value})
		}
	}
	if len(q) == 0 {
		return path
	}
	slices.SortFunc(q, func(a, b queryParam) int { return strings.Compare(a.name, b.name) })
	var b strings.Builder
	n := len(path) + len(q)
	for _, p := range q {
		n += len(p.name) + len(p.value) + 1
	}
	b.Grow(n + n/4) // room for some escapes
	b.WriteString(path)
	sep := byte('?')
	for _, p := range q {
		b.WriteByte(sep)
		sep = '&'
		b.WriteString(url.QueryEscape(p.name))
		b.WriteByte('=')
		b.WriteString(url.QueryEscape(p.value))
	}
	return b.String()
}

// queryParam is one name and value of a page's query.
type queryParam struct{ name, value string }
