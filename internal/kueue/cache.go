package kueue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueclient "sigs.k8s.io/kueue/client-go/clientset/versioned"
	kueueinformers "sigs.k8s.io/kueue/client-go/informers/externalversions"
	kueuelisters "sigs.k8s.io/kueue/client-go/listers/kueue/v1beta2"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/kueue/impact"
)

// RequiredKueue names the Kueue releases whose API the console speaks.
const RequiredKueue = "Kueue v0.15 or newer (kueue.x-k8s.io/v1beta2; tested with v0.19.2)"

// Cache keeps the objects the console reads in memory, current through
// informers: pages never LIST from the apiserver.
type Cache struct {
	Nodes corelisters.NodeLister
	// Namespaces give their labels, which ClusterQueues' namespace
	// selectors read: which namespaces feed a queue, hence a team.
	Namespaces              corelisters.NamespaceLister
	ClusterQueues           kueuelisters.ClusterQueueLister
	LocalQueues             kueuelisters.LocalQueueLister
	ResourceFlavors         kueuelisters.ResourceFlavorLister
	WorkloadPriorityClasses kueuelisters.WorkloadPriorityClassLister
	Cohorts                 kueuelisters.CohortLister
	// LatestTeamRevisions are the teams' revision histories (ConfigMaps in the
	// state namespace), each with its newest revision only.
	LatestTeamRevisions corelisters.ConfigMapNamespaceLister

	kube   kubernetes.Interface
	kueue  kueueclient.Interface
	log    *slog.Logger
	core   informers.SharedInformerFactory
	queues kueueinformers.SharedInformerFactory
	// workloads start once the queues' and classes' first lists reached the
	// listeners (Start), so that the read model's placement is known.
	workloads kueueinformers.SharedInformerFactory
	state     informers.SharedInformerFactory
	placement atomic.Pointer[domain.Placement]

	started     atomic.Bool
	kueueFound  atomic.Bool
	kueueSynced atomic.Bool
	coreSynced  atomic.Bool
	lastAnswer  atomic.Int64 // unix nanos of the apiserver's last answer to a health probe
	unreachable atomic.Bool

	// changes count the events of each kind: pages that show what the
	// cache holds keep their rendering while the counts stay.
	// redefinitions count those of them that changed what an object is,
	// not its status (see redefined).
	changes, redefinitions map[string]*atomic.Uint64
	// informers by kind, and the last error each had listing or watching
	// (kind → string), which Ready names while it has not synced.
	informers map[string]cache.SharedIndexInformer
	listErrs  sync.Map

	mu        sync.Mutex
	listeners []func(Event)
	// delivered report whether each event handler has been handed the
	// initial list of its informer.
	delivered []func() bool
	// queuesDelivered are those of the delivered that tell where tasks go:
	// ClusterQueues, LocalQueues, priority classes and cohorts.
	queuesDelivered []cache.InformerSynced
	onWorkload      []func(*kueuev1beta2.Workload)
	stored          trustedTeams
	policy          keptPolicy
	// previews bound the impact previews and what-ifs computed at once.
	previews previewSlots
}

// Event is one change of a watched object.
type Event struct {
	Kind string
	// Object is the object after the change, its last known state when
	// Deleted. Workloads come as *WorkloadTask.
	Object  any
	Deleted bool
}

// WorkloadTask is what the cache keeps of a Workload: its name and what the
// dashboards show of it, read once when the Workload changes. At 50 000
// Workloads the objects themselves would be most of the console's memory.
type WorkloadTask struct {
	// What the informer and the listeners read of its metadata: a whole
	// ObjectMeta would take twice the memory of the rest.
	Namespace, Name   string
	UID               types.UID
	ResourceVersion   string
	DeletionTimestamp *metav1.Time

	Task *domain.TaskFacts
	// Shape is what Kueue's scheduler reads of it, for the impact preview;
	// nil once it finished.
	Shape *impact.Shape
}

// GetObjectMeta is its metadata, for the informer's keys (meta.Accessor).
func (w *WorkloadTask) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Namespace: w.Namespace, Name: w.Name, UID: w.UID, ResourceVersion: w.ResourceVersion,
		DeletionTimestamp: w.DeletionTimestamp}
}

// NewCache wires informers; Start runs them. Workloads are read with the
// naming rules of s.
func NewCache(kube kubernetes.Interface, kq kueueclient.Interface, s domain.Settings, log *slog.Logger) *Cache {
	c := &Cache{kube: kube, kueue: kq, log: log, changes: map[string]*atomic.Uint64{}, redefinitions: map[string]*atomic.Uint64{}, informers: map[string]cache.SharedIndexInformer{},
		previews: newPreviewSlots(maxPreviews)}
	c.core = informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTransform(stripObject))
	c.queues = kueueinformers.NewSharedInformerFactoryWithOptions(kq, 0, kueueinformers.WithTransform(stripObject))
	c.workloads = kueueinformers.NewSharedInformerFactoryWithOptions(kq, 0, kueueinformers.WithTransform(func(obj any) (any, error) {
		wl, ok := obj.(*kueuev1beta2.Workload)
		if !ok {
			return stripObject(obj)
		}
		_, _ = stripObject(wl) // listeners keep what they queue: not its managed fields
		c.seeWorkload(wl)
		task := domain.FactsOf(wl, s, "")
		if p := c.placement.Load(); p != nil {
			p.Place(task) // the read model keeps a placed task as it is
		}
		return &WorkloadTask{Namespace: task.Namespace, Name: task.Name, UID: wl.UID, ResourceVersion: wl.ResourceVersion,
			DeletionTimestamp: wl.DeletionTimestamp,
			Task:              task,
			Shape:             impact.ShapeOf(wl),
		}, nil
	}))
	// The teams' members and allocations come from the console's own
	// revisions, not from the ClusterQueues, which more people may change.
	c.state = informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(s.State()),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = domain.RevisionsLabel + "=team" }),
		informers.WithTransform(newestRevisionOnly))
	c.LatestTeamRevisions = c.state.Core().V1().ConfigMaps().Lister().ConfigMaps(s.State())
	c.Nodes = c.core.Core().V1().Nodes().Lister()
	c.Namespaces = c.core.Core().V1().Namespaces().Lister()
	v := c.queues.Kueue().V1beta2()
	c.ClusterQueues = v.ClusterQueues().Lister()
	c.LocalQueues = v.LocalQueues().Lister()
	c.ResourceFlavors = v.ResourceFlavors().Lister()
	c.WorkloadPriorityClasses = v.WorkloadPriorityClasses().Lister()
	c.Cohorts = v.Cohorts().Lister()
	c.count(revisionsKind, c.state.Core().V1().ConfigMaps().Informer())
	c.watch("Node", c.core.Core().V1().Nodes().Informer())
	c.watch("Namespace", c.core.Core().V1().Namespaces().Informer())
	c.watch("ClusterQueue", v.ClusterQueues().Informer())
	c.watch("LocalQueue", v.LocalQueues().Informer())
	c.watch("Workload", c.workloads.Kueue().V1beta2().Workloads().Informer())
	c.watch("ResourceFlavor", v.ResourceFlavors().Informer())
	c.watch("WorkloadPriorityClass", v.WorkloadPriorityClasses().Informer())
	c.watch("Cohort", v.Cohorts().Informer())
	return c
}

// workloadStore is every Workload the cache keeps, as *WorkloadTask.
func (c *Cache) workloadStore() []any {
	return c.workloads.Kueue().V1beta2().Workloads().Informer().GetStore().List()
}

// PlaceTasksWith has the cache place each Workload's task as p says, from
// now on: the read model gives it its placement whenever that changes.
func (c *Cache) PlaceTasksWith(p *domain.Placement) { c.placement.Store(p) }

// OnChange registers fn to run (on an informer goroutine: keep it short) after
// every add, update or delete of a watched object.
// It must be registered before Start: the events before it are not
// replayed.
func (c *Cache) OnChange(fn func(Event)) {
	if c.started.Load() {
		panic("kueue.Cache.OnChange after Start: the listener would miss the events before it")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.listeners = append(c.listeners, fn)
}

// OnWorkload registers fn to see every Workload the informer receives, whole
// (adds, updates and relists, before the cache keeps only its task): the
// task history records what the cache does not keep. fn runs on the
// informer's goroutine and must not keep it waiting. Deletions come through
// OnChange (Kind "Workload", Deleted, a *WorkloadTask). Like OnChange, it
// must be registered before Start.
func (c *Cache) OnWorkload(fn func(*kueuev1beta2.Workload)) {
	if c.started.Load() {
		panic("kueue.Cache.OnWorkload after Start: the listener would miss the Workloads before it")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onWorkload = append(c.onWorkload, fn)
}

func (c *Cache) seeWorkload(wl *kueuev1beta2.Workload) {
	c.mu.Lock()
	fns := c.onWorkload
	c.mu.Unlock()
	for _, fn := range fns {
		fn(wl)
	}
}

// WorkloadPages lists every Workload from the apiserver, size at a time,
// calling fn with each page: the task history's backfill, which needs the
// whole objects the cache does not keep, without holding them all at once.
func (c *Cache) WorkloadPages(ctx context.Context, size int64, fn func([]*kueuev1beta2.Workload) error) error {
	opts := metav1.ListOptions{Limit: size}
	for {
		list, err := c.kueue.KueueV1beta2().Workloads("").List(ctx, opts)
		if err != nil {
			return fmt.Errorf("listing Workloads: %w", err)
		}
		page := make([]*kueuev1beta2.Workload, len(list.Items))
		for i := range list.Items {
			page[i] = &list.Items[i]
		}
		if err := fn(page); err != nil {
			return err
		}
		if list.Continue == "" {
			return nil
		}
		opts.Continue = list.Continue
	}
}

// revisionsKind counts the changes of the teams' revision histories.
const revisionsKind = "TeamRevisions"

// Changes is how many changes of the given kinds ("ClusterQueue", "Node",
// "TeamRevisions", …) the cache took in: equal counts, same objects.
func (c *Cache) Changes(kinds ...string) uint64 { return sum(c.changes, kinds) }

// Redefinitions is how many of the given kinds' changes changed what an
// object is rather than its status: equal counts, same definitions. Kueue
// updates a ClusterQueue's status with every admission; a page that shows
// only the queues' quotas keeps its rendering through those.
func (c *Cache) Redefinitions(kinds ...string) uint64 { return sum(c.redefinitions, kinds) }

func sum(counters map[string]*atomic.Uint64, kinds []string) uint64 {
	var n uint64
	for _, k := range kinds {
		if counter := counters[k]; counter != nil {
			n += counter.Load()
		}
	}
	return n
}

// count counts inf's events as changes of kind, and those that redefine
// an object as its redefinitions.
func (c *Cache) count(kind string, inf cache.SharedIndexInformer) {
	changes, redefinitions := &atomic.Uint64{}, &atomic.Uint64{}
	c.changes[kind], c.redefinitions[kind] = changes, redefinitions
	c.informers[kind] = inf
	_ = inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		c.listErrs.Store(kind, err.Error())
		cache.DefaultWatchErrorHandler(ctx, r, err)
	})
	both := func(any) {
		changes.Add(1)
		redefinitions.Add(1)
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: both, DeleteFunc: both,
		UpdateFunc: func(old, obj any) {
			changes.Add(1)
			if redefined(old, obj) {
				redefinitions.Add(1)
			}
		},
	})
}

// redefined reports whether an update changed what the object is: for an
// object whose generation counts its spec's changes, a new generation,
// labels, annotations, finalizers or deletion; for a node, what makes it
// a member of the fleet (labels, spec, capacity, whether it takes tasks); for any other
// object, any change.
func redefined(old, obj any) bool {
	if n, ok := obj.(*corev1.Node); ok {
		o, ok := old.(*corev1.Node)
		return !ok || !maps.Equal(o.Labels, n.Labels) || !apiequality.Semantic.DeepEqual(o.Spec, n.Spec) ||
			!apiequality.Semantic.DeepEqual(o.Status.Capacity, n.Status.Capacity) ||
			!apiequality.Semantic.DeepEqual(o.Status.Allocatable, n.Status.Allocatable) || domain.NodeSchedulable(o) != domain.NodeSchedulable(n)
	}
	n, ok := obj.(metav1.Object)
	o, oldOK := old.(metav1.Object)
	if !ok || !oldOK || n.GetGeneration() == 0 {
		return true
	}
	return o.GetGeneration() != n.GetGeneration() || !maps.Equal(o.GetLabels(), n.GetLabels()) ||
		!maps.Equal(o.GetAnnotations(), n.GetAnnotations()) || !slices.Equal(o.GetFinalizers(), n.GetFinalizers()) ||
		(o.GetDeletionTimestamp() == nil) != (n.GetDeletionTimestamp() == nil)
}

func (c *Cache) watch(kind string, inf cache.SharedIndexInformer) {
	c.count(kind, inf)
	notify := func(obj any, deleted bool) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		c.mu.Lock()
		ls := c.listeners
		c.mu.Unlock()
		for _, fn := range ls {
			fn(Event{Kind: kind, Object: obj, Deleted: deleted})
		}
	}
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { notify(obj, false) },
		UpdateFunc: func(_, obj any) { notify(obj, false) },
		DeleteFunc: func(obj any) { notify(obj, true) },
	})
	if err == nil {
		c.mu.Lock()
		c.delivered = append(c.delivered, reg.HasSynced)
		if placesTasks[kind] {
			c.queuesDelivered = append(c.queuesDelivered, reg.HasSynced)
		}
		c.mu.Unlock()
	}
}

// placesTasks are the kinds that tell the read model where a task goes.
var placesTasks = map[string]bool{"ClusterQueue": true, "LocalQueue": true, "WorkloadPriorityClass": true, "Cohort": true, "Namespace": true}

// Start runs the informers until ctx ends. Kueue's informers start once its
// v1beta2 API is served; until then Ready explains it and the pages say so.
func (c *Cache) Start(ctx context.Context) {
	c.started.Store(true)
	c.lastAnswer.Store(time.Now().UnixNano())
	go c.probe(ctx)
	c.core.Start(ctx.Done())
	c.state.Start(ctx.Done())
	go func() {
		nodes := allSynced(c.core.WaitForCacheSync(ctx.Done()))
		c.coreSynced.Store(nodes && allSynced(c.state.WaitForCacheSync(ctx.Done())))
	}()
	go func() {
		for {
			found, err := c.kueueServed()
			if err != nil {
				c.log.Warn("checking for the Kueue API", "err", err)
			}
			if found {
				c.kueueFound.Store(true)
				c.queues.Start(ctx.Done())
				queues := allSynced(c.queues.WaitForCacheSync(ctx.Done()))
				// The listeners have the queues and classes before the first
				// Workload, so that the cache places tasks as the model does.
				c.mu.Lock()
				delivered := c.queuesDelivered
				c.mu.Unlock()
				cache.WaitForCacheSync(ctx.Done(), delivered...)
				c.workloads.Start(ctx.Done())
				c.kueueSynced.Store(queues && allSynced(c.workloads.WaitForCacheSync(ctx.Done())))
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(15 * time.Second):
			}
		}
	}()
}

func allSynced[K comparable](synced map[K]bool) bool {
	all := len(synced) > 0
	for _, ok := range synced {
		all = all && ok
	}
	return all
}

// probe asks the apiserver's /readyz every few seconds, so pages can say when
// the data they show stopped being live.
func (c *Cache) probe(ctx context.Context) {
	rc := c.kube.Discovery().RESTClient()
	if rc == nil {
		return // a fake clientset in tests: nothing to probe
	}
	for {
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		err := rc.Get().AbsPath("/readyz").Do(pctx).Error()
		cancel()
		if err == nil {
			c.lastAnswer.Store(time.Now().UnixNano())
			c.unreachable.Store(false)
		} else if ctx.Err() == nil {
			if !c.unreachable.Swap(true) {
				c.log.Warn("the apiserver does not answer", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(5 * time.Second):
		}
	}
}

// Reachable reports whether the apiserver answered the last probe, and when
// it last answered.
func (c *Cache) Reachable() (bool, time.Time) {
	return !c.unreachable.Load(), time.Unix(0, c.lastAnswer.Load())
}

func (c *Cache) kueueServed() (bool, error) {
	_, err := c.kube.Discovery().ServerResourcesForGroupVersion(kueuev1beta2.SchemeGroupVersion.String())
	if err == nil {
		return true, nil
	}
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return false, err
}

// Synced reports whether every informer has its initial list.
func (c *Cache) Synced() bool {
	if !c.coreSynced.Load() || !c.kueueSynced.Load() {
		return false
	}
	// The informers have their lists; the listeners (the read model) must
	// have taken them in too, or a first snapshot would miss objects.
	c.mu.Lock()
	delivered := c.delivered
	c.mu.Unlock()
	for _, done := range delivered {
		if !done() {
			return false
		}
	}
	return true
}

// Ready explains what is missing before the console can serve live data.
func (c *Cache) Ready() error {
	switch {
	case !c.coreSynced.Load():
		return c.notRead("Node", "Namespace", revisionsKind)
	case !c.kueueFound.Load():
		return fmt.Errorf("the cluster does not serve the Kueue API: install %s", RequiredKueue)
	case !c.kueueSynced.Load():
		return c.notRead("ClusterQueue", "LocalQueue", "ResourceFlavor", "WorkloadPriorityClass", "Cohort", "Workload")
	}
	return nil
}

// notRead names the kinds whose informers have not listed yet, with the
// cluster's last answer to each that failed (a missing permission, most
// often).
func (c *Cache) notRead(kinds ...string) error {
	var parts []string
	for _, kind := range kinds {
		inf := c.informers[kind]
		if inf == nil || inf.HasSynced() {
			continue
		}
		part := kindWords[kind]
		if err, ok := c.listErrs.Load(kind); ok {
			msg := err.(string)
			if len(msg) > 240 {
				msg = msg[:240] + "…"
			}
			part += " (" + msg + ")"
		}
		parts = append(parts, part)
	}
	if len(parts) == 0 {
		return errors.New("the console is still reading the cluster")
	}
	return errors.New("not read from the cluster yet: " + strings.Join(parts, ", "))
}

// kindWords name the kinds the cache reads for people.
var kindWords = map[string]string{"Node": "Nodes", "Namespace": "Namespaces", revisionsKind: "the teams' revisions",
	"ClusterQueue": "ClusterQueues", "LocalQueue": "LocalQueues", "ResourceFlavor": "ResourceFlavors",
	"WorkloadPriorityClass": "WorkloadPriorityClasses", "Cohort": "Cohorts", "Workload": "Workloads"}

// specWriters keeps of a ClusterQueue's managed fields who wrote its spec,
// without the fields themselves: the pages name who manages a queue the
// console did not create (domain.SpecManagers).
func specWriters(entries []metav1.ManagedFieldsEntry) []metav1.ManagedFieldsEntry {
	var out []metav1.ManagedFieldsEntry
	for _, e := range entries {
		if e.Subresource == "" && e.FieldsV1 != nil && strings.Contains(e.FieldsV1.GetRawString(), `"f:spec"`) {
			out = append(out, metav1.ManagedFieldsEntry{Manager: e.Manager, Operation: e.Operation,
				FieldsType: e.FieldsType, FieldsV1: metav1.NewFieldsV1(`{"f:spec":{}}`)})
		}
	}
	return out
}

// newestRevisionOnly keeps of a team's revisions ConfigMap its newest revision:
// the cache holds one revision per team, not fifty.
func newestRevisionOnly(obj any) (any, error) {
	if cm, ok := obj.(*corev1.ConfigMap); ok {
		cm.Data = domain.LatestRevisionData(cm.Data)
	}
	return stripObject(obj)
}

// stripObject drops what the console never reads before objects enter the
// cache: managed fields and kubectl's copy of the last applied object.
func stripObject(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		var writers []metav1.ManagedFieldsEntry
		if _, ok := obj.(*kueuev1beta2.ClusterQueue); ok {
			writers = specWriters(m.GetManagedFields())
		}
		m.SetManagedFields(writers)
		if a := m.GetAnnotations(); a != nil {
			delete(a, "kubectl.kubernetes.io/last-applied-configuration")
		}
	}
	return obj, nil
}
