// This file computes the Tasks dashboard statistics.

package domain

import (
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
	// Pointers, not copies: a Task is large and there may be 50 000 of them.
	byClass := map[string][]*Task{}
	for i := range tasks {
		byClass[tasks[i].Class] = append(byClass[tasks[i].Class], &tasks[i])
	}
	var rows []ClassStats
	for _, c := range withExtra(classes, byClass) {
		rows = append(rows, classStats(c, byClass[c], windowStart, now))
	}
	return rows
}

// StatsByTeamAndClass gives the same figures per team: one row per team in
// the order of teams, then teams that only tasks name (sorted; tasks outside
// team namespaces last, under ""), each with every class as StatsByClass
// lists them. Within one team, AvgLongest* equal Longest*.
func StatsByTeamAndClass(tasks []Task, teams, classes []string, windowStart, now time.Time) []TeamClassStats {
	type teamClass struct{ team, class string }
	groups := map[teamClass][]*Task{}
	byTeam := map[string]bool{}
	byClass := map[string]bool{}
	for i := range tasks {
		t := &tasks[i]
		groups[teamClass{t.Team, t.Class}] = append(groups[teamClass{t.Team, t.Class}], t)
		byTeam[t.Team], byClass[t.Class] = true, true
	}
	allClasses := withExtra(classes, byClass)
	order := withExtra(teams, byTeam)
	if i := slices.Index(order, ""); i >= 0 && !slices.Contains(teams, "") {
		order = append(slices.Delete(order, i, i+1), "")
	}
	rows := make([]TeamClassStats, 0, len(order))
	for _, team := range order {
		row := TeamClassStats{Team: team, Classes: make([]ClassStats, 0, len(allClasses))}
		for _, c := range allClasses {
			row.Classes = append(row.Classes, classStats(c, groups[teamClass{team, c}], windowStart, now))
		}
		rows = append(rows, row)
	}
	return rows
}

// withExtra is names followed by the keys of m it lacks, sorted.
func withExtra[T any](names []string, m map[string]T) []string {
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
func countsRun(t *Task, windowStart, now time.Time) bool {
	switch t.State {
	case TaskAdmitted:
		return true
	case TaskFinished:
		return inWindow(t.FinishedAt, windowStart, now) && (!t.AdmittedAt.IsZero() || t.Run > 0)
	}
	return false
}

func countsWait(t *Task, windowStart, now time.Time) bool {
	if inWindow(t.AdmittedAt, windowStart, now) {
		return true
	}
	return (t.State == TaskPending || t.State == TaskPreempted) && !t.Deactivated && t.AdmittedAt.IsZero()
}

func classStats(class string, tasks []*Task, windowStart, now time.Time) ClassStats {
	s := ClassStats{Class: class}
	var runSum, waitSum time.Duration
	longestRun, longestWait := map[string]time.Duration{}, map[string]time.Duration{}
	for _, t := range tasks {
		switch {
		case t.State == TaskAdmitted:
			s.Running++
		case t.State == TaskPreempted && !t.Deactivated:
			s.Preempted++
		case t.State == TaskPending && !t.Deactivated:
			s.Pending++
		}
		run, wait := countsRun(t, windowStart, now), countsWait(t, windowStart, now)
		if run {
			s.RunSamples++
			runSum += t.Run
			s.LongestRun = max(s.LongestRun, t.Run)
			longestRun[t.Team] = max(longestRun[t.Team], t.Run)
		}
		if wait {
			s.WaitSamples++
			waitSum += t.Wait
			s.LongestWait = max(s.LongestWait, t.Wait)
			longestWait[t.Team] = max(longestWait[t.Team], t.Wait)
		}
		if run || wait {
			s.Samples++
		}
	}
	s.AvgRun = average(runSum, s.RunSamples)
	s.AvgWait = average(waitSum, s.WaitSamples)
	s.AvgLongestRun = averageOf(longestRun)
	s.AvgLongestWait = averageOf(longestWait)
	return s
}

func average(sum time.Duration, n int) time.Duration {
	if n == 0 {
		return 0
	}
	return sum / time.Duration(n)
}

func averageOf(m map[string]time.Duration) time.Duration {
	var sum time.Duration
	for _, d := range m {
		sum += d
	}
	return average(sum, len(m))
}
