// This file lists tasks: filtered, searched and sorted, a page at a time.

package domain

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"sync"
)

// Task list states beyond the TaskStates.
const (
	ListUnfinished = ""       // every task not finished
	ListQueued     = "Queued" // pending or preempted
	ListAll        = "all"
)

// TaskSorts are the orders the task list offers, the first the default:
// what waits first (by queue position), then what runs (newest first), then
// what finished (newest first).
var TaskSorts = []string{"queue", "name", "team", "class", "state", "gpus", "waited", "ran", "created"}

// TaskQuery is a view of the task list.
type TaskQuery struct {
	Selection
	State     string // ListUnfinished, ListQueued, ListAll or a TaskState
	Borrowing bool   // only tasks that borrow
	Search    string // part of the task's name (its owner's or its Workload's) or namespace
	Sort      string // one of TaskSorts; "" is the first
	Desc      bool   // the sort reversed
}

// Tasks are the tasks q selects, in its order. The result is shared: do not
// change it. Each query is computed once per snapshot.
func (s *Snapshot) Tasks(q TaskQuery) []*TaskFacts {
	return s.lists.get(q, func() []*TaskFacts { return s.list(q) })
}

func (s *Snapshot) list(q TaskQuery) []*TaskFacts {
	keep := s.keeper(q)
	var out []*TaskFacts
	if q.inQueueOrder() {
		out = s.inQueueOrder(keep)
	} else {
		out = s.sorted(q, q.picker(), keep)
	}
	if q.Desc {
		slices.Reverse(out)
	}
	return out
}

// keeper tells the tasks q selects.
func (s *Snapshot) keeper(q TaskQuery) func(*TaskFacts) bool {
	search := strings.ToLower(strings.TrimSpace(q.Search))
	picks := q.picker()
	return func(f *TaskFacts) bool {
		return picks(teamAndClass{f.Team, f.Class}) && q.matches(f) && (!q.Borrowing || s.Borrowing(f)) &&
			(search == "" || f.Named().Matches(search) || strings.Contains(f.Namespace, search))
	}
}

// inQueueOrder: q lists in the first order, merged from the snapshot's
// ordered sets.
func (q TaskQuery) inQueueOrder() bool {
	return (q.Sort == "" || q.Sort == TaskSorts[0]) && q.Teams == nil
}

// maxPrefix is how far into the first order a page is listed without
// listing every task.
const maxPrefix = 2_000

// TasksPage is the tasks q selects from the from-th to before the to-th,
// in q's order, and how many q selects. A page near the top of the first
// order is merged from the queues only as far as the page, and the others
// counted: the live Tasks view shows its first page again on every change
// of 50 000 tasks.
func (s *Snapshot) TasksPage(q TaskQuery, from, to int) (page []*TaskFacts, total int) {
	to = max(to, 0)
	from = min(max(from, 0), to)
	if !q.inQueueOrder() || q.Desc || to > maxPrefix {
		all := s.Tasks(q)
		from, to = min(from, len(all)), min(to, len(all))
		return all[from:to], len(all)
	}
	keep := s.keeper(q)
	count := func(f *TaskFacts) bool {
		if keep(f) {
			total++
		}
		return true
	}
	counted, known := s.countOf(q)
	if !known {
		for _, qu := range s.queues {
			qu.tasks.Ascend(count)
		}
	}
	prefix := s.queuedPrefix(keep, to)
	for _, set := range []*tree{s.unqueued, s.running, s.finished} {
		if set == nil || len(prefix) >= to {
			continue
		}
		set.Ascend(func(f *TaskFacts) bool {
			if keep(f) {
				prefix = append(prefix, f)
			}
			return len(prefix) < to
		})
	}
	if known {
		total = counted
	} else {
		for _, set := range []*tree{s.unqueued, s.running, s.finished} {
			if set != nil {
				set.Ascend(count)
			}
		}
	}
	from = min(from, len(prefix))
	return prefix[from:], total
}

// countOf is how many tasks q selects, from the sizes of the ordered sets,
// when q selects by state alone (known is false otherwise): the unfinished
// wait in a queue or in none, or run.
func (s *Snapshot) countOf(q TaskQuery) (n int, known bool) {
	if q.Search != "" || q.Borrowing || q.Teams != nil || q.Class != "" || s.running == nil {
		return 0, false
	}
	n = s.unqueued.Len() + s.running.Len()
	for _, qu := range s.queues {
		n += qu.tasks.Len()
	}
	switch q.State {
	case ListUnfinished:
		return n, true
	case ListAll:
		return n + s.finished.Len(), true
	}
	return 0, false
}

// queuedPrefix is the first limit waiting tasks keep selects, in the first
// order (inQueueOrder's), taking from each queue only its first tasks:
// positions are merged in turn, so the first limit come from the first
// limit positions, unless keep leaves some out (then more are taken).
func (s *Snapshot) queuedPrefix(keep func(*TaskFacts) bool, limit int) []*TaskFacts {
	out := make([]*TaskFacts, 0, limit)
	for depth := max(limit, 1); ; depth *= 2 {
		out = out[:0]
		deeper := false // a queue has tasks past depth
		var heads [][]*TaskFacts
		for _, q := range s.queues {
			var tasks []*TaskFacts
			q.tasks.Ascend(func(f *TaskFacts) bool {
				if len(tasks) == depth {
					deeper = true
					return false
				}
				tasks = append(tasks, f)
				return true
			})
			if len(tasks) > 0 {
				heads = append(heads, tasks)
			}
		}
		var at []*TaskFacts
		for position := 0; position < depth && len(out) < limit; position++ {
			at = at[:0]
			for _, tasks := range heads {
				if position < len(tasks) {
					at = append(at, tasks[position])
				}
			}
			if len(at) == 0 {
				break
			}
			slices.SortFunc(at, compareNames)
			for _, f := range at {
				if len(out) < limit && keep(f) {
					out = append(out, f)
				}
			}
		}
		if len(out) >= limit || !deeper {
			return out
		}
	}
}

// inQueueOrder lists the whole cluster's tasks in the list's first order
// from the snapshot's ordered sets, without sorting: what waits, by queue
// position (queues merged, ties by namespace and name), then what waits in
// no queue, then what runs (newest admission first), then what finished
// (newest first).
func (s *Snapshot) inQueueOrder(keep func(*TaskFacts) bool) []*TaskFacts {
	type cursor struct{ tasks []*TaskFacts } // one queue's tasks, from the next position on
	var queued []cursor
	for _, q := range s.queues {
		var c cursor
		q.tasks.Ascend(func(f *TaskFacts) bool {
			c.tasks = append(c.tasks, f)
			return true
		})
		queued = append(queued, c)
	}
	var out []*TaskFacts
	// Position by position: the tasks at that position in every queue,
	// by namespace and name.
	var at []*TaskFacts
	for len(queued) > 0 {
		at = at[:0]
		next := queued[:0]
		for _, c := range queued {
			at = append(at, c.tasks[0])
			if c.tasks = c.tasks[1:]; len(c.tasks) > 0 {
				next = append(next, c)
			}
		}
		queued = next
		slices.SortFunc(at, compareNames)
		for _, f := range at {
			if keep(f) {
				out = append(out, f)
			}
		}
	}
	for _, set := range []*tree{s.unqueued, s.running, s.finished} {
		if set == nil { // the zero Snapshot
			continue
		}
		set.Ascend(func(f *TaskFacts) bool {
			if keep(f) {
				out = append(out, f)
			}
			return true
		})
	}
	return out
}

// sorted lists the selected tasks in q's order.
func (s *Snapshot) sorted(q TaskQuery, picks func(teamAndClass) bool, keep func(*TaskFacts) bool) []*TaskFacts {
	// Each task's sort keys are computed once, not in every comparison.
	type entry struct {
		f        *TaskFacts
		rank     int   // what waits, then what runs, then what finished
		position int   // in its queue; unknown last
		recent   int64 // admitted (running) or finished at, newest first
		key      int64 // the chosen sort's key, when it is a number
	}
	classRank := make(map[string]int, len(s.Classes))
	for i, c := range s.Classes {
		classRank[c] = i
	}
	var entries []entry
	for k, tc := range s.tallies {
		if !picks(k) {
			continue
		}
		tc.tasks.Ascend(func(f *TaskFacts) bool {
			if !keep(f) {
				return true
			}
			e := entry{f: f, rank: stateRank(f.State), position: math.MaxInt}
			switch f.State {
			case TaskPending, TaskPreempted:
				if p := s.Position(f); p > 0 {
					e.position = p
				}
			case TaskAdmitted:
				e.recent = -f.AdmittedAt.UnixNano()
			case TaskFinished:
				e.recent = -f.FinishedAt.UnixNano()
			}
			switch q.Sort {
			case "class":
				e.key = int64(classRank[f.Class])
			case "state":
				e.key = int64(e.rank)
			case "gpus":
				e.key = -f.GPUs
			case "waited":
				e.key = -int64(f.WaitAt(s.Taken))
			case "ran":
				e.key = -int64(f.RunAt(s.Taken))
			case "created":
				e.key = -f.Created.UnixNano()
			}
			entries = append(entries, e)
			return true
		})
	}
	queueFirst := func(a, b entry) int {
		switch {
		case a.rank != b.rank:
			return cmp.Compare(a.rank, b.rank)
		case a.position != b.position:
			return cmp.Compare(a.position, b.position)
		case a.recent != b.recent:
			return cmp.Compare(a.recent, b.recent)
		}
		return compareNames(a.f, b.f)
	}
	var by func(a, b entry) int
	switch q.Sort {
	case "name":
		by = func(a, b entry) int { return strings.Compare(a.f.Name, b.f.Name) }
	case "team":
		by = func(a, b entry) int { return strings.Compare(a.f.Team, b.f.Team) }
	case "class", "state", "gpus", "waited", "ran", "created":
		by = func(a, b entry) int { return cmp.Compare(a.key, b.key) }
	}
	slices.SortFunc(entries, func(a, b entry) int {
		if by != nil {
			if c := by(a, b); c != 0 {
				return c
			}
		}
		return queueFirst(a, b)
	})
	out := make([]*TaskFacts, len(entries))
	for i, e := range entries {
		out[i] = e.f
	}
	return out
}

func stateRank(s TaskState) int {
	switch s {
	case TaskPending, TaskPreempted:
		return 0
	case TaskAdmitted:
		return 1
	}
	return 2
}

// matches applies the state filter.
func (q TaskQuery) matches(f *TaskFacts) bool {
	switch q.State {
	case ListAll:
		return true
	case ListUnfinished:
		return f.State != TaskFinished
	case ListQueued:
		return f.State == TaskPending || f.State == TaskPreempted
	}
	return string(f.State) == q.State
}

// listCache keeps a snapshot's task lists: pages and live updates of the
// same view share one.
type listCache struct {
	mu      sync.Mutex
	entries map[string]*listEntry
}

type listEntry struct {
	once  sync.Once
	tasks []*TaskFacts
}

// maxCachedLists bounds what one snapshot keeps; past it, lists start over.
const maxCachedLists = 64

func newListCache() *listCache { return &listCache{entries: map[string]*listEntry{}} }

func (c *listCache) get(q TaskQuery, compute func() []*TaskFacts) []*TaskFacts {
	key := strings.Join(append([]string{q.Class, q.State, q.Search, q.Sort, boolKey(q.Desc), boolKey(q.Borrowing),
		boolKey(q.Teams != nil)}, q.Teams...), "\x00")
	c.mu.Lock()
	e := c.entries[key]
	if e == nil {
		if len(c.entries) >= maxCachedLists {
			clear(c.entries)
		}
		e = &listEntry{}
		c.entries[key] = e
	}
	c.mu.Unlock()
	e.once.Do(func() { e.tasks = compute() })
	return e.tasks
}

func boolKey(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
