package domain

import (
	"cmp"
	"fmt"
	"strings"
	"time"
	"unique"

	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/workload"
)

// This file turns Kueue Workloads into the figures of the Tasks dashboard.
// Everything here is pure: no I/O, and the current time is passed in.

// TaskState is where a task stands, as the dashboard groups tasks.
type TaskState string

const (
	// TaskPending: waiting for quota or admission. It also covers tasks
	// evicted for a reason other than preemption (PodsReady timeout, a
	// stopped queue, node failures, deactivation...): Reason says which.
	TaskPending TaskState = "Pending"
	// TaskAdmitted: running, with quota reserved and admitted, not finished.
	TaskAdmitted TaskState = "Admitted"
	// TaskPreempted: evicted by preemption and not admitted again yet (this
	// includes the short time its pods are being stopped).
	TaskPreempted TaskState = "Preempted"
	// TaskFinished: the job ended (succeeded, failed, or its owner is gone).
	TaskFinished TaskState = "Finished"
)

// Task is one Kueue Workload as the Tasks dashboard shows it.
type Task struct {
	Namespace string
	Name      string // the Workload's
	// OwnerKind and OwnerName name the Workload's owner, as people know
	// the task (WorkloadReading.OwnerKind); empty for a Workload without.
	OwnerKind, OwnerName string
	// Team is the team of its ClusterQueue (Settings.TeamOfClusterQueue):
	// a team is a ClusterQueue, whoever made it. A task whose ClusterQueue
	// is not known yet falls back to its namespace's team ("hyperpod-ns-nlp"
	// gives "nlp"), else none.
	Team string
	// ClusterQueue is status.admission.clusterQueue; a pending Workload does
	// not name it, so the read model resolves it from the LocalQueue.
	ClusterQueue string
	LocalQueue   string // spec.queueName
	// Class is spec.priorityClassRef.name, or the lowest class when the
	// Workload has none (ClassAssumed).
	Class        string
	ClassAssumed bool
	Priority     int32 // spec.priority; 0 (Kueue's default) when unset
	State        TaskState
	// Deactivated: spec.active is false. Kueue does not queue it until it
	// is reactivated; positions and statistics leave it out.
	Deactivated bool
	// Queued: Kueue holds it in its ClusterQueue's pending queue (pending or
	// preempted, active, no quota reserved). Only queued tasks get a Position.
	Queued bool
	// Partitions are the MIG partitions it asks for, in words ("" for none).
	Partitions string
	// GPUs is the task's nvidia.com/gpu as Kueue counts it
	// (WorkloadReading.GPUs): the admitted usage while quota is reserved,
	// else the pod sets' requests.
	GPUs int64
	// Requests are what it asks for, as Kueue counts a pending Workload
	// (WorkloadReading.Requests).
	Requests Amount
	// Flavors are the ResourceFlavors (instance types) the task was admitted
	// on: those assigned to nvidia.com/gpu, or every assigned one for a task
	// without GPUs. Sorted; empty while pending.
	Flavors []string
	// Borrowing: the task borrows quota now (see Borrows and
	// Snapshot.Borrowing; FactsOf cannot know it).
	Borrowing bool

	Created time.Time
	// WaitStart is when the task last started waiting: the last transition
	// of the Requeued condition, else the creation time (Kueue's
	// workload.QueuedWaitTime).
	WaitStart time.Time
	// QueueOrder is the timestamp Kueue orders its queue by
	// (workload.Ordering.GetQueueOrderTimestamp with Kueue's defaults): the
	// creation time, or the eviction time after an eviction by PodsReady
	// timeout or by an admission check. A preempted task keeps its creation
	// time and so its place in line.
	QueueOrder time.Time
	AdmittedAt time.Time // Admitted condition transition, when it is True
	FinishedAt time.Time // Finished condition transition, when it is True

	// Wait is from WaitStart to admission; to now while still waiting (to
	// the end for a task that finished without being admitted again).
	Wait time.Duration
	// Run is FinishedAt−AdmittedAt, or now−AdmittedAt while running, plus
	// status.accumulatedPastExecutionTimeSeconds (time run before earlier
	// evictions).
	Run time.Duration

	// Reason says in plain words why the task is where it is.
	Reason string
	// KueueMessage is the raw Kueue condition message(s) behind Reason, for
	// a tooltip.
	KueueMessage string
	// Position in its ClusterQueue's queue, 1 being next in line; 0 when not
	// queued or unknown (see Snapshot.Position).
	Position int
}

// TaskFacts is what one Workload says about its task, without the clock:
// the read model keeps these and computes waits, runs, queue positions and
// borrowing when a page reads them (Snapshot.Task), so no periodic rebuild
// is needed. A TaskFacts is never changed once the read model holds it; a
// change of the Workload makes a new one.
type TaskFacts struct {
	Namespace, Name, Team string
	OwnerKind, OwnerName  string // as Task's
	ClusterQueue          string // as Task.ClusterQueue
	LocalQueue, Class     string
	Priority              int32
	State                 TaskState
	Deactivated, Queued   bool
	GPUs                  int64
	Requests              Amount // as Task.Requests
	Flavors               []string
	Partitions            string // as WorkloadReading.Partitions
	// Usage is what the task's admission holds per flavor, while quota is
	// reserved (WorkloadReading.Usage).
	Usage                  []FlavorAmount
	Created, WaitStart     time.Time
	QueueOrder             time.Time
	AdmittedAt, FinishedAt time.Time
	KueueMessage           string

	classRef           string // spec.priorityClassRef.name: "" takes the lowest class
	podClass           bool   // classRef is a Kubernetes PriorityClass (WorkloadReading.PodClass)
	namespaceTeam      string // the team its namespace names, for a task in no known ClusterQueue
	admittedIn         string // status.admission.clusterQueue, while quota is reserved
	queue              string // the ClusterQueue whose queue holds it; "" when not queued
	admitted, finished bool   // the Admitted and Finished conditions are True
	pastRun            time.Duration
	// The reason in words is reasonHead, then a countdown while the task
	// waits to be requeued (until requeueAt), then reasonTail.
	reasonHead, reasonTail string
	requeueAt              time.Time
	// variantOf and variantFlavor: the Workload is the concurrent-admission
	// Variant of that parent, for that flavor (WorkloadReading.VariantOf);
	// the read model keeps it apart from the tasks.
	variantOf, variantFlavor string
	// variantWords and variantRaw say what the task's Variants are doing
	// (Model.variantWords): its reason while it waits, added to it while it
	// runs; "" for a task without Variants.
	variantWords, variantRaw string
	// variantPreempted: State is Preempted for a preempted Variant
	// (Model.withVariants), not for the task's own Workload.
	variantPreempted bool
	// slice and replaced: as WorkloadReading's Slice and Replaced.
	slice    string
	replaced bool
	// untried: as WorkloadReading's Untried; noFitWords say why Kueue found
	// no room for it when it did not fit (NoFit), else "". sameShape is
	// Kueue's scheduling-equivalence hash of either (Kueue skips the
	// Workloads of a hash after one of them did not fit); "" otherwise.
	untried    bool
	noFitWords string
	sameShape  string
	// cannotFit: as WorkloadReading's.
	cannotFit bool
}

// FactsOf reads one Workload (ReadWorkload) and keeps what the read model
// needs. lowestClass is the class of tasks without a priority class.
func FactsOf(wl *kueuev1beta2.Workload, s Settings, lowestClass string) *TaskFacts {
	r := ReadWorkload(wl, s)
	f := r.Facts(lowestClass)
	if r.Untried || r.NoFit {
		// Kueue's own hash: the same priority, pod specs, counts and
		// requests. Tasks just like one that did not fit share one string.
		if h := workload.NewInfo(wl).SchedulingHash; h != workload.SchedulingHashUnknown {
			f.sameShape = intern(string(h))
		}
	}
	return f
}

// Facts is what the read model keeps of a reading. lowestClass is the
// class of tasks without a priority class.
func (r *WorkloadReading) Facts(lowestClass string) *TaskFacts {
	// Most strings repeat across tasks (namespaces, queues, classes,
	// flavors, Kueue's messages): one copy of each is kept.
	f := &TaskFacts{
		Namespace: intern(r.Namespace), Name: r.Name, Team: intern(r.Team), OwnerKind: intern(r.OwnerKind), OwnerName: r.OwnerName,
		ClusterQueue: intern(r.ClusterQueue), LocalQueue: intern(r.LocalQueue), Class: intern(cmp.Or(r.ClassRef, lowestClass)),
		Priority: r.Priority, State: r.State, Deactivated: r.Deactivated, Queued: r.Queued, GPUs: r.GPUs, Requests: r.Requests, Partitions: intern(r.Partitions),
		Created: r.Created, WaitStart: r.WaitStart, QueueOrder: r.QueueOrder, AdmittedAt: r.AdmittedAt, FinishedAt: r.FinishedAt,
		KueueMessage: intern(r.KueueMessage),
		classRef:     intern(r.ClassRef), podClass: r.PodClass, namespaceTeam: intern(r.Team), admittedIn: intern(r.ClusterQueue),
		admitted: !r.AdmittedAt.IsZero(), finished: r.Finish != nil, pastRun: r.PastExecution,
		reasonHead: intern(r.Reason), variantOf: r.VariantOf, variantFlavor: intern(r.VariantFlavor),
		slice: r.Slice, replaced: r.Replaced, untried: r.Untried, noFitWords: intern(r.noFitWords), cannotFit: r.cannotFit,
	}
	if len(r.Flavors) > 0 {
		f.Flavors = make([]string, len(r.Flavors))
		for i, fl := range r.Flavors {
			f.Flavors[i] = intern(fl)
		}
	}
	if len(r.Usage) > 0 {
		f.Usage = make([]FlavorAmount, len(r.Usage))
		for i, u := range r.Usage {
			f.Usage[i] = FlavorAmount{Flavor: intern(u.Flavor), Amount: u.Amount, Partitions: u.Partitions}
		}
	}
	if r.countdownAt >= 0 {
		f.reasonHead, f.reasonTail = intern(r.Reason[:r.countdownAt]), intern(r.Reason[r.countdownAt:])
		f.requeueAt = r.RequeueAt
	}
	return f
}

// WaitAt is the task's wait at now: from WaitStart to admission; to now
// while it waits (to the end for a task that finished without being
// admitted again).
func (f *TaskFacts) WaitAt(now time.Time) time.Duration {
	if f.admitted {
		return nonNegative(f.AdmittedAt.Sub(f.WaitStart))
	}
	return nonNegative(f.end(now).Sub(f.WaitStart))
}

// RunAt is the task's run at now: FinishedAt−AdmittedAt, or now−AdmittedAt
// while running, plus status.accumulatedPastExecutionTimeSeconds (time run
// before earlier evictions).
func (f *TaskFacts) RunAt(now time.Time) time.Duration {
	run := f.pastRun
	if f.admitted {
		run += nonNegative(f.end(now).Sub(f.AdmittedAt))
	}
	return run
}

func (f *TaskFacts) end(now time.Time) time.Time {
	if f.finished {
		return f.FinishedAt
	}
	return now
}

// ReasonAt says in plain words why the task is where it is, at now.
// borrowing marks a running task that borrows quota (see
// Snapshot.Borrowing).
func (f *TaskFacts) ReasonAt(now time.Time, borrowing bool) string {
	if f.variantWords != "" && f.State != TaskAdmitted {
		return f.variantWords
	}
	head := f.reasonHead
	if borrowing && f.State == TaskAdmitted {
		t := Task{Flavors: f.Flavors, ClusterQueue: f.ClusterQueue}
		plain := admittedPhrase(t)
		t.Borrowing = true
		head = strings.Replace(head, plain, admittedPhrase(t), 1)
	}
	if f.requeueAt.After(now) {
		head += fmt.Sprintf("; back in the queue in %s", f.requeueAt.Sub(now).Round(time.Second))
	}
	if f.variantWords != "" {
		return head + f.reasonTail + "; " + f.variantWords
	}
	return head + f.reasonTail
}

// kueueMessage is KueueMessage with its Variants' messages.
func (f *TaskFacts) kueueMessage() string {
	if f.variantRaw == "" {
		return f.KueueMessage
	}
	if f.KueueMessage == "" || f.State != TaskAdmitted {
		return f.variantRaw
	}
	return f.KueueMessage + "\n" + f.variantRaw
}

// At is the task as the dashboard shows it at now, with its queue position
// (0 when not queued) and whether it borrows.
func (f *TaskFacts) At(now time.Time, position int, borrowing bool) Task {
	return Task{
		Namespace: f.Namespace, Name: f.Name, OwnerKind: f.OwnerKind, OwnerName: f.OwnerName, Team: f.Team, ClusterQueue: f.ClusterQueue, LocalQueue: f.LocalQueue,
		Class: f.Class, ClassAssumed: f.classRef == "", Priority: f.Priority, State: f.State, Deactivated: f.Deactivated, Queued: f.Queued,
		GPUs: f.GPUs, Requests: f.Requests, Flavors: f.Flavors, Partitions: f.Partitions, Borrowing: borrowing,
		Created: f.Created, WaitStart: f.WaitStart, QueueOrder: f.QueueOrder, AdmittedAt: f.AdmittedAt, FinishedAt: f.FinishedAt,
		Wait: f.WaitAt(now), Run: f.RunAt(now),
		Reason: f.ReasonAt(now, borrowing), KueueMessage: f.kueueMessage(),
		Position: position,
	}
}

// TaskName is a task as people know it: by its owner (the Job "big"),
// with its Workload's name ("job-big-869d5") beside; a Workload without an
// owner by its own name. It is the console's one rule for naming a task.
type TaskName struct {
	Namespace, Workload  string
	OwnerKind, OwnerName string
}

// Named is the task's name as people know it.
func (t Task) Named() TaskName {
	return TaskName{Namespace: t.Namespace, Workload: t.Name, OwnerKind: t.OwnerKind, OwnerName: t.OwnerName}
}

// Named is the task's name as people know it.
func (f *TaskFacts) Named() TaskName {
	return TaskName{Namespace: f.Namespace, Workload: f.Name, OwnerKind: f.OwnerKind, OwnerName: f.OwnerName}
}

// Shown is the name to show: the owner's kind and name ("Job big"), or
// the Workload's name when it has no owner (or the owner is not known, as
// in history recorded without it).
func (n TaskName) Shown() string {
	if n.OwnerName == "" {
		return n.Workload
	}
	return strings.TrimSpace(n.OwnerKind + " " + n.OwnerName)
}

// Aside names the Workload with its namespace, for beside the shown name
// or on hover ("Workload hyperpod-ns-nlp/job-big-869d5"); "" for no
// Workload.
func (n TaskName) Aside() string {
	switch {
	case n.Workload == "":
		return ""
	case n.Namespace == "":
		return "Workload " + n.Workload
	}
	return "Workload " + n.Namespace + "/" + n.Workload
}

// Plain is the name without the kind: the owner's, else the Workload's
// (for a column of its own next to the owner's kind).
func (n TaskName) Plain() string {
	if n.OwnerName == "" {
		return n.Workload
	}
	return n.OwnerName
}

// InWords names the task in a sentence: "Job big (Workload
// hyperpod-ns-nlp/job-big-869d5)", or "hyperpod-ns-nlp/solo" for a
// Workload without an owner.
func (n TaskName) InWords() string {
	workload := n.Workload
	if n.Namespace != "" {
		workload = n.Namespace + "/" + n.Workload
	}
	if n.OwnerName == "" {
		return workload
	}
	return n.Shown() + " (Workload " + workload + ")"
}

// Matches reports whether the owner's or the Workload's name contains part
// (lower case).
func (n TaskName) Matches(part string) bool {
	return strings.Contains(strings.ToLower(n.Workload), part) || strings.Contains(strings.ToLower(n.OwnerName), part)
}

func intern(s string) string { return unique.Make(s).Value() }

func nonNegative(d time.Duration) time.Duration { return max(d, 0) }
