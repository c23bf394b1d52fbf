package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/cache"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueclient "sigs.k8s.io/kueue/client-go/clientset/versioned"
	kueueinformers "sigs.k8s.io/kueue/client-go/informers/externalversions"

	"github.com/openquota/console/internal/domain"
)

// admissions follows every Workload and keeps each admission Kueue
// records (the Admitted condition turning True, as the task history counts
// them; a re-admission after a preemption is another), by namespace/name.
type admissions struct {
	mu   sync.Mutex
	at   map[string][]time.Time
	gone map[string]bool
	// log is every admission seen, in the order seen, for the rates of
	// the what-if estimates.
	log []admission
}

// admission is one admission of a Workload into a ClusterQueue.
type admission struct {
	Key, ClusterQueue, Class string
	At                       time.Time
	// First: the Workload's first admission (not a re-admission after an
	// eviction).
	First bool
}

func newAdmissions() *admissions {
	return &admissions{at: map[string][]time.Time{}, gone: map[string]bool{}}
}

// follow starts a Workload informer that feeds a until ctx ends, and waits
// until it has synced.
func (a *admissions) follow(ctx context.Context, kq kueueclient.Interface) error {
	f := kueueinformers.NewSharedInformerFactory(kq, 0)
	inf := f.Kueue().V1beta2().Workloads().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { a.observe(obj) },
		UpdateFunc: func(_, obj any) { a.observe(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if wl, ok := obj.(*kueuev1beta2.Workload); ok {
				a.observe(wl)
				a.mu.Lock()
				a.gone[domain.LocalQueueKey(wl.Namespace, wl.Name)] = true
				a.mu.Unlock()
			}
		},
	}); err != nil {
		return err
	}
	f.Start(ctx.Done())
	for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("the %v informer did not sync", typ)
		}
	}
	return nil
}

func (a *admissions) observe(obj any) {
	wl, ok := obj.(*kueuev1beta2.Workload)
	if !ok {
		return
	}
	c := apimeta.FindStatusCondition(wl.Status.Conditions, kueuev1beta2.WorkloadAdmitted)
	if c == nil || c.Status != "True" {
		return
	}
	r := admission{Key: domain.LocalQueueKey(wl.Namespace, wl.Name), At: c.LastTransitionTime.Time}
	if wl.Status.Admission != nil {
		r.ClusterQueue = string(wl.Status.Admission.ClusterQueue)
	}
	if ref := wl.Spec.PriorityClassRef; ref != nil {
		r.Class = ref.Name
	}
	// An evicted Workload keeps its Evicted condition once re-admitted.
	r.First = apimeta.FindStatusCondition(wl.Status.Conditions, kueuev1beta2.WorkloadEvicted) == nil
	a.record(r)
}

func (a *admissions) record(r admission) {
	a.mu.Lock()
	defer a.mu.Unlock()
	times := a.at[r.Key]
	i, found := slices.BinarySearchFunc(times, r.At, func(x, t time.Time) int { return x.Compare(t) })
	if found {
		return
	}
	r.First = r.First && i == 0
	a.at[r.Key] = slices.Insert(times, i, r.At)
	a.log = append(a.log, r)
}

// since is every admission after from.
func (a *admissions) since(from time.Time) []admission {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []admission
	for _, r := range a.log {
		if !r.At.Before(from) {
			out = append(out, r)
		}
	}
	return out
}

// admissionSlack is how much earlier than an observation an admission may
// be recorded and still be the one that ended the wait observed: condition
// times are whole seconds, and the console's snapshot trails the cluster
// by a moment.
const admissionSlack = 5 * time.Second

// firstAfter is the first admission of key after a task was seen queued at
// seen.
func (a *admissions) firstAfter(key string, seen time.Time) (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, t := range a.at[key] {
		if t.After(seen.Add(-admissionSlack)) {
			return t, true
		}
	}
	return time.Time{}, false
}

func (a *admissions) isGone(key string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.gone[key]
}
