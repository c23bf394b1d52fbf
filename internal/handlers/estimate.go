package handlers

import (
	"context"
	"strconv"
	"time"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/memo"
	"github.com/openquota/console/internal/taskhistory"
)

// Estimated waits: a queued task waits for the tasks ahead of it in its
// ClusterQueue (Kueue's own order from its visibility API, else the
// console's estimate of it), admitted at its ClusterQueue's recent rate;
// the rule and its words are taskhistory's (QueuedTaskWait, ClassWait).

// rateTTL is how long the admission rates are shared.
const rateTTL = time.Minute

// admissionRates are every ClusterQueue's and class's admissions over
// taskhistory.RateWindow, shared for rateTTL.
type admissionRates struct {
	taskHistory taskStatistics
	rates       *memo.Memo[taskhistory.AdmissionRates]
}

func newAdmissionRates(h taskStatistics) *admissionRates {
	return &admissionRates{taskHistory: h, rates: &memo.Memo[taskhistory.AdmissionRates]{TTL: rateTTL, FailureTTL: taskHistoryTTL}}
}

// at are the rates of the window that ends at now; ok is false without
// a task history.
func (a *admissionRates) at(ctx context.Context, now time.Time) (taskhistory.AdmissionRates, bool) {
	if a.taskHistory.Available() != nil {
		return taskhistory.AdmissionRates{}, false
	}
	r, err := a.rates.Get(ctx, "", func(ctx context.Context) (taskhistory.AdmissionRates, error) {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return a.taskHistory.AdmissionRates(ctx, taskhistory.LiveWindow(now.Add(-taskhistory.RateWindow), now))
	})
	return r, err == nil
}

// waitEstimates estimate the waits of one snapshot's queued tasks, asking
// Kueue for each ClusterQueue's positions once.
type waitEstimates struct {
	ctx       context.Context
	snap      *domain.Snapshot
	rates     *admissionRates
	kueue     *positionsFeed
	positions map[string]domain.QueuePlaces // by ClusterQueue
	// known are the rates, once asked; knownOK: there is a history to ask.
	known   *taskhistory.AdmissionRates
	knownOK bool
	// halted say, by ClusterQueue, why Kueue admits nothing there now
	// (TeamUsage.Halted), once asked.
	halted map[string]string
}

func (p tasksPage) waitEstimates(ctx context.Context, snap *domain.Snapshot) *waitEstimates {
	return &waitEstimates{ctx: ctx, snap: snap, rates: p.rates, kueue: p.live.feeds.positions, positions: map[string]domain.QueuePlaces{}}
}

// ahead is how many tasks are ahead of f in its ClusterQueue; ok is false
// for a task not queued.
func (w *waitEstimates) ahead(f *domain.TaskFacts) (int, bool) {
	if p, ok := w.place(f); ok {
		return p - 1, true
	}
	if p := w.snap.Position(f); p > 0 {
		return p - 1, true
	}
	return 0, false
}

// place is f's place in its ClusterQueue (Snapshot.QueuePositions: Kueue's
// order where its visibility API says, then the console's); ok is false
// for a task not queued.
func (w *waitEstimates) place(f *domain.TaskFacts) (int, bool) {
	if !f.Queued || f.ClusterQueue == "" {
		return 0, false
	}
	pos, asked := w.positions[f.ClusterQueue]
	if !asked {
		var kueue map[string]int
		if w.kueue != nil {
			kueue, _ = w.kueue.of(w.ctx, f.ClusterQueue)
		}
		pos = w.snap.QueuePositions(f.ClusterQueue, kueue)
		w.positions[f.ClusterQueue] = pos
	}
	return pos.Of(f)
}

// position is f's place in its queue as shown (place), else shown, so that
// the place and the tasks ahead in the estimated wait agree.
func (w *waitEstimates) position(f *domain.TaskFacts, shown int) int {
	if p, ok := w.place(f); ok {
		return p
	}
	return shown
}

// of is f's estimated wait in words ("" for a task not queued, or without
// history).
func (w *waitEstimates) of(f *domain.TaskFacts) (short, basis string) {
	ahead, queued := w.ahead(f)
	if !queued {
		return "", ""
	}
	if w.halted == nil {
		w.halted = map[string]string{}
		for i := range w.snap.Teams {
			if why := w.snap.Teams[i].Halted(); why != "" {
				w.halted[w.snap.Teams[i].ClusterQueue] = why
			}
		}
	}
	if why := w.halted[f.ClusterQueue]; why != "" {
		return haltedWait(why)
	}
	if why := w.snap.CannotStart(f); why != "" {
		return cannotStartWait(why)
	}
	if w.known == nil {
		rates, ok := w.rates.at(w.ctx, w.snap.Taken)
		w.known, w.knownOK = &rates, ok
	}
	if !w.knownOK {
		return "", ""
	}
	return taskhistory.QueuedTaskWait(ahead, *w.known, f.ClusterQueue).WordsAfter(strconv.Itoa(ahead)+" ahead", f.WaitAt(w.snap.Taken))
}

// haltedWait is the estimated wait of a task whose queue admits nothing now,
// and why.
func haltedWait(why string) (short, basis string) {
	return "not while its queue admits nothing", "not while its queue admits nothing: " + why
}

// cannotStartWait is the estimated wait of a task that cannot start while
// its queue stays as it is defined, and why: no rate of admissions moves it.
func cannotStartWait(why string) (short, basis string) {
	return "not as its queue is", "not as its queue is defined now (the task, or the queue's quota or flavors, must change): " + why
}

// classWait is the estimated wait of a task of one class now, in the
// selection's ClusterQueue (one team selected) or every queue.
func (p tasksPage) classWait(ctx context.Context, snap *domain.Snapshot, s domain.ClassStats, f taskFilter, visible scope) (short, basis string) {
	rates, ok := p.rates.at(ctx, snap.Taken)
	if !ok {
		return "", ""
	}
	waiting := s.Pending + s.Preempted
	if waiting == 0 {
		return "none waiting", ""
	}
	clusterQueue := ""
	if team, one := p.selectedQueue(f, visible, snap); one {
		if why := team.Halted(); why != "" {
			return haltedWait(why)
		}
		clusterQueue = team.ClusterQueue
	}
	return taskhistory.ClassWait(waiting, rates, clusterQueue, s.Class, snap.LowestClass()).Words(strconv.Itoa(waiting) + " waiting")
}
