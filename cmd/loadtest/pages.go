package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// pageSpec is one page or CSV the clients request. <team> in Path is
// replaced by a different team on each request.
type pageSpec struct{ Path string }

// pagesUnderLoad are the pages and CSVs driven by the concurrent clients.
var pagesUnderLoad = []pageSpec{
	{"/"}, {"/usage"}, {"/usage/<team>"}, {"/tasks"}, {"/tasks?team=<team>"},
	{"/tasks?table=classes&format=csv"}, {"/tasks?table=breakdown&format=csv"},
	{"/teams"}, {"/policy"}, {"/reports/usage"},
}

// expand fills in the i-th request's team.
func (p pageSpec) expand(teams []teamQueue, i int) string {
	if !strings.Contains(p.Path, "<team>") || len(teams) == 0 {
		return p.Path
	}
	return strings.ReplaceAll(p.Path, "<team>", url.PathEscape(teams[i%len(teams)].Name))
}

// pageResult is one page under concurrent clients: client-side latency and
// throughput, and the server's own time from its request-duration histogram.
type pageResult struct {
	Page         string         `json:"page"`
	Requests     int            `json:"requests"`
	Failed       int            `json:"failed"` // transport errors and non-2xx answers
	Statuses     map[string]int `json:"statuses"`
	P50Seconds   float64        `json:"p50_seconds"`
	P99Seconds   float64        `json:"p99_seconds"`
	ReqPerSec    float64        `json:"req_per_sec"`
	AvgBytes     int64          `json:"avg_bytes"`
	Server       serverTime     `json:"server"`
	KubectlRatio float64        `json:"kubectl_ratio,omitempty"` // kubectl way ÷ p50
	// ConsoleCores and SandboxCores are the CPU the console and the
	// sandbox's processes (Kueue, the apiserver, etcd, ...) used while the
	// page was driven, in cores: on a shared machine the server's p99
	// follows what the sandbox leaves it.
	ConsoleCores float64 `json:"console_cores"`
	SandboxCores float64 `json:"sandbox_cores"`
}

// serverTime is what the console's histogram says about a set of requests.
type serverTime struct {
	Routes      []string `json:"routes"`
	Count       float64  `json:"count"`
	P50Seconds  float64  `json:"p50_seconds"`
	P99Seconds  float64  `json:"p99_seconds"`
	P99Above    bool     `json:"p99_above_last_bucket"` // p99 is beyond the largest finite bucket
	MeanSeconds float64  `json:"mean_seconds"`          // exact, whatever the buckets
	Unavailable string   `json:"unavailable,omitempty"`
}

func serverTimeOf(h routeHistograms) serverTime {
	st := serverTime{Routes: h.routes()}
	m := h.merged()
	if m == nil {
		st.Unavailable = "no requests in the console's " + durationMetric
		return st
	}
	st.Count = m.Count
	st.P50Seconds, _ = m.quantile(0.50)
	st.P99Seconds, st.P99Above = m.quantile(0.99)
	st.MeanSeconds = m.Sum / m.Count
	return st
}

// scrape reads the console's request-duration histograms.
func scrape(ctx context.Context, client *http.Client, base string) (routeHistograms, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	res, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reading /metrics: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("/metrics answered %s", res.Status)
	}
	return parseRouteHistograms(res.Body, durationMetric)
}

// Where a change spends its time in the console: the read model's
// snapshots and the live views' renderings.
const (
	readModelMetric  = "quota_console_read_model_update_duration_seconds"
	liveRenderMetric = "quota_console_live_render_duration_seconds"
)

// liveTimes are the console's snapshot and live rendering histograms.
type liveTimes struct{ snapshot, render *histogram }

// scrapeLiveTimes reads the console's snapshot and rendering times.
func scrapeLiveTimes(ctx context.Context, client *http.Client, base string) (liveTimes, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return liveTimes{}, err
	}
	res, err := client.Do(req)
	if err != nil {
		return liveTimes{}, fmt.Errorf("reading /metrics: %w", err)
	}
	defer res.Body.Close()
	families, err := parseFamilies(res.Body)
	if err != nil {
		return liveTimes{}, err
	}
	return liveTimes{snapshot: histogramsBy(families, readModelMetric, "kind")["snapshot"],
		render: histogramsBy(families, liveRenderMetric, "")[""]}, nil
}

// stage is how long one stage of a change took, over a phase.
type stage struct {
	Count      float64 `json:"count"`
	P50Seconds float64 `json:"p50_seconds"`
	P99Seconds float64 `json:"p99_seconds"`
}

// stageOf is what after observed since before.
func stageOf(before, after *histogram) stage {
	if after == nil {
		return stage{}
	}
	d := after
	if before != nil {
		d = after.plus(before, -1)
	}
	p50, _ := d.quantile(0.5)
	p99, _ := d.quantile(0.99)
	return stage{Count: d.Count, P50Seconds: p50, P99Seconds: p99}
}

// drivePage runs clients concurrent clients, each requesting the page
// again as soon as it has the previous answer, until d has passed; requests
// in flight then finish and count. Throughput is requests over the time
// until the last answer.
func drivePage(ctx context.Context, client *http.Client, base string, p pageSpec, teams []teamQueue, clients int, d time.Duration) pageResult {
	var (
		next     atomic.Int64
		mu       sync.Mutex
		lat      []time.Duration
		statuses = map[string]int{}
		failed   int
		bytes    int64
	)
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for w := 0; w < clients; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) && ctx.Err() == nil {
				path := p.expand(teams, int(next.Add(1)-1))
				took, status, n, err := get(ctx, client, base+path, nil)
				mu.Lock()
				switch {
				case err != nil:
					failed++
					statuses["error"]++
				default:
					statuses[fmt.Sprint(status)]++
					if status/100 != 2 {
						failed++
					}
					lat = append(lat, took)
					bytes += n
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	r := pageResult{Page: p.Path, Requests: len(lat) + statuses["error"], Failed: failed, Statuses: statuses}
	if len(lat) > 0 {
		r.P50Seconds = percentile(lat, 0.50).Seconds()
		r.P99Seconds = percentile(lat, 0.99).Seconds()
		r.AvgBytes = bytes / int64(len(lat))
		r.ReqPerSec = float64(len(lat)) / elapsed.Seconds()
	}
	return r
}

// pageRequestTimeout bounds one request; the slowest pages of today's
// console take seconds under load.
const pageRequestTimeout = 2 * time.Minute

// get fetches url, reads the whole answer and says how long it took.
func get(ctx context.Context, client *http.Client, url string, header http.Header) (time.Duration, int, int64, error) {
	ctx, cancel := context.WithTimeout(ctx, pageRequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, 0, 0, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	start := time.Now()
	res, err := client.Do(req)
	if err != nil {
		return 0, 0, 0, err
	}
	n, err := io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if err != nil {
		return 0, res.StatusCode, n, err
	}
	return time.Since(start), res.StatusCode, n, nil
}

// percentile is the nearest-rank p-quantile of ds (sorted in place).
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	i := int(math.Ceil(p*float64(len(ds)))) - 1
	return ds[min(max(i, 0), len(ds)-1)]
}

// csvResult is one download of the full task CSV.
type csvResult struct {
	Rows          int     `json:"rows"`
	Bytes         int64   `json:"bytes"`
	Seconds       float64 `json:"seconds"`
	RowsPerSec    float64 `json:"rows_per_sec"`
	RSSBeforeMiB  float64 `json:"rss_before_mib"`
	RSSPeakMiB    float64 `json:"rss_peak_mib"`
	RSSGrowthMiB  float64 `json:"rss_growth_mib"`
	Status        int     `json:"status"`
	ServerSeconds float64 `json:"server_seconds"`
}

// fullTaskCSV is every task as CSV: the one answer that grows with the
// cluster.
const fullTaskCSV = "/tasks?format=csv&table=tasks"

// downloadCSV fetches the full task CSV once, counting rows as they arrive
// and sampling the console's RSS meanwhile.
func downloadCSV(ctx context.Context, client *http.Client, base string, pid string) (csvResult, error) {
	before := readProc(pid)
	rss := watchRSS(pid, 20*time.Millisecond)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+fullTaskCSV, nil)
	if err != nil {
		rss.Stop()
		return csvResult{}, err
	}
	start := time.Now()
	res, err := client.Do(req)
	if err != nil {
		rss.Stop()
		return csvResult{}, fmt.Errorf("GET %s: %w", fullTaskCSV, err)
	}
	defer res.Body.Close()
	var rows csvRows
	n := int64(0)
	buf := make([]byte, 64<<10)
	for {
		k, err := res.Body.Read(buf)
		n += int64(k)
		rows.scan(buf[:k])
		if err == io.EOF {
			break
		}
		if err != nil {
			rss.Stop()
			return csvResult{}, fmt.Errorf("reading %s: %w", fullTaskCSV, err)
		}
	}
	took := time.Since(start)
	peak := rss.Stop()
	r := csvResult{Rows: max(rows.records-1, 0), Bytes: n, Seconds: took.Seconds(), Status: res.StatusCode,
		RSSBeforeMiB: mib(before.RSSBytes), RSSPeakMiB: mib(max(peak, before.RSSBytes))}
	r.RSSGrowthMiB = r.RSSPeakMiB - r.RSSBeforeMiB
	if took > 0 {
		r.RowsPerSec = float64(r.Rows) / took.Seconds()
	}
	return r, nil
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// csvRows counts CSV records as they stream in: line ends outside quoted
// fields (Kueue's messages, quoted, may hold line breaks).
type csvRows struct {
	records int
	quoted  bool
}

func (c *csvRows) scan(b []byte) {
	for _, ch := range b {
		switch {
		case ch == '"':
			c.quoted = !c.quoted // an escaped quote ("") toggles twice
		case ch == '\n' && !c.quoted:
			c.records++
		}
	}
}
