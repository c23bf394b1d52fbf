package impact

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime/pkg/log"
	config "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/metrics"
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
	// Resources is how Kueue counts a Workload's resources: the
	// transformations and the resources left out (its configuration's
	// resources section).
	Resources *config.Resources
	// Uncertain names, per ClusterQueue, what of its admissions the preview
	// cannot know (its admission checks: a provisioning request decides
	// whether the nodes come).
	Uncertain map[string]string
	// PendingPerQueue bounds the pending Workloads each ClusterQueue hands
	// the scheduler, the first in Kueue's order (0: all). Kueue tries one
	// head per queue and cycle, so a queue thousands deep costs thousands
	// of cycles; the ones behind are reported in place, and as uncertain
	// when every one the scheduler saw was admitted.
	PendingPerQueue int
	// Limit, when set, stops the run at the cycle it names once its time
	// is up; runs that share a Limit stop at the same cycle.
	Limit *Limit
}

// Limit bounds in time runs compared with each other. On large cohorts
// with fair sharing one cycle of Kueue's scheduler takes seconds (7 s at
// 200 queues and 50 000 Workloads), and a change that sets off preemptions
// takes hundreds of cycles;
// past its time the preview reports what the cycles so far did, as Kueue
// would do it first. The runs stop at the same cycle, so what one run did
// and the other did not yet is never read as the change's doing.
type Limit struct {
	mu       sync.Mutex
	deadline time.Time
	stopAt   int           // 0 until the time is up
	furthest int           // the most cycles a run sharing the limit has done
	longest  time.Duration // the longest cycle a run sharing the limit took
}

// NewLimit is a limit of d from now.
func NewLimit(d time.Duration) *Limit { return &Limit{deadline: time.Now().Add(d)} }

// stop reports whether a run that has done cycles, the last of which took
// last, must stop. The time is up once one more cycle, as long as the
// longest any run took, would end past the deadline: a cycle cannot be cut
// short, so the limit does not start one it expects to overrun. Every run
// then stops at the furthest cycle any of them had reached; each runs at
// least one, since a preview of no cycle would say nothing.
func (l *Limit) stop(cycles int, last time.Duration) bool {
	if l == nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.furthest = max(l.furthest, cycles)
	l.longest = max(l.longest, last)
	if l.stopAt == 0 && l.furthest > 0 && time.Now().Add(l.longest).After(l.deadline) {
		l.stopAt = l.furthest
	}
	return l.stopAt > 0 && cycles >= l.stopAt
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
	// Stalled: Kueue kept retrying heads without any change (it waits for
	// something the copy does not run); those stay pending, uncertain.
	Stalled bool
	// Cut: the run reached its Limit with heads left to try; those stay
	// pending, uncertain, and later cycles may preempt more.
	Cut bool
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

// maxStalledCycles is how many cycles in a row may change nothing before
// the preview stops waiting for them.
const maxStalledCycles = 5

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
	defer roomToRun()()
	log := logr.Discard()
	ctx = ctrl.IntoContext(ctx, log)
	scheme := runtime.NewScheme()
	if err := kueue.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := corev1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	cl := &copyClient{scheme: scheme, namespaces: map[string]*corev1.Namespace{}, workloads: map[string]*kueue.Workload{}}
	for _, ns := range c.Namespaces {
		cl.namespaces[ns.Name] = ns
	}
	shapes := make(map[string]*Shape, len(c.Workloads))
	for _, s := range c.Workloads {
		shapes[s.Key()] = s
	}

	store := expectations.NewStore("impact-preview")
	fairSharing := c.FairSharing != nil
	// The copy reports no LocalQueue metrics: Kueue recounts a queue's
	// pending Workloads for each report.
	noLQMetrics := &metrics.LocalQueueMetricsConfig{}
	cacheOptions := []schdcache.Option{schdcache.WithFairSharing(fairSharing), schdcache.WithAdmissionFairSharing(c.AdmissionFairSharing),
		schdcache.WithLocalQueueMetrics(noLQMetrics)}
	queueOptions := []qcache.Option{qcache.WithPreemptionExpectations(store), qcache.WithAdmissionFairSharing(c.AdmissionFairSharing),
		qcache.WithLocalQueueMetrics(noLQMetrics)}
	// As Kueue's main sets them up.
	if r := c.Resources; r != nil {
		if len(r.ExcludeResourcePrefixes) > 0 {
			cacheOptions = append(cacheOptions, schdcache.WithExcludedResourcePrefixes(r.ExcludeResourcePrefixes))
			queueOptions = append(queueOptions, qcache.WithExcludedResourcePrefixes(r.ExcludeResourcePrefixes))
		}
		if len(r.Transformations) > 0 {
			cacheOptions = append(cacheOptions, schdcache.WithResourceTransformations(r.Transformations))
			queueOptions = append(queueOptions, qcache.WithResourceTransformations(r.Transformations))
		}
	}
	cache := schdcache.New(cl, cacheOptions...)
	queues, requeuer := qcache.NewManagerForUnitTestsWithRequeuer(cl, cache, queueOptions...)
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
		// As Kueue's LocalQueue controller: a stopped LocalQueue (Hold,
		// HoldAndDrain) is in the cache, not in the queues, so its
		// Workloads wait where they are.
		if ptr.Deref(lq.Spec.StopPolicy, kueue.None) != kueue.None {
			continue
		}
		if err := queues.AddLocalQueue(ctx, lq); err != nil {
			return nil, fmt.Errorf("LocalQueue %s/%s: %w", lq.Namespace, lq.Name, err)
		}
	}
	// Admitted Workloads hold quota; pending ones queue, each ClusterQueue's
	// first PendingPerQueue in Kueue's order (the ones behind wait in place).
	before := map[string]bool{}
	lqQueue := map[string]string{}
	for _, lq := range c.LocalQueues {
		lqQueue[lq.Namespace+"/"+lq.Name] = string(lq.Spec.ClusterQueue)
	}
	waiting := map[string][]*Shape{}
	var evicting []string
	for key, s := range shapes {
		if s.Admitted() {
			wl := s.Workload()
			cl.workloads[key] = wl
			before[key] = true
			cache.AddOrUpdateWorkload(log, wl)
			if s.Evicting() {
				evicting = append(evicting, key)
			}
			continue
		}
		cq := lqQueue[s.Namespace+"/"+string(s.Queue)]
		waiting[cq] = append(waiting[cq], s)
	}
	behind := map[string][]*Shape{}
	for cq, ss := range waiting {
		ss = inKueueOrder(ss)
		if c.PendingPerQueue > 0 && cq != "" && len(ss) > c.PendingPerQueue {
			ss, behind[cq] = ss[:c.PendingPerQueue], ss[c.PendingPerQueue:]
		}
		for _, s := range ss {
			wl := s.Workload()
			cl.workloads[s.Key()] = wl
			_ = queues.AddOrUpdateWorkload(log, wl) // a Workload no queue takes stays where it is: pending
		}
	}

	sched := scheduler.New(queues, cache, cl, &events.FakeRecorder{},
		scheduler.WithFairSharing(c.FairSharing), scheduler.WithAdmissionFairSharing(c.AdmissionFairSharing),
		scheduler.WithPreemptionExpectations(store))
	setAdmissionRoutineWrapper(sched, inline{})
	// A cycle waits for a head; an ended preview wakes it.
	defer context.AfterFunc(ctx, queues.Broadcast)()
	res = &Result{Workloads: map[string]*Outcome{}, Usage: map[string][]kueue.FlavorUsage{}}
	preempted := map[string]eviction{}
	// An eviction under way (Kueue evicted it, its job has not stopped yet)
	// completes first, with or without any change: Kueue counts it as done.
	for _, key := range evicting {
		preempted[key] = eviction{key: key, preemptedReason: shapes[key].condition(kueue.WorkloadPreempted).Reason}
		requeueEvicted(ctx, log, cl, cache, queues, key)
	}
	stalled := 0
	var stuck, cut map[string]bool
	var last time.Duration // the last cycle's time
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		requeuer.ProcessRequeues(ctx)
		heads := activeHeads(queues, cache)
		if heads == 0 {
			break
		}
		if res.Cycles >= maxCycles {
			return nil, errTooLong
		}
		if c.Limit.stop(res.Cycles, last) {
			res.Cut = true
			cut = headsOf(queues, cache)
			break
		}
		res.Cycles++
		began := time.Now()
		scheduleOnce(sched, ctx)
		// What Kueue's Workload controller does when it sees a reservation:
		// the Workload leaves its queue (else it would stay the queue's
		// popped head, and count as pending).
		moved := false
		for _, wl := range cl.takeReservations() {
			queues.DeleteWorkload(log, workload.Key(wl))
			cache.AddOrUpdateWorkload(log, wl)
			moved = true
		}
		for _, ev := range cl.takeEvictions() {
			preempted[ev.key] = ev
			requeueEvicted(ctx, log, cl, cache, queues, ev.key)
			moved = true
		}
		// A cycle that admits, evicts and parks nothing leaves the same heads
		// to try again: Kueue waits there for something the copy has no
		// controller for. After a few such cycles the heads stay pending,
		// named uncertain.
		if !moved && activeHeads(queues, cache) >= heads {
			if stalled++; stalled >= maxStalledCycles {
				res.Stalled = true
				stuck = headsOf(queues, cache)
				// A StrictFIFO queue keeps a head that does not fit at its
				// front, and Kueue tries it every cycle: that is its rule,
				// and its tasks stay pending behind it.
				for _, cq := range c.ClusterQueues {
					if cq.Spec.QueueingStrategy == kueue.StrictFIFO {
						for _, info := range queues.PendingWorkloadsInfo(kueue.ClusterQueueReference(cq.Name)) {
							delete(stuck, string(workload.Key(info.Obj)))
						}
					}
				}
				break
			}
		} else {
			stalled = 0
		}
		last = time.Since(began)
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
		seen := queues.PendingWorkloadsInfo(kueue.ClusterQueueReference(cq.Name))
		for i, info := range seen {
			res.Workloads[string(workload.Key(info.Obj))] = &Outcome{Fate: StaysPending, ClusterQueue: cq.Name, Position: i + 1}
		}
		for i, s := range behind[cq.Name] {
			o := &Outcome{Fate: StaysPending, ClusterQueue: cq.Name, Position: len(seen) + i + 1}
			if len(seen) == 0 {
				o.Uncertain = fmt.Sprintf("Deeper in its queue than the %d tasks the preview hands Kueue, which admits all of those: it may be admitted too.", c.PendingPerQueue)
			}
			res.Workloads[s.Key()] = o
		}
		if u, err := cache.Usage(cq); err == nil {
			res.Usage[cq.Name] = u.ReservedResources
		}
	}
	// The copy counts none of the devices of a job with resource claims: what
	// it admits beside one, in its cohort tree, may not fit either.
	withClaims := map[string]bool{}
	for key, o := range res.Workloads {
		if s := shapes[key]; s != nil && o.Fate == Admitted && s.asksClaims() {
			withClaims[c.treeOf(o.ClusterQueue)] = true
		}
	}
	for key := range shapes {
		o, ok := res.Workloads[key]
		if !ok {
			o = &Outcome{Fate: StaysPending} // in no queue Kueue knows (a LocalQueue missing or stopped)
			res.Workloads[key] = o
		}
		if ev, ok := preempted[key]; ok {
			o.Fate, o.Reason, o.Message = Preempted, ev.preemptedReason, ev.message
		} else if o.Fate == StaysPending {
			o.Message = cl.pendingMessage(key)
		}
		if stuck[key] {
			o.Uncertain = "Kueue keeps trying it without a change: it waits for something the preview does not run (an eviction under way, admission checks)."
		}
		if cut[key] {
			o.Uncertain = fmt.Sprintf("Kueue had not tried it yet when the preview stopped, after %d cycles: it may be admitted, or preempt for it.", res.Cycles)
		}
		if why := c.Uncertain[o.ClusterQueue]; why != "" && o.Fate == Admitted {
			o.Uncertain = why
		}
		if s := shapes[key]; s != nil && o.Fate != StaysAdmitted && o.Fate != StaysPending {
			for _, ps := range s.PodSets {
				if ps.Topology {
					o.Uncertain = "It asks for a topology (nodes close to each other): whether nodes have room is decided at scheduling, not by quota."
				}
			}
		}
		if o.Fate == Admitted && o.Uncertain == "" {
			switch s := shapes[key]; {
			case s != nil && s.asksClaims():
				o.Uncertain = "It asks for devices through Dynamic Resource Allocation (resource claims), which Kueue counts from its deviceClassMappings and the preview does not: Kueue may find them beyond the quota."
			case len(withClaims) > 0 && withClaims[c.treeOf(o.ClusterQueue)]:
				o.Uncertain = "A job asking for devices through Dynamic Resource Allocation is admitted beside it, and the preview does not count those devices: there may be less room than it shows."
			}
		}
	}
	return res, nil
}

// asksClaims reports pods asking for devices through resource claims.
func (s *Shape) asksClaims() bool {
	return slices.ContainsFunc(s.PodSets, func(ps PodSetShape) bool { return ps.Claims })
}

// treeOf names the cohort tree a ClusterQueue borrows within: its root
// cohort, or the queue alone outside any.
func (c *Cluster) treeOf(clusterQueue string) string {
	var cohort kueue.CohortReference
	for _, cq := range c.ClusterQueues {
		if cq.Name == clusterQueue {
			cohort = cq.Spec.CohortName
		}
	}
	if cohort == "" {
		return "queue " + clusterQueue
	}
	parent := map[kueue.CohortReference]kueue.CohortReference{}
	for _, co := range c.Cohorts {
		parent[kueue.CohortReference(co.Name)] = co.Spec.ParentName
	}
	for seen := 0; parent[cohort] != "" && seen < len(parent); seen++ { // a cycle ends where it repeats
		cohort = parent[cohort]
	}
	return "cohort " + string(cohort)
}

// inKueueOrder sorts pending Workloads as Kueue's queues order them:
// higher priority first, then the earlier queue-order timestamp (Kueue's
// own Ordering, read from the conditions alone).
func inKueueOrder(ss []*Shape) []*Shape {
	order := workload.Ordering{PodsReadyRequeuingTimestamp: config.EvictionTimestamp}
	type keyed struct {
		s        *Shape
		priority int32
		at       time.Time
	}
	ks := make([]keyed, len(ss))
	for i, s := range ss {
		light := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: s.Created}, Status: kueue.WorkloadStatus{Conditions: s.Conditions}}
		ks[i] = keyed{s, ptr.Deref(s.Priority, 0), order.GetQueueOrderTimestamp(light).Time}
	}
	slices.SortFunc(ks, func(a, b keyed) int {
		return cmp.Or(cmp.Compare(b.priority, a.priority), a.at.Compare(b.at))
	})
	for i := range ks {
		ss[i] = ks[i].s
	}
	return ss
}

// activeHeads counts the Workloads Kueue would try in its next cycle: those
// in the heaps of active ClusterQueues, the ones Kueue's Heads pops (a
// count that includes an inactive queue's, or the head popped last cycle,
// would call Heads when it has nothing to give, and Heads then waits for
// ever).
func activeHeads(queues *qcache.Manager, cache *schdcache.Cache) int {
	return len(headsOf(queues, cache))
}

// headsOf are the Workloads in the heaps of active ClusterQueues.
func headsOf(queues *qcache.Manager, cache *schdcache.Cache) map[string]bool {
	out := map[string]bool{}
	for _, name := range queues.GetClusterQueueNames() {
		if !cache.ClusterQueueActive(name) {
			continue
		}
		if cq := queueOf(queues, name); cq != nil {
			heap, _ := cq.Dump()
			for _, ref := range heap {
				out[string(ref)] = true
			}
		}
	}
	return out
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
