package main

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/openquota/console/internal/loopback"
	"github.com/openquota/console/sandbox"
)

// result is everything one run measured.
type result struct {
	Command         string    `json:"command"`
	Commit          string    `json:"commit"`
	Instance        string    `json:"instance"`
	Started         time.Time `json:"started"`
	Finished        time.Time `json:"finished"`
	DurationSeconds float64   `json:"duration_seconds"`
	TailSeconds     float64   `json:"tail_seconds"`
	EverySeconds    float64   `json:"every_seconds"`
	ConsoleExited   bool      `json:"console_exited,omitempty"`

	Rounds         int `json:"rounds"`
	RoundErrors    int `json:"round_errors"`
	ExtraJobs      int `json:"extra_jobs"`
	ExtraJobErrors int `json:"extra_job_errors"`
	// Queued tasks seen without a known estimate, summed over rounds.
	Unknown    int `json:"unknown_estimates"`
	NoEstimate int `json:"no_estimate"`

	Observations int `json:"observations"` // estimates read
	// Left out: tasks never admitted before the end (still queued, or gone
	// without an admission) and their estimates.
	StillQueuedTasks int `json:"still_queued_tasks"`
	GoneTasks        int `json:"gone_tasks"`
	LeftOut          int `json:"left_out_estimates"`
	// LowerBound is the median absolute error of every estimate read
	// (those left out too), at least: a task still queued at the end
	// waited at least until the end, so its error is at least the part of
	// that wait beyond the estimate (else 0).
	LowerBound float64 `json:"median_abs_error_lower_bound_seconds"`

	All       summary   `json:"all"`
	FirstSeen summary   `json:"first_seen"` // each task's first estimate only
	ByBasis   []summary `json:"by_basis"`
	ByClass   []summary `json:"by_class"`
	// WhatIf are the same estimates, (ahead+1)/rate unrounded, with other
	// admission rates counted from the run's own record of admissions.
	WhatIf     []summary `json:"what_if,omitempty"`
	Comparison []pair    `json:"comparisons,omitempty"`
	Notes      []string  `json:"notes,omitempty"`
}

// pair is one estimate and the wait that followed.
type pair struct {
	Task            string    `json:"task"`
	Class           string    `json:"class"`
	Basis           string    `json:"basis"`
	ObservedAt      time.Time `json:"observed_at"`
	Ahead           int       `json:"ahead"`
	PerHour         float64   `json:"per_hour"`
	EstimateSeconds float64   `json:"estimate_seconds"`
	RawSeconds      float64   `json:"raw_estimate_seconds"`
	ActualSeconds   float64   `json:"actual_seconds"`
	first           bool
	obs             observation
}

func (p pair) absError() float64 { return math.Abs(p.EstimateSeconds - p.ActualSeconds) }

// summary is the error of a group of estimates, in seconds.
type summary struct {
	Group     string `json:"group"`
	Estimates int    `json:"estimates"`
	Tasks     int    `json:"tasks"`

	MedianAbsError float64 `json:"median_abs_error_seconds"`
	P90AbsError    float64 `json:"p90_abs_error_seconds"`
	MedianActual   float64 `json:"median_actual_wait_seconds"`
	MedianEstimate float64 `json:"median_estimate_seconds"`
	// MedianSigned is the median of estimate − actual: above 0 the
	// estimates are too long.
	MedianSigned float64 `json:"median_signed_error_seconds"`
	// MedianRelative is the median of |estimate − actual| / actual over the
	// pairs whose actual wait is at least a minute (RelativePairs).
	MedianRelative float64 `json:"median_relative_error"`
	RelativePairs  int     `json:"relative_pairs"`
	// WithinFactor2 is the share of estimates between half and twice the
	// actual wait (actual at least a minute).
	WithinFactor2 float64 `json:"within_factor_2"`
	// MedianAbsErrorRaw is the error of (ahead+1)/rate before the figure is
	// rounded for display.
	MedianAbsErrorRaw float64 `json:"median_abs_error_raw_seconds"`
	// Baseline is the median absolute error of one constant guess, the
	// group's median actual wait, for scale.
	Baseline float64 `json:"baseline_constant_guess_median_abs_error_seconds"`
}

// summarize matches each observation with the admission that followed it;
// the what-if rates count the admissions from recordFrom (when the
// console's history began) to each observation.
func summarize(res *result, obs []observation, adm *admissions, recordFrom, end time.Time) {
	res.Observations = len(obs)
	stillQueued, gone := map[string]bool{}, map[string]bool{}
	seen := map[string]bool{}
	var pairs []pair
	var lower []float64
	for _, o := range obs {
		admitted, ok := adm.firstAfter(o.Key, o.At)
		if !ok {
			res.LeftOut++
			if adm.isGone(o.Key) {
				gone[o.Key] = true
				lower = append(lower, 0)
			} else {
				stillQueued[o.Key] = true
				lower = append(lower, max(end.Sub(o.At)-o.Estimate.Shown, 0).Seconds())
			}
			continue
		}
		pairs = append(pairs, pair{Task: o.Key, Class: o.Class, Basis: o.Basis, ObservedAt: o.At.UTC(), Ahead: o.Estimate.Ahead,
			PerHour: o.Estimate.PerHour, EstimateSeconds: o.Estimate.Shown.Seconds(), RawSeconds: o.Estimate.Raw.Seconds(),
			ActualSeconds: max(admitted.Sub(o.At), 0).Seconds(), first: !seen[o.Key], obs: o})
		seen[o.Key] = true
	}
	res.StillQueuedTasks, res.GoneTasks = len(stillQueued), len(gone)
	for _, p := range pairs {
		lower = append(lower, p.absError())
	}
	res.LowerBound = quantile(lower, 0.5)
	res.Comparison = pairs
	res.All = summarizePairs("all estimates", pairs)
	res.FirstSeen = summarizePairs("first estimate of each task", filter(pairs, func(p pair) bool { return p.first }))
	for _, b := range []string{basisVisibility, basisConsole} {
		if g := filter(pairs, func(p pair) bool { return p.Basis == b }); len(g) > 0 {
			res.ByBasis = append(res.ByBasis, summarizePairs(b, g))
		}
	}
	for _, c := range sandbox.DemoPolicy.Classes {
		if g := filter(pairs, func(p pair) bool { return p.Class == c.Name }); len(g) > 0 {
			res.ByClass = append(res.ByClass, summarizePairs(c.Name, g))
		}
	}
	if others := filter(pairs, func(p pair) bool { return !isDemoClass(p.Class) }); len(others) > 0 {
		res.ByClass = append(res.ByClass, summarizePairs("other classes", others))
	}
	res.WhatIf = whatIf(pairs, adm.since(recordFrom), recordFrom)
}

// rateRules are the admission rates the what-if estimates try: which
// admissions of the record count for an observed task, and whether a task
// admitted several times counts once.
var rateRules = []struct {
	name  string
	once  bool
	count func(a admission, o observation) bool
}{
	{"its ClusterQueue, every class, each task once (the console's rule)", true, sameQueue},
	{"its ClusterQueue, every class, every admission", false, sameQueue},
	{"its ClusterQueue, its class, each task once", true, func(a admission, o observation) bool {
		return sameQueue(a, o) && a.Class == o.Class
	}},
	{"its ClusterQueue, its class, every admission", false, func(a admission, o observation) bool {
		return sameQueue(a, o) && a.Class == o.Class
	}},
	{"its ClusterQueue, its class and lower ones, each task once", true, func(a admission, o observation) bool {
		return sameQueue(a, o) && classRank(a.Class) >= classRank(o.Class)
	}},
	{"its ClusterQueue, every class, first admissions only", false, func(a admission, o observation) bool {
		return sameQueue(a, o) && a.First
	}},
}

func sameQueue(a admission, o observation) bool { return a.ClusterQueue == o.ClusterQueue }

// classRank orders the demo's classes, highest first (0); others after.
func classRank(class string) int {
	for i, c := range sandbox.DemoPolicy.Classes {
		if c.Name == class {
			return i
		}
	}
	return len(sandbox.DemoPolicy.Classes)
}

// whatIf estimates each compared observation again, (ahead+1)/rate with
// each rule's rate over [from, observation), and sums up their errors.
// Estimates without an admission to count are left out.
func whatIf(pairs []pair, record []admission, from time.Time) []summary {
	var out []summary
	for _, rule := range rateRules {
		var alt []pair
		for _, p := range pairs {
			hours := p.obs.At.Sub(from).Hours()
			n, seen := 0, map[string]bool{}
			for _, a := range record {
				if !a.At.Before(p.obs.At) || !rule.count(a, p.obs) || (rule.once && seen[a.Key]) {
					continue
				}
				seen[a.Key] = true
				n++
			}
			if n == 0 || hours <= 0 {
				continue
			}
			q := p
			q.EstimateSeconds = float64(p.Ahead+1) / (float64(n) / hours) * 3600
			q.RawSeconds = q.EstimateSeconds
			alt = append(alt, q)
		}
		out = append(out, summarizePairs(rule.name, alt))
	}
	return out
}

func isDemoClass(class string) bool {
	for _, c := range sandbox.DemoPolicy.Classes {
		if c.Name == class {
			return true
		}
	}
	return false
}

func filter(pairs []pair, keep func(pair) bool) []pair {
	var out []pair
	for _, p := range pairs {
		if keep(p) {
			out = append(out, p)
		}
	}
	return out
}

func summarizePairs(group string, pairs []pair) summary {
	s := summary{Group: group, Estimates: len(pairs)}
	if len(pairs) == 0 {
		return s
	}
	tasks := map[string]bool{}
	var abs, raw, actual, est, signed, rel []float64
	within := 0
	for _, p := range pairs {
		tasks[p.Task] = true
		abs = append(abs, p.absError())
		raw = append(raw, math.Abs(p.RawSeconds-p.ActualSeconds))
		actual = append(actual, p.ActualSeconds)
		est = append(est, p.EstimateSeconds)
		signed = append(signed, p.EstimateSeconds-p.ActualSeconds)
		if p.ActualSeconds >= 60 {
			rel = append(rel, p.absError()/p.ActualSeconds)
			if p.EstimateSeconds >= p.ActualSeconds/2 && p.EstimateSeconds <= 2*p.ActualSeconds {
				within++
			}
		}
	}
	s.Tasks = len(tasks)
	s.MedianAbsError, s.P90AbsError = quantile(abs, 0.5), quantile(abs, 0.9)
	s.MedianAbsErrorRaw = quantile(raw, 0.5)
	s.MedianActual, s.MedianEstimate, s.MedianSigned = quantile(actual, 0.5), quantile(est, 0.5), quantile(signed, 0.5)
	s.RelativePairs = len(rel)
	if len(rel) > 0 {
		s.MedianRelative = quantile(rel, 0.5)
		s.WithinFactor2 = float64(within) / float64(len(rel))
	}
	var base []float64
	for _, a := range actual {
		base = append(base, math.Abs(a-s.MedianActual))
	}
	s.Baseline = quantile(base, 0.5)
	return s
}

// quantile is the q-quantile of values by linear interpolation between
// closest ranks (0 for none).
func quantile(values []float64, q float64) float64 {
	if len(values) == 0 {
		return 0
	}
	v := slices.Clone(values)
	slices.Sort(v)
	pos := q * float64(len(v)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(v)-1)
	return v[lo] + (v[hi]-v[lo])*(pos-float64(lo))
}

// write prints the summary to w and writes out.json and out.md.
func (r *result) write(out string, w io.Writer) error {
	md := r.markdown()
	fmt.Fprint(w, md)
	return loopback.Save(out, r, md)
}

func (r *result) markdown() string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Estimated wait against the actual wait (%s sandbox)\n\n", r.Instance)
	fmt.Fprintf(&b, "`%s` at %s, %s to %s UTC (%s, the last %s only waiting for admissions); the Tasks CSV read every %s.\n\n",
		r.Command, r.Commit, r.Started.Format("2006-01-02 15:04"), r.Finished.Format("15:04"),
		secs(r.DurationSeconds), secs(r.TailSeconds), secs(r.EverySeconds))
	fmt.Fprintf(&b, "- %d estimates read in %d rounds (%d failed); queued tasks without a known estimate: %d \"unknown\" (history under 15 min, or no admission of the class), %d with none.\n",
		r.Observations, r.Rounds, r.RoundErrors, r.Unknown, r.NoEstimate)
	fmt.Fprintf(&b, "- Compared: **%d estimates of %d tasks**. Left out: %d estimates of tasks never admitted before the end (%d still queued, %d gone without admission).\n",
		r.All.Estimates, r.All.Tasks, r.LeftOut, r.StillQueuedTasks, r.GoneTasks)
	fmt.Fprintf(&b, "- Counting the estimates left out too, the median absolute error is at least %s (a task still queued at the end waited at least until then).\n",
		secs(r.LowerBound))
	fmt.Fprintf(&b, "- Extra demo-like Jobs submitted to keep queues waiting: %d (%d failed).\n", r.ExtraJobs, r.ExtraJobErrors)
	fmt.Fprintf(&b, "- Error = |estimate − actual|, actual = admission (Admitted condition) − observation; the estimate is the figure shown (\"about 25 min\"). "+
		"Relative error and \"within ×2\" over pairs whose actual wait is at least 1 min. Baseline: one constant guess (the group's median actual wait).\n\n")
	b.WriteString("| Estimates | Count | Tasks | Median abs error | p90 abs error | Median actual wait | Median estimate | Median estimate − actual | Median relative error | Within ×2 | Median abs error, unrounded | Baseline median abs error |\n")
	b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	rows := []summary{r.All, r.FirstSeen}
	for _, s := range r.ByBasis {
		s.Group = "basis: " + s.Group
		rows = append(rows, s)
	}
	for _, s := range r.ByClass {
		s.Group = "class: " + s.Group
		rows = append(rows, s)
	}
	for _, s := range rows {
		fmt.Fprintf(&b, "| %s | %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", s.Group, s.Estimates, s.Tasks,
			secs(s.MedianAbsError), secs(s.P90AbsError), secs(s.MedianActual), secs(s.MedianEstimate), signedSecs(s.MedianSigned),
			percent(s.MedianRelative, s.RelativePairs), percent(s.WithinFactor2, s.RelativePairs), secs(s.MedianAbsErrorRaw), secs(s.Baseline))
	}
	if len(r.WhatIf) > 0 {
		b.WriteString("\nWhat if the rate were another: the same tasks ahead, (ahead+1)/rate unrounded, the rate counted from the run's own record of admissions " +
			"since the history began (Admitted condition turning True; a first admission is one of a Workload never evicted).\n\n")
		b.WriteString("| Rate counts | Estimates | Median abs error | p90 abs error | Median estimate | Median estimate − actual | Median relative error | Within ×2 |\n")
		b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|\n")
		for _, s := range r.WhatIf {
			fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %s | %s |\n", s.Group, s.Estimates, secs(s.MedianAbsError), secs(s.P90AbsError),
				secs(s.MedianEstimate), signedSecs(s.MedianSigned), percent(s.MedianRelative, s.RelativePairs), percent(s.WithinFactor2, s.RelativePairs))
		}
	}
	if len(r.Notes) > 0 {
		b.WriteString("\n")
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
	}
	return b.String()
}

// secs shows seconds as minutes and seconds ("12m 05s").
func secs(s float64) string {
	d := time.Duration(math.Round(s)) * time.Second
	switch {
	case d >= time.Hour:
		return fmt.Sprintf("%dh %02dm", int(d.Hours()), int(d.Minutes())%60)
	case d >= time.Minute:
		return fmt.Sprintf("%dm %02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%ds", int(d.Seconds()))
}

func signedSecs(s float64) string {
	if s < 0 {
		return "−" + secs(-s)
	}
	return "+" + secs(s)
}

func percent(v float64, n int) string {
	if n == 0 {
		return "—"
	}
	return strings.TrimSuffix(fmt.Sprintf("%.0f%%", v*100), ".0")
}
