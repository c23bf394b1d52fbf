// This file keeps the read model current event by event.

package domain

import (
	"cmp"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/google/btree"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// Model is the console's read model, kept current one object change at a
// time. A changed Workload costs its task, its team and class's counts, and
// a few ordered sets (its queue, its borrowing group, the running and the
// finished tasks), each an insertion or removal in a B-tree: no pass over
// the cluster, whatever its size. Snapshot gives immutable views of it that
// share everything (copy-on-write) with the model. A Model is not safe for
// concurrent use.
type Model struct {
	settings Settings
	policy   Policy
	classes  []string // highest priority first

	// placing is where tasks go: their class, ClusterQueue and team.
	placing placement
	// placed is a copy of placing for readers on other goroutines
	// (Placement); nil after placing changed.
	placed *Placement

	cohort        *kueuev1beta2.Cohort
	priorityClass map[string]*kueuev1beta2.WorkloadPriorityClass
	// podClasses are the Kubernetes PriorityClasses tasks name, with how
	// many do and the priority Kueue gave the first: the read model needs
	// no watch of PriorityClasses, and a class no task names is noise
	// (system-node-critical, say).
	podClasses map[string]podClassUse
	// classesDirty: a Kubernetes PriorityClass appeared or went since the
	// classes were ordered; Snapshot orders them again, once, rather than
	// each update of a task (unindexed, then indexed again) twice.
	classesDirty  bool
	clusterQueues map[string]*kueuev1beta2.ClusterQueue
	// localQueues are the ClusterQueue each LocalQueue names (LocalQueueKey
	// → ClusterQueue); placing keeps those whose namespace the queue's
	// namespaceSelector admits. namespaceLabels are the namespaces' labels.
	localQueues     map[string]string
	namespaceLabels map[string]map[string]string
	// stoppedLocalQueues are the stop policies of the LocalQueues that have
	// one (Hold, HoldAndDrain): Kueue admits none of their tasks.
	stoppedLocalQueues map[string]kueuev1beta2.StopPolicy
	// cohorts are Kueue's Cohort objects, by name: lending is shared out
	// over a whole cohort tree, within its cohorts' lending limits.
	cohorts map[string]*kueuev1beta2.Cohort

	tasks map[string]*TaskFacts // LocalQueueKey(namespace, name)
	// variants are Kueue's concurrent-admission Variants (VariantParent),
	// by their parent's key and their name: attempts at a task, not tasks;
	// variantParent is the parent's key by a Variant's key.
	variants      map[string]map[string]*TaskFacts
	variantParent map[string]string
	// replaced are the slices of elastic jobs that later slices replaced,
	// by their chain's key (its first slice's) and their own key: the job
	// goes on in its latest slice, which runs from the first's admission.
	// sliceTasks are the tasks of each chain (its latest slices).
	replaced      map[string]map[string]*TaskFacts
	replacedChain map[string]string
	sliceTasks    map[string]map[string]bool
	// The same tasks in the orders and groups the snapshot needs.
	buckets  map[teamAndClass]*bucket
	queues   map[string]*tree // ClusterQueue → its queued tasks, Kueue's order
	groups   map[groupKey]*tree
	unqueued *tree // waiting, but in no queue: by namespace and name
	running  *tree // newest admission first
	finished *tree // newest finish first

	dirtyBuckets map[teamAndClass]bool
	dirtyQueues  map[string]bool
	dirtyGroups  map[groupKey]bool
	queuesDirty  bool        // ClusterQueues changed: team rows and nominal quotas
	queueRows    []TeamUsage // the team rows without task counts
	nominal      map[groupKey]int64

	last    *Snapshot
	changes uint64 // object changes applied, for Changes
}

// podClassUse is how many tasks name a Kubernetes PriorityClass, and the
// priority of the first.
type podClassUse struct {
	tasks    int
	priority int32
}

// tree is an ordered set of tasks.
type tree = btree.BTreeG[*TaskFacts]

func newTree(less func(a, b *TaskFacts) bool) *tree { return btree.NewG(32, less) }

// bucket is one team's tasks of one class, with their clock-free counts.
type bucket struct {
	tasks  *tree // by namespace and name
	counts tally
}

// NewModel starts an empty model.
func NewModel(s Settings) *Model {
	return &Model{
		settings:           s,
		priorityClass:      map[string]*kueuev1beta2.WorkloadPriorityClass{},
		podClasses:         map[string]podClassUse{},
		clusterQueues:      map[string]*kueuev1beta2.ClusterQueue{},
		localQueues:        map[string]string{},
		namespaceLabels:    map[string]map[string]string{},
		stoppedLocalQueues: map[string]kueuev1beta2.StopPolicy{},
		cohorts:            map[string]*kueuev1beta2.Cohort{},
		placing:            placement{teamOf: map[string]string{}, clusterQueueOf: map[string]string{}},
		tasks:              map[string]*TaskFacts{},
		variants:           map[string]map[string]*TaskFacts{},
		variantParent:      map[string]string{},
		replaced:           map[string]map[string]*TaskFacts{},
		replacedChain:      map[string]string{},
		sliceTasks:         map[string]map[string]bool{},
		buckets:            map[teamAndClass]*bucket{},
		queues:             map[string]*tree{},
		groups:             map[groupKey]*tree{},
		unqueued:           newTree(byName),
		running:            newTree(newestAdmission),
		finished:           newTree(newestFinish),
		dirtyBuckets:       map[teamAndClass]bool{},
		dirtyQueues:        map[string]bool{},
		dirtyGroups:        map[groupKey]bool{},
		queuesDirty:        true,
	}
}

// Load adds every object of in (to an empty model: a from-scratch build).
func (m *Model) Load(in SnapshotInput) {
	for _, ns := range in.Namespaces {
		m.SetNamespace(ns.Name, ns.Labels)
	}
	for _, co := range in.Cohorts {
		m.SetCohort(co)
	}
	for _, cq := range in.ClusterQueues {
		m.SetClusterQueue(cq)
	}
	for _, lq := range in.LocalQueues {
		m.SetLocalQueue(lq)
	}
	m.SetPolicyObjects(in.Cohort, in.Classes)
	for _, wl := range in.Workloads {
		m.SetWorkload(wl)
	}
}

// Changes counts the object changes the model has taken in.
func (m *Model) Changes() uint64 { return m.changes }

// SetWorkload adds or replaces a Workload's task.
func (m *Model) SetWorkload(wl *kueuev1beta2.Workload) {
	m.SetTask(FactsOf(wl, m.settings, ""))
}

// SetTask adds or replaces a task, read by FactsOf (with any lowest class:
// the model gives tasks without a class its own).
func (m *Model) SetTask(f *TaskFacts) {
	m.changes++
	key := LocalQueueKey(f.Namespace, f.Name)
	if f.variantOf != "" {
		parent := LocalQueueKey(f.Namespace, f.variantOf)
		m.variantParent[key] = parent
		m.setVariant(parent, f.Name, f)
		return
	}
	if m.setReplaced(key, f) {
		return
	}
	m.unindex(key)
	_, hasVariants := m.variants[key]
	_, hasReplaced := m.replaced[m.chainOf(f)]
	if !m.placing.placedAsIs(f) || hasVariants || hasReplaced {
		g := *f
		m.placing.place(&g)
		m.withVariants(&g)
		m.withSlices(&g)
		f = &g
	}
	m.index(key, f)
}

// chainOf is the key of an elastic job's chain of slices f is in; "" for
// a Workload in none.
func (m *Model) chainOf(f *TaskFacts) string {
	if f.slice == "" {
		return ""
	}
	return LocalQueueKey(f.Namespace, f.slice)
}

// setReplaced keeps (nil: forgets) the replaced slice at key, which is no
// task, and gives its chain's tasks their start again; false when f is no
// replaced slice and there was none at key.
func (m *Model) setReplaced(key string, f *TaskFacts) bool {
	var chain string
	switch {
	case f != nil && f.replaced:
		chain = m.chainOf(f)
		m.unindex(key)
		if m.replaced[chain] == nil {
			m.replaced[chain] = map[string]*TaskFacts{}
		}
		m.replaced[chain][key] = f
		m.replacedChain[key] = chain
	case f == nil && m.replacedChain[key] != "":
		chain = m.replacedChain[key]
		delete(m.replacedChain, key)
		delete(m.replaced[chain], key)
		if len(m.replaced[chain]) == 0 {
			delete(m.replaced, chain)
		}
	default:
		return false
	}
	for k := range m.sliceTasks[chain] {
		if t, ok := m.tasks[k]; ok {
			g := *t
			m.withSlices(&g)
			if !g.Created.Equal(t.Created) || !g.WaitStart.Equal(t.WaitStart) || !g.AdmittedAt.Equal(t.AdmittedAt) {
				m.replace(k, t, func(h *TaskFacts) { *h = g })
			}
		}
	}
	return true
}

// withSlices gives the latest slice of an elastic job, once admitted, the
// job's start from the slices it replaced: its creation, when it began
// waiting and its admission. (A slice still waiting is a resize: its wait
// is its own.)
func (m *Model) withSlices(f *TaskFacts) {
	if !f.admitted {
		return
	}
	for _, old := range m.replaced[m.chainOf(f)] {
		if old.Created.Before(f.Created) {
			f.Created, f.WaitStart, f.QueueOrder = old.Created, old.WaitStart, old.QueueOrder
		}
		if old.admitted && old.AdmittedAt.Before(f.AdmittedAt) {
			f.AdmittedAt = old.AdmittedAt
		}
	}
}

// DeleteWorkload removes a Workload's task (or Variant, or replaced slice).
func (m *Model) DeleteWorkload(namespace, name string) {
	m.changes++
	key := LocalQueueKey(namespace, name)
	if m.setReplaced(key, nil) {
		return
	}
	if parent, ok := m.variantParent[key]; ok {
		delete(m.variantParent, key)
		m.setVariant(parent, name, nil)
		return
	}
	m.unindex(key)
}

// setVariant keeps (nil: forgets) a Variant of the task at parent, and
// words the task's reason again.
func (m *Model) setVariant(parent, name string, f *TaskFacts) {
	vs := m.variants[parent]
	switch {
	case f != nil && vs == nil:
		vs = map[string]*TaskFacts{name: f}
		m.variants[parent] = vs
	case f != nil:
		vs[name] = f
	default:
		delete(vs, name)
		if len(vs) == 0 {
			delete(m.variants, parent)
		}
	}
	if p, ok := m.tasks[parent]; ok {
		g := *p
		if m.withVariants(&g); g.State != p.State || g.variantWords != p.variantWords || g.variantRaw != p.variantRaw {
			m.replace(parent, p, func(h *TaskFacts) { *h = g })
		}
	}
}

// withVariants gives a task what its concurrent-admission Variants say
// (variantWords). A waiting task whose Variant was preempted is preempted:
// Kueue preempts the Variant that held the quota, and only evicts the
// task's own Workload.
func (m *Model) withVariants(f *TaskFacts) {
	if f.variantPreempted { // back to its own reading
		f.State, f.variantPreempted = TaskPending, false
	}
	var preempted bool
	f.variantWords, f.variantRaw, preempted = m.variantWords(f)
	if preempted && f.State == TaskPending {
		f.State, f.variantPreempted = TaskPreempted, true
	}
}

// variantWords say what Kueue's concurrent-admission Variants of a task
// are doing, in its ClusterQueue's order of flavors: while the task waits,
// why each flavor it is tried on does not take it; while it runs, the
// flavors Kueue would still move it to, of those that may yet hold it. ""
// when no Variant is tried, or none of those.
// preempted: one of those tried was preempted.
func (m *Model) variantWords(f *TaskFacts) (words, raw string, preempted bool) {
	vs := m.variants[LocalQueueKey(f.Namespace, f.Name)]
	if len(vs) == 0 || f.finished || f.Deactivated || (f.State != TaskAdmitted && f.admittedIn != "") {
		return "", "", false
	}
	order := map[string]int{}
	if cq := m.clusterQueues[f.ClusterQueue]; cq != nil && len(cq.Spec.ResourceGroups) > 0 {
		for i, fl := range cq.Spec.ResourceGroups[0].Flavors {
			order[string(fl.Name)] = i + 1
		}
	}
	var tried []*TaskFacts
	for _, v := range vs {
		if !v.Deactivated && !v.finished && v.admittedIn == "" && !slices.Contains(f.Flavors, v.variantFlavor) {
			tried = append(tried, v)
		}
	}
	if len(tried) == 0 {
		return "", "", false
	}
	slices.SortFunc(tried, func(a, b *TaskFacts) int {
		rank := func(v *TaskFacts) int { return cmp.Or(order[v.variantFlavor], len(order)+1) }
		return cmp.Or(cmp.Compare(rank(a), rank(b)), strings.Compare(a.variantFlavor, b.variantFlavor), strings.Compare(a.Name, b.Name))
	})
	flavors := make([]string, len(tried))
	parts := make([]string, len(tried))
	messages := make([]string, 0, len(tried))
	for i, v := range tried {
		preempted = preempted || v.State == TaskPreempted
		flavors[i] = v.variantFlavor
		parts[i] = v.variantFlavor + ": " + v.reasonHead + v.reasonTail
		if v.KueueMessage != "" {
			messages = append(messages, v.variantFlavor+": "+v.KueueMessage)
		}
	}
	if f.State == TaskAdmitted {
		// Only the flavors that may yet hold it: one Kueue found can never
		// (beyond its quota, or excluded) is no promise.
		flavors = flavors[:0]
		for _, v := range tried {
			if !v.cannotFit {
				flavors = append(flavors, v.variantFlavor)
			}
		}
		if len(flavors) == 0 {
			return "", strings.Join(messages, "\n"), false
		}
		which := "that has"
		if len(flavors) > 1 {
			which = "one of them has"
		}
		return "Kueue moves it to " + strings.Join(flavors, " or ") + " as soon as " + which + " room (concurrent admission)", strings.Join(messages, "\n"), false
	}
	return "Tried on each flavor at once (Kueue's concurrent admission). " + strings.Join(parts, "; "), strings.Join(messages, "\n"), preempted
}

// SetClusterQueue adds or replaces a ClusterQueue.
func (m *Model) SetClusterQueue(cq *kueuev1beta2.ClusterQueue) {
	m.changes++
	if old := m.clusterQueues[cq.Name]; old == nil || strictFIFO(old) != strictFIFO(cq) {
		m.dirtyQueues[cq.Name] = true // who waits behind whom
	}
	old := m.clusterQueues[cq.Name]
	m.clusterQueues[cq.Name] = cq
	if old == nil || !equality.Semantic.DeepEqual(old.Spec.NamespaceSelector, cq.Spec.NamespaceSelector) {
		m.admitAgain(func(_, target string) bool { return target == cq.Name })
	}
	m.clusterQueueChanged(cq.Name)
	team := m.settings.TeamOfClusterQueue(cq)
	if old, ok := m.placing.teamOf[cq.Name]; !ok || old != team {
		m.placing.teamOf[cq.Name] = team
		m.placed = nil
		m.queueTeamChanged(cq.Name)
	}
}

// DeleteClusterQueue removes a ClusterQueue.
func (m *Model) DeleteClusterQueue(name string) {
	m.changes++
	if strictFIFO(m.clusterQueues[name]) {
		m.dirtyQueues[name] = true // who waits behind whom
	}
	delete(m.clusterQueues, name)
	m.admitAgain(func(_, target string) bool { return target == name })
	m.clusterQueueChanged(name)
	if _, ok := m.placing.teamOf[name]; ok {
		delete(m.placing.teamOf, name)
		m.placed = nil
		m.queueTeamChanged(name)
	}
}

// queueTeamChanged gives the tasks of a ClusterQueue its team again: a rare
// change (a queue created, adopted or released; its status updates keep
// the team), so it may look at every task.
func (m *Model) queueTeamChanged(name string) {
	for key, f := range m.tasks {
		if f.ClusterQueue != name {
			continue
		}
		if !m.placing.placedAsIs(f) { // a queue named after its team changes none
			m.replace(key, f, m.placing.place)
		}
	}
}

func (m *Model) clusterQueueChanged(name string) {
	m.queuesDirty = true
	// Its nominal quota decides who in its groups borrows.
	for key := range m.groups {
		if key.clusterQueue == name {
			m.dirtyGroups[key] = true
		}
	}
}

// SetLocalQueue adds or replaces a LocalQueue: only which ClusterQueue it
// feeds matters, so its frequent status updates cost nothing.
func (m *Model) SetLocalQueue(lq *kueuev1beta2.LocalQueue) {
	m.changes++
	key := LocalQueueKey(lq.Namespace, lq.Name)
	m.localQueues[key] = string(lq.Spec.ClusterQueue)
	m.setLocalQueueStop(key, ptr.Deref(lq.Spec.StopPolicy, kueuev1beta2.None))
	m.admit(key)
}

// setLocalQueueStop keeps a LocalQueue's stop policy: its team's row says
// which of its LocalQueues admit nothing.
func (m *Model) setLocalQueueStop(key string, p kueuev1beta2.StopPolicy) {
	if old := m.stoppedLocalQueues[key]; old == p || old == "" && p == kueuev1beta2.None {
		return
	}
	if p == kueuev1beta2.None {
		delete(m.stoppedLocalQueues, key)
	} else {
		m.stoppedLocalQueues[key] = p
	}
	m.queuesDirty = true
}

// DeleteLocalQueue removes a LocalQueue.
func (m *Model) DeleteLocalQueue(namespace, name string) {
	m.changes++
	key := LocalQueueKey(namespace, name)
	delete(m.localQueues, key)
	m.setLocalQueueStop(key, kueuev1beta2.None)
	m.admit(key)
}

// SetCohort takes a Cohort object: its parent and its own quota.
func (m *Model) SetCohort(co *kueuev1beta2.Cohort) {
	m.changes++
	if old, ok := m.cohorts[co.Name]; ok && old.Spec.ParentName == co.Spec.ParentName &&
		equality.Semantic.DeepEqual(old.Spec.ResourceGroups, co.Spec.ResourceGroups) {
		return
	}
	m.cohorts[co.Name] = co
	m.queuesDirty = true // who lends to whom
}

// DeleteCohort forgets a Cohort object.
func (m *Model) DeleteCohort(name string) {
	m.changes++
	if _, ok := m.cohorts[name]; ok {
		delete(m.cohorts, name)
		m.queuesDirty = true
	}
}

// SetNamespace takes a namespace's labels, which ClusterQueues'
// namespaceSelectors read.
func (m *Model) SetNamespace(name string, labels map[string]string) {
	m.changes++
	if old, ok := m.namespaceLabels[name]; ok && maps.Equal(old, labels) {
		return
	}
	m.namespaceLabels[name] = labels
	m.admitAgain(func(namespace, _ string) bool { return namespace == name })
}

// DeleteNamespace forgets a namespace's labels.
func (m *Model) DeleteNamespace(name string) {
	m.changes++
	if _, ok := m.namespaceLabels[name]; !ok {
		return
	}
	delete(m.namespaceLabels, name)
	m.admitAgain(func(namespace, _ string) bool { return namespace == name })
}

// admitAgain decides again where the LocalQueues that match feed.
func (m *Model) admitAgain(match func(namespace, clusterQueue string) bool) {
	for key, target := range m.localQueues {
		if ns, _, _ := strings.Cut(key, "/"); match(ns, target) {
			m.admit(key)
		}
	}
}

// admit places the tasks of a LocalQueue in the ClusterQueue it names when
// that queue admits its namespace, as Kueue does: a LocalQueue anyone may
// point at any ClusterQueue must not make its namespace, its tasks or
// whoever may see them the team's. A namespace whose labels are not known
// yet has only its name label.
func (m *Model) admit(key string) {
	target, ok := m.localQueues[key]
	namespace, name, _ := strings.Cut(key, "/")
	if ok && target != "" {
		ok = AdmitsNamespace(m.clusterQueues[target], namespace, m.namespaceLabels[namespace])
	}
	old, had := m.placing.clusterQueueOf[key]
	switch {
	case ok && had && old == target, !ok && !had:
		return
	case ok:
		m.placing.clusterQueueOf[key] = target
	default:
		delete(m.placing.clusterQueueOf, key)
	}
	m.placed = nil
	m.localQueueChanged(namespace, name)
	m.queuesDirty = true // the namespaces a ClusterQueue serves
}

// AdmitsNamespace is Kueue's rule: a ClusterQueue admits Workloads of the
// namespaces its namespaceSelector selects; none without one. A queue not
// known yet keeps the LocalQueues that name it (their tasks have no team
// until it comes).
func AdmitsNamespace(cq *kueuev1beta2.ClusterQueue, namespace string, labels map[string]string) bool {
	if cq == nil {
		return true
	}
	selector, err := metav1.LabelSelectorAsSelector(cq.Spec.NamespaceSelector)
	if err != nil {
		return false
	}
	if labels == nil {
		labels = map[string]string{corev1.LabelMetadataName: namespace}
	}
	return selector.Matches(k8slabels.Set(labels))
}

// localQueueChanged resolves again the tasks submitted to a LocalQueue: a
// rare change (a team created, or its queue pointed elsewhere), so it may
// look at every task.
func (m *Model) localQueueChanged(namespace, name string) {
	for key, f := range m.tasks {
		if f.Namespace == namespace && f.LocalQueue == name {
			m.replace(key, f, m.placing.place)
		}
	}
}

// SetPolicyObjects takes the cohort and the priority classes (the policy).
// Tasks change only when the order of classes, and so the lowest class,
// does: a rare change, which may look at every task.
func (m *Model) SetPolicyObjects(cohort *kueuev1beta2.Cohort, classes []*kueuev1beta2.WorkloadPriorityClass) {
	m.changes++
	m.cohort = cohort
	m.priorityClass = make(map[string]*kueuev1beta2.WorkloadPriorityClass, len(classes))
	for _, c := range classes {
		m.priorityClass[c.Name] = c
	}
	m.orderClasses()
}

// orderClasses orders the classes again (classOrder) after the policy,
// the WorkloadPriorityClasses or the PriorityClasses tasks name changed,
// and gives tasks without a class the lowest WorkloadPriorityClass: a
// Kubernetes PriorityClass never becomes theirs, as tasks naming one come
// and go.
func (m *Model) orderClasses() {
	byName := make([]*kueuev1beta2.WorkloadPriorityClass, 0, len(m.priorityClass))
	for _, c := range m.priorityClass {
		byName = append(byName, c)
	}
	slices.SortFunc(byName, func(a, b *kueuev1beta2.WorkloadPriorityClass) int { return strings.Compare(a.Name, b.Name) })
	policy := ReadPolicy(m.cohort, byName)
	pods := make(map[string]int32, len(m.podClasses))
	for name, use := range m.podClasses {
		pods[name] = use.priority
	}
	order := classOrder(policy, byName, pods)
	if reflect.DeepEqual(policy, m.policy) && slices.Equal(order, m.classes) {
		return
	}
	m.policy, m.classes = policy, order
	lowest := ""
	if own := classOrder(policy, byName, nil); len(own) > 0 {
		lowest = own[len(own)-1]
	}
	if lowest == m.placing.lowest {
		return
	}
	m.placing.lowest = lowest
	m.placed = nil
	for key, f := range m.tasks {
		if f.classRef == "" {
			m.replace(key, f, m.placing.place)
		}
	}
}

// countPodClass counts a task naming a Kubernetes PriorityClass in or out
// (sign 1 or -1); the classes are ordered again when one appears or goes.
func (m *Model) countPodClass(f *TaskFacts, sign int) {
	if !f.podClass || f.classRef == "" {
		return
	}
	use, known := m.podClasses[f.classRef]
	if !known {
		use.priority = f.Priority
	}
	use.tasks += sign
	if use.tasks <= 0 {
		delete(m.podClasses, f.classRef)
	} else {
		m.podClasses[f.classRef] = use
	}
	if known != (use.tasks > 0) {
		m.classesDirty = true
	}
}

// replace swaps a task for a changed copy: facts are never changed in place,
// since snapshots share them.
func (m *Model) replace(key string, f *TaskFacts, change func(*TaskFacts)) {
	g := *f
	change(&g)
	m.unindex(key)
	m.index(key, &g)
}

// placement is where the read model puts a task: its class when it names
// none, its ClusterQueue (a pending Workload does not name it: its
// LocalQueue's), the queue that holds it and its team (the ClusterQueue's).
type placement struct {
	clusterQueueOf map[string]string // LocalQueueKey → ClusterQueue
	teamOf         map[string]string // ClusterQueue → the team it is (Settings.TeamOfClusterQueue)
	lowest         string            // the class of tasks that name none
}

// where is the class, ClusterQueue, queue and team of f.
func (p placement) where(f *TaskFacts) (class, clusterQueue, queue, team string) {
	class, clusterQueue = f.Class, f.admittedIn
	if f.classRef == "" {
		class = p.lowest
	}
	if cq, ok := p.clusterQueueOf[LocalQueueKey(f.Namespace, f.LocalQueue)]; ok && f.LocalQueue != "" {
		if clusterQueue == "" {
			clusterQueue = cq
		}
		if f.Queued {
			queue = cq
		}
	}
	team = f.namespaceTeam
	if t, ok := p.teamOf[clusterQueue]; ok {
		team = t
	}
	return class, clusterQueue, queue, team
}

// place gives f its class, ClusterQueue, queue and team.
func (p placement) place(f *TaskFacts) {
	f.Class, f.ClusterQueue, f.queue, f.Team = p.where(f)
}

// placedAsIs reports whether f is where it goes already, so that the model
// may keep it as it is: most tasks are, when the cache placed them
// (Placement) before the model took them.
func (p placement) placedAsIs(f *TaskFacts) bool {
	class, clusterQueue, queue, team := p.where(f)
	return class == f.Class && clusterQueue == f.ClusterQueue && queue == f.queue && team == f.Team
}

// Placement is a copy of where the read model puts tasks, safe for
// concurrent use: the cache places each Workload's facts with it as it
// reads them, and the model then keeps those facts as they are instead of
// a placed copy (the facts of 50 000 Workloads are about 25 MB).
type Placement struct{ p placement }

// Place gives f, which nobody else holds yet, its class, ClusterQueue,
// queue and team as the model would.
func (p *Placement) Place(f *TaskFacts) { p.p.place(f) }

// Placement is where the model puts tasks now; the same value until that
// changes (a LocalQueue pointed elsewhere, a ClusterQueue's team, the
// lowest class).
func (m *Model) Placement() *Placement {
	if m.placed == nil {
		m.placed = &Placement{placement{clusterQueueOf: maps.Clone(m.placing.clusterQueueOf),
			teamOf: maps.Clone(m.placing.teamOf), lowest: m.placing.lowest}}
	}
	return m.placed
}

// index adds a task to every set it belongs to; unindex removes it.
func (m *Model) index(key string, f *TaskFacts) {
	m.tasks[key] = f
	m.place(f, true)
	m.countPodClass(f, 1)
	if chain := m.chainOf(f); chain != "" {
		if m.sliceTasks[chain] == nil {
			m.sliceTasks[chain] = map[string]bool{}
		}
		m.sliceTasks[chain][key] = true
	}
}

func (m *Model) unindex(key string) {
	if f, ok := m.tasks[key]; ok {
		delete(m.tasks, key)
		m.place(f, false)
		m.countPodClass(f, -1)
		if chain := m.chainOf(f); chain != "" {
			delete(m.sliceTasks[chain], key)
			if len(m.sliceTasks[chain]) == 0 {
				delete(m.sliceTasks, chain)
			}
		}
	}
}

func (m *Model) place(f *TaskFacts, add bool) {
	tc := teamAndClass{f.Team, f.Class}
	b := m.buckets[tc]
	if b == nil {
		b = &bucket{tasks: newTree(byName)}
		m.buckets[tc] = b
	}
	put(b.tasks, f, add)
	sign := 1
	if !add {
		sign = -1
	}
	b.counts.count(f.State, f.Deactivated, demand(f.Requests, f.GPUs), f.Partitions, sign)
	m.dirtyBuckets[tc] = true
	if b.tasks.Len() == 0 {
		delete(m.buckets, tc)
	}

	if f.queue != "" {
		q := m.queues[f.queue]
		if q == nil {
			q = newTree(inQueueOrder)
			m.queues[f.queue] = q
		}
		put(q, f, add)
		m.dirtyQueues[f.queue] = true
		if q.Len() == 0 {
			delete(m.queues, f.queue)
		}
	} else if f.State == TaskPending || f.State == TaskPreempted {
		put(m.unqueued, f, add)
	}
	eachGroup(f, func(key groupKey) {
		g := m.groups[key]
		if g == nil {
			g = newTree(inAdmissionOrder)
			m.groups[key] = g
		}
		put(g, f, add)
		m.dirtyGroups[key] = true
		if g.Len() == 0 {
			delete(m.groups, key)
		}
	})
	switch f.State {
	case TaskAdmitted:
		put(m.running, f, add)
	case TaskFinished:
		put(m.finished, f, add)
	}
}

func put(t *tree, f *TaskFacts, add bool) {
	if add {
		t.ReplaceOrInsert(f)
	} else {
		t.Delete(f)
	}
}

// Snapshot gives the model as of now: an immutable view that shares with
// the model and the previous snapshot everything unchanged. It costs what
// changed since the previous call, not the size of the cluster.
func (m *Model) Snapshot(now time.Time) *Snapshot {
	if m.classesDirty {
		m.classesDirty = false
		m.orderClasses()
	}
	prev := m.last
	if prev == nil {
		prev = &Snapshot{}
	}
	s := &Snapshot{Version: prev.Version + 1, Taken: now, Policy: m.policy, Classes: m.classes, Size: len(m.tasks),
		PodClasses: m.podClassPriorities(prev.PodClasses), changes: m.changes, lowest: m.placing.lowest, tallies: prev.tallies, queues: prev.queues, borrowing: prev.borrowing, Teams: prev.Teams, BorrowingSince: prev.BorrowingSince,
		unqueued: m.unqueued.Clone(), running: m.running.Clone(), finished: m.finished.Clone(), lists: newListCache()}

	if len(m.dirtyBuckets) > 0 {
		s.tallies = cloneMap(prev.tallies)
		for tc := range m.dirtyBuckets {
			if b := m.buckets[tc]; b != nil {
				s.tallies[tc] = &teamClassTasks{key: tc, tasks: b.tasks.Clone(), counts: b.counts.frozen(), windows: map[time.Duration]*tally{}}
			} else {
				delete(s.tallies, tc)
			}
		}
	}
	if len(m.dirtyQueues) > 0 {
		s.queues = cloneMap(prev.queues)
		for cq := range m.dirtyQueues {
			if q := m.queues[cq]; q != nil {
				s.queues[cq] = &queue{tasks: q.Clone(), strict: strictFIFO(m.clusterQueues[cq])}
			} else {
				delete(s.queues, cq)
			}
		}
	}
	if m.queuesDirty {
		m.nominal = nominalQuotas(m.clusterQueues)
		m.queueRows = queueRows(m.settings, sortedQueues(m.clusterQueues), servedNamespaces(m.placing.clusterQueueOf), CohortForestOf(slices.Collect(maps.Values(m.cohorts))))
		addStoppedLocalQueues(m.queueRows, m.placing.clusterQueueOf, m.stoppedLocalQueues)
	}
	if len(m.dirtyGroups) > 0 {
		s.borrowing = cloneMap(prev.borrowing)
		for key := range m.dirtyGroups {
			nominal, ok := m.nominal[key]
			g := m.groups[key]
			delete(s.borrowing, key)
			if !ok || g == nil {
				continue
			}
			if first, ok := firstBorrowing(g, key, nominal); ok {
				s.borrowing[key] = first
			}
		}
	}
	if len(m.dirtyBuckets) > 0 || m.queuesDirty || s.Teams == nil {
		s.Teams = withTaskCounts(m.queueRows, m.buckets)
		s.BorrowingSince = TrackBorrowing(prev.BorrowingSince, s.Teams, now)
	}
	clear(m.dirtyBuckets)
	clear(m.dirtyQueues)
	clear(m.dirtyGroups)
	m.queuesDirty = false
	m.last = s
	return s
}

// podClassPriorities are the snapshot's PodClasses: prev's while they are
// the same, as most snapshots' are.
func (m *Model) podClassPriorities(prev map[string]int32) map[string]int32 {
	same := len(prev) == len(m.podClasses)
	for name, use := range m.podClasses {
		if p, ok := prev[name]; !ok || p != use.priority {
			same = false
			break
		}
	}
	if same {
		return prev
	}
	out := make(map[string]int32, len(m.podClasses))
	for name, use := range m.podClasses {
		out[name] = use.priority
	}
	return out
}

// strictFIFO reports a ClusterQueue whose queue Kueue admits strictly in
// order (nil: not known, so not).
func strictFIFO(cq *kueuev1beta2.ClusterQueue) bool {
	return cq != nil && cq.Spec.QueueingStrategy == kueuev1beta2.StrictFIFO
}

func sortedQueues(cqs map[string]*kueuev1beta2.ClusterQueue) []*kueuev1beta2.ClusterQueue {
	out := make([]*kueuev1beta2.ClusterQueue, 0, len(cqs))
	for _, cq := range cqs {
		out = append(out, cq)
	}
	slices.SortFunc(out, func(a, b *kueuev1beta2.ClusterQueue) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// withTaskCounts are the team rows with their tasks counted.
func withTaskCounts(rows []TeamUsage, buckets map[teamAndClass]*bucket) []TeamUsage {
	out := slices.Clone(rows)
	byTeam := make(map[string]int, len(out))
	for i, r := range out {
		byTeam[r.Team] = i
	}
	for k, b := range buckets {
		i, ok := byTeam[k.team]
		if !ok {
			continue
		}
		out[i].Running += b.counts.Running
		out[i].Pending += b.counts.Pending
		out[i].Preempted += b.counts.Preempted
		out[i].PendingDemand.add(b.counts.PendingDemand)
		for profile, n := range b.counts.PendingPartitions {
			if n == 0 {
				continue
			}
			if out[i].PendingPartitions == nil {
				out[i].PendingPartitions = map[string]int64{}
			}
			out[i].PendingPartitions[profile] += n
		}
	}
	return out
}

func cloneMap[K comparable, V any](m map[K]V) map[K]V {
	out := make(map[K]V, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}
