package taskhistory

import (
	"reflect"
	"slices"
	"time"

	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/domain"
)

// This file turns Workloads into history: pure functions, no I/O.

// Diff is what the change of a Workload from old to new adds to its history
// (old is nil when the Workload is first seen: an informer add, or a
// backfill). ok is false when nothing changed that the history keeps, e.g.
// an informer resync or a status change it does not follow. Events are those
// visible in new and not in old, oldest first; when old is nil, every event
// new still shows. teamPrefix is the namespace prefix of team namespaces.
func Diff(old, new *kueuev1beta2.Workload, teamPrefix string) (c Change, ok bool) {
	cur := observe(new, teamPrefix, time.Time{})
	if old == nil {
		return cur, true
	}
	prev := observe(old, teamPrefix, time.Time{})
	seen := map[eventKey]bool{}
	for _, e := range prev.Events {
		seen[keyOf(e)] = true
	}
	var fresh []Event
	for _, e := range cur.Events {
		if !seen[keyOf(e)] {
			fresh = append(fresh, e)
		}
	}
	cur.Events = fresh
	return cur, len(fresh) > 0 || !reflect.DeepEqual(prev.Task, cur.Task)
}

// isVariant: wl is one of Kueue's concurrent-admission attempts at a task
// (domain.VariantParent), whose own Workload the history follows.
func isVariant(wl *kueuev1beta2.Workload) bool {
	return domain.VariantParent(wl.OwnerReferences) != nil
}

// VariantChange is what a concurrent-admission Variant adds to the history
// of its job's task: its preemption. Kueue preempts the Variant that holds
// the quota and only evicts the job's own Workload ("VariantEvicted"), so
// the task's preemption is read on the Variant. ok is false for a Variant
// not preempted.
func VariantChange(wl *kueuev1beta2.Workload) (c Change, ok bool) {
	r := domain.ReadWorkload(wl, domain.Settings{})
	p := r.Preemption
	if r.VariantParentUID == "" || p == nil {
		return Change{}, false
	}
	return Change{Task: Task{UID: r.VariantParentUID, Namespace: r.Namespace, Name: r.VariantOf}, EventsOnly: true,
		Events: []Event{{Kind: EventPreempted, At: p.At, ClusterQueue: r.ClusterQueue,
			Reason: p.Reason, Message: p.Message, ReasonWords: p.Words, Preemptor: p.Preemptor}}}, true
}

// Gone is the history of a Workload deleted at at (its last state is wl). A
// task deleted before it finished ends there: outcome deleted, its run up to
// the deletion.
func Gone(wl *kueuev1beta2.Workload, teamPrefix string, at time.Time) Change {
	if wl.DeletionTimestamp != nil && wl.DeletionTimestamp.Time.Before(at) {
		at = wl.DeletionTimestamp.Time
	}
	return ended(observe(wl, teamPrefix, at), at)
}

// ended is c, the last state of a task, ended by its deletion at at.
func ended(c Change, at time.Time) Change {
	c.Task.DeletedAt = at
	if c.Task.FinishedAt.IsZero() {
		c.Task.State = domain.TaskFinished
		c.Task.FinishedAt = at
		c.Task.Outcome = OutcomeDeleted
	}
	c.Events = append(c.Events, Event{Kind: EventDeleted, At: at, ClusterQueue: c.Task.ClusterQueue})
	return c
}

type eventKey struct {
	kind EventKind
	at   int64
}

func keyOf(e Event) eventKey { return eventKey{e.Kind, e.At.UnixMilli()} }

// observe records one state of a Workload, as domain.ReadWorkload reads it,
// so that the history and the live pages count alike; now is the end of a
// run still going (zero: not needed).
func observe(wl *kueuev1beta2.Workload, teamPrefix string, now time.Time) Change {
	r := domain.ReadWorkload(wl, domain.Settings{NamespacePrefix: teamPrefix})
	facts := r.Facts("")
	t := Task{
		UID: r.UID, Namespace: r.Namespace, Name: r.Name,
		OwnerKind: r.OwnerKind, OwnerName: r.OwnerName, OwnerUID: r.OwnerUID, Labels: r.Labels,
		Team: r.Team, Class: r.ClassRef, Priority: r.Priority,
		ClusterQueue: r.ClusterQueue, LocalQueue: r.LocalQueue,
		Created: r.Created, Requests: r.Requests, Partitions: r.Partitions, PodSets: r.PodSets, State: r.State,
		WaitStart: r.WaitStart, AdmittedAt: r.AdmittedAt, FinishedAt: r.FinishedAt,
		PastExecution: r.PastExecution,
		Flavors:       r.Flavors,
	}
	if t.AdmittedAt.IsZero() {
		t.ReleasedAt = r.ReleasedAt
	} else {
		t.Wait = facts.WaitAt(now)
	}
	if !t.FinishedAt.IsZero() || !now.IsZero() {
		t.Run = facts.RunAt(now)
	}

	var events []Event
	if r.ClusterQueue != "" {
		events = append(events, Event{Kind: EventQuotaReserved, At: r.QuotaReservedAt, ClusterQueue: r.ClusterQueue})
		if !r.AdmittedAt.IsZero() {
			events = append(events, Event{Kind: EventAdmitted, At: r.AdmittedAt, ClusterQueue: r.ClusterQueue, Flavors: r.Flavors, Usage: r.Usage})
		}
	}
	// Messages are kept where they say more than the reason: evictions and
	// preemptions.
	if e := r.Eviction; e != nil {
		events = append(events, Event{Kind: EventEvicted, At: e.At, ClusterQueue: t.ClusterQueue, Reason: e.Reason, Message: e.Message})
	}
	if p := r.Preemption; p != nil {
		events = append(events, Event{Kind: EventPreempted, At: p.At, ClusterQueue: t.ClusterQueue,
			Reason: p.Reason, Message: p.Message, ReasonWords: p.Words, Preemptor: p.Preemptor})
	}
	if e := r.Requeue; e != nil {
		events = append(events, Event{Kind: EventRequeued, At: e.At, ClusterQueue: t.ClusterQueue, Reason: e.Reason})
	}
	if e := r.Finish; e != nil {
		t.Outcome, t.FinishReason = outcomeOf(e.Reason), e.Reason
		events = append(events, Event{Kind: EventFinished, At: e.At, ClusterQueue: t.ClusterQueue, Reason: e.Reason})
	}
	slices.SortStableFunc(events, func(a, b Event) int { return a.At.Compare(b.At) })
	return Change{Task: t, Events: events}
}

func outcomeOf(reason string) Outcome {
	switch reason {
	case kueuev1beta2.WorkloadFinishedReasonSucceeded:
		return OutcomeSucceeded
	case kueuev1beta2.WorkloadFinishedReasonFailed:
		return OutcomeFailed
	}
	return OutcomeOther
}
