package taskhistory

import (
	"time"

	"github.com/openquota/console/internal/domain"
)

// Resources are amounts of the resources the history follows, in the units
// the pages show: GPUs and Neuron devices, vCPU in millicores, memory in MiB.
type Resources = domain.Amount

// PodSetRequest is what one pod set of a task asks for, all its pods together.
type PodSetRequest = domain.PodSetAmount

// FlavorUsage is what an admission holds on one flavor (instance type).
type FlavorUsage = domain.FlavorAmount

// Outcome is how a task ended.
type Outcome string

const (
	OutcomeSucceeded Outcome = "succeeded" // Finished, reason Succeeded
	OutcomeFailed    Outcome = "failed"    // Finished, reason Failed
	OutcomeOther     Outcome = "other"     // Finished for another reason (owner gone, out of sync, ...)
	OutcomeDeleted   Outcome = "deleted"   // deleted before it finished
	// OutcomeVanished: gone while no recorder ran; when and how it ended is
	// not known, so it counts in no statistic.
	OutcomeVanished Outcome = "vanished"
)

// Task is the recorded summary of one Workload: who it is, what it asked for,
// and where it stands, as domain.ReadWorkload reads it. It is replaced on
// every change; the Events keep the sequence.
type Task struct {
	UID, Namespace, Name string
	// OwnerKind, OwnerName and OwnerUID name the Workload's controlling owner
	// (usually a batch/v1 Job).
	OwnerKind, OwnerName, OwnerUID string
	// Labels are the Workload's labels in words (domain.LabelsWord).
	Labels string
	// Team is the namespace without the team prefix; empty outside team
	// namespaces. Class is the priority class name; empty when the Workload
	// has none (the live read model then shows its lowest class).
	Team, Class  string
	Priority     int32
	ClusterQueue string // of the current or last admission
	LocalQueue   string
	Created      time.Time
	Requests     Resources // all pod sets together
	// Partitions are the MIG partitions its pods ask for, in words
	// (domain.WorkloadReading.Partitions).
	Partitions string
	PodSets    []PodSetRequest
	State      domain.TaskState

	// WaitStart, AdmittedAt and FinishedAt are domain.FactsOf's. AdmittedAt is
	// zero while no admission holds (never admitted, or evicted and not
	// admitted again). ReleasedAt is when the last admission ended, while
	// none holds.
	WaitStart, AdmittedAt, FinishedAt, ReleasedAt time.Time
	// PastExecution is status.accumulatedPastExecutionTimeSeconds.
	PastExecution time.Duration
	// Wait is FactsOf's wait up to the current admission (when AdmittedAt is
	// set); Run is FactsOf's run of a finished task.
	Wait, Run    time.Duration
	Outcome      Outcome // empty until it ends
	FinishReason string  // the Finished condition's reason
	Flavors      []string
	DeletedAt    time.Time
}

// EventKind names what happened to a task.
type EventKind string

const (
	EventQuotaReserved EventKind = "quota_reserved"
	EventAdmitted      EventKind = "admitted"
	EventEvicted       EventKind = "evicted"
	EventPreempted     EventKind = "preempted"
	EventRequeued      EventKind = "requeued"
	EventFinished      EventKind = "finished"
	EventDeleted       EventKind = "deleted"
)

// Event is one step of a task's history. At is the Kueue condition's
// transition time, so that every replica and every restart sees the same
// event at the same time (and writes it once).
type Event struct {
	Kind         EventKind
	At           time.Time
	ClusterQueue string
	// Flavors and Usage (admitted): the instance types assigned and what the
	// admission holds on each. Whether it borrowed the store decides, from
	// what it recorded (see borrowed.go).
	Flavors []string
	Usage   []FlavorUsage
	// Reason and Message are the condition's. For a preemption, ReasonWords
	// says it in plain words and Preemptor names who caused it.
	Reason, Message string
	ReasonWords     string
	Preemptor       Preemptor
}

// Preemptor is the Workload that caused a preemption (domain.ParsePreemptor).
type Preemptor = domain.Preemptor

// Change is what one observation of a Workload adds to its history: its new
// summary and the events not seen before.
type Change struct {
	Task   Task
	Events []Event
	// EventsOnly: the events are of the task Task.UID, recorded from
	// another Workload (VariantChange); its summary is left as it is, and
	// nothing is written before the task is recorded.
	EventsOnly bool
	// Continues: Task.UID is the task of an elastic job's first slice, which
	// this later slice goes on (Recorder.ofJob): the task keeps its name,
	// creation, wait and, while it runs on, its admission.
	Continues bool
	// IfAbsent: written only when nothing of the task is recorded yet (a
	// slice that a later one replaced, seen first after the replacement).
	IfAbsent bool
}

// Period is a half-open span of time [From, To).
type Period struct {
	From, To time.Time
}

// Duration is To − From.
func (p Period) Duration() time.Duration { return p.To.Sub(p.From) }

// Window is the half-open period a query covers.
type Window = Period
