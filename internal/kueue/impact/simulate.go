package impact

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime/pkg/log"
	config "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/scheduler"
	"sigs.k8s.io/kueue/pkg/util/expectations"
	"sigs.k8s.io/kueue/pkg/workload"
)

// Cluster is the in-memory copy the preview runs Kueue over: the objects as
// they are, or as a change would leave them.
type Cluster struct {
	Flavors       []*kueue.ResourceFlavor
	Cohorts       []*kueue.Cohort
	ClusterQueues []*kueue.ClusterQueue
	LocalQueues   []*kueue.LocalQueue
	// Namespaces are read for ClusterQueues' namespaceSelectors.
	Namespaces []*corev1.Namespace
	Workloads  []*Shape
	// Kueue's controller configuration, as the cluster runs it.
	FairSharing          *config.FairSharing
	AdmissionFairSharing *config.AdmissionFairSharing
}

// Fate is what Kueue does with one Workload.
type Fate string

const (
	StaysAdmitted Fate = "stays admitted"
	Preempted     Fate = "preempted"
	Admitted      Fate = "admitted"
	StaysPending  Fate = "stays pending"
)

// Result is where every Workload of a Cluster ends when Kueue has no head
// left to try.
type Result struct {
	Workloads map[string]*Outcome
	// Usage is each ClusterQueue's reserved quota afterwards, per flavor and
	// resource, with what it borrows.
	Usage map[string][]kueue.FlavorUsage
	// Cycles is how many scheduling cycles Kueue ran.
	Cycles int
}

// Outcome is one Workload's end.
type Outcome struct {
	Fate Fate
	// ClusterQueue holds it afterwards (admitted) or queues it (pending).
	ClusterQueue string
	// Position is its place in its ClusterQueue's queue afterwards, from 1,
	// while pending.
	Position int
	// Reason is Kueue's condition reason for a preemption
	// (InClusterQueue, InCohortReclamation, InCohortFairSharing, ...).
	Reason string
	// Message is Kueue's message: for a preemption, the preemptor.
	Message string
	// Uncertain names what the preview cannot know for this Workload.
	Uncertain string
}

// maxCycles bounds a preview whose queues never settle (they do: each cycle
// admits, preempts or parks its heads).
const maxCycles = 20000

var errTooLong = errors.New("the preview: Kueue's scheduler did not settle within its bound")

// Simulate runs Kueue's scheduler over c until no queue has a head left.
func Simulate(ctx context.Context, c Cluster) (res *Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			res, err = nil, fmt.Errorf("the preview: Kueue's scheduler failed on the copy: %v", r)
		}
	}()
	log := logr.Discard()
	if debugLog != nil {
		log = *debugLog
	}
	ctx = ctrl.IntoContext(ctx, log)
	scheme := runtime.NewScheme()
	if err := kueue.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := corev1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	cl := &copyClient{scheme: scheme, namespaces: map[string]*corev1.Namespace{}, workloads: make(map[string]*kueue.Workload, len(c.Workloads))}
	for _, ns := range c.Namespaces {
		cl.namespaces[ns.Name] = ns
	}
	shapes := make(map[string]*Shape, len(c.Workloads))
	for _, s := range c.Workloads {
		cl.workloads[s.Key()] = s.Workload()
		shapes[s.Key()] = s
	}

	store := expectations.NewStore("impact-preview")
	fairSharing := c.FairSharing != nil
	cache := schdcache.New(cl, schdcache.WithFairSharing(fairSharing), schdcache.WithAdmissionFairSharing(c.AdmissionFairSharing))
	queues, requeuer := qcache.NewManagerForUnitTestsWithRequeuer(cl, cache,
		qcache.WithPreemptionExpectations(store), qcache.WithAdmissionFairSharing(c.AdmissionFairSharing))
	for _, rf := range c.Flavors {
		cache.AddOrUpdateResourceFlavor(log, rf)
	}
	for _, co := range c.Cohorts {
		if err := cache.AddOrUpdateCohort(co); err != nil {
			return nil, fmt.Errorf("cohort %s: %w", co.Name, err)
		}
		queues.AddOrUpdateCohort(ctx, co)
	}
	for _, cq := range c.ClusterQueues {
		if err := cache.AddClusterQueue(ctx, cq); err != nil {
			return nil, fmt.Errorf("ClusterQueue %s: %w", cq.Name, err)
		}
		if err := queues.AddClusterQueue(ctx, cq); err != nil {
			return nil, fmt.Errorf("ClusterQueue %s: %w", cq.Name, err)
		}
	}
	for _, lq := range c.LocalQueues {
		if err := cache.AddLocalQueue(lq); err != nil {
			return nil, fmt.Errorf("LocalQueue %s/%s: %w", lq.Namespace, lq.Name, err)
		}
		if err := queues.AddLocalQueue(ctx, lq); err != nil {
			return nil, fmt.Errorf("LocalQueue %s/%s: %w", lq.Namespace, lq.Name, err)
		}
	}
	before := map[string]bool{}
	for key, wl := range cl.workloads {
		if workload.HasQuotaReservation(wl) {
			before[key] = true
			cache.AddOrUpdateWorkload(log, wl)
		} else {
			_ = queues.AddOrUpdateWorkload(log, wl) // a Workload no queue takes stays where it is: pending
		}
	}

	sched := scheduler.New(queues, cache, cl, &events.FakeRecorder{},
		scheduler.WithFairSharing(c.FairSharing), scheduler.WithAdmissionFairSharing(c.AdmissionFairSharing),
		scheduler.WithPreemptionExpectations(store))
	setAdmissionRoutineWrapper(sched, inline{})
	res = &Result{Workloads: map[string]*Outcome{}, Usage: map[string][]kueue.FlavorUsage{}}
	preempted := map[string]eviction{}
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		requeuer.ProcessRequeues(ctx)
		if activeHeads(queues, cache) == 0 {
			break
		}
		if res.Cycles >= maxCycles {
			return nil, errTooLong
		}
		res.Cycles++
		scheduleOnce(sched, ctx)
		// What Kueue's Workload controller does when it sees a reservation:
		// the Workload leaves its queue (else it would stay the queue's
		// popped head, and count as pending).
		for _, wl := range cl.takeReservations() {
			queues.DeleteWorkload(log, workload.Key(wl))
			cache.AddOrUpdateWorkload(log, wl)
		}
		for _, ev := range cl.takeEvictions() {
			preempted[ev.key] = ev
			requeueEvicted(ctx, log, cl, cache, queues, ev.key)
		}
	}

	snap, err := cache.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	for name, cq := range snap.ClusterQueues() {
		for ref := range cq.Workloads {
			key := string(ref)
			o := &Outcome{Fate: Admitted, ClusterQueue: string(name)}
			if before[key] {
				o.Fate = StaysAdmitted
			}
			res.Workloads[key] = o
		}
	}
	for _, cq := range c.ClusterQueues {
		for i, info := range queues.PendingWorkloadsInfo(kueue.ClusterQueueReference(cq.Name)) {
			res.Workloads[string(workload.Key(info.Obj))] = &Outcome{Fate: StaysPending, ClusterQueue: cq.Name, Position: i + 1}
		}
		if u, err := cache.Usage(cq); err == nil {
			res.Usage[cq.Name] = u.ReservedResources
		}
	}
	for key := range cl.workloads {
		o, ok := res.Workloads[key]
		if !ok {
			o = &Outcome{Fate: StaysPending} // in no queue Kueue knows (a LocalQueue missing or stopped)
			res.Workloads[key] = o
		}
		if ev, ok := preempted[key]; ok {
			o.Fate, o.Reason, o.Message = Preempted, ev.preemptedReason, ev.message
		}
		if s := shapes[key]; s != nil && o.Fate != StaysAdmitted && o.Fate != StaysPending {
			for _, ps := range s.PodSets {
				if ps.Topology {
					o.Uncertain = "It asks for a topology (nodes close to each other): whether nodes have room is decided at scheduling, not by quota."
				}
			}
		}
	}
	return res, nil
}

// activeHeads counts the Workloads Kueue would try in its next cycle: those
// in the heaps of active ClusterQueues, the ones Kueue's Heads pops (a
// count that includes an inactive queue's, or the head popped last cycle,
// would call Heads when it has nothing to give, and Heads then waits for
// ever).
func activeHeads(queues *qcache.Manager, cache *schdcache.Cache) int {
	n := 0
	for _, name := range queues.GetClusterQueueNames() {
		if !cache.ClusterQueueActive(name) {
			continue
		}
		if cq := queueOf(queues, name); cq != nil {
			heap, _ := cq.Dump()
			n += len(heap)
		}
	}
	return n
}

// requeueEvicted does what Kueue's controllers do after the scheduler
// evicts a Workload: its job stops, its quota is released, and it queues
// again, which lets the Workloads parked behind it try again.
func requeueEvicted(ctx context.Context, log logr.Logger, cl *copyClient, cache *schdcache.Cache, queues *qcache.Manager, key string) {
	cl.mu.Lock()
	wl := cl.workloads[key]
	if wl != nil {
		now := metav1.NewTime(time.Now())
		wl.Status.Admission = nil
		apimeta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: kueue.WorkloadQuotaReserved,
			Status: metav1.ConditionFalse, Reason: "Pending", LastTransitionTime: now})
		apimeta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: kueue.WorkloadAdmitted,
			Status: metav1.ConditionFalse, Reason: "NoReservation", LastTransitionTime: now})
		wl = wl.DeepCopy()
	}
	cl.mu.Unlock()
	if wl == nil {
		return
	}
	ref := workload.Key(wl)
	_ = queues.AddOrUpdateWorkload(log, wl)
	queues.QueueAssociatedInadmissibleWorkloadsAfter(ctx, ref, func() { _ = cache.DeleteWorkload(log, ref) })
}

var debugLog *logr.Logger
