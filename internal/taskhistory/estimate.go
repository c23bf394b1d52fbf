package taskhistory

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/openquota/console/internal/domain"
)

// WaitEstimate is how much longer a queued task may wait, and on what
// basis: Ahead tasks are to be admitted before it, and its queue admitted
// PerHour tasks per recorded hour lately.
type WaitEstimate struct {
	Ahead   int
	PerHour float64
	// Recorded is how much of the rate's window the history recorded.
	Recorded time.Duration
	// Wait is the time the admissions before its own and its own take at
	// that rate; Known is false without a rate (no admission recorded).
	Wait  time.Duration
	Known bool
}

// MinRecorded is the record a rate needs to estimate from: a recorder
// that just started has seen too few admissions.
const MinRecorded = 15 * time.Minute

// EstimateWait estimates the wait of a task with ahead tasks before it in
// its queue, from its queue's admission rate: admissions come at random
// at the recent rate, so the (ahead+1)-th comes after (ahead+1)/rate on
// average.
func EstimateWait(ahead int, r AdmissionRate) WaitEstimate {
	e := WaitEstimate{Ahead: max(ahead, 0), PerHour: r.PerHour(), Recorded: r.Recorded}
	if r.Recorded < MinRecorded || e.PerHour <= 0 || math.IsInf(e.PerHour, 0) || math.IsNaN(e.PerHour) {
		return e
	}
	e.Wait = time.Duration(float64(e.Ahead+1) / e.PerHour * float64(time.Hour))
	e.Known = true
	return e
}

// RateWindow is how far back the admission rates of estimated waits look.
const RateWindow = 24 * time.Hour

// QueuedTaskWait estimates the wait of a queued task with ahead tasks
// before it in its ClusterQueue. The tasks ahead are of every class, so the
// rate is the ClusterQueue's over every class; and it counts tasks, not
// admissions, since re-admissions after preemptions do not move the queue.
// Measured on the demo (make measure-wait), the rate of the task's class
// alone, counting every admission, had a median error 1.5 to 1.8 times as
// large.
func QueuedTaskWait(ahead int, rates AdmissionRates, clusterQueue string) WaitEstimate {
	return EstimateWait(ahead, rates.Of(clusterQueue, ""))
}

// ClassWait estimates the wait of a task of class queued now behind the
// class's waiting tasks, at the class's rate in clusterQueue ("": every
// queue); tasks recorded without a class count in lowestClass, as in the
// statistics.
func ClassWait(waiting int, rates AdmissionRates, clusterQueue, class, lowestClass string) WaitEstimate {
	return EstimateWait(waiting, rates.OfClass(clusterQueue, class, lowestClass))
}

// Overdue reports a task that has waited much longer than its estimate
// (three times, and 10 minutes at least): its queue's pace does not move
// it, as when tasks behind it that fit are admitted while it does not.
func (e WaitEstimate) Overdue(waited time.Duration) bool {
	return e.Known && waited >= 10*time.Minute && waited > 3*e.Wait
}

// WordsAfter are Words for a task that has waited waited so far: an
// overdue one says so rather than promise its queue's pace.
func (e WaitEstimate) WordsAfter(waiting string, waited time.Duration) (short, basis string) {
	short, basis = e.Words(waiting)
	if e.Overdue(waited) {
		short = "past its estimate"
		basis += "; it has waited " + domain.FormatDuration(waited) + " already: its queue admits tasks behind it that fit while it does not"
	}
	return short, basis
}

// Words are the estimate briefly ("about 25 min") and with its basis
// ("about 25 min: 3 ahead, 8.0 admitted per hour over the last day");
// waiting describes the queue ahead ("3 ahead", "2 waiting").
func (e WaitEstimate) Words(waiting string) (short, basis string) {
	switch {
	case !e.Known && e.Recorded < MinRecorded:
		return "unknown", fmt.Sprintf("unknown: %s; the task history holds only %s of the last day, too little to know how fast the queue admits (it needs %s)",
			waiting, roughDuration(e.Recorded), roughDuration(MinRecorded))
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
