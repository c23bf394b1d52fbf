package handlers

import "net/url"

// pageURL is the address of path with a query of name, value pairs: a later
// pair replaces an earlier one of the same name, and empty values and
// defaults are left out, so that a page has one address per view.
func pageURL(path string, defaults map[string]string, pairs ...string) string {
	q := url.Values{}
	for i := 0; i+1 < len(pairs); i += 2 {
		name, value := pairs[i], pairs[i+1]
		if value != "" && value != defaults[name] {
			q.Set(name, value)
		} else {
			q.Del(name)
		}
	}
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}
