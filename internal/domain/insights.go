// This file finds what needs a platform lead's attention: the insights
// page's rules, evaluated on a snapshot and the cluster's capacity.

package domain

import (
	"cmp"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Severity orders insights: Critical first.
type Severity int

const (
	Info Severity = iota
	Warning
	Critical
)

func (s Severity) String() string {
	switch s {
	case Critical:
		return "critical"
	case Warning:
		return "warning"
	}
	return "info"
}

// Insight is one thing that needs attention: what, for whom, the evidence,
// and the page that shows it.
type Insight struct {
	Rule     string // a stable key: "long-wait", "idle-gpus", …
	Severity Severity
	Team     string // "" when it concerns the cluster
	Title    string
	Evidence string
	// Link is the page that shows it, with the filters that select it.
	Link string
	// Others are the teams it names besides Team (a lender); a viewer who
	// may not see them all reads Guarded, which names none of them, as its
	// title.
	Others  []string
	Guarded string
}

// Same reports whether two insights say the same.
func (i Insight) Same(j Insight) bool {
	return i.Rule == j.Rule && i.Severity == j.Severity && i.Team == j.Team && i.Title == j.Title && i.Evidence == j.Evidence &&
		i.Link == j.Link && i.Guarded == j.Guarded && slices.Equal(i.Others, j.Others)
}

// InsightThresholds are when the rules speak up.
type InsightThresholds struct {
	// LongWait: a task waiting longer needs attention; a class whose tasks
	// all wait longer, with none running, starves.
	LongWait time.Duration
	// IdleUtilization: a team holding GPUs whose hardware utilization is
	// under this (percent) holds them idle.
	IdleUtilization float64
	// ClassLongWait are the classes' own LongWait, where they have one.
	ClassLongWait map[string]time.Duration
	// SustainedBorrowing: a team borrowing longer while a lender waits
	// needs attention.
	SustainedBorrowing time.Duration
}

// LongWaitOf is the long-wait threshold of class.
func (t InsightThresholds) LongWaitOf(class string) time.Duration {
	if d, ok := t.ClassLongWait[class]; ok {
		return d
	}
	return t.LongWait
}

// IdleWindow is how long GPUs must work under the idle threshold, on
// average, to be idle.
const IdleWindow = time.Hour

// DefaultInsightThresholds are the thresholds unless an admin sets others.
var DefaultInsightThresholds = InsightThresholds{LongWait: time.Hour, IdleUtilization: 10, SustainedBorrowing: 2 * time.Hour}

// InsightInput is what the rules read.
type InsightInput struct {
	Snapshot *Snapshot
	// Capacity is the cluster's nodes by instance type (Overview).
	Capacity []InstanceTypeCapacity
	// Utilization is each team's GPU utilization now (percent, from
	// dcgm-exporter); nil when Prometheus did not answer.
	Utilization map[string]float64
	// PartitionUtilization is each team's MIG partitions' activity now
	// (percent) by profile; nil when not known.
	PartitionUtilization map[string]map[string]float64
	// GPUsOverWindow is, per team, the utilization of each GPU it holds
	// averaged over IdleWindow, one reading a GPU; nil when not known (the
	// idle rule then reads Utilization).
	GPUsOverWindow map[string][]float64
	// Unavailable are the dependencies that do not answer, each said in a
	// sentence (the task history, Prometheus).
	Unavailable []string
	Thresholds  InsightThresholds
	Now         time.Time
	// BorrowingSince is since when each team that borrows GPUs now has
	// done so without a break (Snapshot.BorrowingSince).
	BorrowingSince map[string]time.Time
	// Ongoing are the snapshot's figures by team and class at Now
	// (Snapshot.Ongoing), when the caller has them; nil reads them.
	Ongoing []Ongoing
}

func (in InsightInput) ongoing() []Ongoing {
	if in.Ongoing != nil {
		return in.Ongoing
	}
	return in.Snapshot.Ongoing(Selection{}, 0, in.Now)
}

// Insights evaluates every rule: the most severe first, then by rule and
// team.
func Insights(in InsightInput) []Insight {
	var out []Insight
	out = append(out, waitInsights(in)...)
	out = append(out, idleInsights(in)...)
	out = append(out, borrowingInsights(in)...)
	out = append(out, capacityInsights(in.Snapshot, in.Capacity)...)
	out = append(out, haltedInsights(in.Snapshot)...)
	for _, u := range in.Unavailable {
		out = append(out, Insight{Rule: "dependency", Severity: Warning, Title: u,
			Evidence: "The figures that come from it are missing or old until it answers."})
	}
	slices.SortStableFunc(out, func(a, b Insight) int {
		return cmp.Or(cmp.Compare(b.Severity, a.Severity), cmp.Compare(a.Rule, b.Rule), cmp.Compare(a.Team, b.Team))
	})
	return out
}

// haltedInsights: teams whose queue admits nothing now (stopped, or kept
// inactive by Kueue) while tasks wait in it: they wait until someone acts,
// not the long-wait threshold.
func haltedInsights(s *Snapshot) []Insight {
	var out []Insight
	for i := range s.Teams {
		u := &s.Teams[i]
		waiting := u.Pending + u.Preempted
		why := u.Halted()
		if why == "" || waiting == 0 {
			continue
		}
		severity := Warning
		if u.Inactive != "" { // not a choice of the admin's, as a stopped queue is
			severity = Critical
		}
		out = append(out, Insight{Rule: "queue-admits-nothing", Severity: severity, Team: u.Team,
			Title:    fmt.Sprintf("Team %s: %s waiting in a queue that admits nothing", u.Team, CountOf(int64(waiting), "task")),
			Evidence: "They wait until its queue changes: " + strings.TrimSuffix(why, ".") + ".",
			Link:     "/usage/" + u.Team})
	}
	return out
}

// waitInsights: tasks of a team and class waiting longer than the
// threshold, and classes whose tasks wait that long with none running.
func waitInsights(in InsightInput) []Insight {
	var out []Insight
	type classTotals struct {
		waiting, running int
		longest          time.Duration
		lastAdmission    time.Time
	}
	classes := map[string]*classTotals{}
	for _, o := range in.ongoing() {
		ct := classes[o.Class]
		if ct == nil {
			ct = &classTotals{}
			classes[o.Class] = ct
		}
		waiting := o.Pending + o.Preempted
		ct.waiting += waiting
		ct.running += o.Running
		ct.longest = max(ct.longest, o.LongestWait)
		if o.LastAdmission.After(ct.lastAdmission) {
			ct.lastAdmission = o.LastAdmission
		}
		threshold := in.Thresholds.LongWaitOf(o.Class)
		if waiting == 0 || o.LongestWait <= threshold || o.Team == "" {
			continue
		}
		sev := Warning
		if o.LongestWait > 4*threshold {
			sev = Critical
		}
		out = append(out, Insight{Rule: "long-wait", Severity: sev, Team: o.Team,
			Title: fmt.Sprintf("Team %s: %s of class %s waiting, the longest for %s", o.Team, tasksWord(waiting), orNone(o.Class), FormatDuration(o.LongestWait)),
			Evidence: fmt.Sprintf("Over the %s threshold; %d of the team's tasks of this class run. The Tasks page gives Kueue's reason for each.",
				FormatDuration(threshold), o.Running),
			Link: "/tasks?" + queryOf("team", o.Team, "class", o.Class, "state", "Queued")})
	}
	for class, ct := range classes {
		// Starving: tasks wait past the threshold and none of the class was
		// admitted within it.
		threshold := in.Thresholds.LongWaitOf(class)
		if ct.waiting == 0 || ct.longest <= threshold || in.Now.Sub(ct.lastAdmission) <= threshold {
			continue
		}
		last := "No task of the class known to Kueue now was ever admitted."
		if !ct.lastAdmission.IsZero() {
			last = fmt.Sprintf("The last admission of the class was %s ago.", FormatDuration(in.Now.Sub(ct.lastAdmission)))
		}
		out = append(out, Insight{Rule: "starving-class", Severity: Critical,
			Title: fmt.Sprintf("Class %s: %s waiting, none admitted in %s", orNone(class), tasksWord(ct.waiting), FormatDuration(threshold)),
			Evidence: fmt.Sprintf("%s %d of the class run; the longest wait is %s. Higher classes or quota elsewhere take every admission.",
				last, ct.running, FormatDuration(ct.longest)),
			Link: "/tasks?" + queryOf("class", class, "state", "Queued")})
	}
	return out
}

// idleInsights: teams whose admitted tasks hold GPUs that barely work, each
// GPU judged on its own average over IdleWindow where that is known, else
// the team's GPUs together now.
func idleInsights(in InsightInput) []Insight {
	var out []Insight
	for _, u := range in.Snapshot.Teams {
		idle := in.idleGPUs(u)
		if idle.count == 0 {
			continue
		}
		out = append(out, Insight{Rule: "idle-gpus", Severity: Warning, Team: u.Team,
			Title: fmt.Sprintf("Team %s holds %s at %.0f %% utilization", u.Team, CountOf(idle.count, "GPU"), idle.average),
			Evidence: fmt.Sprintf("%d of its %s worked under %.0f %% (hardware utilization, dcgm-exporter, %s): %d GPU-hours an hour are held without work.",
				idle.count, CountOf(u.InUse.GPUs, "GPU"), in.Thresholds.IdleUtilization, idle.over, idle.count),
			Link: "/usage/" + u.Team})
	}
	for _, u := range in.Snapshot.Teams {
		for _, profile := range slices.Sorted(maps.Keys(in.PartitionUtilization[u.Team])) {
			v, held := in.PartitionUtilization[u.Team][profile], u.Partition(profile).InUse
			if held == 0 || v >= in.Thresholds.IdleUtilization {
				continue
			}
			out = append(out, Insight{Rule: "idle-partitions", Severity: Warning, Team: u.Team,
				Title: fmt.Sprintf("Team %s holds %d %s partitions at %.0f %% activity", u.Team, held, profile, v),
				Evidence: fmt.Sprintf("Their graphics engines are active under %.0f %% of the time (dcgm-exporter's DCGM_FI_PROF_GR_ENGINE_ACTIVE, now): %s GPU-hours an hour, in whole GPUs, are held without work.",
					in.Thresholds.IdleUtilization, FormatHours(GPUEquivalent(profile, float64(held)))),
				Link: "/usage?resource=" + profile})
		}
	}
	return out
}

// idleGPUs are a team's GPUs under the idle threshold: count of them, their
// average utilization and over which time.
type idleGPUs struct {
	count   int64
	average float64
	over    string
}

// idleGPUs are the GPUs of u that work under the idle threshold: each GPU
// on its own average over IdleWindow (a team's busy GPUs do not hide its
// idle ones), or, without those readings, all of them when the team's
// average now is under it. Never more than the GPUs Kueue says it holds.
func (in InsightInput) idleGPUs(u TeamUsage) idleGPUs {
	limit := in.Thresholds.IdleUtilization
	if u.InUse.GPUs == 0 {
		return idleGPUs{}
	}
	if in.GPUsOverWindow != nil {
		var sum float64
		var n int64
		for _, v := range in.GPUsOverWindow[u.Team] {
			if v < limit && n < u.InUse.GPUs {
				sum, n = sum+v, n+1
			}
		}
		if n == 0 {
			return idleGPUs{}
		}
		return idleGPUs{count: n, average: sum / float64(n), over: "each GPU averaged over the last " + FormatDuration(IdleWindow)}
	}
	if v, ok := in.Utilization[u.Team]; ok && v < limit {
		return idleGPUs{count: u.InUse.GPUs, average: v, over: "its GPUs together, now"}
	}
	return idleGPUs{}
}

// idleKnown reports whether the idle GPUs can be counted (Prometheus answered).
func (in InsightInput) idleKnown() bool { return in.GPUsOverWindow != nil || in.Utilization != nil }

// borrowingInsights: a team that borrows while teams of its cohort that
// lend have tasks waiting (Kueue reclaims only when a lender preempts): one
// insight a borrower, naming the first waiting lender; a warning once it
// has borrowed longer than the threshold.
func borrowingInsights(in InsightInput) []Insight {
	s := in.Snapshot
	waiting := map[string][]TeamUsage{} // cohort → lenders with demand
	for _, l := range s.Teams {
		if l.Cohort != "" && l.Lent.GPUs > 0 && l.PendingDemand.GPUs > 0 {
			waiting[l.Cohort] = append(waiting[l.Cohort], l)
		}
	}
	var out []Insight
	for _, b := range s.Teams {
		if b.Borrowed.GPUs == 0 || b.Cohort == "" {
			continue
		}
		var names []string
		var demand int64
		for _, l := range waiting[b.Cohort] {
			if l.Team != b.Team {
				names = append(names, l.Team)
				demand += l.PendingDemand.GPUs
			}
		}
		if len(names) == 0 {
			continue
		}
		lenders := "team " + names[0]
		if len(names) > 1 {
			lenders = fmt.Sprintf("%d teams that lend (%s, …)", len(names), names[0])
		}
		i := Insight{Rule: "borrowing", Severity: Info, Team: b.Team,
			Title:    fmt.Sprintf("Team %s borrows %s while %s, which lends, waits for %s", b.Team, CountOf(b.Borrowed.GPUs, "GPU"), lenders, CountOf(demand, "GPU")),
			Evidence: fmt.Sprintf("They are in cohort %s. Kueue gives a lender its quota back by preempting what others borrow, when the lender's queue reclaims within its cohort and that makes room for the lender's waiting task.", b.Cohort),
			Link:     "/usage/" + b.Team, Others: names,
			Guarded: fmt.Sprintf("Team %s borrows %s while a team that lends to it has tasks waiting", b.Team, CountOf(b.Borrowed.GPUs, "GPU"))}
		if since, ok := in.BorrowingSince[b.Team]; ok && in.Now.Sub(since) > in.Thresholds.SustainedBorrowing {
			i.Severity = Warning
			i.Title += fmt.Sprintf(", borrowing for %s", FormatDuration(in.Now.Sub(since)))
			i.Guarded += fmt.Sprintf(", borrowing for %s", FormatDuration(in.Now.Sub(since)))
			i.Evidence += fmt.Sprintf(" It has borrowed without a break for longer than the %s threshold.", FormatDuration(in.Thresholds.SustainedBorrowing))
		}
		out = append(out, i)
	}
	return out
}

// TrackBorrowing is since when each team that borrows GPUs now has done so
// without a break: prev's time for a team that borrowed at the last look,
// now for one that starts.
func TrackBorrowing(prev map[string]time.Time, teams []TeamUsage, now time.Time) map[string]time.Time {
	out := map[string]time.Time{}
	for _, u := range teams {
		if u.Borrowed.GPUs == 0 {
			continue
		}
		if since, ok := prev[u.Team]; ok {
			out[u.Team] = since
		} else {
			out[u.Team] = now
		}
	}
	return out
}

// capacityInsights: GPU quota on an instance type beyond its ready nodes,
// and nodes that are not ready.
func capacityInsights(s *Snapshot, capacity []InstanceTypeCapacity) []Insight {
	quota := map[string]int64{}
	for _, u := range s.Teams {
		for _, l := range u.Limits {
			if l.Resource == ResourceGPU {
				quota[l.Flavor] += l.Nominal
			}
		}
	}
	var out []Insight
	for _, c := range capacity {
		perNode := int64(0)
		if c.Count > 0 {
			perNode = c.GPUs / int64(c.Count)
		}
		ready := perNode * int64(c.Ready)
		if q := quota[c.Type]; q > ready && perNode > 0 {
			out = append(out, Insight{Rule: "quota-beyond-capacity", Severity: Warning,
				Title: fmt.Sprintf("%d GPUs of quota on %s, %d on its ready nodes", q, c.Type, ready),
				Evidence: fmt.Sprintf("%d of %d nodes ready. Teams cannot all use their quota at once: Kueue admits what fits, the rest waits.",
					c.Ready, c.Count),
				Link: "/teams"})
		}
		if c.NotReady > 0 {
			out = append(out, Insight{Rule: "not-ready-nodes", Severity: Info,
				Title:    fmt.Sprintf("%d of %d %s nodes not ready", c.NotReady, c.Count, c.Type),
				Evidence: "Not ready or cordoned: the overview counts every node, admissions fit only on the ready ones.",
				Link:     "/"})
		}
	}
	return out
}

// Headline is the cluster's figures at a glance, in GPUs.
type Headline struct {
	Ready, Allocated, InUse, Borrowed int64
	// Idle are the GPUs held that work under the idle threshold, each on
	// its own (InsightInput.idleGPUs); IdleKnown is false without
	// utilization figures.
	Idle      int64
	IdleKnown bool
	// Waiting counts the tasks waiting, the longest for LongestWait.
	Waiting     int
	LongestWait time.Duration
	// At is when the figures were taken.
	At time.Time
}

// HeadlineOf sums the cluster's figures.
func HeadlineOf(in InsightInput) Headline {
	h := Headline{At: in.Now}
	for _, c := range in.Capacity {
		if c.Count > 0 {
			h.Ready += c.GPUs / int64(c.Count) * int64(c.Ready)
		}
	}
	h.IdleKnown = in.idleKnown()
	for _, u := range in.Snapshot.Teams {
		h.Allocated += u.Allocated.GPUs
		h.InUse += u.InUse.GPUs
		h.Borrowed += u.Borrowed.GPUs
		h.Idle += in.idleGPUs(u).count
	}
	for _, o := range in.ongoing() {
		h.Waiting += o.Pending + o.Preempted
		h.LongestWait = max(h.LongestWait, o.LongestWait)
	}
	return h
}

func tasksWord(n int) string {
	if n == 1 {
		return "1 task"
	}
	return fmt.Sprintf("%d tasks", n)
}

// queryOf is a query string of name, value pairs, empty values left out.
func queryOf(pairs ...string) string {
	q := url.Values{}
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] != "" {
			q.Set(pairs[i], pairs[i+1])
		}
	}
	return q.Encode()
}
