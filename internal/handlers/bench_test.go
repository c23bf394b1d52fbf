package handlers_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	k8sfake "k8s.io/client-go/kubernetes/fake"
	kueuefake "sigs.k8s.io/kueue/client-go/clientset/versioned/fake"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/handlers"
	"github.com/openquota/console/internal/kueue"
	"github.com/openquota/console/internal/kueuetest"
	"github.com/openquota/console/internal/metrics"
)

// benchServer serves pages from a snapshot of 200 teams and 50 000 Workloads.
func benchServer(b *testing.B) http.Handler {
	b.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cache := kueue.NewCache(k8sfake.NewClientset(), kueuefake.NewSimpleClientset(), domain.DefaultSettings, log)
	live := kueue.NewLive(cache, domain.DefaultSettings, log)
	now := time.Now()
	live.Publish(domain.BuildSnapshot(inputOf(domain.DefaultSettings, kueuetest.Cluster(domain.DefaultSettings, domain.DefaultSettings.Cohort, 200, 50_000, now)), now))
	return atLoopback(handlers.New(handlers.Deps{Cache: cache, Live: live, Settings: domain.DefaultSettings, Metrics: metrics.NewConsole(), Log: log}))
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

// inputOf is a synthetic cluster as a snapshot's input.
func inputOf(s domain.Settings, o kueuetest.Objects) domain.SnapshotInput {
	return domain.SnapshotInput{Settings: s, ClusterQueues: o.ClusterQueues, LocalQueues: o.LocalQueues, Workloads: o.Workloads, Classes: o.Classes}
}
func BenchmarkOverviewPage(b *testing.B)  { benchPage(b, "/") }
func BenchmarkTeamUsagePage(b *testing.B) { benchPage(b, "/usage/team-007") }
func BenchmarkTeamsPage(b *testing.B)     { benchPage(b, "/teams") }
func BenchmarkReportPage(b *testing.B)    { benchPage(b, "/reports/usage") }
