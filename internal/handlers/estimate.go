package handlers

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/taskhistory"
)

// Estimated waits: a queued task waits for the tasks ahead of it in its
// ClusterQueue (Kueue's own order from its visibility API, else the
// console's estimate of it), admitted at the rate its ClusterQueue admitted
// tasks over the last day (from the task history). The tasks ahead are of
// every class, so the rate counts every class; and it counts tasks, not
// admissions, since re-admissions after preemptions do not move the queue.
// Measured on the demo (make measure-wait), the rate of the task's class
// alone, counting every admission, had a median error 1.5 to 1.8 times as
// large.

// rateWindow is how far back admission rates look; rateTTL how long a rate
// is shared.
const (
	rateWindow = 24 * time.Hour
	rateTTL    = time.Minute
)

// positionReader reads Kueue's queue positions (*kueue.Positions).
type positionReader interface {
	Known(ctx context.Context, clusterQueue string) (map[string]int, bool)
}

// admissionRates are every ClusterQueue's and class's admissions over the
// last day, shared for rateTTL; ok is false without history.
func (d Deps) admissionRates(ctx context.Context, now time.Time) (taskhistory.AdmissionRates, bool) {
	store, err := d.historyStore()
	if store == nil || err != nil {
		return taskhistory.AdmissionRates{}, false
	}
	r, err := d.rates.Get(ctx, "", func(ctx context.Context) (taskhistory.AdmissionRates, error) {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return store.AdmissionRates(ctx, taskhistory.LiveWindow(now.Add(-rateWindow), now))
	})
	return r, err == nil
}

// waitEstimates estimate the waits of one snapshot's queued tasks, asking
// Kueue for each ClusterQueue's positions once.
type waitEstimates struct {
	d         Deps
	ctx       context.Context
	snap      *domain.Snapshot
	positions map[string]map[string]int // nil entry: Kueue did not answer
	// rates, once asked; ratesKnown: there is a history to ask.
	rates      *taskhistory.AdmissionRates
	ratesKnown bool
}

func (d Deps) waitEstimates(ctx context.Context, snap *domain.Snapshot) *waitEstimates {
	return &waitEstimates{d: d, ctx: ctx, snap: snap, positions: map[string]map[string]int{}}
}

// ahead is how many tasks are ahead of f in its ClusterQueue; ok is false
// for a task not queued.
func (w *waitEstimates) ahead(f *domain.TaskFacts) (int, bool) {
	if !f.Queued || f.ClusterQueue == "" {
		return 0, false
	}
	if w.d.positions != nil {
		pos, asked := w.positions[f.ClusterQueue]
		if !asked {
			pos, _ = w.d.positions.Known(w.ctx, f.ClusterQueue)
			w.positions[f.ClusterQueue] = pos
		}
		if p, ok := pos[domain.LocalQueueKey(f.Namespace, f.Name)]; ok {
			return p, true
		}
	}
	if p := w.snap.Position(f); p > 0 {
		return p - 1, true
	}
	return 0, false
}

// of is f's estimated wait in words ("" for a task not queued, or without
// history).
func (w *waitEstimates) of(f *domain.TaskFacts) (short, basis string) {
	ahead, queued := w.ahead(f)
	if !queued {
		return "", ""
	}
	if w.rates == nil {
		rates, ok := w.d.admissionRates(w.ctx, w.snap.Taken)
		w.rates = &rates
		w.ratesKnown = ok
	}
	if !w.ratesKnown {
		return "", ""
	}
	return estimateWords(taskhistory.EstimateWait(ahead, w.rates.Of(f.ClusterQueue, "")), strconv.Itoa(ahead)+" ahead")
}

// estimateWords are an estimate briefly ("about 25 min") and with its basis
// ("about 25 min: 3 ahead, 8 admitted per hour over the last day");
// waiting describes the queue ahead.
func estimateWords(e taskhistory.WaitEstimate, waiting string) (short, basis string) {
	switch {
	case !e.Known && e.Recorded < taskhistory.MinRecorded:
		return "unknown", fmt.Sprintf("unknown: %s; the task history has recorded only %s of the last day", waiting, roughDuration(e.Recorded))
	case !e.Known:
		return "unknown", "unknown: " + waiting + ", no admissions recorded over the last day"
	}
	short = "about " + roughDuration(e.Wait)
	return short, fmt.Sprintf("%s: %s, %s admitted per hour over the last day", short, waiting, perHour(e.PerHour))
}

// perHour shows a rate with two significant digits at most.
func perHour(v float64) string {
	switch {
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 1:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// roughDuration rounds an estimate to what it can mean: minutes under two
// hours, hours under two days, else days.
func roughDuration(d time.Duration) string {
	switch {
	case d < time.Minute:
		return "1 min"
	case d < 2*time.Hour:
		return fmt.Sprintf("%d min", int(d.Round(time.Minute).Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h", int(d.Round(time.Hour).Hours()))
	}
	return fmt.Sprintf("%d days", int(d.Round(24*time.Hour).Hours()/24))
}

// classWait is the estimated wait of a task of one class now: the class's
// waiting tasks admitted at the class's rate over the last day, in the
// selection's ClusterQueue (one team selected) or every queue.
func (d Deps) classWait(ctx context.Context, s domain.ClassStats, clusterQueue string, now time.Time) (short, basis string) {
	rates, ok := d.admissionRates(ctx, now)
	if !ok {
		return "", ""
	}
	rate := rates.Of(clusterQueue, s.Class)
	waiting := s.Pending + s.Preempted
	if waiting == 0 {
		return "none waiting", ""
	}
	return estimateWords(taskhistory.EstimateWait(waiting, rate), strconv.Itoa(waiting)+" waiting")
}
