package handlers_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
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

func benchPage(b *testing.B, path string) {
	h := benchServer(b)
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
