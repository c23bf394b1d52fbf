package write

import (
	"context"
	"fmt"
	"strings"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/kueue"
)

// RecentUseChanges are the teams whose order of waiting tasks changes when
// every team orders them by recent use (on) or by priority and arrival.
func (s Service) RecentUseChanges(on bool) []string {
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
// team is written through the team write path as its own revision; teams
// already ordered so are left as they are. A failure stops at that team:
// the teams before it keep the new order and running it again finishes.
func (s Service) SetRecentUseOrder(ctx context.Context, who kueue.Identity, on bool) Outcome {
	word := map[bool]string{true: "by recent use", false: "by priority and arrival"}[on]
	ctx = kueue.WithNote(ctx, "every team's waiting tasks ordered "+word+" from the cluster policy")
	var done []string
	for _, name := range s.RecentUseChanges(on) {
		_, stored, ok := s.Cache.Team(s.Settings, name)
		if !ok {
			continue // deleted meanwhile
		}
		t := stored
		t.RecentUseOrder = on
		o := s.applyTeam(ctx, who, name, t, "Team "+name+"'s allocation cannot be applied: ", "")
		if o.Kind != Saved {
			o.Message = fmt.Sprintf("%s %s", writtenBefore(done), o.Message)
			return o
		}
		done = append(done, name)
	}
	if len(done) == 0 {
		return Outcome{Kind: Saved, Message: "Every team already orders its waiting tasks " + word + "."}
	}
	return Outcome{Kind: Saved, Message: fmt.Sprintf("Waiting tasks are now ordered %s in %s. %s", word, teamsWord(done), domain.RecentUseRestartNote)}
}

// writtenBefore says which teams a bulk change wrote before it stopped.
func writtenBefore(done []string) string {
	if len(done) == 0 {
		return "No team was changed."
	}
	return "Changed before it stopped: " + strings.Join(done, ", ") + "; the others were not changed, and doing it again changes them."
}

func teamsWord(names []string) string {
	if len(names) == 1 {
		return "team " + names[0]
	}
	return fmt.Sprintf("%d teams (%s)", len(names), strings.Join(names, ", "))
}
