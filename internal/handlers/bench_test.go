package handlers_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/openquota/console/internal/auth"
	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/taskhistory"
)

// benchServer serves pages from a snapshot of 200 teams and 50 000
// Workloads.
func benchServer(b *testing.B) http.Handler {
	b.Helper()
	return newFixture(b, 200, 50_000).handler()
}

// countingWriter is a response writer that keeps nothing, as a network
// connection: the benchmark's allocations are the console's own.
type countingWriter struct {
	header http.Header
	code   int
	n      int
}

func (w *countingWriter) Header() http.Header  { return w.header }
func (w *countingWriter) WriteHeader(code int) { w.code = code }
func (w *countingWriter) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	w.n += len(p)
	return len(p), nil
}

func benchPage(b *testing.B, path string) { benchHandler(b, benchServer(b), path) }

func benchHandler(b *testing.B, h http.Handler, path string) {
	b.ReportAllocs()
	b.ResetTimer()
	var size int
	for b.Loop() {
		w := &countingWriter{header: http.Header{}}
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		if w.code != http.StatusOK {
			b.Fatalf("GET %s = %d", path, w.code)
		}
		size = w.n
	}
	b.ReportMetric(float64(size), "bytes/page")
}

func BenchmarkUsagePage(b *testing.B)        { benchPage(b, "/usage") }
func BenchmarkTasksPage(b *testing.B)        { benchPage(b, "/tasks") }
func BenchmarkTasksPageOneTeam(b *testing.B) { benchPage(b, "/tasks?team=team-007&window=7d") }
func BenchmarkTasksCSV(b *testing.B)         { benchPage(b, "/tasks?format=csv&table=tasks&state=all") }
func BenchmarkOverviewPage(b *testing.B)     { benchPage(b, "/") }
func BenchmarkTeamUsagePage(b *testing.B)    { benchPage(b, "/usage/team-007") }
func BenchmarkTeamsPage(b *testing.B)        { benchPage(b, "/teams") }
func BenchmarkReportPage(b *testing.B)       { benchPage(b, "/reports/usage") }

// BenchmarkReportPageFromHistory is the usage report's default page (the
// last 7 days) from a task history of 200 teams, each on two instance types,
// and a page of the per-task report.
func BenchmarkReportPageFromHistory(b *testing.B) {
	f := newFixture(b, 200, 50_000)
	today := time.Now().UTC().Truncate(24 * time.Hour)
	h := &taskHistory{summary: taskhistory.UsageSummary{UpTo: time.Now()}}
	for d := -6; d <= 0; d++ {
		day := today.AddDate(0, 0, d)
		h.summary.Days = append(h.summary.Days, taskhistory.UsageDay{Day: day})
		for t := range 200 {
			for _, it := range []string{"ml.p5.48xlarge", "ml.g5.12xlarge"} {
				h.summary.Rows = append(h.summary.Rows, taskhistory.UsageRow{Day: day, Team: fmt.Sprintf("team-%03d", t), InstanceType: it,
					GPU: taskhistory.ResourceHours{Allocated: 192, Used: 150.5, Borrowed: 3.25, Lent: 1.5}})
			}
		}
	}
	for i := range 50 {
		h.report = append(h.report, taskhistory.ReportRow{Task: taskhistory.TaskRef{Namespace: "hyperpod-ns-team-001", Name: fmt.Sprintf("job-%d", i), Team: "team-001"},
			Use: []taskhistory.InstanceUse{{InstanceType: "ml.p5.48xlarge", Held: time.Hour, GPUHours: 8}}, Start: time.Now().Add(-time.Hour), State: domain.TaskAdmitted})
	}
	f.cfg.TaskHistory = h
	benchHandler(b, f.handler(), "/reports/usage")
}

// benchSignedIn serves path as a signed-in platform viewer's browser
// reaches it in token mode: the session cookie and the browser's usual
// headers on every request, so the session is opened, its sign-out looked
// up, the CSRF token signed and the user's access asked, through every
// middleware of the console's handler. The cluster's teams and nodes do not
// change meanwhile, as between two changes of a live cluster.
func benchSignedIn(b *testing.B, path string) {
	f := newFixture(b, 200, 50_000)
	f.cluster.unchanged = true
	sessions := auth.NewSessions(auth.RandomKeys(), auth.SessionTTL, nil)
	f.cfg.Auth = &auth.Authenticator{Mode: auth.ModeToken, Sessions: sessions}
	f.access.grant("ada", listClusterQueues)
	value, _, err := sessions.Create(auth.User{Name: "ada", Groups: []string{"platform-viewers", "system:authenticated"}}, time.Time{})
	if err != nil {
		b.Fatal(err)
	}
	h := f.handler()
	b.ReportAllocs()
	b.ResetTimer()
	var size int
	for b.Loop() {
		w := &countingWriter{header: http.Header{}}
		r := httptest.NewRequest(http.MethodGet, path, nil)
		r.Header.Set("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8")
		r.Header.Set("User-Agent", "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0")
		r.AddCookie(&http.Cookie{Name: auth.SessionCookie, Value: value})
		h.ServeHTTP(w, r)
		if w.code != http.StatusOK {
			b.Fatalf("GET %s = %d", path, w.code)
		}
		size = w.n
	}
	b.ReportMetric(float64(size), "bytes/page")
}

func BenchmarkSignedInOverviewPage(b *testing.B)  { benchSignedIn(b, "/") }
func BenchmarkSignedInTeamsPage(b *testing.B)     { benchSignedIn(b, "/teams") }
func BenchmarkSignedInTeamUsagePage(b *testing.B) { benchSignedIn(b, "/usage/team-007") }
func BenchmarkSignedInTasksPage(b *testing.B)     { benchSignedIn(b, "/tasks") }
func BenchmarkSignedInReportPage(b *testing.B)    { benchSignedIn(b, "/reports/usage") }

func BenchmarkPolicyPage(b *testing.B) { benchPage(b, "/policy") }
