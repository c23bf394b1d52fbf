package sandbox

import (
	"context"
	"fmt"
	"io"
	"time"

	"golang.org/x/time/rate"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueclient "sigs.k8s.io/kueue/client-go/clientset/versioned"
	kueueinformers "sigs.k8s.io/kueue/client-go/informers/externalversions"
	"sigs.k8s.io/kueue/pkg/workload"
	workloadevict "sigs.k8s.io/kueue/pkg/workload/evict"
	workloadfinish "sigs.k8s.io/kueue/pkg/workload/finish"
	workloadpatching "sigs.k8s.io/kueue/pkg/workload/patching"
)

// A Workload created directly (the load instance's) has no job: when Kueue
// evicts it, no job controller stops the job and clears the quota
// reservation, so it would stay evicted holding its quota and Kueue would
// keep trying to preempt for ever. releaseEvicted plays that part of Kueue's
// job reconciler (jobframework's "handle eviction") for bare Workloads.

// needsRelease reports whether Kueue's job reconciler would clear wl's quota
// reservation: a Workload no job owns, evicted, still holding quota, neither
// finished nor being deleted (the reconciler handles those first).
func needsRelease(wl *kueuev1beta2.Workload) bool {
	return len(wl.OwnerReferences) == 0 && wl.DeletionTimestamp.IsZero() &&
		workloadevict.IsEvicted(wl) && workload.HasQuotaReservation(wl) && !workloadfinish.IsFinished(wl)
}

// releaseReservation is the reconciler's status change for an evicted
// Workload whose job no longer runs: requeued (after a preemption or a node
// failure) and back to pending without an admission.
func releaseReservation(wl *kueuev1beta2.Workload, now time.Time) bool {
	evicted := apimeta.FindStatusCondition(wl.Status.Conditions, kueuev1beta2.WorkloadEvicted)
	if evicted == nil {
		return false
	}
	requeue := evicted.Reason == kueuev1beta2.WorkloadEvictedByPreemption || evicted.Reason == kueuev1beta2.WorkloadEvictedDueToNodeFailures
	updated := workload.SetRequeuedCondition(wl, evicted.Reason, evicted.Message, requeue)
	reason := workload.UnadmittedWorkloadReasonWithFallback(
		kueuev1beta2.WorkloadQuotaReservedReasonPendingEvaluation,
		//lint:ignore SA1019 the reason Kueue itself writes without the feature gate
		kueuev1beta2.WorkloadPending,
	)
	if workload.UnsetQuotaReservationWithCondition(wl, reason, evicted.Message, now) {
		updated = true
	}
	return updated
}

// trimWorkload keeps what needsRelease reads: at 50 000 Workloads the
// whole objects would be most of the agent's memory. The worker reads the
// full object before it writes.
func trimWorkload(obj any) (any, error) {
	wl, ok := obj.(*kueuev1beta2.Workload)
	if !ok {
		return obj, nil
	}
	t := &kueuev1beta2.Workload{ObjectMeta: metav1.ObjectMeta{
		Namespace: wl.Namespace, Name: wl.Name, UID: wl.UID, ResourceVersion: wl.ResourceVersion,
		DeletionTimestamp: wl.DeletionTimestamp, OwnerReferences: wl.OwnerReferences,
	}}
	for _, c := range wl.Status.Conditions {
		switch c.Type {
		case kueuev1beta2.WorkloadEvicted, kueuev1beta2.WorkloadQuotaReserved, kueuev1beta2.WorkloadFinished:
			t.Status.Conditions = append(t.Status.Conditions, metav1.Condition{Type: c.Type, Status: c.Status})
		}
	}
	return t, nil
}

const (
	releaseQPS   = 50  // writes per second at most
	releaseBurst = 100 // writes in a burst
	releaseLogN  = 500 // one log line per this many releases
)

// runReleaseEvicted clears the quota reservation of evicted bare Workloads
// until ctx ends, one write at a time.
func runReleaseEvicted(ctx context.Context, cfg *rest.Config, kq kueueclient.Interface, log io.Writer) error {
	scheme := runtime.NewScheme()
	if err := kueuev1beta2.AddToScheme(scheme); err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	factory := kueueinformers.NewSharedInformerFactoryWithOptions(kq, 0, kueueinformers.WithTransform(trimWorkload))
	informer := factory.Kueue().V1beta2().Workloads()
	// Retries back off per Workload; writes are paced by the releaser.
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[cache.ObjectName](100*time.Millisecond, time.Minute),
		workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{Name: "release-evicted"})
	defer queue.ShutDown()
	enqueue := func(obj any) {
		if wl, ok := obj.(*kueuev1beta2.Workload); ok && needsRelease(wl) {
			queue.Add(cache.MetaObjectToName(wl))
		}
	}
	if _, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	go func() {
		<-ctx.Done()
		queue.ShutDown()
	}()

	r := &releaser{client: c, store: informer.Informer().GetStore(), clock: clock.RealClock{},
		limit: rate.NewLimiter(releaseQPS, releaseBurst), log: log}
	for r.next(ctx, queue) {
	}
	return nil
}

type releaser struct {
	client   client.Client
	store    cache.Store
	clock    clock.Clock
	limit    *rate.Limiter
	log      io.Writer
	released int
	failed   int
}

func (r *releaser) next(ctx context.Context, queue workqueue.TypedRateLimitingInterface[cache.ObjectName]) bool {
	key, quit := queue.Get()
	if quit {
		return false
	}
	defer queue.Done(key)
	err := r.release(ctx, key)
	switch {
	case err == nil || apierrors.IsNotFound(err):
		queue.Forget(key)
	case ctx.Err() != nil:
	default:
		// A conflict means the Workload changed: the next read decides again.
		r.failed++
		if r.failed == 1 || r.failed%100 == 0 {
			fmt.Fprintf(r.log, "release evicted: %s: %v (%d failed writes so far)\n", key, err, r.failed)
		}
		queue.AddRateLimited(key)
	}
	return true
}

func (r *releaser) release(ctx context.Context, key cache.ObjectName) error {
	if obj, ok, err := r.store.GetByKey(key.String()); err != nil || !ok || !needsRelease(obj.(*kueuev1beta2.Workload)) {
		return err
	}
	if err := r.limit.Wait(ctx); err != nil {
		return err
	}
	var wl kueuev1beta2.Workload
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: key.Name}, &wl); err != nil {
		return err
	}
	if !needsRelease(&wl) {
		return nil
	}
	// Kueue's own write: a server-side apply of the admission status,
	// field manager kueue-admission, bound to the resourceVersion read.
	err := workloadpatching.PatchAdmissionStatus(ctx, r.client, &wl, r.clock, func(wl *kueuev1beta2.Workload) (bool, error) {
		return releaseReservation(wl, r.clock.Now()), nil
	})
	if err != nil {
		return err
	}
	r.released++
	if r.released%releaseLogN == 0 {
		fmt.Fprintf(r.log, "release evicted: %d evicted Workloads returned to pending so far\n", r.released)
	}
	return nil
}
