package main

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseEstimate(t *testing.T) {
	for _, tc := range []struct {
		cell      string
		kind      string
		shown     time.Duration
		ahead     int
		perHour   float64
		raw       time.Duration
		wantError bool
	}{
		{"about 30 min: 3 ahead, 8.0 admitted per hour over the last day", cellKnown, 30 * time.Minute, 3, 8, 30 * time.Minute, false},
		{"about 41 h: 40 ahead, 1.0 admitted per hour over the last day", cellKnown, 41 * time.Hour, 40, 1, 41 * time.Hour, false},
		{"about 8 days: 99 ahead, 0.50 admitted per hour over the last day", cellKnown, 8 * 24 * time.Hour, 99, 0.5, 200 * time.Hour, false},
		{"about 1 min: 0 ahead, 120 admitted per hour over the last day", cellKnown, time.Minute, 0, 120, 30 * time.Second, false},
		{"unknown: 2 ahead; the task history holds only 3 min of the last day, too little to know how fast the queue admits (it needs 15 min)", cellUnknown, 0, 0, 0, 0, false},
		{"unknown: 2 ahead, no admissions recorded over the last day", cellUnknown, 0, 0, 0, 0, false},
		{"", cellNone, 0, 0, 0, 0, false},
		{"about soon", "", 0, 0, 0, 0, true},
	} {
		e, kind, err := parseEstimate(tc.cell)
		if (err != nil) != tc.wantError {
			t.Errorf("%q: error %v", tc.cell, err)
			continue
		}
		if kind != tc.kind || e.Shown != tc.shown || e.Ahead != tc.ahead || e.PerHour != tc.perHour || e.Raw != tc.raw {
			t.Errorf("%q: got %s %+v", tc.cell, kind, e)
		}
	}
}

func TestBasisOf(t *testing.T) {
	for _, tc := range []struct {
		ahead, kueue, console int
		want                  string
	}{
		{2, 2, 5, basisVisibility},
		{4, -1, 4, basisConsole},
		{3, 1, 3, basisConsole},
		{3, 1, 7, basisVisibility},
		{3, -1, -1, basisConsole},
	} {
		if got := basisOf(tc.ahead, tc.kueue, tc.console); got != tc.want {
			t.Errorf("basisOf(%d, %d, %d) = %s, want %s", tc.ahead, tc.kueue, tc.console, got, tc.want)
		}
	}
}

func TestParseTasksCSV(t *testing.T) {
	csv := "Namespace,Task,Team,Priority class,State,GPUs (count),Waited (s),Ran (s),Queue position,Borrowing,Why,Kueue message,Estimated wait\n" +
		"hyperpod-ns-nlp,job-a,nlp,training,Pending,4,95,,3,false,waits,\"msg, with comma\",\"about 12 min: 2 ahead, 15 admitted per hour over the last day\"\n" +
		"hyperpod-ns-nlp,job-b,nlp,batch,Preempted,4,10,,,false,,,\n"
	rows, err := parseTasksCSV(strings.NewReader(csv))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 {
		t.Fatalf("rows: %d", len(rows))
	}
	a := rows[0]
	if a.key != "hyperpod-ns-nlp/job-a" || a.class != "training" || a.consoleAhead != 2 || a.waited != 95*time.Second ||
		!strings.HasPrefix(a.estimate, "about 12 min") {
		t.Errorf("row a: %+v", a)
	}
	if rows[1].consoleAhead != -1 || rows[1].estimate != "" {
		t.Errorf("row b: %+v", rows[1])
	}
	if _, err := parseTasksCSV(strings.NewReader("Namespace,Task\n")); err == nil {
		t.Error("a CSV without the estimate column was accepted")
	}
}

func TestSummarize(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	adm := newAdmissions()
	// a: admitted, preempted, then admitted again 10 min after the first
	// observation; b: admitted a moment before the snapshot said queued;
	// c: never admitted; d: deleted before admission.
	adm.add("ns/a", t0.Add(-time.Hour))
	adm.add("ns/a", t0.Add(10*time.Minute))
	adm.add("ns/a", t0.Add(10*time.Minute)) // the same admission seen twice
	adm.add("ns/b", t0.Add(-2*time.Second))
	adm.gone["ns/d"] = true
	obs := []observation{
		{Key: "ns/a", Class: "training", At: t0, Basis: basisVisibility, Estimate: estimate{Shown: 8 * time.Minute, Raw: 8 * time.Minute}},
		{Key: "ns/a", Class: "training", At: t0.Add(5 * time.Minute), Basis: basisVisibility, Estimate: estimate{Shown: 4 * time.Minute, Raw: 4 * time.Minute}},
		{Key: "ns/b", Class: "batch", At: t0, Basis: basisConsole, Estimate: estimate{Shown: time.Minute, Raw: 30 * time.Second}},
		{Key: "ns/c", Class: "batch", At: t0, Basis: basisVisibility, Estimate: estimate{Shown: time.Minute}},
		{Key: "ns/d", Class: "batch", At: t0, Basis: basisVisibility, Estimate: estimate{Shown: time.Minute}},
	}
	var res result
	summarize(&res, obs, adm, t0.Add(-2*time.Hour), t0.Add(20*time.Minute))
	if res.All.Estimates != 3 || res.All.Tasks != 2 || res.LeftOut != 2 || res.StillQueuedTasks != 1 || res.GoneTasks != 1 {
		t.Fatalf("counts: %+v", res.All)
	}
	// Errors: |8m−10m| = 120 s, |4m−5m| = 60 s, |1m−0| = 60 s.
	if res.All.MedianAbsError != 60 || res.All.MedianActual != 300 {
		t.Errorf("all: %+v", res.All)
	}
	if res.FirstSeen.Estimates != 2 || res.FirstSeen.MedianAbsError != 90 {
		t.Errorf("first seen: %+v", res.FirstSeen)
	}
	if len(res.ByBasis) != 2 || res.ByBasis[0].Estimates != 2 || res.ByBasis[1].Estimates != 1 {
		t.Errorf("by basis: %+v", res.ByBasis)
	}
	// Lower bound: 120, 60, 60, c: 20 min waited − 1 min estimated, d: 0.
	if res.LowerBound != 60 {
		t.Errorf("lower bound: %v", res.LowerBound)
	}
	// Relative: only pairs with an actual wait of a minute or more.
	if res.All.RelativePairs != 2 || math.Abs(res.All.MedianRelative-0.2) > 1e-9 {
		t.Errorf("relative: %+v", res.All)
	}
	if md := res.markdown(); !strings.Contains(md, "**3 estimates of 2 tasks**") {
		t.Errorf("markdown:\n%s", md)
	}
}

func TestQuantile(t *testing.T) {
	if got := quantile([]float64{4, 1, 3, 2}, 0.5); got != 2.5 {
		t.Errorf("median: %v", got)
	}
	if got := quantile([]float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, 0.9); got != 10 {
		t.Errorf("p90: %v", got)
	}
	if got := quantile(nil, 0.5); got != 0 {
		t.Errorf("empty: %v", got)
	}
}

func TestValidate(t *testing.T) {
	o, err := parseOptions(nil)
	if err != nil {
		t.Fatal(err)
	}
	if o.duration != 40*time.Minute || o.listen != "127.0.0.1:0" {
		t.Errorf("defaults: %+v", o)
	}
	if _, err := parseOptions([]string{"--listen", "0.0.0.0:8080"}); err == nil {
		t.Error("a non-loopback address was accepted")
	}
	if _, err := parseOptions([]string{"--duration", "10m", "--tail", "10m"}); err == nil {
		t.Error("a tail as long as the run was accepted")
	}
}

func TestWhatIf(t *testing.T) {
	from := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	at := from.Add(time.Hour)
	var record []admission
	// In one hour: 2 training admissions (one a re-admission), 4 batch, 2
	// inference; and one training admission in another queue, one after
	// the observation.
	for i, c := range []string{"training", "training", "batch", "batch", "batch", "batch", "inference", "inference"} {
		key := "ns/" + strconv.Itoa(i)
		if i == 1 {
			key = "ns/0" // admitted again
		}
		record = append(record, admission{Key: key, ClusterQueue: "cq", Class: c, At: from.Add(time.Duration(i+1) * time.Minute), First: i != 1})
	}
	record = append(record, admission{ClusterQueue: "other", Class: "training", At: from.Add(time.Minute), First: true},
		admission{ClusterQueue: "cq", Class: "training", At: at.Add(time.Minute), First: true})
	o := observation{Key: "ns/x", ClusterQueue: "cq", Class: "training", At: at, Estimate: estimate{Ahead: 3}}
	got := whatIf([]pair{{ActualSeconds: 3600, obs: o, Ahead: 3}}, record, from)
	// (3+1) tasks at 7, 8, 1, 2, 5 and 7 per hour.
	want := []float64{4.0 / 7, 0.5, 4, 2, 0.8, 4.0 / 7}
	if len(got) != len(want) {
		t.Fatalf("%d rules", len(got))
	}
	for i, w := range want {
		if math.Abs(got[i].MedianEstimate-w*3600) > 1e-6 {
			t.Errorf("%s: estimate %v s, want %v h", got[i].Group, got[i].MedianEstimate, w)
		}
	}
}

// add records an admission of key at at, as observe does for a Workload.
func (a *admissions) add(key string, at time.Time) {
	a.record(admission{Key: key, At: at})
}
