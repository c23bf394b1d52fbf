package domain

import (
	"maps"
	"reflect"
	"slices"
	"time"
	"weak"
)

// ClockCadence is how often figures that grow with the clock (how long a
// task has waited or run, the longest wait) move on the pages when nothing
// else changes: a snapshot's Clock is its time to the cadence.
const ClockCadence = 30 * time.Second

// Clock is the snapshot's time to ClockCadence: the time figures that grow
// with the clock are shown at, so that they do not change with every
// snapshot.
func (s *Snapshot) Clock() time.Time { return s.Taken.Truncate(ClockCadence) }

// Changes are what differs between two snapshots of the read model, in the
// terms the pages depend on: which teams' and classes' figures may have
// changed. A page shows again only what depends on them.
type Changes struct {
	// Version is the snapshot the changes lead to.
	Version uint64
	// Everything may differ: the first snapshot, or the policy or the
	// priority classes changed.
	Everything bool
	// Clock: the snapshots' Clocks differ, so figures that grow with the
	// clock are due.
	Clock bool
	// Teams whose tasks, queue order, borrowing or usage row changed ("" for
	// tasks outside team namespaces).
	Teams map[string]bool
	// Classes whose tasks changed.
	Classes map[string]bool
}

// ChangesBetween are the changes from prev (nil: none before) to next. It
// costs the number of teams and classes, not of tasks: snapshots share
// what did not change, so an unchanged team's tasks are the same pointer.
func ChangesBetween(prev, next *Snapshot) Changes {
	c := Changes{Version: next.Version}
	if prev == nil || prev == next {
		c.Everything = prev == nil
		return c
	}
	if c, ok := next.stepsFrom(prev); ok {
		return c
	}
	if !reflect.DeepEqual(prev.Policy, next.Policy) || !slices.Equal(prev.Classes, next.Classes) {
		c.Everything = true
		return c
	}
	c.Clock = !prev.Clock().Equal(next.Clock())
	for k, tc := range next.tallies {
		if prev.tallies[k] != tc {
			c.team(k.team)
			c.class(k.class)
		}
	}
	for k := range prev.tallies {
		if _, ok := next.tallies[k]; !ok {
			c.team(k.team)
			c.class(k.class)
		}
	}
	rows := make(map[string]*TeamUsage, len(prev.Teams))
	teamOf := make(map[string]string, len(next.Teams)) // ClusterQueue → team
	for i := range prev.Teams {
		rows[prev.Teams[i].Team] = &prev.Teams[i]
	}
	for i := range next.Teams {
		r := &next.Teams[i]
		teamOf[r.ClusterQueue] = r.Team
		if old, ok := rows[r.Team]; !ok || !sameUsage(old, r) {
			c.team(r.Team)
		}
		delete(rows, r.Team)
	}
	for team := range rows { // gone
		c.team(team)
	}
	// A queue's order and a group's borrowing are its ClusterQueue's team's.
	for cq, q := range next.queues {
		if prev.queues[cq] != q {
			c.team(teamOf[cq])
		}
	}
	for cq := range prev.queues {
		if _, ok := next.queues[cq]; !ok {
			c.team(teamOf[cq])
		}
	}
	for k, f := range next.borrowing {
		if prev.borrowing[k] != f {
			c.team(teamOf[k.clusterQueue])
		}
	}
	for k := range prev.borrowing {
		if _, ok := next.borrowing[k]; !ok {
			c.team(teamOf[k.clusterQueue])
		}
	}
	return c
}

// Follow is ChangesBetween(prev, next) for next, the snapshot published
// after prev (nil: the first), and keeps them in next, which must not be
// shared yet, with those of the publishes before: the views that move to
// next from a snapshot of the last keptSteps are many (a team page each),
// and comparing every team's figures was a sixth of a team page's time.
func Follow(prev, next *Snapshot) Changes {
	c := ChangesBetween(prev, next)
	if prev != nil {
		kept := prev.steps[max(0, len(prev.steps)-keptSteps+1):]
		next.steps = append(slices.Clip(kept), step{from: weak.Make(prev), changes: c.clone()})
	}
	return c
}

// keptSteps is how many publishes a snapshot keeps the changes of.
const keptSteps = 32

// stepsFrom are the changes of the steps kept from prev to s, merged;
// false when prev is not one of the snapshots they start from. A team
// that changed and changed back counts as changed.
func (s *Snapshot) stepsFrom(prev *Snapshot) (Changes, bool) {
	first := slices.IndexFunc(s.steps, func(st step) bool { return st.from.Value() == prev })
	if first < 0 {
		return Changes{}, false
	}
	c := Changes{Version: s.Version}
	for _, st := range s.steps[first:] {
		c.Add(st.changes)
	}
	return c, true
}

// clone is c with its own sets, which Add may change.
func (c Changes) clone() Changes {
	c.Teams, c.Classes = maps.Clone(c.Teams), maps.Clone(c.Classes)
	return c
}

func (c *Changes) team(t string) {
	if c.Teams == nil {
		c.Teams = map[string]bool{}
	}
	c.Teams[t] = true
}

func (c *Changes) class(name string) {
	if c.Classes == nil {
		c.Classes = map[string]bool{}
	}
	c.Classes[name] = true
}

// Add merges o into c: the changes of both steps, up to the later version.
func (c *Changes) Add(o Changes) {
	c.Version = max(c.Version, o.Version)
	c.Everything = c.Everything || o.Everything
	c.Clock = c.Clock || o.Clock
	for t := range o.Teams {
		c.team(t)
	}
	for cl := range o.Classes {
		c.class(cl)
	}
}

// None reports whether nothing changed.
func (c Changes) None() bool {
	return !c.Everything && !c.Clock && len(c.Teams) == 0 && len(c.Classes) == 0
}

// Team reports whether team's figures may have changed.
func (c Changes) Team(team string) bool { return c.Everything || c.Teams[team] }

// AnyTeam reports whether the figures of any team that sees reports true
// for may have changed (every team when sees is nil).
func (c Changes) AnyTeam(sees func(team string) bool) bool {
	if c.Everything {
		return true
	}
	for t := range c.Teams {
		if sees == nil || sees(t) {
			return true
		}
	}
	return false
}

// Class reports whether class's figures may have changed ("" for any class).
func (c Changes) Class(class string) bool {
	return c.Everything || class == "" && len(c.Classes) > 0 || c.Classes[class]
}

// sameUsage compares two rows (by pointer: a row is large, and a copy of
// each in an interface was most of a snapshot's garbage).
func sameUsage(a, b *TeamUsage) bool { return reflect.DeepEqual(a, b) }
