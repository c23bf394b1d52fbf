package main

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openquota/console/internal/domain"
)

// Bases of an estimate: where the number of tasks ahead came from.
const (
	basisVisibility = "visibility API"   // Kueue's pendingworkloads
	basisConsole    = "console position" // the console's own order
)

// observation is one queued task's estimate at one reading of the CSV.
type observation struct {
	Key          string // namespace/name of the Workload
	Team, Class  string
	ClusterQueue string // the team's
	State        string
	At           time.Time
	Estimate     estimate
	Basis        string
	KueueAhead   int // -1: not in Kueue's list
	ConsoleAhead int // -1: no console position
	Waited       time.Duration
}

// estimate is the "Estimated wait" cell of the Tasks CSV, read back.
type estimate struct {
	Shown   time.Duration // the rounded figure shown ("about 25 min")
	Ahead   int
	PerHour float64 // as shown: at most two significant digits
	// Raw is (Ahead+1)/PerHour, before the rounding of the figure (PerHour
	// is itself rounded).
	Raw time.Duration
}

var estimateRE = regexp.MustCompile(`^about (\d+) (min|h|days): (\d+) ahead, ([0-9.]+) admitted per hour over the last day(; .*)?$`)

// Kinds of cells.
const (
	cellKnown   = "known"
	cellUnknown = "unknown" // not enough history, or no admissions
	cellNone    = "none"    // no estimate (no history store, not queued)
)

// parseEstimate reads a cell such as "about 25 min: 3 ahead, 8 admitted
// per hour over the last day".
func parseEstimate(cell string) (estimate, string, error) {
	cell = strings.TrimSpace(cell)
	switch {
	case cell == "" || cell == "none waiting":
		return estimate{}, cellNone, nil
	case strings.HasPrefix(cell, "unknown"):
		return estimate{}, cellUnknown, nil
	}
	m := estimateRE.FindStringSubmatch(cell)
	if m == nil {
		return estimate{}, "", fmt.Errorf("estimated wait %q: not in the expected form", cell)
	}
	n, _ := strconv.Atoi(m[1])
	unit := map[string]time.Duration{"min": time.Minute, "h": time.Hour, "days": 24 * time.Hour}[m[2]]
	ahead, _ := strconv.Atoi(m[3])
	rate, err := strconv.ParseFloat(m[4], 64)
	if err != nil || rate <= 0 {
		return estimate{}, "", fmt.Errorf("estimated wait %q: rate %q", cell, m[4])
	}
	return estimate{Shown: time.Duration(n) * unit, Ahead: ahead, PerHour: rate,
		Raw: time.Duration(float64(ahead+1) / rate * float64(time.Hour))}, cellKnown, nil
}

// basisOf tells where the console took the tasks ahead from: Kueue's
// position when it matches (or Kueue lists the task), else the console's.
func basisOf(ahead, kueueAhead, consoleAhead int) string {
	switch {
	case kueueAhead >= 0 && ahead == kueueAhead:
		return basisVisibility
	case consoleAhead >= 0 && ahead == consoleAhead:
		return basisConsole
	case kueueAhead >= 0:
		return basisVisibility // the queue moved between the two reads
	}
	return basisConsole
}

// observer reads the Tasks CSV every round and keeps what it saw.
type observer struct {
	c    *cluster
	base string

	mu           sync.Mutex
	observations []observation
	lastSeen     map[string]time.Time // by task: its last observation with an estimate
	rounds       int
	errors       int
	unknown      int // queued tasks whose estimate was "unknown"
	none         int // queued tasks without an estimate
}

// loop reads the CSV every `every` until `until`.
func (o *observer) loop(ctx context.Context, every time.Duration, until time.Time) error {
	client := &http.Client{Timeout: 30 * time.Second}
	for time.Now().Before(until) {
		next := time.Now().Add(every)
		if err := o.round(ctx, client); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			o.errors++
			log.Printf("round %d: %v", o.rounds, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(time.Until(next), time.Until(until))):
		}
	}
	return nil
}

// pending is the last time each observed task was seen queued.
func (o *observer) pending() map[string]time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make(map[string]time.Time, len(o.lastSeen))
	for k, v := range o.lastSeen {
		out[k] = v
	}
	return out
}

func (o *observer) round(ctx context.Context, client *http.Client) error {
	o.rounds++
	kueue := o.kueuePositions(ctx)
	at := time.Now()
	rows, err := fetchQueued(ctx, client, o.base)
	if err != nil {
		return err
	}
	known, unknown, none := 0, 0, 0
	var obs []observation
	for _, r := range rows {
		e, kind, err := parseEstimate(r.estimate)
		if err != nil {
			return err
		}
		switch kind {
		case cellUnknown:
			unknown++
			continue
		case cellNone:
			none++
			continue
		}
		known++
		kueueAhead, ok := kueue[r.key]
		if !ok {
			kueueAhead = -1
		}
		obs = append(obs, observation{Key: r.key, Team: r.team, Class: r.class, ClusterQueue: domain.DefaultSettings.ClusterQueue(r.team),
			State: r.state, At: at, Estimate: e,
			Basis: basisOf(e.Ahead, kueueAhead, r.consoleAhead), KueueAhead: kueueAhead, ConsoleAhead: r.consoleAhead, Waited: r.waited})
	}
	o.mu.Lock()
	o.observations = append(o.observations, obs...)
	if o.lastSeen == nil {
		o.lastSeen = map[string]time.Time{}
	}
	for _, ob := range obs {
		o.lastSeen[ob.Key] = ob.At
	}
	o.unknown += unknown
	o.none += none
	o.mu.Unlock()
	log.Printf("round %d: %d queued: %d with an estimate, %d unknown, %d without; %d estimates so far",
		o.rounds, len(rows), known, unknown, none, len(o.observations))
	return nil
}

// kueuePositions asks Kueue's visibility API for every ClusterQueue's
// waiting Workloads: positions (0 is next) by namespace/name. A queue that
// does not answer is left out.
func (o *observer) kueuePositions(ctx context.Context) map[string]int {
	out := map[string]int{}
	cqs, err := o.c.kq.KueueV1beta2().ClusterQueues().List(ctx, metav1.ListOptions{})
	if err != nil {
		log.Printf("listing ClusterQueues: %v", err)
		return out
	}
	for _, cq := range cqs.Items {
		sum, err := o.c.kq.VisibilityV1beta2().ClusterQueues().GetPendingWorkloadsSummary(ctx, cq.Name, metav1.GetOptions{})
		if err != nil {
			continue
		}
		for _, w := range sum.Items {
			out[domain.LocalQueueKey(w.Namespace, w.Name)] = int(w.PositionInClusterQueue)
		}
	}
	return out
}

// queuedRow is one row of the Tasks CSV.
type queuedRow struct {
	key, team, class, state string
	waited                  time.Duration
	consoleAhead            int // -1: no position
	estimate                string
}

// fetchQueued reads the Tasks CSV of every team's queued tasks (pending or
// preempted).
func fetchQueued(ctx context.Context, client *http.Client, base string) ([]queuedRow, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/tasks?format=csv&state="+domain.ListQueued, nil)
	if err != nil {
		return nil, err
	}
	res, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(res.Body, 512))
		return nil, fmt.Errorf("tasks CSV: %s: %s", res.Status, strings.TrimSpace(string(body)))
	}
	return parseTasksCSV(res.Body)
}

// The Tasks CSV's columns this tool reads.
var tasksColumns = []string{"Namespace", "Task", "Team", "Priority class", "State", "Waited (s)", "Queue position", "Estimated wait"}

func parseTasksCSV(r io.Reader) ([]queuedRow, error) {
	cr := csv.NewReader(r)
	header, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("tasks CSV header: %w", err)
	}
	col := map[string]int{}
	for i, h := range header {
		col[h] = i
	}
	for _, name := range tasksColumns {
		if _, ok := col[name]; !ok {
			return nil, fmt.Errorf("tasks CSV: no %q column (header %q)", name, header)
		}
	}
	var rows []queuedRow
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return rows, nil
		}
		if err != nil {
			return nil, fmt.Errorf("tasks CSV: %w", err)
		}
		get := func(name string) string { return rec[col[name]] }
		r := queuedRow{key: domain.LocalQueueKey(get("Namespace"), get("Task")), team: get("Team"), class: get("Priority class"),
			state: get("State"), consoleAhead: -1, estimate: get("Estimated wait")}
		if s, err := strconv.Atoi(get("Waited (s)")); err == nil {
			r.waited = time.Duration(s) * time.Second
		}
		if p, err := strconv.Atoi(get("Queue position")); err == nil && p > 0 {
			r.consoleAhead = p - 1
		}
		rows = append(rows, r)
	}
}
