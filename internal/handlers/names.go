package handlers

import "strconv"

// maxShownName bounds how much of a name taken from a request (the team in
// a path) a page repeats.
const maxShownName = 64

// quoteName is a name from a request as a message repeats it: quoted, with
// control characters and quotes escaped, and cut to maxShownName
// characters with an ellipsis, so that a link cannot put kilobytes or line
// breaks of its own on the console's pages.
func quoteName(name string) string {
	if r := []rune(name); len(r) > maxShownName {
		name = string(r[:maxShownName]) + "…"
	}
	return strconv.Quote(name)
}
