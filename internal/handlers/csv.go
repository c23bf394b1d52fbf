package handlers

import (
	"bytes"
	"encoding/csv"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/openquota/console/internal/domain"
)

// csvStream writes a table as RFC 4180 CSV (UTF-8, header row first) straight
// to the response, flushing as it goes: memory stays flat however many rows.
type csvStream struct {
	w       *csv.Writer
	flusher http.Flusher
	rows    int
}

// The CSV convention of every page: ?format=csv answers the page's table as
// CSV, with the page's filters; table= chooses when a page has several.

// csvTable reports whether the request asks for CSV, and for which table.
func csvTable(c echo.Context) (table string, ok bool) {
	return c.QueryParam("table"), c.QueryParam("format") == "csv"
}

// csvHref is the link to a table of this page as CSV: the page's address
// with the page's filters (the query parameters named in filters, as this
// request has them), format=csv and table ("" for the page's main table).
func csvHref(c echo.Context, table string, filters ...string) string {
	q := url.Values{"format": {"csv"}}
	for _, k := range filters {
		if v := c.QueryParam(k); v != "" {
			q.Set(k, v)
		}
	}
	if table != "" {
		q.Set("table", table)
	}
	return c.Request().URL.Path + "?" + q.Encode()
}

func startCSV(c echo.Context, filename string, header ...string) (*csvStream, error) {
	res := csvResponse(c, filename)
	s := &csvStream{w: csv.NewWriter(res)}
	s.flusher, _ = res.Writer.(http.Flusher)
	return s, s.Row(header...)
}

func csvResponse(c echo.Context, filename string) *echo.Response {
	res := c.Response()
	res.Header().Set(echo.HeaderContentType, "text/csv; charset=utf-8")
	res.Header().Set(echo.HeaderContentDisposition, `attachment; filename="`+filename+`"`)
	res.WriteHeader(http.StatusOK)
	return res
}

// cachedCSV answers a small table that depends only on the snapshot and
// the view (key): written once per snapshot, then sent as it is to every
// request for it.
func (l *liveViews) cachedCSV(c echo.Context, key string, snap *domain.Snapshot, filename string, header []string, rows func(*csvStream) error) error {
	e, err := l.csv.once("csv\x00"+key, snap.Version, func(e *rendering) error {
		var b bytes.Buffer
		s := &csvStream{w: csv.NewWriter(&b)}
		if err := s.Row(header...); err != nil {
			return err
		}
		if err := rows(s); err != nil {
			return err
		}
		err := s.Close()
		e.body = b.Bytes()
		return err
	})
	if err != nil {
		return err
	}
	if e == nil { // an older snapshot than the cached table: stream it
		s, err := startCSV(c, filename, header...)
		if err != nil {
			return err
		}
		if err := rows(s); err != nil {
			return err
		}
		return s.Close()
	}
	_, err = csvResponse(c, filename).Write(e.body)
	return err
}

// Row writes one row; cells that a spreadsheet would run as a formula are
// neutralized first.
func (s *csvStream) Row(cells ...string) error {
	for i, cell := range cells {
		cells[i] = safeCell(cell)
	}
	if err := s.w.Write(cells); err != nil {
		return err
	}
	s.rows++
	if s.rows%500 == 0 {
		s.w.Flush()
		if s.flusher != nil {
			s.flusher.Flush()
		}
	}
	return s.w.Error()
}

func (s *csvStream) Close() error {
	s.w.Flush()
	return s.w.Error()
}

// safeCell prefixes cells starting with = + - @ (or tab/CR, which some
// spreadsheets skip before those) with a quote, so no cell runs as a formula.
// A plain negative number stays a number.
func safeCell(s string) string {
	if s == "" || !strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return s
	}
	if s[0] == '-' && isNumber(s[1:]) {
		return s
	}
	return "'" + s
}

func isNumber(s string) bool {
	if s == "" {
		return false
	}
	dot := false
	for _, r := range s {
		switch {
		case r == '.' && !dot:
			dot = true
		case r < '0' || r > '9':
			return false
		}
	}
	return true
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
