package taskhistory

import (
	"math"
	"time"
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
