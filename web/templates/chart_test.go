package templates

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

func renderChart(t *testing.T, c ChartModel) string {
	t.Helper()
	var b strings.Builder
	if err := LineChart(c).Render(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// every returns n points a minute apart from start with values f(i).
func every(start time.Time, n int, f func(i int) float64) []ChartPoint {
	pts := make([]ChartPoint, n)
	for i := range pts {
		pts[i] = ChartPoint{T: start.Add(time.Duration(i) * time.Minute), V: f(i)}
	}
	return pts
}

func TestLineChartDrawsSeriesLegendAndHoverValues(t *testing.T) {
	start := time.Date(2026, 7, 1, 11, 30, 0, 0, time.Local)
	html := renderChart(t, ChartModel{
		ID: "cluster-gpu", Title: "GPU", Unit: "%", YMax: 100,
		Series: []ChartSeries{
			{Name: "GPU utilization", Points: every(start, 61, func(i int) float64 {
				if i == 35 { // 12:05
					return 73.24
				}
				return 50
			})},
			{Name: "GPU memory used", Points: every(start, 61, func(int) float64 { return 20 })},
			{Name: `<script>alert("x")</script>`, Points: every(start, 61, func(int) float64 { return 5 })},
		},
	})

	if got := strings.Count(html, "<polyline"); got != 3 {
		t.Errorf("%d polylines, want 3 (one per series)", got)
	}
	for i, class := range []string{"chart-line s0", "chart-line s1", "chart-line s2"} {
		if !strings.Contains(html, `class="`+class+`"`) {
			t.Errorf("series %d lacks class %q", i, class)
		}
	}
	legend := html[strings.Index(html, `<ul class="chart-legend">`):strings.Index(html, "</ul>")]
	for _, name := range []string{"GPU utilization", "GPU memory used", "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;"} {
		if !strings.Contains(legend, name) {
			t.Errorf("legend lacks %q:\n%s", name, legend)
		}
	}
	if !strings.Contains(html, "<title>12:05 · GPU utilization 73.2 %</title>") {
		t.Errorf("no hover title for 12:05 with one decimal and unit")
	}
	if got := strings.Count(html, "<circle"); got != 3*61 {
		t.Errorf("%d hover circles, want one per point (183)", got)
	}
	if strings.Contains(html, "<script") {
		t.Errorf("a series name came out as markup:\n%s", html)
	}
	// Y axis 0-100 % in nice steps, X axis with local HH:MM labels.
	for _, label := range []string{">0 %</text>", ">50 %</text>", ">100 %</text>", ">12:00</text>"} {
		if !strings.Contains(html, label) {
			t.Errorf("axis label %q missing", label)
		}
	}
	if strings.Contains(html, "No data in this range") {
		t.Error("empty state shown with data")
	}
}

// Every coordinate stays inside the 700×220 drawing.
func TestLineChartStaysInsideViewBox(t *testing.T) {
	start := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	html := renderChart(t, ChartModel{ID: "q", Title: "Quota", Unit: "GPUs", Series: []ChartSeries{
		{Name: "GPU quota", Points: every(start, 300, func(int) float64 { return 16 })},
		{Name: "GPUs in use", Points: every(start, 300, func(i int) float64 { return float64(i % 23) })},
	}})
	for _, m := range regexp.MustCompile(`points="([^"]*)"`).FindAllStringSubmatch(html, -1) {
		for _, xy := range strings.Fields(m[1]) {
			var x, y float64
			if _, err := fmt.Sscanf(xy, "%f,%f", &x, &y); err != nil {
				t.Fatalf("point %q: %v", xy, err)
			}
			if x < 64 || x > 684 || y < 10 || y > 196 {
				t.Errorf("point %q outside the plot area", xy)
			}
		}
	}
	// Data up to 22 GPUs: ticks every 10 up to 30.
	if got, want := strings.Join(yLabels(html), ","), "0 GPUs,10 GPUs,20 GPUs,30 GPUs"; got != want {
		t.Errorf("Y labels %s, want %s", got, want)
	}
}

func TestLineChartSevenDaysShowsDates(t *testing.T) {
	start := time.Date(2026, 7, 1, 9, 0, 0, 0, time.Local)
	pts := make([]ChartPoint, 0, 253)
	for i := range 253 {
		pts = append(pts, ChartPoint{T: start.Add(time.Duration(i) * 40 * time.Minute), V: 3})
	}
	html := renderChart(t, ChartModel{ID: "w", Title: "Week", Unit: "GPUs", Series: []ChartSeries{{Name: "GPUs in use", Points: pts}}})
	if !strings.Contains(html, ">Jul 3</text>") {
		t.Errorf("7-day X axis should label dates, got:\n%s", xLabels(html))
	}
	if !strings.Contains(html, "<title>Jul 1 09:00 · GPUs in use 3 GPUs</title>") {
		t.Error("7-day hover titles should carry the date")
	}
}

func TestLineChartEmptyAndUnavailable(t *testing.T) {
	empty := renderChart(t, ChartModel{ID: "e", Title: "GPU", Unit: "%", Series: []ChartSeries{{Name: "GPU utilization"}}})
	if !strings.Contains(empty, "No data in this range") || strings.Contains(empty, "<svg") {
		t.Errorf("empty chart:\n%s", empty)
	}
	down := renderChart(t, ChartModel{ID: "d", Title: "GPU", Unavailable: "Prometheus unavailable",
		Series: []ChartSeries{{Name: "x", Points: []ChartPoint{{T: time.Now(), V: 1}}}}})
	if !strings.Contains(down, "Prometheus unavailable") || strings.Contains(down, "<svg") || strings.Contains(down, "No data") {
		t.Errorf("unavailable chart:\n%s", down)
	}
	one := renderChart(t, ChartModel{ID: "o", Title: "GPU", Unit: "%", Series: []ChartSeries{{Name: "u", Points: []ChartPoint{{T: time.Now(), V: 0}}}}})
	if strings.Count(one, "<circle") != 1 || strings.Contains(one, "NaN") || strings.Contains(one, "Inf") {
		t.Errorf("single zero point:\n%s", one)
	}
}

func TestNiceStep(t *testing.T) {
	for raw, want := range map[float64]float64{0.3: 0.5, 1: 1, 4: 5, 4.4: 5, 22.0 / 4: 10, 25: 25, 26: 50, 180: 200, 0: 1} {
		if got := niceStep(raw); got != want {
			t.Errorf("niceStep(%v) = %v, want %v", raw, got, want)
		}
	}
}

func yLabels(html string) []string { return labels(html, "y-label") }
func xLabels(html string) []string { return labels(html, "x-label") }

func labels(html, class string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`<text class="`+class+`"[^>]*>([^<]*)</text>`).FindAllStringSubmatch(html, -1) {
		out = append(out, m[1])
	}
	return out
}

// A chart's text alternative is its figures as a table: a row per sample
// time, a column per series, "—" where a series has no sample; each series
// has its own dash pattern class, on its line and in its legend.
func TestLineChartHasItsFiguresAsATable(t *testing.T) {
	start := time.Date(2026, 7, 1, 12, 0, 0, 0, time.Local)
	html := renderChart(t, ChartModel{
		ID: "team-gpu", Title: "GPUs", Unit: "GPUs",
		Series: []ChartSeries{
			{Name: "In use", Points: every(start, 3, func(i int) float64 { return float64(i) + 0.125 })},
			{Name: "Quota", Points: every(start.Add(time.Minute), 2, func(int) float64 { return 8 })},
		},
	})
	table := html[strings.Index(html, `<details class="chart-data">`):]
	table = table[:strings.Index(table, "</details>")]
	if !strings.Contains(table, "(GPUs)") || !strings.Contains(table, `id="team-gpu-table"`) {
		t.Errorf("the table does not name its unit or id:\n%s", table)
	}
	var rows []string
	for _, m := range regexp.MustCompile(`(?s)<tr>(.*?)</tr>`).FindAllStringSubmatch(table, -1) {
		rows = append(rows, regexp.MustCompile(`<[^>]+>`).ReplaceAllString(m[1], "|"))
	}
	want := []string{"|Time||In use||Quota|", "|12:00||0.13||—|", "|12:01||1.13||8|", "|12:02||2.13||8|"}
	if fmt.Sprint(rows) != fmt.Sprint(want) {
		t.Errorf("table rows\n%q\nwant\n%q", rows, want)
	}
	for _, class := range []string{`<li class="s0"><svg class="swatch"`, `<li class="s1"><svg class="swatch"`} {
		if !strings.Contains(html, class) {
			t.Errorf("legend entry %q missing", class)
		}
	}
}

// A chart of UTC days names its days on the axis and on hover, one day
// alone too (it read "23:59 00:00 00:01").
func TestDailyChartNamesDays(t *testing.T) {
	day := func(d int) time.Time { return time.Date(2026, 11, d, 0, 0, 0, 0, time.UTC) }
	one := renderChart(t, ChartModel{ID: "d1", Title: "GPU-hours used per UTC day", Unit: "h", Daily: true,
		Series: []ChartSeries{{Name: "nlp", Points: []ChartPoint{{T: day(28), V: 34.8}}}}})
	if got, want := xLabels(one), []string{"Nov 28"}; !slices.Equal(got, want) {
		t.Errorf("one day: X labels %v, want %v", got, want)
	}
	if !strings.Contains(one, "<title>2026-11-28 · nlp 34.8 h</title>") {
		t.Errorf("one day: the hover does not name the day:\n%s", one)
	}
	var pts []ChartPoint
	for d := 1; d <= 30; d++ {
		pts = append(pts, ChartPoint{T: day(d), V: 1})
	}
	month := renderChart(t, ChartModel{ID: "d30", Title: "per day", Unit: "h", Daily: true, Series: []ChartSeries{{Name: "nlp", Points: pts}}})
	if got, want := xLabels(month), []string{"Nov 1", "Nov 4", "Nov 7", "Nov 10", "Nov 13", "Nov 16", "Nov 19", "Nov 22", "Nov 25", "Nov 28"}; !slices.Equal(got, want) {
		t.Errorf("30 days: X labels %v, want %v", got, want)
	}
}

// A series with no samples for a while (Prometheus had none: a queue gone
// and made again) is drawn in two pieces, not joined across the gap.
func TestLineChartStopsAtGaps(t *testing.T) {
	start := time.Date(2026, 7, 1, 11, 30, 0, 0, time.Local)
	points := append(every(start, 10, func(int) float64 { return 20 }), every(start.Add(3*time.Hour), 10, func(int) float64 { return 5 })...)
	html := renderChart(t, ChartModel{ID: "team-gpu", Title: "GPUs", Unit: "GPUs",
		Series: []ChartSeries{{Name: "In use", Points: points}, {Name: "Quota", Points: every(start, 10, func(int) float64 { return 8 })}}})
	if got := strings.Count(html, "<polyline"); got != 3 {
		t.Errorf("%d polylines, want 3: the first series in two pieces around its gap, the second whole", got)
	}
	if got := strings.Count(html, "<circle"); got != 30 {
		t.Errorf("%d samples drawn, want all 30", got)
	}
}
