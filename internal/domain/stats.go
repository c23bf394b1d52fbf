// This file computes the Tasks dashboard statistics.

package domain

import (
	"maps"
	"slices"
	"time"
)

// ClassStats are the Tasks dashboard figures of one priority class.
//
// Running, Pending and Preempted count tasks now (deactivated tasks are not
// counted as pending). The averages cover a window:
//   - a task's wait counts once it was admitted in the window, or while it
//     is still waiting;
//   - a task's run counts once it finished in the window, or while it is
//     still running (tasks that finished without ever running are left out).
//
// AvgLongestRun (AvgLongestWait) is the average over teams of each team's
// longest run (wait) in the class within the window; teams without a run
// (wait) in the window are left out. On the dashboard: "Average longest run
// time: for each team, its longest run in this class during the window;
// averaged over the teams that ran tasks of this class."
type ClassStats struct {
	Class                         string
	Running, Pending, Preempted   int
	AvgRun, AvgWait               time.Duration
	LongestRun, LongestWait       time.Duration
	AvgLongestRun, AvgLongestWait time.Duration
	// Samples is how many tasks count in the averages (run, wait or both);
	// RunSamples and WaitSamples count each average's tasks.
	Samples, RunSamples, WaitSamples int
}

// TeamClassStats is one team's row of the team × class breakdown.
type TeamClassStats struct {
	Team    string // empty for tasks outside team namespaces
	Classes []ClassStats
}

// StatsByClass gives one row per class, in the order of classes (highest
// priority first), every class present even without tasks; classes that
// tasks name but classes lacks follow, sorted by name. Teams are told apart
// by Task.Team (tasks outside team namespaces form one group).
func StatsByClass(tasks []Task, classes []string, windowStart, now time.Time) []ClassStats {
	tallies := tallyTasks(tasks, windowStart, now)
	byClass := map[string][]*tally{}
	for k, t := range tallies {
		byClass[k.class] = append(byClass[k.class], t)
	}
	var rows []ClassStats
	for _, c := range WithExtra(classes, byClass) {
		rows = append(rows, classStats(c, byClass[c], now))
	}
	return rows
}

// StatsByTeamAndClass gives the same figures per team: one row per team in
// the order of teams, then teams that only tasks name (sorted; tasks outside
// team namespaces last, under ""), each with every class as StatsByClass
// lists them. Within one team, AvgLongest* equal Longest*.
func StatsByTeamAndClass(tasks []Task, teams, classes []string, windowStart, now time.Time) []TeamClassStats {
	return teamClassStats(tallyTasks(tasks, windowStart, now), teams, classes, now)
}

// teamAndClass names one tally: one team's tasks of one class.
type teamAndClass struct{ team, class string }

func tallyTasks(tasks []Task, windowStart, now time.Time) map[teamAndClass]*tally {
	tallies := map[teamAndClass]*tally{}
	for i := range tasks {
		t := &tasks[i]
		k := teamAndClass{t.Team, t.Class}
		if tallies[k] == nil {
			tallies[k] = &tally{}
		}
		tallies[k].addTask(t, windowStart, now)
	}
	return tallies
}

func teamClassStats(tallies map[teamAndClass]*tally, teams, classes []string, now time.Time) []TeamClassStats {
	byTeam := map[string]bool{}
	byClass := map[string]bool{}
	for k := range tallies {
		byTeam[k.team], byClass[k.class] = true, true
	}
	allClasses := WithExtra(classes, byClass)
	order := WithExtra(teams, byTeam)
	if i := slices.Index(order, ""); i >= 0 && !slices.Contains(teams, "") {
		order = append(slices.Delete(order, i, i+1), "")
	}
	rows := make([]TeamClassStats, 0, len(order))
	for _, team := range order {
		row := TeamClassStats{Team: team, Classes: make([]ClassStats, 0, len(allClasses))}
		for _, c := range allClasses {
			var ts []*tally
			if t := tallies[teamAndClass{team, c}]; t != nil {
				ts = append(ts, t)
			}
			row.Classes = append(row.Classes, classStats(c, ts, now))
		}
		rows = append(rows, row)
	}
	return rows
}

// WithExtra is the order of a table's rows: names, then the keys of m it
// lacks, sorted (a class or team with tasks but not in the list still shows).
func WithExtra[T any](names []string, m map[string]T) []string {
	out := slices.Clone(names)
	var extra []string
	for k := range m {
		if !slices.Contains(names, k) {
			extra = append(extra, k)
		}
	}
	slices.Sort(extra)
	return append(out, extra...)
}

func inWindow(at, windowStart, now time.Time) bool {
	return !at.IsZero() && !at.Before(windowStart) && !at.After(now)
}

// countsRun and countsWait are the window rules of ClassStats.
func countsRun(state TaskState, admittedAt, finishedAt time.Time, run time.Duration, windowStart, now time.Time) bool {
	switch state {
	case TaskAdmitted:
		return true
	case TaskFinished:
		return inWindow(finishedAt, windowStart, now) && (!admittedAt.IsZero() || run > 0)
	}
	return false
}

func countsWait(state TaskState, deactivated bool, admittedAt, windowStart, now time.Time) bool {
	if inWindow(admittedAt, windowStart, now) {
		return true
	}
	return (state == TaskPending || state == TaskPreempted) && !deactivated && admittedAt.IsZero()
}

// tally sums the figures of ClassStats over a set of tasks (one team's tasks
// of one class). Waits and runs of tasks that still wait or run grow with
// the clock, so a tally built at one time gives exact figures at any later
// time before validBefore: until then no task enters or leaves the window
// and none starts to grow.
type tally struct {
	Running, Pending, Preempted int
	// PendingDemand is what pending (active) and preempted tasks ask for
	// (demand).
	PendingDemand Amount
	// PendingPartitions are the MIG partitions they ask for, by profile
	// (nil for none; a profile's entry stays, at 0, once counted).
	PendingPartitions                map[string]int64
	Samples, RunSamples, WaitSamples int
	run, wait                        durations
	at, validBefore                  time.Time // validBefore zero: valid for ever

	// What still runs or waits (see Ongoing).
	ongoingRuns, ongoingWaits, ongoingSamples int
	ongoingRun, ongoingWait                   durations
	lastAdmission                             time.Time // the latest AdmittedAt
}

// frozen is a copy of t that later counting in t does not change.
func (t tally) frozen() tally {
	t.PendingPartitions = maps.Clone(t.PendingPartitions)
	return t
}

// demand is what a waiting task asks for: its requests, and the GPUs it
// counts (those its reservation holds, while an eviction is under way).
func demand(requests Amount, gpus int64) Amount {
	requests.GPUs = gpus
	return requests
}

// count counts a task in (sign 1) or out (sign −1); asks is its demand.
func (t *tally) count(state TaskState, deactivated bool, asks Amount, partitions string, sign int) {
	switch {
	case state == TaskAdmitted:
		t.Running += sign
		return
	case state == TaskPreempted && !deactivated:
		t.Preempted += sign
	case state == TaskPending && !deactivated:
		t.Pending += sign
	default:
		return
	}
	t.PendingDemand.addTimes(asks, int64(sign))
	for profile, n := range PartitionCounts(partitions) {
		if t.PendingPartitions == nil {
			t.PendingPartitions = map[string]int64{}
		}
		t.PendingPartitions[profile] += int64(sign) * n
	}
}

// addTask counts a task as seen at now (its Wait and Run fixed).
func (t *tally) addTask(task *Task, windowStart, now time.Time) {
	t.count(task.State, task.Deactivated, demand(task.Requests, task.GPUs), task.Partitions, 1)
	run := countsRun(task.State, task.AdmittedAt, task.FinishedAt, task.Run, windowStart, now)
	wait := countsWait(task.State, task.Deactivated, task.AdmittedAt, windowStart, now)
	if run {
		t.RunSamples++
		t.run.addFixed(task.Run)
	}
	if wait {
		t.WaitSamples++
		t.wait.addFixed(task.Wait)
	}
	if run || wait {
		t.Samples++
	}
}

// addFacts counts a task for a window ending at t.at or later.
func (t *tally) addFacts(f *TaskFacts, window time.Duration) {
	at := t.at
	start := at.Add(-window)
	t.count(f.State, f.Deactivated, demand(f.Requests, f.GPUs), f.Partitions, 1)
	if f.AdmittedAt.After(t.lastAdmission) {
		t.lastAdmission = f.AdmittedAt
	}
	run := countsRun(f.State, f.AdmittedAt, f.FinishedAt, f.RunAt(at), start, at)
	wait := countsWait(f.State, f.Deactivated, f.AdmittedAt, start, at)
	if run {
		t.RunSamples++
		t.run.addRun(f, at)
	}
	if wait {
		t.WaitSamples++
		t.wait.addWait(f, at)
	}
	switch {
	case f.State == TaskAdmitted:
		t.ongoingRuns++
		t.ongoingRun.addRun(f, at)
		if !inWindow(f.AdmittedAt, start, at) {
			t.ongoingSamples++ // else its wait is a completed fact
		}
	case (f.State == TaskPending || f.State == TaskPreempted) && !f.Deactivated && f.AdmittedAt.IsZero():
		t.ongoingWaits++
		t.ongoingWait.addWait(f, at)
		t.ongoingSamples++
	}
	if run || wait {
		t.Samples++
	}
	// What changes the tally later: a time passing into the window or out
	// of it, or a wait or run starting to grow.
	for _, c := range [...]time.Time{f.AdmittedAt, f.FinishedAt, f.WaitStart} {
		if c.IsZero() {
			continue
		}
		for _, when := range [...]time.Time{c, c.Add(window + 1)} {
			if when.After(at) && (t.validBefore.IsZero() || when.Before(t.validBefore)) {
				t.validBefore = when
			}
		}
	}
}

// validAt reports whether the tally gives exact figures at now.
func (t *tally) validAt(now time.Time) bool {
	return !now.Before(t.at) && (t.validBefore.IsZero() || now.Before(t.validBefore))
}

// growsAt reports whether a duration since since grows at the clock from at
// on: since is a real time, not after at.
func growsAt(since, at time.Time) bool { return !since.IsZero() && !since.After(at) }

// durations sums durations, some fixed, some growing with the clock (now −
// since + plus): the sum and the longest are exact at any now. Sums wrap
// around as time.Duration sums do, so they equal the plain sum.
type durations struct {
	fixed, longestFixed time.Duration
	growing             int64 // how many terms grow
	offsets             int64 // Σ (plus − since) over growing terms, in ns
	longestOffset       int64
}

// addRun adds f's run as of at.
func (d *durations) addRun(f *TaskFacts, at time.Time) {
	if f.admitted && !f.finished && growsAt(f.AdmittedAt, at) {
		d.addGrowing(f.AdmittedAt, f.pastRun)
	} else {
		d.addFixed(f.RunAt(at))
	}
}

// addWait adds f's wait as of at.
func (d *durations) addWait(f *TaskFacts, at time.Time) {
	if !f.admitted && !f.finished && growsAt(f.WaitStart, at) {
		d.addGrowing(f.WaitStart, 0)
	} else {
		d.addFixed(f.WaitAt(at))
	}
}

func (d *durations) addFixed(v time.Duration) {
	d.fixed += v
	d.longestFixed = max(d.longestFixed, v)
}

func (d *durations) addGrowing(since time.Time, plus time.Duration) {
	off := int64(plus) - since.UnixNano()
	if d.growing == 0 || off > d.longestOffset {
		d.longestOffset = off
	}
	d.growing++
	d.offsets += off
}

func (d durations) sum(now time.Time) time.Duration {
	return d.fixed + time.Duration(d.growing*now.UnixNano()+d.offsets)
}

func (d durations) longest(now time.Time) time.Duration {
	if d.growing == 0 {
		return d.longestFixed
	}
	return max(d.longestFixed, time.Duration(now.UnixNano()+d.longestOffset))
}

// classStats merges the tallies of one class (one per team) at now.
func classStats(class string, tallies []*tally, now time.Time) ClassStats {
	s := ClassStats{Class: class}
	var runSum, waitSum, longestRuns, longestWaits time.Duration
	var runTeams, waitTeams int
	for _, t := range tallies {
		s.Running += t.Running
		s.Pending += t.Pending
		s.Preempted += t.Preempted
		s.Samples += t.Samples
		s.RunSamples += t.RunSamples
		s.WaitSamples += t.WaitSamples
		runSum += t.run.sum(now)
		waitSum += t.wait.sum(now)
		if t.RunSamples > 0 {
			l := t.run.longest(now)
			s.LongestRun = max(s.LongestRun, l)
			longestRuns += l
			runTeams++
		}
		if t.WaitSamples > 0 {
			l := t.wait.longest(now)
			s.LongestWait = max(s.LongestWait, l)
			longestWaits += l
			waitTeams++
		}
	}
	s.AvgRun = average(runSum, s.RunSamples)
	s.AvgWait = average(waitSum, s.WaitSamples)
	s.AvgLongestRun = average(longestRuns, runTeams)
	s.AvgLongestWait = average(longestWaits, waitTeams)
	return s
}

func average(sum time.Duration, n int) time.Duration {
	if n == 0 {
		return 0
	}
	return sum / time.Duration(n)
}
