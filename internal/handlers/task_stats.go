package handlers

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/taskhistory"
)

// taskHistoryTTL is how long the task history's answers are shared: every
// view and snapshot of a page within it reads the same, so a snapshot
// rendered per change never queries the store itself.
const taskHistoryTTL = 5 * time.Second

// taskStats are the Tasks page's statistics for a view: the completed
// facts of the task history merged with what still runs or waits, or the
// live tasks alone without history.
type taskStats struct {
	byClass []domain.ClassStats
	byTeam  []domain.TeamClassStats
	// note says where the figures come from when not (only) from history;
	// gaps are the window's periods without a record.
	note string
	gaps []string
	// history: the figures include the task history.
	history bool
}

// windowFacts are the task history's completed facts of the window that
// ends at now, shared for historyTTL per window.
func (p tasksPage) windowFacts(ctx context.Context, key string, window time.Duration, now time.Time) (*taskhistory.WindowStats, error) {
	return p.facts.Get(ctx, key, func(ctx context.Context) (*taskhistory.WindowStats, error) {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return p.stats.TaskStats(ctx, taskhistory.LiveWindow(now.Add(-window), now))
	})
}

// taskStatistics computes the statistics of f for a viewer (by team too,
// when byTeam: of the teams in only, when not nil).
func (p tasksPage) taskStatistics(ctx context.Context, f taskFilter, visible scope, snap *domain.Snapshot, byTeam bool, only []string) taskStats {
	sel := f.selection(visible)
	teams := only
	switch {
	case only != nil:
		sel.Teams = only
	case byTeam:
		teams = visibleTeams(snap, visible)
	}
	classes := snap.Classes
	if f.Class != "" {
		classes = []string{f.Class}
	}
	window, now := f.window(), snap.Taken
	var st taskStats
	err := p.stats.Available()
	var hist *taskhistory.WindowStats
	// Not before the first snapshot (the caches are syncing): its time is
	// zero, a window to share with no snapshot that follows.
	if err == nil && !now.IsZero() {
		hist, err = p.windowFacts(ctx, f.Window, window, now)
	}
	if hist == nil {
		if err != nil {
			st.note = p.taskHistoryNote(err) + " The figures cover only the tasks that still exist in the cluster."
		}
		st.byClass = snap.StatsByClass(sel, classes, window, now)
		if byTeam {
			st.byTeam = snap.StatsByTeamAndClass(sel, teams, classes, window, now)
		}
		return st
	}
	lowest := snap.LowestClass()
	hist = selectFacts(hist, sel, lowest)
	ongoing := snap.Ongoing(sel, window, now)
	st.byClass = taskhistory.ClassStats(hist, ongoing, classes, lowest)
	if byTeam {
		st.byTeam = taskhistory.TeamClassStats(hist, ongoing, teams, classes, lowest)
	}
	st.gaps = gapNotes(hist.Gaps)
	st.history = true
	return st
}

// selectedQueue is the ClusterQueue of the one team a filter shows ("":
// several teams, every queue).
func (p tasksPage) selectedQueue(f taskFilter, visible scope, snap *domain.Snapshot) (domain.TeamUsage, bool) {
	sel := f.selection(visible)
	if len(sel.Teams) != 1 {
		return domain.TeamUsage{}, false
	}
	return teamRow(snap, sel.Teams[0])
}

// warnings remembers when each message was last logged, so that pages
// rendered for every change of the cluster do not repeat one failure many
// times a second. A nil *warnings logs every time.
type warnings struct {
	mu   sync.Mutex
	last map[string]time.Time
}

// warnEvery is how often the same failure is logged again.
const warnEvery = time.Minute

// due reports whether msg should be logged at now, and if so notes it.
func (w *warnings) due(msg string, now time.Time) bool {
	if w == nil {
		return true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if at, ok := w.last[msg]; ok && now.Sub(at) < warnEvery {
		return false
	}
	if w.last == nil || len(w.last) > 100 {
		w.last = map[string]time.Time{}
	}
	w.last[msg] = now
	return true
}

// selectFacts keeps the history's groups the selection covers.
func selectFacts(h *taskhistory.WindowStats, sel domain.Selection, lowest string) *taskhistory.WindowStats {
	if sel.Teams == nil && sel.Class == "" {
		return h
	}
	teams := map[string]bool{}
	for _, t := range sel.Teams {
		teams[t] = true
	}
	out := &taskhistory.WindowStats{Window: h.Window, Gaps: h.Gaps}
	for _, g := range h.Groups {
		class := g.Class
		if class == "" {
			class = lowest
		}
		if (sel.Teams == nil || teams[g.Team]) && (sel.Class == "" || sel.Class == class) {
			out.Groups = append(out.Groups, g)
		}
	}
	return out
}

// maxGapNotes bounds the gaps a page lists one by one.
const maxGapNotes = 5

// gapNotes say which periods have no record: shown as gaps, never as zero.
// The longest are listed, in time order, each with how long it lasted; the
// rest are counted.
func gapNotes(gaps []taskhistory.Period) []string {
	if len(gaps) == 0 {
		return nil
	}
	listed := slices.Clone(gaps)
	slices.SortStableFunc(listed, func(a, b taskhistory.Period) int { return cmp.Compare(b.To.Sub(b.From), a.To.Sub(a.From)) })
	var rest time.Duration
	for _, g := range listed[min(maxGapNotes, len(listed)):] {
		rest += g.To.Sub(g.From)
	}
	more := len(listed) - maxGapNotes
	listed = listed[:min(maxGapNotes, len(listed))]
	slices.SortFunc(listed, func(a, b taskhistory.Period) int { return a.From.Compare(b.From) })
	out := make([]string, 0, len(listed)+1)
	for i, g := range listed {
		note := "No record for " + domain.FormatDuration(g.To.Sub(g.From)) + ", "
		if g.To.Sub(g.From) < time.Minute {
			note += "at " + recordedTime(g.From)
		} else {
			note += "from " + recordedTime(g.From) + " to " + recordedTime(g.To)
		}
		if i == 0 {
			note += ": the figures leave such time out (no recorder ran, or it lost events)"
		}
		out = append(out, note+".")
	}
	if more > 0 {
		out = append(out, fmt.Sprintf("And %s without a record, %s in all.", domain.CountOf(int64(more), "more period"), domain.FormatDuration(rest)))
	}
	return out
}

// recordedTime shows a time the task history recorded, in UTC, to the
// minute.
func recordedTime(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") }
