package write

import (
	"context"
	"fmt"
	"strings"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/kueue"
)

// teamsToReorder are the teams whose order of waiting tasks changes when
// every team orders them by recent use (on) or by priority and arrival.
func (s Service) teamsToReorder(on bool) []string {
	var names []string
	for _, t := range s.Cache.Teams(s.Settings) {
		if t.Team.RecentUseOrder != on {
			names = append(names, t.Team.Name)
		}
	}
	return names
}

// SetRecentUseOrder sets the order of waiting tasks of every team the
// console manages: by recent use (admission fair sharing) when on. Each
// team is written through the team write path as its own revision, with
// only its order changed; teams already ordered so are left as they are.
// A team whose objects were edited by hand is left too (writing it would
// set the edits back): the admin re-applies or adopts first. A team
// changed by someone else since it was read is not written. One team's
// failure does not stop the others; doing it again retries the rest.
func (s Service) SetRecentUseOrder(ctx context.Context, who kueue.Identity, on bool) Outcome {
	word := map[bool]string{true: "by recent use", false: "by priority and arrival"}[on]
	ctx = kueue.WithNote(ctx, "every team's waiting tasks ordered "+word+" from the cluster policy")
	shapes, _ := s.Cache.Fleet()
	drifted := s.Cache.DriftedTeams(s.Settings, shapes)
	var done, edited, failures []string
	first := Outcome{Kind: Saved}
	for _, name := range s.teamsToReorder(on) {
		if drifted[name] {
			edited = append(edited, name)
			continue
		}
		cq, stored, ok := s.Cache.Team(s.Settings, name)
		if !ok {
			continue // deleted meanwhile
		}
		t := stored
		t.RecentUseOrder = on
		tr := s.teamChange(t, shapes, "")
		tr.validate = func() Outcome {
			if msg := TeamProblem(name, t, cq, shapes); msg != "" {
				return rejected("Team " + name + "'s allocation cannot be applied: " + msg)
			}
			return Outcome{}
		}
		loaded := Loaded{ResourceVersion: cq.ResourceVersion, Allocation: stored}
		tr.conflict = func(ctx context.Context, _ kueue.Applier) Outcome {
			o, rv := s.checkTeamConflict(ctx, loaded, name)
			if o.Kind == Saved {
				tr.pin(rv)
			}
			return o
		}
		if o := s.run(ctx, who, tr.plan); o.Kind != Saved {
			failures = append(failures, name+": "+o.Message)
			if first.Kind == Saved {
				first = o
			}
			continue
		}
		done = append(done, name)
	}
	var msg []string
	switch {
	case len(done) > 0:
		msg = append(msg, fmt.Sprintf("Waiting tasks are now ordered %s in %s. %s", word, teamsWord(done), domain.RecentUseRestartNote))
	case len(failures) == 0 && len(edited) == 0:
		msg = append(msg, "Every team already orders its waiting tasks "+word+".")
	}
	if len(edited) > 0 {
		msg = append(msg, fmt.Sprintf("Left as they are, because their objects were edited by hand: %s. Re-apply or adopt the edits on their drift pages, then do this again.",
			strings.Join(edited, ", ")))
	}
	if len(failures) > 0 {
		msg = append(msg, "Not changed: "+strings.Join(failures, " ")+" Doing it again retries them.")
	}
	first.Message = strings.Join(msg, " ")
	if first.Kind == Saved && len(edited) > 0 && len(done) == 0 {
		first.Kind = Rejected // nothing was written: the page shows why
	}
	return first
}

func teamsWord(names []string) string {
	if len(names) == 1 {
		return "team " + names[0]
	}
	return fmt.Sprintf("%d teams (%s)", len(names), strings.Join(names, ", "))
}
