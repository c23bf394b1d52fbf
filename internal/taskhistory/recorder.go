package taskhistory

import (
	"context"
	"encoding/json"
	"errors"
	"hash/fnv"
	"log/slog"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/domain"
)

// RecorderConfig configures a Recorder.
type RecorderConfig struct {
	// TeamPrefix is the namespace prefix of team namespaces ("hyperpod-ns-").
	TeamPrefix string
	// TeamOf names the team of a task: the team of its ClusterQueue (the
	// admission's, else its LocalQueue's), as the live pages count it
	// (domain.Settings.TeamOfClusterQueue). Nil, or ok false: the team
	// its namespace names.
	TeamOf func(namespace, localQueue, clusterQueue string) (team string, ok bool)
	// Identity names this replica in the record of runs (e.g. the pod name).
	Identity string
	// Workloads lists every Workload a page at a time, for the backfill at
	// start and after an overflow: the console's cache keeps only each
	// Workload's task, so this asks the apiserver (kueue.Cache.
	// WorkloadPages). It is the recorder's only LIST: once per leadership,
	// and again only after its queue overflowed.
	Workloads func(ctx context.Context, page func([]*kueuev1beta2.Workload) error) error
	// ClusterQueues lists the informer cache's ClusterQueues.
	ClusterQueues func() ([]*kueuev1beta2.ClusterQueue, error)
	// CohortTree names the root of a cohort's tree (Kueue's hierarchical
	// cohorts): a queue borrows from anywhere in it, so lending is shared
	// out over the tree, and the history records each queue's tree. Nil:
	// each cohort is a tree of its own.
	CohortTree func(cohort string) string
	// Synced reports whether the informers have their initial lists; Run
	// waits for it before the backfill, which takes every recorded task
	// missing from the list for deleted. Nil: synced.
	Synced func() bool
	// QueueSize bounds the events waiting to be written (default 10 000);
	// beyond it the recorder drops events and records a gap. BatchSize
	// bounds one transaction (default 500).
	QueueSize, BatchSize int
	// PruneEvery is how often old records are deleted (default 1 h).
	PruneEvery time.Duration
	// Backfilled, when set, is called after each backfill (a burst of
	// whole Workloads read and dropped).
	Backfilled func()
	Log        *slog.Logger
}

// Recorder writes the history of Workloads and ClusterQueues from informer
// events. Its handlers never block: they queue the event, and Run writes
// the queue in batches. Only while Run runs does it record; on a replica
// that does not hold the lease, the handlers do nothing.
type Recorder struct {
	store *Store
	cfg   RecorderConfig
	now   func() time.Time

	running atomic.Bool
	queue   chan item
	// droppedSince is when the queue first overflowed since the last
	// backfill (unix nanos; 0: nothing dropped).
	droppedSince atomic.Int64

	mu    sync.Mutex
	stats RecorderStats

	// seen is, per Workload UID, a hash of the last change queued: the
	// informer hook sees every Workload again on each update and relist,
	// without the previous state to compare with. listed are the
	// resourceVersions the last backfill read, until the events queued
	// before it are written: an older one is not written over it.
	seenMu sync.Mutex
	seen   map[string]uint64
	listed map[string]uint64
	// variantJobs is the UID of the job's own Workload by the UID of each
	// of its concurrent-admission Variants: Kueue names the Variant that
	// preempts, the history the task.
	variantJobs map[string]string
	// firstSlices is the UID of each elastic job's first slice, by its
	// key: the task all the job's slices go on.
	firstSlices map[string]string
}

// RecorderStats count what a Recorder did since it was made.
type RecorderStats struct {
	Observed, Dropped, Written, Events, Batches, WriteErrors, Backfills int64
	// Failing: the store refused or did not answer the last write, which
	// the recorder retries.
	Failing bool
}

// item is one queued observation: a Workload as seen (new, with its
// change), a Workload gone (its last state, or only its UID), or a
// ClusterQueue state.
type item struct {
	new     *kueuev1beta2.Workload
	change  *Change
	gone    *kueuev1beta2.Workload
	goneUID string
	at      time.Time
	queue   *QueueState
}

// NewRecorder makes a recorder writing to store.
func NewRecorder(store *Store, cfg RecorderConfig) *Recorder {
	if cfg.QueueSize <= 0 {
		cfg.QueueSize = 10000
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 500
	}
	if cfg.PruneEvery <= 0 {
		cfg.PruneEvery = time.Hour
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Recorder{store: store, cfg: cfg, now: time.Now, queue: make(chan item, cfg.QueueSize)}
}

// Stats returns the recorder's counters.
func (r *Recorder) Stats() RecorderStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats
}

func (r *Recorder) count(fn func(*RecorderStats)) {
	r.mu.Lock()
	fn(&r.stats)
	r.mu.Unlock()
}

// Observe takes a Workload as an informer receives it (an add, an update,
// a relist). It queues the Workload only when what the history keeps of it
// differs from what it last queued: re-seeing the same state costs a hash.
func (r *Recorder) Observe(wl *kueuev1beta2.Workload) {
	if wl == nil {
		return
	}
	// Known from the informers' first list on, leading or not, the
	// Variants name their jobs' tasks in the preemptions the backfill
	// records, and elastic jobs' first slices their tasks.
	r.noteVariant(wl)
	r.noteFirstSlice(wl)
	if !r.running.Load() {
		return
	}
	if r.cfg.Synced != nil && !r.cfg.Synced() {
		// The informers' first list: the backfill, which waits for it to
		// end, lists every Workload itself. Queueing each would overflow
		// the queue and cost a second backfill.
		return
	}
	c, ok := r.changeOf(wl)
	if !ok || !r.remember(string(wl.UID), hashOf(&c)) {
		return
	}
	r.enqueue(item{new: wl, change: &c})
}

// changeOf is the whole history wl shows, with its team; for a
// concurrent-admission Variant, what it adds to its job's task
// (VariantChange), if anything (ok).
func (r *Recorder) changeOf(wl *kueuev1beta2.Workload) (c Change, ok bool) {
	if r.noteVariant(wl) {
		c, ok = VariantChange(wl)
	} else {
		r.noteFirstSlice(wl)
		c, _ = Diff(nil, wl, r.cfg.TeamPrefix)
		c, ok = r.ofJob(wl, r.withTeam(c))
	}
	r.seenMu.Lock()
	for i := range c.Events {
		if job, ok := r.variantJobs[c.Events[i].Preemptor.UID]; ok {
			c.Events[i].Preemptor.UID = job
		}
	}
	r.seenMu.Unlock()
	return c, ok
}

// withTeam gives c's task the team of its ClusterQueue (RecorderConfig.TeamOf).
func (r *Recorder) withTeam(c Change) Change {
	if r.cfg.TeamOf != nil {
		if team, ok := r.cfg.TeamOf(c.Task.Namespace, c.Task.LocalQueue, c.Task.ClusterQueue); ok {
			c.Task.Team = team
		}
	}
	return c
}

// noteFirstSlice keeps the UID of an elastic job's first slice, which is
// the UID of the job's task (ofJob).
func (r *Recorder) noteFirstSlice(wl *kueuev1beta2.Workload) {
	if wl.Annotations[kueuev1beta2.WorkloadSliceNameAnnotation] != wl.Name {
		return
	}
	r.seenMu.Lock()
	defer r.seenMu.Unlock()
	if r.firstSlices == nil {
		r.firstSlices = map[string]string{}
	}
	r.firstSlices[domain.LocalQueueKey(wl.Namespace, wl.Name)] = string(wl.UID)
}

// ofJob is c, the change of wl, as the history of its task: an elastic
// job's later slice goes on its first slice's task (Change.Continues),
// from its admission on (before it, the job runs on in the slice before);
// a slice a later one replaced did not end the task: it is recorded as it
// ran, only when nothing of it is yet (Change.IfAbsent). ok is false for a
// change the history does not keep: a later slice never admitted (a resize
// waiting, or given up), a replaced slice's deletion.
func (r *Recorder) ofJob(wl *kueuev1beta2.Workload, c Change) (Change, bool) {
	if f := apimeta.FindStatusCondition(wl.Status.Conditions, kueuev1beta2.WorkloadFinished); f != nil &&
		f.Status == metav1.ConditionTrue && f.Reason == kueuev1beta2.WorkloadSliceReplaced {
		if !c.Task.DeletedAt.IsZero() || c.Task.AdmittedAt.IsZero() {
			return c, false
		}
		c.Task.State, c.Task.FinishedAt, c.Task.Outcome, c.Task.FinishReason, c.Task.Run = domain.TaskAdmitted, time.Time{}, "", "", 0
		c.Events = slices.DeleteFunc(c.Events, func(e Event) bool { return e.Kind == EventFinished })
		c.IfAbsent = true
	}
	first := wl.Annotations[kueuev1beta2.WorkloadSliceNameAnnotation]
	if first == "" || first == wl.Name {
		return c, true
	}
	r.seenMu.Lock()
	uid, ok := r.firstSlices[domain.LocalQueueKey(wl.Namespace, first)]
	r.seenMu.Unlock()
	if !ok {
		return c, true // its first slice is gone: a task of its own
	}
	if c.Task.AdmittedAt.IsZero() && c.Task.ReleasedAt.IsZero() {
		return c, false
	}
	c.Task.UID, c.Continues = uid, true
	return c, true
}

// noteVariant keeps which job a concurrent-admission Variant is of; false
// for a Workload that is no Variant.
func (r *Recorder) noteVariant(wl *kueuev1beta2.Workload) bool {
	parent := domain.VariantParent(wl.OwnerReferences)
	if parent == nil {
		return false
	}
	r.seenMu.Lock()
	defer r.seenMu.Unlock()
	if r.variantJobs == nil {
		r.variantJobs = map[string]string{}
	}
	r.variantJobs[string(wl.UID)] = string(parent.UID)
	return true
}

// remember records h as the last change of uid; false when it already was.
func (r *Recorder) remember(uid string, h uint64) bool {
	r.seenMu.Lock()
	defer r.seenMu.Unlock()
	if r.seen == nil {
		r.seen = map[string]uint64{}
	}
	if old, ok := r.seen[uid]; ok && old == h {
		return false
	}
	r.seen[uid] = h
	return true
}

func (r *Recorder) forget(uid string) {
	r.seenMu.Lock()
	delete(r.seen, uid)
	r.seenMu.Unlock()
}

// hashOf hashes what a change or a queue state records.
func hashOf(v any) uint64 {
	h := fnv.New64a()
	_ = json.NewEncoder(h).Encode(v)
	return h.Sum64()
}

// Deleted takes a Workload delete from an informer that keeps whole
// Workloads: wl is its last state.
func (r *Recorder) Deleted(wl *kueuev1beta2.Workload) {
	if wl != nil && isVariant(wl) {
		r.forget(string(wl.UID))
		r.seenMu.Lock()
		delete(r.variantJobs, string(wl.UID))
		r.seenMu.Unlock()
		return // its job's task ends with the job's own Workload
	}
	if wl != nil && r.running.Load() {
		r.forget(string(wl.UID))
		r.enqueue(item{gone: wl, at: r.now()})
	}
}

// DeletedUID takes a Workload delete known only by its UID (the console's
// cache keeps no Workloads): the recorded task ends at at, from its record.
func (r *Recorder) DeletedUID(uid string, at time.Time) {
	if uid != "" && r.running.Load() {
		r.forget(uid)
		r.enqueue(item{goneUID: uid, at: at})
	}
}

// queueOf is QueueOf with the queue's cohort tree in place of its cohort.
func (r *Recorder) queueOf(cq *kueuev1beta2.ClusterQueue, at time.Time) QueueState {
	q := QueueOf(cq, r.cfg.TeamPrefix, at)
	if r.cfg.CohortTree != nil && q.Cohort != "" {
		q.Cohort = r.cfg.CohortTree(q.Cohort)
	}
	return q
}

// ObserveCohorts takes a change of Kueue's Cohort objects: a queue whose
// tree it changes is recorded in its new tree.
func (r *Recorder) ObserveCohorts() {
	if !r.running.Load() || r.cfg.ClusterQueues == nil {
		return
	}
	cqs, err := r.cfg.ClusterQueues()
	if err != nil {
		return // the next change, or the next leadership's backfill, records them
	}
	for _, cq := range cqs {
		r.ObserveClusterQueue(nil, cq)
	}
}

// ObserveClusterQueue takes a ClusterQueue add or update (old nil when the
// previous state is not at hand); only a change of its quotas, cohort or
// team is recorded: without old, a change from what was last queued.
func (r *Recorder) ObserveClusterQueue(old, new *kueuev1beta2.ClusterQueue) {
	if new == nil || !r.running.Load() {
		return
	}
	at := r.now()
	q := r.queueOf(new, at)
	if old != nil {
		prev := r.queueOf(old, at)
		if reflect.DeepEqual(prev, q) {
			return
		}
	}
	if !r.remember(seenQueueKey(q.ClusterQueue), hashOf(queueFacts(q))) {
		return
	}
	r.enqueue(item{queue: &q})
}

// seenQueueKey is a ClusterQueue's key among the seen hashes (never a UID).
func seenQueueKey(name string) string { return "clusterqueue\x00" + name }

// queueFacts is what a queue's hash covers: not when it was seen.
func queueFacts(q QueueState) QueueState {
	q.At = time.Time{}
	return q
}

// ClusterQueueDeleted takes a ClusterQueue delete.
func (r *Recorder) ClusterQueueDeleted(cq *kueuev1beta2.ClusterQueue) {
	if cq != nil && r.running.Load() {
		r.forget(seenQueueKey(cq.Name))
		q := QueueGone(cq, r.cfg.TeamPrefix, r.now())
		r.enqueue(item{queue: &q})
	}
}

// WorkloadHandler is the informer handler that feeds the recorder.
func (r *Recorder) WorkloadHandler() cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if wl, ok := obj.(*kueuev1beta2.Workload); ok {
				r.Observe(wl)
			}
		},
		UpdateFunc: func(_, newObj any) {
			if wl, ok := newObj.(*kueuev1beta2.Workload); ok {
				r.Observe(wl)
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if wl, ok := obj.(*kueuev1beta2.Workload); ok {
				r.Deleted(wl)
			}
		},
	}
}

// ClusterQueueHandler is the informer handler for ClusterQueues.
func (r *Recorder) ClusterQueueHandler() cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if cq, ok := obj.(*kueuev1beta2.ClusterQueue); ok {
				r.ObserveClusterQueue(nil, cq)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			old, _ := oldObj.(*kueuev1beta2.ClusterQueue)
			if cq, ok := newObj.(*kueuev1beta2.ClusterQueue); ok {
				r.ObserveClusterQueue(old, cq)
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if cq, ok := obj.(*kueuev1beta2.ClusterQueue); ok {
				r.ClusterQueueDeleted(cq)
			}
		},
	}
}

func (r *Recorder) enqueue(it item) {
	if !r.running.Load() {
		return
	}
	select {
	case r.queue <- it:
		r.count(func(s *RecorderStats) { s.Observed++ })
	default:
		// Never block the informer, never grow without bound: drop, and
		// record the gap once the queue drains.
		r.droppedSince.CompareAndSwap(0, r.now().UnixNano())
		r.count(func(s *RecorderStats) { s.Dropped++ })
	}
}

const (
	flushAfter = 100 * time.Millisecond
	backoffMin = 500 * time.Millisecond
	backoffMax = 30 * time.Second
)

// Run records until ctx ends: it records the run, backfills from the
// informer cache, then writes what the handlers queue, with heartbeats and
// pruning. A store that fails is retried with backoff; Run returns only
// when ctx ends (nil) or when it cannot even start.
func (r *Recorder) Run(ctx context.Context) error {
	if !r.running.CompareAndSwap(false, true) {
		return errors.New("task history recorder: already running")
	}
	defer r.running.Store(false)
	r.droppedSince.Store(0)
	defer func() {
		r.seenMu.Lock()
		r.seen, r.listed = nil, nil
		r.seenMu.Unlock()
	}()

	var runID int64
	if err := r.retry(ctx, "start run", writeTimeout, func(ctx context.Context) (err error) {
		// From the start of the second: the backfill records the state as
		// of now, and Kueue's times of what happened since then come
		// rounded down to the second (see QueueOf).
		runID, err = r.store.StartRun(ctx, r.cfg.Identity, r.now().Truncate(time.Second))
		return err
	}); err != nil {
		return nil // ctx ended
	}
	var pending []item // a batch being written when ctx ends gets a last try
	defer func() {
		r.stop(runID, pending)
	}()

	for r.cfg.Synced != nil && !r.cfg.Synced() {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(200 * time.Millisecond):
		}
	}
	if err := r.retry(ctx, "backfill", backfillTimeout, func(ctx context.Context) error { return r.backfill(ctx, runID) }); err != nil {
		return nil
	}

	heartbeat := time.NewTicker(HeartbeatEvery)
	defer heartbeat.Stop()
	prune := time.NewTicker(r.cfg.PruneEvery)
	defer prune.Stop()
	r.prune(ctx)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-heartbeat.C:
			hctx, cancel := context.WithTimeout(ctx, writeTimeout)
			err := r.store.Heartbeat(hctx, runID, r.now())
			cancel()
			if err != nil && ctx.Err() == nil {
				r.cfg.Log.Warn("task history: heartbeat", "err", err)
			}
		case <-prune.C:
			r.prune(ctx)
		case it := <-r.queue:
			pending = r.collect(ctx, it)
			if err := r.retry(ctx, "write", writeTimeout, func(ctx context.Context) error { return r.writeOrSplit(ctx, pending) }); err != nil {
				return nil
			}
			pending = nil
			if len(r.queue) == 0 {
				r.seenMu.Lock()
				r.listed = nil // what was queued before the backfill is written
				r.seenMu.Unlock()
			}
			if r.droppedSince.Load() != 0 && len(r.queue) == 0 {
				if err := r.retry(ctx, "backfill after dropped events", backfillTimeout, func(ctx context.Context) error { return r.backfill(ctx, runID) }); err != nil {
					return nil
				}
			}
		}
	}
}

// collect gathers a batch: what is queued, up to BatchSize, waiting
// briefly for more after the first.
func (r *Recorder) collect(ctx context.Context, first item) []item {
	batch := []item{first}
	timer := time.NewTimer(flushAfter)
	defer timer.Stop()
	for len(batch) < r.cfg.BatchSize {
		select {
		case it := <-r.queue:
			batch = append(batch, it)
		case <-timer.C:
			return batch
		case <-ctx.Done():
			return batch
		}
	}
	return batch
}

// write turns queued observations into changes and writes them.
func (r *Recorder) write(ctx context.Context, items []item) error {
	var b Batch
	for _, it := range items {
		switch {
		case it.queue != nil:
			b.Queues = append(b.Queues, *it.queue)
		case it.gone != nil:
			if c, ok := r.ofJob(it.gone, r.withTeam(Gone(it.gone, r.cfg.TeamPrefix, it.at))); ok {
				b.Changes = append(b.Changes, c)
			}
		case it.goneUID != "":
			b.Gone = append(b.Gone, GoneUID{UID: it.goneUID, At: it.at})
		case it.new != nil:
			if r.older(it.new) {
				continue
			}
			b.Changes = append(b.Changes, *it.change)
		}
	}
	if len(b.Changes) == 0 && len(b.Queues) == 0 && len(b.Gone) == 0 {
		return nil
	}
	w, err := r.store.Write(ctx, b)
	if err != nil {
		return err
	}
	r.count(func(s *RecorderStats) {
		s.Batches++
		s.Written += int64(w.Tasks)
		s.Events += int64(w.Events)
	})
	return nil
}

// writeOrSplit writes a batch. When the store refuses it for what it
// holds rather than for its own state (see storeTrouble), the items are
// written one by one and those refused are dropped (a gap, like an
// overflow), so that one bad event never stalls the recorder.
func (r *Recorder) writeOrSplit(ctx context.Context, items []item) error {
	err := r.write(ctx, items)
	if err == nil || storeTrouble(err) {
		return err
	}
	refused := 0
	for _, it := range items {
		if err := r.write(ctx, []item{it}); err != nil {
			if storeTrouble(err) {
				return err
			}
			refused++
			r.cfg.Log.Error("task history: the store refuses an event; dropped", "err", err)
		}
	}
	if refused > 0 {
		r.droppedSince.CompareAndSwap(0, r.now().UnixNano())
		r.count(func(s *RecorderStats) { s.Dropped += int64(refused) })
	}
	return nil
}

// older reports whether wl is older than the backfill's copy of it (a
// Workload queued before the backfill listed it again).
func (r *Recorder) older(wl *kueuev1beta2.Workload) bool {
	r.seenMu.Lock()
	listed, ok := r.listed[string(wl.UID)]
	r.seenMu.Unlock()
	if !ok {
		return false
	}
	rv, err := strconv.ParseUint(wl.ResourceVersion, 10, 64)
	return err == nil && rv < listed
}

// backfill records every Workload and ClusterQueue of the cache as it is
// now, ends the recorded ones that are gone, and records the period of
// dropped events, if any, as a gap.
func (r *Recorder) backfill(ctx context.Context, runID int64) error {
	droppedSince := r.droppedSince.Swap(0)
	restore := func(err error) error {
		if droppedSince != 0 {
			r.droppedSince.CompareAndSwap(0, droppedSince)
		}
		return err
	}
	now := r.now()
	if r.cfg.ClusterQueues != nil {
		cqs, err := r.cfg.ClusterQueues()
		if err != nil {
			return restore(err)
		}
		b := Batch{}
		present := map[string]bool{}
		for _, cq := range cqs {
			q := r.queueOf(cq, now)
			b.Queues = append(b.Queues, q)
			present[cq.Name] = true
			r.remember(seenQueueKey(q.ClusterQueue), hashOf(queueFacts(q)))
		}
		if _, err := r.store.Write(ctx, b); err != nil {
			return restore(err)
		}
		if err := r.store.CloseQueuesExcept(ctx, present, now); err != nil {
			return restore(err)
		}
	}
	if r.cfg.Workloads != nil {
		// Page by page: only the UIDs (and versions) stay for the sweep.
		present := map[string]bool{}
		listed := map[string]uint64{}
		// Variants' preemptions and later slices of elastic jobs go on
		// other Workloads' tasks: once every task of the list is written.
		var later []item
		err := r.cfg.Workloads(ctx, func(page []*kueuev1beta2.Workload) error {
			items := make([]item, 0, len(page))
			for _, wl := range page {
				uid := string(wl.UID)
				if isVariant(wl) {
					if c, ok := r.changeOf(wl); ok {
						r.remember(uid, hashOf(&c))
						later = append(later, item{new: wl, change: &c})
					}
					continue
				}
				present[uid] = true
				if rv, err := strconv.ParseUint(wl.ResourceVersion, 10, 64); err == nil {
					listed[uid] = rv
				}
				c, ok := r.changeOf(wl)
				if !ok {
					continue
				}
				r.remember(uid, hashOf(&c))
				if c.Continues {
					later = append(later, item{new: wl, change: &c})
					continue
				}
				items = append(items, item{new: wl, change: &c})
			}
			for len(items) > 0 {
				n := min(len(items), r.cfg.BatchSize)
				if err := r.write(ctx, items[:n]); err != nil {
					return err
				}
				items = items[n:]
			}
			return nil
		})
		if err != nil {
			return restore(err)
		}
		for len(later) > 0 {
			n := min(len(later), r.cfg.BatchSize)
			if err := r.write(ctx, later[:n]); err != nil {
				return restore(err)
			}
			later = later[n:]
		}
		r.seenMu.Lock()
		r.listed = listed
		r.seenMu.Unlock()
		lastSeen, err := r.store.LastCoverage(ctx, runID)
		if err != nil {
			return restore(err)
		}
		if droppedSince != 0 {
			lastSeen = time.Unix(0, droppedSince)
		}
		if _, err := r.store.MarkVanished(ctx, present, now, lastSeen); err != nil {
			return restore(err)
		}
	}
	if droppedSince != 0 {
		if err := r.store.RecordLost(ctx, Period{From: time.Unix(0, droppedSince), To: r.now()}, "recorder queue overflow"); err != nil {
			return restore(err)
		}
	}
	r.count(func(s *RecorderStats) { s.Backfills++ })
	if r.cfg.Backfilled != nil {
		r.cfg.Backfilled()
	}
	return nil
}

func (r *Recorder) prune(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, backfillTimeout)
	defer cancel()
	if n, err := r.store.Prune(ctx); err != nil && ctx.Err() == nil {
		r.cfg.Log.Warn("task history: pruning old records", "err", err)
	} else if n > 0 {
		r.cfg.Log.Info("task history: pruned old records", "rows", n)
	}
}

// writeTimeout bounds one attempt at a write to the store, and
// backfillTimeout one backfill or prune: a store that accepts connections
// but does not answer must not hold the recorder, and its Lease, for ever.
const (
	writeTimeout    = 30 * time.Second
	backfillTimeout = 10 * time.Minute
)

// retry runs fn, each attempt within timeout, until it succeeds, backing
// off after each failure; it fails only when ctx ends. Stats().Failing
// says whether the last attempt failed.
func (r *Recorder) retry(ctx context.Context, what string, timeout time.Duration, fn func(context.Context) error) error {
	wait := backoffMin
	for {
		actx, cancel := context.WithTimeout(ctx, timeout)
		err := fn(actx)
		cancel()
		if err == nil {
			r.count(func(s *RecorderStats) { s.Failing = false })
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		r.count(func(s *RecorderStats) { s.WriteErrors++; s.Failing = true })
		r.cfg.Log.Warn("task history: "+what+" failed; retrying", "err", err, "in", wait)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, backoffMax)
	}
}

// stop writes pending and what is still queued, briefly, and records the
// run's end.
func (r *Recorder) stop(runID int64, pending []item) {
	r.running.Store(false)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for {
		items := pending
		pending = nil
	drain:
		for len(items) < r.cfg.BatchSize {
			select {
			case it := <-r.queue:
				items = append(items, it)
			default:
				break drain
			}
		}
		if len(items) == 0 {
			break
		}
		if err := r.write(ctx, items); err != nil {
			r.cfg.Log.Warn("task history: writing the last events", "err", err)
			break
		}
	}
	if err := r.store.EndRun(ctx, runID, r.now()); err != nil {
		r.cfg.Log.Warn("task history: recording the end of the run", "err", err)
	}
}
