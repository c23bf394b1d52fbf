package taskhistory

import (
	"cmp"
	"context"
	"fmt"
	"math/bits"
	"slices"
	"time"

	"github.com/openquota/console/internal/domain"
)

// Durations are the count, sum and longest of a set of durations. The sum
// is exact, and does not overflow where an int64 of nanoseconds would (a
// million tasks of ten hours).
type Durations struct {
	N   int64
	Max time.Duration
	// The sum is sumMS milliseconds plus sumNS nanoseconds, 0 ≤ sumNS < 1e6.
	sumMS, sumNS int64
}

// Add counts one duration (negative ones count as zero, as in domain.FactsOf).
func (d *Durations) Add(x time.Duration) {
	x = max(x, 0)
	d.N++
	d.Max = max(d.Max, x)
	d.addSum(x.Milliseconds(), int64(x%time.Millisecond))
}

// Merge adds the durations o counted.
func (d *Durations) Merge(o Durations) {
	d.N += o.N
	d.Max = max(d.Max, o.Max)
	d.addSum(o.sumMS, o.sumNS)
}

func (d *Durations) addSum(ms, ns int64) {
	d.sumMS += ms
	d.sumNS += ns
	if d.sumNS >= int64(time.Millisecond) {
		d.sumMS += d.sumNS / int64(time.Millisecond)
		d.sumNS %= int64(time.Millisecond)
	}
}

// DurationsOf are n durations of the given sum and longest (as the live
// read model's Ongoing gives them).
func DurationsOf(n int64, sum, longest time.Duration) Durations {
	sum = max(sum, 0)
	return Durations{N: n, Max: max(longest, 0), sumMS: int64(sum / time.Millisecond), sumNS: int64(sum % time.Millisecond)}
}

// Avg is the average, rounded down to the nanosecond like kueue's; 0 when
// nothing was counted.
func (d Durations) Avg() time.Duration {
	if d.N <= 0 || d.sumMS < 0 {
		return 0
	}
	// (sumMS·1e6 + sumNS) / N in 128 bits.
	hi, lo := bits.Mul64(uint64(d.sumMS), uint64(time.Millisecond))
	lo, carry := bits.Add64(lo, uint64(d.sumNS), 0)
	hi += carry
	if hi >= uint64(d.N) {
		return time.Duration(1<<63 - 1)
	}
	q, _ := bits.Div64(hi, lo, uint64(d.N))
	return time.Duration(q)
}

// GroupStats are one team's completed facts in one priority class.
type GroupStats struct {
	// Team is empty for tasks outside team namespaces; Class is empty for
	// tasks without a priority class.
	Team, Class string
	// Wait: tasks admitted in the window, each its wait up to that
	// admission. Run: tasks that finished in the window having run.
	Wait, Run Durations
	// Samples counts the tasks with a wait or a run (or both) in the window.
	Samples int64
}

// WindowStats are the completed facts of a window, per team and class.
type WindowStats struct {
	Window Window
	Groups []GroupStats // by team, then class
	// Gaps are the parts of the window without a record (see Store.Gaps).
	Gaps []Period
}

type teamClass struct{ team, class string }

// TaskStats returns the completed facts of w per team and class (see the
// package doc). It reads the daily rollup for the whole days of w and the
// task rows for the hours at its edges, so it costs about the same for any
// window.
func (s *Store) TaskStats(ctx context.Context, w Window) (*WindowStats, error) {
	now := s.clock()
	out := &WindowStats{Window: w}
	gaps, err := s.gaps(ctx, s.db, w, now)
	if err != nil {
		return nil, fmt.Errorf("task history store %s: statistics: %w", s.name, err)
	}
	out.Gaps = gaps
	from, to := ceilMS(w.From), ceilMS(w.To)
	if horizon := ms(now.Add(-s.retention)); from < horizon {
		from = horizon
	}
	groups := map[teamClass]*GroupStats{}
	get := func(team, class string) *GroupStats {
		k := teamClass{team, class}
		g := groups[k]
		if g == nil {
			g = &GroupStats{Team: team, Class: class}
			groups[k] = g
		}
		return g
	}
	if from < to {
		if err := s.windowFacts(ctx, span{from, to}, get); err != nil {
			return nil, fmt.Errorf("task history store %s: statistics: %w", s.name, err)
		}
	}
	for _, g := range groups {
		out.Groups = append(out.Groups, *g)
	}
	slices.SortFunc(out.Groups, func(a, b GroupStats) int {
		return cmp.Or(cmp.Compare(a.Team, b.Team), cmp.Compare(a.Class, b.Class))
	})
	return out, nil
}

// durations rebuilds Durations from stored milliseconds.
func durations(n, sumMS, maxMS int64) Durations {
	return Durations{N: n, sumMS: sumMS, Max: time.Duration(maxMS) * time.Millisecond}
}

// windowFacts adds up w's facts: whole weeks, days and hours from the
// rollup (coarsest first), the minutes left at its edges from the task rows,
// and the spanning runs for Samples.
func (s *Store) windowFacts(ctx context.Context, w span, get func(team, class string) *GroupStats) error {
	add := func(k teamClass, f facts) {
		g := get(k.team, k.class)
		g.Wait.Merge(durations(f.waitN, f.waitSum, f.waitMax))
		g.Run.Merge(durations(f.runN, f.runSum, f.runMax))
		g.Samples += f.waitN + f.runUnadmitted
	}
	var facts func(e span, level int) error
	facts = func(e span, level int) error {
		if e.from >= e.to {
			return nil
		}
		if level < 0 {
			return s.rawStats(ctx, e, get)
		}
		length := rollupSpans[level]
		b0, b1 := ceilTo(e.from, length), floorTo(e.to, length)
		if b0 >= b1 {
			return facts(e, level-1)
		}
		if err := s.readRollup(ctx, length, b0, b1, add); err != nil {
			return err
		}
		if err := facts(span{e.from, b0}, level-1); err != nil {
			return err
		}
		return facts(span{b1, e.to}, level-1)
	}
	if err := facts(w, len(rollupSpans)-1); err != nil {
		return err
	}
	return s.spanningRuns(ctx, w, get)
}

func (s *Store) rawStats(ctx context.Context, e span, get func(team, class string) *GroupStats) error {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT team, class, COUNT(*), CAST(COALESCE(SUM(wait_ms), 0) AS BIGINT), COALESCE(MAX(wait_ms), 0)
		FROM tasks WHERE admitted_ms >= ? AND admitted_ms < ? GROUP BY team, class`), e.from, e.to)
	if err != nil {
		return err
	}
	for rows.Next() {
		var team, class string
		var n, sum, mx int64
		if err := rows.Scan(&team, &class, &n, &sum, &mx); err != nil {
			rows.Close()
			return err
		}
		g := get(team, class)
		g.Wait.Merge(durations(n, sum, mx))
		g.Samples += n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	rows, err = s.db.QueryContext(ctx, s.q(`SELECT team, class, COUNT(*), CAST(COALESCE(SUM(run_ms), 0) AS BIGINT), COALESCE(MAX(run_ms), 0),
		CAST(COALESCE(SUM(CASE WHEN admitted_ms IS NULL THEN 1 ELSE 0 END), 0) AS BIGINT)
		FROM tasks WHERE finished_ms >= ? AND finished_ms < ? AND run_ms IS NOT NULL GROUP BY team, class`), e.from, e.to)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var team, class string
		var n, sum, mx, unadmitted int64
		if err := rows.Scan(&team, &class, &n, &sum, &mx, &unadmitted); err != nil {
			return err
		}
		g := get(team, class)
		g.Run.Merge(durations(n, sum, mx))
		g.Samples += unadmitted
	}
	return rows.Err()
}

// spanningRuns counts, for Samples, the tasks with a run in w whose current
// admission is outside w (admitted before it, or oddly after): they are not
// among w's waits. The span classes bound how far back to look for each.
func (s *Store) spanningRuns(ctx context.Context, w span, get func(team, class string) *GroupStats) error {
	query := `SELECT team, class, COUNT(*) FROM (`
	var args []any
	for c, b := range spanBounds {
		query += `SELECT team, class FROM tasks WHERE span_class = ? AND admitted_ms >= ? AND admitted_ms < ? AND finished_ms >= ? AND finished_ms < ? UNION ALL `
		args = append(args, c+1, w.from-b.Milliseconds(), w.from, w.from, w.to)
	}
	query += `SELECT team, class FROM tasks WHERE span_class = ? AND admitted_ms < ? AND finished_ms >= ? AND finished_ms < ? UNION ALL
		SELECT team, class FROM tasks WHERE span_class = 0 AND finished_ms >= ? AND finished_ms < ? AND (admitted_ms < ? OR admitted_ms >= ?)
		) spanning GROUP BY team, class`
	args = append(args, len(spanBounds)+1, w.from, w.from, w.to, w.from, w.to, w.from, w.to)
	rows, err := s.db.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var team, class string
		var n int64
		if err := rows.Scan(&team, &class, &n); err != nil {
			return err
		}
		get(team, class).Samples += n
	}
	return rows.Err()
}

// LiveWindow is the window of the Tasks page's statistics: from windowStart
// up to and including now.
func LiveWindow(windowStart, now time.Time) Window {
	return Window{From: windowStart, To: time.UnixMilli(now.UnixMilli() + 1)}
}

// ceilMS is t in Unix milliseconds, rounded up: recorded times are whole
// milliseconds, so t ≤ x exactly when ceilMS(t) ≤ ms(x).
func ceilMS(t time.Time) int64 {
	v := t.UnixMilli()
	if time.UnixMilli(v).Before(t) {
		v++
	}
	return v
}

// ClassStats merges a window's completed facts with what the live read
// model says still runs or waits (domain.Snapshot.Ongoing, for the same
// window) into the Tasks page's per-class figures, by the rule in the
// package doc: for the same tasks, the result equals domain.StatsByClass
// on the live tasks and the history's together, except that teams and
// classes named only by tasks without a fact in the window get no row of
// their own. hist should cover the window up to the live snapshot's time
// (LiveWindow); lowestClass is the class of recorded tasks without one.
// Without history (the store unavailable), a page uses the snapshot's
// StatsByClass alone, as before.
func ClassStats(hist *WindowStats, live []domain.Ongoing, classes []string, lowestClass string) []domain.ClassStats {
	m := merge(hist, live, lowestClass)
	var rows []domain.ClassStats
	for _, c := range m.classOrder(classes) {
		rows = append(rows, m.classStats(c, func(string) bool { return true }))
	}
	return rows
}

// TeamClassStats is ClassStats per team, in the order and with the rows of
// domain.StatsByTeamAndClass.
func TeamClassStats(hist *WindowStats, live []domain.Ongoing, teams, classes []string, lowestClass string) []domain.TeamClassStats {
	m := merge(hist, live, lowestClass)
	allClasses := m.classOrder(classes)
	order := domain.WithExtra(teams, m.teams)
	if i := slices.Index(order, ""); i >= 0 && !slices.Contains(teams, "") {
		order = append(slices.Delete(order, i, i+1), "")
	}
	rows := make([]domain.TeamClassStats, 0, len(order))
	for _, team := range order {
		row := domain.TeamClassStats{Team: team, Classes: make([]domain.ClassStats, 0, len(allClasses))}
		for _, c := range allClasses {
			row.Classes = append(row.Classes, m.classStats(c, func(t string) bool { return t == team }))
		}
		rows = append(rows, row)
	}
	return rows
}

// merged holds the combined figures per team and class.
type merged struct {
	groups  map[teamClass]*mergedGroup
	teams   map[string]bool
	classes map[string]bool
}

type mergedGroup struct {
	wait, run                   Durations
	samples                     int64
	running, pending, preempted int
}

func merge(hist *WindowStats, live []domain.Ongoing, lowestClass string) *merged {
	m := &merged{groups: map[teamClass]*mergedGroup{}, teams: map[string]bool{}, classes: map[string]bool{}}
	get := func(team, class string) *mergedGroup {
		k := teamClass{team, class}
		g := m.groups[k]
		if g == nil {
			g = &mergedGroup{}
			m.groups[k] = g
			m.teams[team], m.classes[class] = true, true
		}
		return g
	}
	if hist != nil {
		for _, h := range hist.Groups {
			class := h.Class
			if class == "" {
				class = lowestClass
			}
			g := get(h.Team, class)
			g.wait.Merge(h.Wait)
			g.run.Merge(h.Run)
			g.samples += h.Samples
		}
	}
	for _, o := range live {
		g := get(o.Team, o.Class)
		g.running += o.Running
		g.pending += o.Pending
		g.preempted += o.Preempted
		g.run.Merge(DurationsOf(int64(o.Runs), o.RunSum, o.LongestRun))
		g.wait.Merge(DurationsOf(int64(o.Waits), o.WaitSum, o.LongestWait))
		g.samples += int64(o.Samples)
	}
	return m
}

// classOrder is kueue's: the given classes, then the others, sorted.
func (m *merged) classOrder(classes []string) []string { return domain.WithExtra(classes, m.classes) }

func (m *merged) classStats(class string, teamOK func(string) bool) domain.ClassStats {
	s := domain.ClassStats{Class: class}
	var run, wait, longestRuns, longestWaits Durations
	for k, g := range m.groups {
		if k.class != class || !teamOK(k.team) {
			continue
		}
		s.Running += g.running
		s.Pending += g.pending
		s.Preempted += g.preempted
		run.Merge(g.run)
		wait.Merge(g.wait)
		s.Samples += int(g.samples)
		if g.run.N > 0 {
			longestRuns.Add(g.run.Max)
		}
		if g.wait.N > 0 {
			longestWaits.Add(g.wait.Max)
		}
	}
	s.RunSamples, s.WaitSamples = int(run.N), int(wait.N)
	s.AvgRun, s.AvgWait = run.Avg(), wait.Avg()
	s.LongestRun, s.LongestWait = run.Max, wait.Max
	s.AvgLongestRun, s.AvgLongestWait = longestRuns.Avg(), longestWaits.Avg()
	return s
}
