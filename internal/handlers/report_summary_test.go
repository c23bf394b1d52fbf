package handlers_test

import (
	"fmt"
	"html"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openquota/console/internal/taskhistory"
	"github.com/openquota/console/internal/webtest"
)

// The usage summary shows a page of rows at a time (a week of 200 teams is
// thousands of rows), says which, and links the pages around it; the
// resource tabs and the CSV start from the first row, and the CSV has them
// all.
func TestUsageSummaryIsPaged(t *testing.T) {
	f := newFixture(t, 1, 0)
	today := time.Now().UTC().Truncate(24 * time.Hour)
	history := &taskHistory{}
	const teams = 230
	for i := range teams {
		history.summary.Rows = append(history.summary.Rows, taskhistory.UsageRow{Day: today, Team: fmt.Sprintf("team-%03d", i),
			InstanceType: "ml.p5.48xlarge", GPU: taskhistory.ResourceHours{Allocated: 8, Used: 1}})
	}
	history.summary.Days = []taskhistory.UsageDay{{Day: today}}
	f.cfg.TaskHistory = history
	h := f.handler()

	type page struct {
		First, Last, Rows     string
		Shown, Previous, Next string
	}
	read := func(path string) page {
		t.Helper()
		code, body := webtest.Get(t, h, path)
		if code != 200 {
			t.Fatalf("GET %s: %d", path, code)
		}
		rows := webtest.HTMLRows(t, body, "history-usage", webtest.ByAttr("data-team"))
		names := make([]string, 0, len(rows))
		for team := range rows {
			names = append(names, team)
		}
		slices.Sort(names)
		p := page{Rows: fmt.Sprint(len(names))}
		if len(names) > 0 {
			p.First, p.Last = names[0], names[len(names)-1]
		}
		if _, rest, ok := strings.Cut(body, `id="summary-rows-shown">`); ok {
			p.Shown, _, _ = strings.Cut(rest, "<")
		}
		link := func(rel string) string {
			_, rest, ok := strings.Cut(body, `rel="`+rel+`"`)
			if !ok {
				return ""
			}
			before := body[:len(body)-len(rest)]
			href := before[strings.LastIndex(before, `href="`)+len(`href="`):]
			href, _, _ = strings.Cut(href, `"`)
			return html.UnescapeString(href)
		}
		p.Previous, p.Next = link("prev"), link("next")
		return p
	}
	first := read("/reports/usage?source=history")
	want := page{First: "team-000", Last: "team-099", Rows: "100", Shown: "Rows 1–100 of 230; the CSV has them all.",
		Next: "/reports/usage?rows=100&source=history"}
	if diff := cmp.Diff(want, first); diff != "" {
		t.Fatalf("first page (-want +got):\n%s", diff)
	}
	last := read("/reports/usage?rows=200&source=history")
	want = page{First: "team-200", Last: "team-229", Rows: "30", Shown: "Rows 201–230 of 230; the CSV has them all.",
		Previous: "/reports/usage?rows=100&source=history"}
	if diff := cmp.Diff(want, last); diff != "" {
		t.Errorf("last page (-want +got):\n%s", diff)
	}
	if beyond := read("/reports/usage?rows=9999&source=history"); beyond.First != "team-200" {
		t.Errorf("an offset past the rows shows %+v, want the last page", beyond)
	}
	if odd := read("/reports/usage?rows=-5&source=history"); odd.First != "team-000" {
		t.Errorf("a negative offset shows %+v, want the first page", odd)
	}

	_, body := webtest.Get(t, h, "/reports/usage?rows=100&source=history")
	for _, id := range []string{`id="export-summary"`, `id="export-hyperpod"`} {
		i := strings.Index(body, id)
		if i < 0 {
			t.Fatalf("no %s", id)
		}
		tag := body[strings.LastIndex(body[:i], "<a") : i+strings.Index(body[i:], ">")]
		if strings.Contains(tag, "rows=") {
			t.Errorf("%s keeps the page's offset: %s", id, tag)
		}
	}
	code, csv := webtest.Get(t, h, "/reports/usage?source=history&format=csv&table=summary")
	_, records := webtest.ReadCSV(t, "summary CSV", code, csv)
	if len(records) != teams {
		t.Errorf("the summary CSV has %d rows, want %d", len(records), teams)
	}
}
