package domain

import (
	"cmp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
	"weak"

	corev1 "k8s.io/api/core/v1"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// Snapshot is the read model at one time (see Model): everything the
// dashboards show, shared by every page view and live update. It is never
// changed once published (before, it is numbered and Follow keeps in it the
// changes since the snapshots published before it);
// figures that grow with the clock are computed when read, at the time the
// reader gives (pages use Taken).
type Snapshot struct {
	Version uint64
	Taken   time.Time
	Policy  Policy
	// Classes are the priority classes, highest priority first (classOrder).
	Classes []string
	// PodClasses are those of Classes that are Kubernetes PriorityClasses
	// (tasks of Jobs with a priorityClassName), with the priority Kueue
	// gave their tasks.
	PodClasses map[string]int32
	Teams      []TeamUsage
	Size       int // how many tasks
	// BorrowingSince is, for each team borrowing GPUs, since when it has
	// borrowed without a break, as the model saw the teams change
	// (TrackBorrowing): its first snapshot dates what it found.
	BorrowingSince map[string]time.Time

	changes   uint64 // the model's changes when it was taken
	lowest    string // LowestClass
	tallies   map[teamAndClass]*teamClassTasks
	queues    map[string]*queue
	borrowing map[groupKey]*TaskFacts // each group's first task that borrows
	unqueued  *tree                   // waiting, in no queue
	running   *tree                   // newest admission first
	finished  *tree                   // newest finish first
	lists     *listCache

	teamsOnce sync.Once
	teams     []string // TeamNames

	// steps are the changes of the last publishes up to it, oldest first
	// (Follow): every view that moves from one of those snapshots to this
	// one reads them rather than compare the two again.
	steps []step
}

// step is one publish: the snapshot before it (a weak pointer: a
// snapshot does not keep the ones before it) and the changes since.
type step struct {
	from    weak.Pointer[Snapshot]
	changes Changes
}

// Changes is how many object changes the snapshot reflects (Model.Changes
// when it was taken).
func (s *Snapshot) Changes() uint64 { return s.changes }

// SnapshotInput is what a snapshot is built from.
type SnapshotInput struct {
	Settings      Settings
	ClusterQueues []*kueuev1beta2.ClusterQueue
	LocalQueues   []*kueuev1beta2.LocalQueue
	Workloads     []*kueuev1beta2.Workload
	Classes       []*kueuev1beta2.WorkloadPriorityClass
	Cohort        *kueuev1beta2.Cohort
	// Namespaces give their labels, which ClusterQueues' namespace
	// selectors read; one not given has only its name label.
	Namespaces []*corev1.Namespace
	// Cohorts are Kueue's Cohort objects (the tree lending is shared out over).
	Cohorts []*kueuev1beta2.Cohort
}

// BuildSnapshot builds a snapshot from scratch.
func BuildSnapshot(in SnapshotInput, now time.Time) *Snapshot {
	m := NewModel(in.Settings)
	m.Load(in)
	return m.Snapshot(now)
}

// LowestClass is the class of tasks that name none: the lowest of Kueue's
// WorkloadPriorityClasses ("" without any).
func (s *Snapshot) LowestClass() string { return s.lowest }

// Task is f as the dashboard shows it at the snapshot's time.
func (s *Snapshot) Task(f *TaskFacts) Task { return s.TaskAt(f, s.Taken) }

// TaskAt is f as the dashboard shows it at now: with its queue position,
// whether it borrows, and, for a task Kueue has not tried yet because of
// one ahead of it that does not fit, why.
func (s *Snapshot) TaskAt(f *TaskFacts, now time.Time) Task {
	t := f.At(now, s.Position(f), s.Borrowing(f))
	if q := s.queues[f.queue]; f.queue != "" && q != nil {
		if ahead := q.waitsBehind(f); ahead != nil {
			t.Reason = behindReason(ahead.Named().Shown(), ahead.noFitWords, q.strict)
		}
	}
	return t
}

// CannotStart says why queued f cannot start while its queue stays as it is
// defined: Kueue found its queue can never hold it, or it waits behind a
// task that Kueue found so (the head of a StrictFIFO queue, or one just
// like it that Kueue tries in its stead); "" when it may start once others
// finish.
func (s *Snapshot) CannotStart(f *TaskFacts) string {
	if !f.Queued {
		return ""
	}
	if f.cannotFit {
		return "its queue, as it is defined, can never hold it: " + f.noFitWords
	}
	if q := s.queues[f.queue]; f.queue != "" && q != nil {
		if ahead := q.waitsBehind(f); ahead != nil && ahead.cannotFit {
			if q.strict {
				return "it waits behind " + ahead.Named().Shown() + ", first in its StrictFIFO queue, which the queue, as it is defined, can never hold: " + ahead.noFitWords
			}
			return "its queue, as it is defined, can never hold " + ahead.Named().Shown() + ", just like it: " + ahead.noFitWords
		}
	}
	return ""
}

// Position is f's place in its ClusterQueue's queue, 1 being next in line;
// 0 when it is not queued or its LocalQueue is unknown.
func (s *Snapshot) Position(f *TaskFacts) int {
	if q := s.queues[f.queue]; f.queue != "" && q != nil {
		return q.position(f)
	}
	return 0
}

// QueuePositions are the places of the tasks queued in clusterQueue, one
// each from 1: Kueue's order for the tasks its visibility API named (kueue,
// 0-based positions by LocalQueueKey), then the tasks it did not name (new
// since it answered) in the console's order. Kueue's answer may be older
// than the snapshot: tasks admitted since are skipped, and no two tasks
// share a place.
func (s *Snapshot) QueuePositions(clusterQueue string, kueue map[string]int) QueuePlaces {
	q := s.queues[clusterQueue]
	if q == nil || len(kueue) == 0 {
		return QueuePlaces{q: q} // the console's order
	}
	type named struct{ kueue, console int32 }
	var names []named
	var unnamed []int32
	i := int32(0)
	q.tasks.Ascend(func(f *TaskFacts) bool {
		if k, ok := kueue[LocalQueueKey(f.Namespace, f.Name)]; ok {
			names = append(names, named{int32(k), i})
		} else {
			unnamed = append(unnamed, i)
		}
		i++
		return true
	})
	slices.SortStableFunc(names, func(a, b named) int { return cmp.Compare(a.kueue, b.kueue) })
	places := make([]int32, i)
	for p, n := range names {
		places[n.console] = int32(p + 1)
	}
	for p, c := range unnamed {
		places[c] = int32(len(names) + p + 1)
	}
	return QueuePlaces{q: q, places: places}
}

// QueuePlaces are the places of one queue's tasks (QueuePositions).
type QueuePlaces struct {
	q      *queue
	places []int32 // by the console's position − 1; nil: the console's order
}

// Of is f's place; ok is false for a task not in the queue.
func (p QueuePlaces) Of(f *TaskFacts) (int, bool) {
	if p.q == nil {
		return 0, false
	}
	pos := p.q.position(f)
	switch {
	case pos == 0:
		return 0, false
	case p.places == nil:
		return pos, true
	}
	return int(p.places[pos-1]), true
}

// Borrowing reports whether f, holding quota, borrows now: by Borrows, on
// any of its groups, what the tasks admitted before it and still holding
// quota hold and what it holds exceed its ClusterQueue's nominal quota.
func (s *Snapshot) Borrowing(f *TaskFacts) bool {
	borrowing := false
	eachGroup(f, func(key groupKey) {
		if first, ok := s.borrowing[key]; ok && admissionOrder(f, first) >= 0 {
			borrowing = true
		}
	})
	return borrowing
}

// Find is the task of the Workload namespace/name, nil when the snapshot
// has none. It looks in every team and class (a few hundred ordered sets).
func (s *Snapshot) Find(namespace, name string) *TaskFacts {
	probe := &TaskFacts{Namespace: namespace, Name: name}
	for _, tc := range s.tallies {
		if f, ok := tc.tasks.Get(probe); ok {
			return f
		}
	}
	return nil
}

// Selection picks tasks by team and class.
type Selection struct {
	// Teams limits the selection to these teams when not nil (an empty,
	// non-nil list selects nothing). Nil selects every task, tasks outside
	// team namespaces included.
	Teams []string
	Class string // "" for every class
}

func (sel Selection) picker() func(teamAndClass) bool {
	var teams map[string]bool
	if sel.Teams != nil {
		teams = make(map[string]bool, len(sel.Teams))
		for _, t := range sel.Teams {
			teams[t] = true
		}
	}
	return func(k teamAndClass) bool {
		return (teams == nil || teams[k.team]) && (sel.Class == "" || k.class == sel.Class)
	}
}

// selected are the tallies of the selection for the window at now.
func (s *Snapshot) selected(sel Selection, window time.Duration, now time.Time) map[teamAndClass]*tally {
	picks := sel.picker()
	out := map[teamAndClass]*tally{}
	for k, tc := range s.tallies {
		if picks(k) {
			out[k] = tc.tally(window, now)
		}
	}
	return out
}

// StatsByClass is the package's StatsByClass over the selected tasks, for
// the window that ends at now; it costs the number of teams and classes,
// not of tasks.
func (s *Snapshot) StatsByClass(sel Selection, classes []string, window time.Duration, now time.Time) []ClassStats {
	byClass := map[string][]*tally{}
	for k, t := range s.selected(sel, window, now) {
		byClass[k.class] = append(byClass[k.class], t)
	}
	var rows []ClassStats
	for _, c := range WithExtra(classes, byClass) {
		rows = append(rows, classStats(c, byClass[c], now))
	}
	return rows
}

// StatsByTeamAndClass is the package's StatsByTeamAndClass over the
// selected tasks.
func (s *Snapshot) StatsByTeamAndClass(sel Selection, teams, classes []string, window time.Duration, now time.Time) []TeamClassStats {
	return teamClassStats(s.selected(sel, window, now), teams, classes, now)
}

// Ongoing are the figures of one team's tasks of one class that still run
// or wait, at a time: what a history of completed tasks lacks. Runs and
// Waits count the running tasks and the waiting ones (pending or preempted,
// active, never admitted), with their runs and waits so far; Samples counts
// those that count in ClassStats.Samples without a completed fact in the
// window (running tasks admitted before it, waiting tasks). LastAdmission
// is the latest admission of any of them the cluster still holds, running
// or finished (zero when none).
type Ongoing struct {
	Team, Class                 string
	Running, Pending, Preempted int
	Runs, Waits                 int
	RunSum, WaitSum             time.Duration
	LongestRun, LongestWait     time.Duration
	Samples                     int
	LastAdmission               time.Time
}

// Ongoing gives the selection's ongoing figures for a window ending at now,
// by team and class.
func (s *Snapshot) Ongoing(sel Selection, window time.Duration, now time.Time) []Ongoing {
	var out []Ongoing
	for k, t := range s.selected(sel, window, now) {
		out = append(out, Ongoing{Team: k.team, Class: k.class,
			Running: t.Running, Pending: t.Pending, Preempted: t.Preempted,
			Runs: t.ongoingRuns, Waits: t.ongoingWaits,
			RunSum: t.ongoingRun.sum(now), WaitSum: t.ongoingWait.sum(now),
			LongestRun: t.ongoingRun.longest(now), LongestWait: t.ongoingWait.longest(now),
			Samples: t.ongoingSamples, LastAdmission: t.lastAdmission})
	}
	slices.SortFunc(out, func(a, b Ongoing) int {
		if a.Team != b.Team {
			return strings.Compare(a.Team, b.Team)
		}
		return strings.Compare(a.Class, b.Class)
	})
	return out
}

// TeamNames are the teams that have tasks or a queue, sorted: the teams a
// filter offers. The result is shared: do not change it.
func (s *Snapshot) TeamNames() []string {
	s.teamsOnce.Do(func() {
		seen := map[string]bool{}
		for k := range s.tallies {
			if k.team != "" {
				seen[k.team] = true
			}
		}
		for _, u := range s.Teams {
			seen[u.Team] = true
		}
		s.teams = make([]string, 0, len(seen))
		for t := range seen {
			s.teams = append(s.teams, t)
		}
		sort.Strings(s.teams)
	})
	return s.teams
}

// teamClassTasks are one team's tasks of one class, with their tallies per
// window (kept while valid: see tally).
type teamClassTasks struct {
	key    teamAndClass
	tasks  *tree
	counts tally // the clock-free counts

	mu      sync.Mutex
	windows map[time.Duration]*tally
}

func (tc *teamClassTasks) tally(window time.Duration, now time.Time) *tally {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if t := tc.windows[window]; t != nil && t.validAt(now) {
		return t
	}
	t := &tally{at: now}
	tc.tasks.Ascend(func(f *TaskFacts) bool {
		t.addFacts(f, window)
		return true
	})
	if old := tc.windows[window]; old == nil || now.After(old.at) {
		tc.windows[window] = t
	}
	return t
}

// classOrder lists the policy's classes by weight, highest first, then any
// other priority class in the cluster by value: Kueue's
// WorkloadPriorityClasses, then the Kubernetes PriorityClasses tasks name
// (podClasses, by the priority Kueue gave their tasks).
func classOrder(p Policy, wpcs []*kueuev1beta2.WorkloadPriorityClass, podClasses map[string]int32) []string {
	type class struct {
		name  string
		value int64
	}
	seen := map[string]bool{}
	var cs []class
	for _, c := range p.Classes {
		seen[c.Name] = true
		cs = append(cs, class{c.Name, int64(c.Weight)})
	}
	for _, w := range wpcs {
		if !seen[w.Name] {
			seen[w.Name] = true
			cs = append(cs, class{w.Name, int64(w.Value)})
		}
	}
	for name, value := range podClasses {
		if !seen[name] {
			cs = append(cs, class{name, int64(value)})
		}
	}
	sort.SliceStable(cs, func(i, j int) bool {
		if cs[i].value != cs[j].value {
			return cs[i].value > cs[j].value
		}
		return cs[i].name < cs[j].name
	})
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.name
	}
	return out
}
