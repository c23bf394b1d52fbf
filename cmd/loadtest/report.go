package main

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/openquota/console/internal/loopback"
)

// result is everything one run measured.
type result struct {
	Command      string    `json:"command"`
	Commit       string    `json:"commit"`
	Started      time.Time `json:"started"`
	Finished     time.Time `json:"finished"`
	CPUs         int       `json:"cpus"`
	Workloads    int       `json:"workloads"`
	Teams        int       `json:"teams"`
	FillSeconds  float64   `json:"fill_seconds,omitempty"`
	ReadySeconds float64   `json:"console_ready_seconds"`

	Kubectl *kubectlResult `json:"kubectl,omitempty"`
	Pages   []pageResult   `json:"pages,omitempty"`
	CSV     *csvResult     `json:"full_task_csv,omitempty"`
	Preview *previewResult `json:"impact_preview,omitempty"`
	Watch   *watchResult   `json:"watchers,omitempty"`

	RSSReadyMiB     float64  `json:"rss_ready_mib"`
	RSSIdleMiB      float64  `json:"rss_idle_mib,omitempty"`
	RSSChurnMiB     float64  `json:"rss_churn_mib,omitempty"`
	RSSWatchersMiB  float64  `json:"rss_with_watchers_mib,omitempty"`
	RSSPeakMiB      float64  `json:"rss_peak_mib"` // VmHWM at the end
	CPUIdlePercent  *float64 `json:"cpu_idle_percent_of_core,omitempty"`
	CPUChurnPercent *float64 `json:"cpu_churn_percent_of_core,omitempty"`

	LoadAverage map[string]string `json:"load_average"` // after each phase
	Notes       []string          `json:"notes,omitempty"`
}

// watchResult is the live-update phase.
type watchResult struct {
	Watchers            int            `json:"watchers"`
	Streams             int            `json:"streams"`       // event streams held open
	NoLiveParts         int            `json:"no_live_parts"` // pages without live parts: no stream, as app.js
	Refused             int            `json:"refused_503"`   // event streams refused (over the cap)
	Failed              int            `json:"failed"`        // could not load the page or follow the stream
	FailedReasons       []string       `json:"failed_reasons,omitempty"`
	Modes               map[string]int `json:"modes"`           // refetch or push, by the first event
	Probes              int            `json:"probes"`          // Workloads created while watching
	CreatedPerSec       float64        `json:"created_per_sec"` // achieved rate
	CreateP50Seconds    float64        `json:"create_p50_seconds"`
	CreateP95Seconds    float64        `json:"create_p95_seconds"`
	ProbeCreateFailures int            `json:"probe_create_failures"`
	ProbeCreateError    string         `json:"probe_create_error,omitempty"`
	ConnectSeconds      float64        `json:"connect_seconds"`
	CreateSeconds       float64        `json:"create_seconds"`
	All                 kindResult     `json:"all"` // every watcher whose page must change
	Kinds               []kindResult   `json:"by_page"`
	ServerPages         serverTime     `json:"server_pages"` // page requests (loads, refetches) during the phase
	CPUPercent          float64        `json:"cpu_percent_of_core"`
	ToolCPUPercent      float64        `json:"tool_cpu_percent_of_core"`
	RSSWithWatchersMiB  float64        `json:"rss_with_watchers_mib"`
	RSSPeakMiB          float64        `json:"rss_peak_mib"`
	// Snapshots and Renders are the console's own times over the phase:
	// the read model's snapshots, and each live view's rendering.
	Snapshots stage `json:"snapshots"`
	Renders   stage `json:"renders"`
}

// kindResult is the watchers of one page (or all of them).
type kindResult struct {
	Page            string  `json:"page"`
	Watchers        int     `json:"watchers"`
	Pairs           int     `json:"pairs"` // (watcher, probe) pairs where the page must change
	P50Seconds      float64 `json:"p50_seconds"`
	P95Seconds      float64 `json:"p95_seconds"`
	P50Beyond       bool    `json:"p50_beyond_timeout"` // the quantile is a miss: longer than the timeout
	P95Beyond       bool    `json:"p95_beyond_timeout"`
	Missed          int     `json:"missed"` // pairs not seen within the timeout
	WatchersMissing int     `json:"watchers_missing"`
	Early           int     `json:"early"` // count rose before the probe was created
	Events          int     `json:"events"`
	Refetches       int     `json:"refetches"`
	RefetchP50      float64 `json:"refetch_p50_seconds"`
	RefetchFailed   int     `json:"refetch_failed"`
	Pushes          int     `json:"pushes"`
	AvgPushBytes    int64   `json:"avg_push_bytes"`
	// MedianPushBytes is the median size of a push: what a browser parses
	// for a typical change.
	MedianPushBytes int `json:"median_push_bytes"`
}

// summarizeWatchers pairs every probe with every watcher whose page it
// must change.
func summarizeWatchers(ws []*watcher, probes []probe, timeout time.Duration) *watchResult {
	wr := &watchResult{Watchers: len(ws), Modes: map[string]int{}, Probes: len(probes)}
	byKind := map[string]*kindResult{}
	var order []string
	lats := map[string][]time.Duration{}
	refetches := map[string][]time.Duration{}
	pushBytes := map[string]int64{}
	pushSizes := map[string][]int{}
	var allSizes []int
	var all, allRefetches []time.Duration
	allKind := kindResult{Page: "all watchers whose page must change"}
	for _, w := range ws {
		k := byKind[w.Kind.Label]
		if k == nil {
			k = &kindResult{Page: w.Kind.Label}
			byKind[w.Kind.Label] = k
			order = append(order, w.Kind.Label)
		}
		k.Watchers++
		lat, missed, early := w.seenLatencies(probes, timeout)
		w.mu.Lock()
		switch {
		case w.failed != "":
			wr.Failed++
			if len(wr.FailedReasons) < 5 {
				wr.FailedReasons = append(wr.FailedReasons, w.Path+": "+w.failed)
			}
		case w.refused:
			wr.Refused++
		case w.noLive:
			wr.NoLiveParts++
		default:
			wr.Streams++
		}
		if w.mode != "" {
			wr.Modes[w.mode]++
		}
		k.Events += w.events
		k.Refetches += len(w.refetches)
		k.RefetchFailed += w.refetchKO
		refetches[w.Kind.Label] = append(refetches[w.Kind.Label], w.refetches...)
		allRefetches = append(allRefetches, w.refetches...)
		k.Pushes += w.pushes
		pushBytes[w.Kind.Label] += w.pushBytes
		pushSizes[w.Kind.Label] = append(pushSizes[w.Kind.Label], w.pushSizes...)
		allSizes = append(allSizes, w.pushSizes...)
		w.mu.Unlock()
		pairs := len(lat) + missed + early
		k.Pairs += pairs
		k.Missed += missed
		k.Early += early
		if missed > 0 {
			k.WatchersMissing++
		}
		lats[w.Kind.Label] = append(lats[w.Kind.Label], lat...)
		all = append(all, lat...)
		if pairs > 0 {
			allKind.Watchers++
		}
	}
	for _, label := range order {
		k := byKind[label]
		k.P50Seconds, k.P50Beyond = latencyQuantile(lats[label], k.Missed, 0.50, timeout)
		k.P95Seconds, k.P95Beyond = latencyQuantile(lats[label], k.Missed, 0.95, timeout)
		k.RefetchP50 = percentile(refetches[label], 0.50).Seconds()
		if k.Pushes > 0 {
			k.AvgPushBytes = pushBytes[label] / int64(k.Pushes)
			k.MedianPushBytes = medianSize(pushSizes[label])
		}
		allKind.Pairs += k.Pairs
		allKind.Missed += k.Missed
		allKind.Early += k.Early
		allKind.WatchersMissing += k.WatchersMissing
		allKind.Events += k.Events
		allKind.Refetches += k.Refetches
		allKind.RefetchFailed += k.RefetchFailed
		allKind.Pushes += k.Pushes
		wr.Kinds = append(wr.Kinds, *k)
	}
	allKind.P50Seconds, allKind.P50Beyond = latencyQuantile(all, allKind.Missed, 0.50, timeout)
	allKind.P95Seconds, allKind.P95Beyond = latencyQuantile(all, allKind.Missed, 0.95, timeout)
	allKind.RefetchP50 = percentile(allRefetches, 0.50).Seconds()
	if allKind.Pushes > 0 {
		var bytes int64
		for _, b := range pushBytes {
			bytes += b
		}
		allKind.AvgPushBytes = bytes / int64(allKind.Pushes)
		allKind.MedianPushBytes = medianSize(allSizes)
	}
	wr.All = allKind
	return wr
}

// medianSize is the median of sizes (0 for none).
func medianSize(sizes []int) int {
	if len(sizes) == 0 {
		return 0
	}
	s := slices.Clone(sizes)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

// latencyQuantile is the q-quantile of the change → page latencies, each
// miss counted as longer than the timeout (leaving misses out would make a
// page that often never updates look fast). beyond: the quantile is a miss.
func latencyQuantile(lat []time.Duration, missed int, q float64, timeout time.Duration) (seconds float64, beyond bool) {
	n := len(lat) + missed
	if n == 0 {
		return 0, false
	}
	i := int(math.Ceil(q*float64(n))) - 1
	if i >= len(lat) {
		return timeout.Seconds(), true
	}
	sort.Slice(lat, func(a, b int) bool { return lat[a] < lat[b] })
	return lat[max(i, 0)].Seconds(), false
}

// write prints the table to w and saves <out>.json and <out>.md.
func (r *result) write(out string, w io.Writer) error {
	md := r.markdown()
	fmt.Fprintln(w)
	fmt.Fprint(w, md)
	if err := loopback.Save(out, r, md); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nWritten to %s.json and %s.md\n", out, out)
	return nil
}

// markdown is the one table, with the live-update and resource figures
// below it.
func (r *result) markdown() string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "Load test: %d Workloads, %d teams, %d CPUs; console %s; %s\n\n",
		r.Workloads, r.Teams, r.CPUs, orDash(r.Commit), r.Started.Format(time.RFC3339))
	fmt.Fprintf(&b, "`%s`\n\n", r.Command)
	if len(r.Pages) > 0 || r.Kubectl != nil || r.CSV != nil {
		b.WriteString("| page | p50 | p99 | req/s | server p99 | × faster than kubectl | CPU: console / sandbox (cores) |\n|---|---:|---:|---:|---:|---:|---:|\n")
		for _, p := range r.Pages {
			ratio := "—"
			if p.KubectlRatio > 0 {
				ratio = fmt.Sprintf("%.0f×", p.KubectlRatio)
			}
			failed := ""
			if p.Failed > 0 {
				failed = fmt.Sprintf(" (%d of %d failed)", p.Failed, p.Requests)
			}
			fmt.Fprintf(&b, "| `%s`%s | %s | %s | %.1f | %s | %s | %.2f / %.2f |\n", p.Page, failed, fmtSeconds(p.P50Seconds),
				fmtSeconds(p.P99Seconds), p.ReqPerSec, fmtServerP99(p.Server), ratio, p.ConsoleCores, p.SandboxCores)
		}
		if c := r.CSV; c != nil {
			fmt.Fprintf(&b, "| `%s` (one download, %d rows, %.1f MB) | %s | | %.0f rows/s | %s | RSS +%.0f MiB | |\n",
				fullTaskCSV, c.Rows, float64(c.Bytes)/1e6, fmtSeconds(c.Seconds), c.RowsPerSec, fmtSeconds(c.ServerSeconds), c.RSSGrowthMiB)
		}
		if k := r.Kubectl; k != nil {
			fmt.Fprintf(&b, "| kubectl way: `kubectl get workloads -A -o json` (%.0f MB) + per-class table | %s | | | | 1× | |\n",
				float64(k.Bytes)/1e6, fmtSeconds(k.Seconds))
		}
		b.WriteString("\n")
	}
	if p := r.Preview; p != nil {
		fmt.Fprintf(&b, "Impact preview of a team's quota cut (%d previews, %d failed): p50 %s, p95 %s, max %s; RSS %.0f MiB before, %.0f MiB at the peak while previewing. %s\n\n",
			p.Previews, p.Failed, fmtSeconds(p.P50Seconds), fmtSeconds(p.P95Seconds), fmtSeconds(p.MaxSeconds), p.RSSBeforeMiB, p.RSSPeakMiB, p.Basis)
	}
	if wr := r.Watch; wr != nil {
		fmt.Fprintf(&b, "Live updates: %d watchers (%s), %d Workloads created at %.1f/s; change → watcher's page:\n\n",
			wr.Watchers, watcherSummary(wr), wr.Probes, wr.CreatedPerSec)
		b.WriteString("| watchers of | n | p50 | p95 | missed (of pairs) | refetches (p50) | pushes (median, avg bytes) |\n|---|---:|---:|---:|---:|---:|---:|\n")
		for _, k := range append([]kindResult{wr.All}, wr.Kinds...) {
			if k.Pairs == 0 && k.Page != wr.All.Page {
				fmt.Fprintf(&b, "| `%s` | %d | — | — | — (page shows no probe) | %s | %s |\n", k.Page, k.Watchers, refetchCell(k), pushCell(k))
				continue
			}
			page := k.Page
			if page != wr.All.Page {
				page = "`" + page + "`"
			}
			missed := fmt.Sprintf("%d of %d", k.Missed, k.Pairs)
			if k.WatchersMissing > 0 {
				missed += fmt.Sprintf(" (%d watchers)", k.WatchersMissing)
			}
			if k.Early > 0 {
				missed += fmt.Sprintf("; %d early", k.Early)
			}
			fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %s |\n", page, k.Watchers, fmtLatency(k.P50Seconds, k.P50Beyond), fmtLatency(k.P95Seconds, k.P95Beyond),
				missed, refetchCell(k), pushCell(k))
		}
		fmt.Fprintf(&b, "\nServer time of page requests while watching: p99 %s over %.0f requests. ", fmtServerP99(wr.ServerPages), wr.ServerPages.Count)
		fmt.Fprintf(&b, "The load tool itself used %.0f %% of a core.\n", wr.ToolCPUPercent)
		fmt.Fprintf(&b, "Where a change spends its time: the create call p50 %s, p95 %s; %.0f snapshots (p50 %s, p99 %s); %.0f renderings of a view (p50 %s, p99 %s).\n",
			fmtSeconds(wr.CreateP50Seconds), fmtSeconds(wr.CreateP95Seconds), wr.Snapshots.Count, fmtSeconds(wr.Snapshots.P50Seconds), fmtSeconds(wr.Snapshots.P99Seconds),
			wr.Renders.Count, fmtSeconds(wr.Renders.P50Seconds), fmtSeconds(wr.Renders.P99Seconds))
		if wr.ProbeCreateFailures > 0 {
			fmt.Fprintf(&b, "Probe creates failed: %d (%s).\n", wr.ProbeCreateFailures, wr.ProbeCreateError)
		}
		for _, f := range wr.FailedReasons {
			fmt.Fprintf(&b, "Watcher failed: %s\n", f)
		}
		b.WriteString("\n")
	}
	b.WriteString("| console | idle | under churn | with watchers | peak |\n|---|---:|---:|---:|---:|\n")
	fmt.Fprintf(&b, "| RSS (MiB) | %s | %s | %s | %s (VmHWM) |\n", mibCell(r.RSSIdleMiB), mibCell(r.RSSChurnMiB), mibCell(r.RSSWatchersMiB), mibCell(r.RSSPeakMiB))
	watchCPU := "—"
	if r.Watch != nil {
		watchCPU = fmt.Sprintf("%.0f %%", r.Watch.CPUPercent)
	}
	fmt.Fprintf(&b, "| CPU (%% of a core) | %s | %s | %s | |\n", pctCell(r.CPUIdlePercent), pctCell(r.CPUChurnPercent), watchCPU)
	b.WriteString("\nLoad average (1, 5, 15 min) after each phase:")
	for _, phase := range []string{"idle", "churn", "kubectl", "pages", "csv", "watch"} {
		if la, ok := r.LoadAverage[phase]; ok {
			fmt.Fprintf(&b, " %s %s;", phase, la)
		}
	}
	b.WriteString("\n")
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "\nNote: %s\n", n)
	}
	return b.String()
}

func watcherSummary(wr *watchResult) string {
	parts := []string{fmt.Sprintf("%d streams", wr.Streams)}
	if wr.NoLiveParts > 0 {
		parts = append(parts, fmt.Sprintf("%d on pages without live parts", wr.NoLiveParts))
	}
	if wr.Refused > 0 {
		parts = append(parts, fmt.Sprintf("%d refused with 503", wr.Refused))
	}
	if wr.Failed > 0 {
		parts = append(parts, fmt.Sprintf("%d failed", wr.Failed))
	}
	var modes []string
	for _, m := range []string{modeRefetch, modePush} {
		if n := wr.Modes[m]; n > 0 {
			modes = append(modes, fmt.Sprintf("%d %s", n, m))
		}
	}
	if len(modes) > 0 {
		parts = append(parts, "protocol: "+strings.Join(modes, ", "))
	}
	return strings.Join(parts, ", ")
}

func refetchCell(k kindResult) string {
	if k.Refetches == 0 {
		return "—"
	}
	s := fmt.Sprintf("%d (%s)", k.Refetches, fmtSeconds(k.RefetchP50))
	if k.RefetchFailed > 0 {
		s += fmt.Sprintf(", %d failed", k.RefetchFailed)
	}
	return s
}

func pushCell(k kindResult) string {
	if k.Pushes == 0 {
		return "—"
	}
	return fmt.Sprintf("%d (%d, %d)", k.Pushes, k.MedianPushBytes, k.AvgPushBytes)
}

// fmtSeconds writes a duration the way a person reads it.
func fmtSeconds(s float64) string {
	switch {
	case math.IsNaN(s) || s <= 0:
		return "—"
	case s < 0.01:
		return fmt.Sprintf("%.1f ms", s*1000)
	case s < 1:
		return fmt.Sprintf("%.0f ms", s*1000)
	case s < 100:
		return fmt.Sprintf("%.2f s", s)
	}
	return fmt.Sprintf("%.0f s", s)
}

func fmtLatency(s float64, beyond bool) string {
	if beyond {
		return "> " + fmtSeconds(s) + " (missed)"
	}
	return fmtSeconds(s)
}

func fmtServerP99(st serverTime) string {
	if st.Unavailable != "" || st.Count == 0 {
		return "—"
	}
	if st.P99Above {
		return fmt.Sprintf("> %s (mean %s)", fmtSeconds(st.P99Seconds), fmtSeconds(st.MeanSeconds))
	}
	return fmtSeconds(st.P99Seconds)
}

func mibCell(v float64) string {
	if v <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.0f", v)
}

func pctCell(v *float64) string {
	if v == nil {
		return "—"
	}
	return fmt.Sprintf("%.1f %%", *v)
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}
