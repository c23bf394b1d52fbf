package kueue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	configv1beta2 "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/kueue/impact"
)

// SchedulerConfig is what of Kueue's controller configuration decides
// admission and preemption beyond the queues themselves.
type SchedulerConfig struct {
	FairSharing          *configv1beta2.FairSharing
	AdmissionFairSharing *configv1beta2.AdmissionFairSharing
	// Resources: how Kueue counts a Workload's resources (transformations,
	// resources left out).
	Resources *configv1beta2.Resources
	// ManageJobsWithoutQueueName: Kueue holds Jobs that name no LocalQueue
	// (else they run outside every quota).
	ManageJobsWithoutQueueName bool
}

// ImpactChange is a change as the preview applies it to its copy of the
// cluster, before anything is written.
type ImpactChange struct {
	// What is the change in words, for the page.
	What string
	// Queues are the ClusterQueues as the change leaves them, by name; a
	// nil value deletes the queue.
	Queues map[string]*kueuev1beta2.ClusterQueue
	// LocalQueues the change creates.
	LocalQueues []*kueuev1beta2.LocalQueue
	// Cohorts as the change leaves them, by name; nil deletes.
	Cohorts map[string]*kueuev1beta2.Cohort
	// Priorities are new values of priority classes, by name; Kueue's
	// webhook gives a Workload its class's value when it is created, and
	// Kueue updates pending and admitted ones when the value changes.
	Priorities map[string]int32
	// DeletedNamespaces go with the change, and their Workloads with them.
	DeletedNamespaces []string
	// Everything puts every queue in the preview (a policy change);
	// otherwise only the cohort trees the change touches.
	Everything bool
}

// ErrNoPreview is a preview the console cannot compute yet (the cache is
// not synced).
var ErrNoPreview = errors.New("the console has not read the cluster yet")

// ErrNoLocalQueue: the team has no LocalQueue a job could be submitted to
// and start from (none, or none in a namespace its ClusterQueue admits).
var ErrNoLocalQueue = errors.New("no LocalQueue in a namespace its ClusterQueue admits")

// Impact computes what Kueue would do with the cluster as it is and as ch
// leaves it, with Kueue's own scheduler, and what differs.
func (c *Cache) Impact(ctx context.Context, s domain.Settings, cfg SchedulerConfig, ch ImpactChange) (domain.Impact, error) {
	if !c.Synced() {
		return domain.Impact{}, ErrNoPreview
	}
	release, err := c.previews.take(ctx, previewWait)
	if err != nil {
		return domain.Impact{}, err
	}
	defer release()
	start := time.Now()
	limit := impact.NewLimit(previewTimeLimit) // from the request: the copy's making counts
	ch.Queues = c.withLiveStatus(ch.Queues)
	nowCopy, facts, err := c.impactCopy(cfg, ch)
	if err != nil {
		return domain.Impact{}, err
	}
	nowCopy.Limit = limit
	afterCopy := applyChange(nowCopy, ch)
	// The two runs are independent (one per core), and stop at the same
	// cycle when their time is up.
	var before, after *impact.Result
	var beforeErr, afterErr error
	var wg sync.WaitGroup
	wg.Go(func() { before, beforeErr = impact.Simulate(ctx, nowCopy) })
	after, afterErr = impact.Simulate(ctx, afterCopy)
	wg.Wait()
	if err := cmp.Or(beforeErr, afterErr); err != nil {
		return domain.Impact{}, err
	}

	byUID := map[string]*domain.TaskFacts{}
	for _, sh := range nowCopy.Workloads {
		if f := facts[sh.Key()]; f != nil {
			byUID[string(sh.UID)] = f
		}
	}
	left := c.treesLeft(ch)
	var fates []domain.FateChange
	for key, f := range facts {
		b, a := before.Workloads[key], after.Workloads[key]
		if b == nil {
			continue
		}
		fc := domain.FateChange{Task: f, Now: domain.Fate(b.Fate), After: domain.FateDeleted, PositionNow: b.Position}
		if a != nil {
			fc.After, fc.PositionAfter, fc.Reason, fc.Uncertain = domain.Fate(a.Fate), a.Position, a.Reason, a.Uncertain
			if a.Fate == impact.Preempted {
				fc.Preemptor = byUID[domain.ParsePreemptor(a.Message).UID]
			}
			if fc.Now == domain.FateStaysPending && fc.After == domain.FateAdmitted && fc.Uncertain == "" && len(left) > 0 {
				if q := c.clusterQueueOfTask(f.Namespace, f.LocalQueue, f.ClusterQueue); ch.Queues[q] == nil && left[c.rootOfQueue(q)] {
					fc.Uncertain = leftTreeUncertain
				}
			}
		}
		fates = append(fates, fc)
	}
	im := domain.BuildImpact(s, time.Now(), ch.What, fates, withUsage(nowCopy.ClusterQueues, before), withUsage(afterCopy.ClusterQueues, after), nil)
	if before.Cut || after.Cut {
		im.Notes = append(im.Notes, unsettledNote(max(before.Cycles, after.Cycles)))
	}
	im.Kueue = fmt.Sprintf("Computed with Kueue %s's own scheduler on a copy of the %d ClusterQueues and %d Workloads the change touches, "+
		"run as the cluster is (%s) and as the change leaves it (%s), in %s.",
		kueueVersion, len(afterCopy.ClusterQueues), len(afterCopy.Workloads), cyclesWord(before.Cycles), cyclesWord(after.Cycles), time.Since(start).Round(time.Millisecond))
	return im, nil
}

// leftTreeUncertain is why a task the change would admit in a cohort tree a
// queue leaves is uncertain: Kueue looks again at the waiting tasks of the
// tree a queue joins (pkg/cache/queue Manager.UpdateClusterQueue), not of
// the one it leaves.
const leftTreeUncertain = "A queue leaves this task's cohort tree, which makes room for it, but Kueue looks again at once only at " +
	"the waiting tasks of the tree the queue joins: this one is admitted at the next change in its own tree (a task's status, " +
	"a task ending, a quota change), within seconds in a busy tree, much later in a quiet one."

// treesLeft are the roots of the cohort trees that queues of ch leave for
// another tree.
func (c *Cache) treesLeft(ch ImpactChange) map[string]bool {
	left := map[string]bool{}
	for name, cq := range ch.Queues {
		live, err := c.ClusterQueues.Get(name)
		if err != nil || cq == nil || live.Spec.CohortName == "" {
			continue
		}
		if from := c.CohortRoot(string(live.Spec.CohortName)); cq.Spec.CohortName == "" || c.CohortRoot(string(cq.Spec.CohortName)) != from {
			left[from] = true
		}
	}
	return left
}

// rootOfQueue is the root of the cohort tree of the ClusterQueue named
// name, as the cluster has it ("" without one).
func (c *Cache) rootOfQueue(name string) string {
	cq, err := c.ClusterQueues.Get(name)
	if err != nil || cq.Spec.CohortName == "" {
		return ""
	}
	return c.CohortRoot(string(cq.Spec.CohortName))
}

// pendingPerQueue is how deep into each queue the preview hands pending
// Workloads to Kueue's scheduler (impact.Cluster.PendingPerQueue): deeper
// ones keep their place, or are named uncertain.
const pendingPerQueue = 10

// previewTimeLimit is how long a preview lets Kueue's scheduler run. Small
// clusters settle in milliseconds; a cohort of hundreds of queues with fair
// sharing takes seconds per cycle, and the preview then shows what the
// cycles it ran do (what Kueue would do first) and says so.
const previewTimeLimit = time.Second

// cyclesWord counts scheduling cycles for people.
func cyclesWord(n int) string {
	if n == 1 {
		return "1 scheduling cycle"
	}
	return fmt.Sprintf("%d scheduling cycles", n)
}

// unsettledNote says that the preview stopped before Kueue settled.
func unsettledNote(cycles int) string {
	return fmt.Sprintf("Kueue's scheduler had not settled after %d cycles, when the preview stopped (it runs for %s): "+
		"what is listed is what those cycles do, as Kueue would do it first; later cycles may admit or preempt more, "+
		"and the tasks it had not tried yet are listed as uncertain.", cycles, previewTimeLimit)
}

// kueueVersion is the Kueue module whose scheduler the preview runs.
const kueueVersion = "v0.19.2"

// impactCopy is the copy of the cluster the change touches: the cohort
// trees of the queues it writes (before and after), with their flavors,
// LocalQueues and Workloads; and the tasks' facts by key.
func (c *Cache) impactCopy(cfg SchedulerConfig, ch ImpactChange) (impact.Cluster, map[string]*domain.TaskFacts, error) {
	cqs, err := c.ClusterQueues.List(labels.Everything())
	if err != nil {
		return impact.Cluster{}, nil, err
	}
	cohorts, err := c.Cohorts.List(labels.Everything())
	if err != nil {
		return impact.Cluster{}, nil, err
	}
	parents := map[string]string{}
	for _, co := range cohorts {
		parents[co.Name] = string(co.Spec.ParentName)
	}
	for name, co := range ch.Cohorts {
		if co != nil {
			parents[name] = string(co.Spec.ParentName)
		}
	}
	root := func(cohort string) string {
		for seen := 0; cohort != "" && parents[cohort] != "" && seen < 64; seen++ {
			cohort = parents[cohort]
		}
		return cohort
	}
	roots := map[string]bool{}
	touched := map[string]bool{}
	for name, cq := range ch.Queues {
		touched[name] = true
		if cq != nil {
			roots[root(string(cq.Spec.CohortName))] = true
		}
	}
	for name := range ch.Cohorts {
		roots[root(name)] = true
	}
	inScope := func(cq *kueuev1beta2.ClusterQueue) bool {
		if ch.Everything || touched[cq.Name] {
			return true
		}
		return cq.Spec.CohortName != "" && roots[root(string(cq.Spec.CohortName))]
	}
	for _, cq := range cqs {
		if touched[cq.Name] && cq.Spec.CohortName != "" {
			roots[root(string(cq.Spec.CohortName))] = true
		}
	}

	out := impact.Cluster{FairSharing: cfg.FairSharing, AdmissionFairSharing: cfg.AdmissionFairSharing, Resources: cfg.Resources, PendingPerQueue: pendingPerQueue,
		Uncertain: map[string]string{}}
	scope := map[string]bool{}
	for _, cq := range cqs {
		if inScope(cq) {
			scope[cq.Name] = true
			out.ClusterQueues = append(out.ClusterQueues, forCopy(cq))
			if why := uncertainOf(cq); why != "" {
				out.Uncertain[cq.Name] = why
			}
		}
	}
	for _, co := range cohorts {
		if ch.Everything || roots[root(co.Name)] {
			out.Cohorts = append(out.Cohorts, co)
		}
	}
	flavors, err := c.ResourceFlavors.List(labels.Everything())
	if err != nil {
		return impact.Cluster{}, nil, err
	}
	// Topology-aware flavors place pods on nodes: the copy has no nodes, so
	// it counts their quota only and names what it admits there uncertain.
	// One whose labels no schedulable node has offers Kueue no topology
	// domain: Kueue admits nothing there. The copy gives it a taint no pod
	// tolerates, so that Kueue's flavor assigner passes it over too.
	nodes, err := c.Nodes.List(labels.Everything())
	if err != nil {
		return impact.Cluster{}, nil, err
	}
	byTopology, noNodes := map[string]bool{}, map[string]bool{}
	for _, rf := range flavors {
		if rf.Spec.TopologyName != nil {
			byTopology[rf.Name] = true
			rf = rf.DeepCopy()
			rf.Spec.TopologyName = nil
			if !anyNodeHas(nodes, rf.Spec.NodeLabels) {
				noNodes[rf.Name] = true
				rf.Spec.NodeTaints = append(rf.Spec.NodeTaints, corev1.Taint{Key: noTopologyNodes, Effect: corev1.TaintEffectNoSchedule})
			}
		}
		out.Flavors = append(out.Flavors, rf)
	}
	for _, cq := range out.ClusterQueues {
		for _, rg := range cq.Spec.ResourceGroups {
			for _, f := range rg.Flavors {
				switch {
				case !byTopology[string(f.Name)] || out.Uncertain[cq.Name] != "":
				case noNodes[string(f.Name)]:
					out.Uncertain[cq.Name] = "Its flavor " + string(f.Name) + " places pods by topology, and no ready node has its labels: Kueue admits nothing there until one has."
				default:
					out.Uncertain[cq.Name] = "Its flavor " + string(f.Name) + " places pods by topology: whether nodes have room is decided at scheduling, not by quota."
				}
			}
		}
	}
	lqs, err := c.LocalQueues.List(labels.Everything())
	if err != nil {
		return impact.Cluster{}, nil, err
	}
	queueOf := map[string]string{}
	for _, lq := range lqs {
		queueOf[lq.Namespace+"/"+lq.Name] = string(lq.Spec.ClusterQueue)
		if scope[string(lq.Spec.ClusterQueue)] {
			out.LocalQueues = append(out.LocalQueues, lq)
		}
	}
	out.Namespaces = namespacesOf(out.LocalQueues, c.namespaceLabels)
	facts := map[string]*domain.TaskFacts{}
	for _, obj := range c.workloadStore() {
		wt, ok := obj.(*WorkloadTask)
		if !ok || wt.Shape == nil {
			continue
		}
		sh := wt.Shape
		in := scope[queueOf[sh.Namespace+"/"+string(sh.Queue)]]
		if sh.Admitted() {
			in = scope[string(sh.Admission.ClusterQueue)]
		}
		if in {
			out.Workloads = append(out.Workloads, sh)
			facts[sh.Key()] = wt.Task
		}
	}
	return out, facts, nil
}

// namespacesOf are the namespaces of the LocalQueues, with their labels
// (labelsOf; nil: a namespace a change creates, which has only its name's).
// Kueue's scheduler reads a Workload's namespace before it admits it, for
// its ClusterQueue's namespaceSelector, and keeps one without a namespace
// pending.
func namespacesOf(lqs []*kueuev1beta2.LocalQueue, labelsOf func(namespace string) map[string]string) []*corev1.Namespace {
	seen := map[string]bool{}
	var out []*corev1.Namespace
	for _, lq := range lqs {
		if !seen[lq.Namespace] {
			seen[lq.Namespace] = true
			ls := labelsOf(lq.Namespace)
			if ls == nil {
				ls = map[string]string{corev1.LabelMetadataName: lq.Namespace}
			}
			out = append(out, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: lq.Namespace, Labels: ls}})
		}
	}
	return out
}

// namespaceLabels are a copy of a namespace's labels in the cache (nil:
// not there).
func (c *Cache) namespaceLabels(namespace string) map[string]string {
	if ns, err := c.Namespaces.Get(namespace); err == nil {
		return maps.Clone(ns.Labels)
	}
	return nil
}

// ServedNamespaces are the namespaces of the LocalQueues feeding
// clusterQueue whose Workloads it admits (its namespaceSelector, Kueue's
// rule domain.AdmitsNamespace), sorted; a LocalQueue elsewhere keeps its
// Workloads pending.
func (c *Cache) ServedNamespaces(cq *kueuev1beta2.ClusterQueue) []string {
	lqs, _ := c.LocalQueues.List(labels.Everything())
	var out []string
	for _, lq := range lqs {
		if string(lq.Spec.ClusterQueue) == cq.Name && !slices.Contains(out, lq.Namespace) && domain.AdmitsNamespace(cq, lq.Namespace, c.namespaceLabels(lq.Namespace)) {
			out = append(out, lq.Namespace)
		}
	}
	slices.Sort(out)
	return out
}

// forCopy is the ClusterQueue as the copy holds it, with its
// namespaceSelector: the copy's namespaces have their labels.
//
// Admission checks are left out (the copy has none to run): a Workload
// admitted there is named uncertain (uncertainOf).
func forCopy(cq *kueuev1beta2.ClusterQueue) *kueuev1beta2.ClusterQueue {
	out := cq.DeepCopy()
	out.Spec.AdmissionChecksStrategy = nil
	if inactiveForWhatTheCopyLeavesOut(cq) && !domain.Stopped(cq) {
		out.Spec.StopPolicy = ptr.To(kueuev1beta2.Hold)
	}
	out.Status = kueuev1beta2.ClusterQueueStatus{}
	return out
}

// withLiveStatus are the queues a change writes, each with the status the
// cluster's queue of its name has: a change leaves what keeps a queue
// inactive that the copy leaves out (admission checks, topologies) as it
// is, and forCopy reads it there.
func (c *Cache) withLiveStatus(queues map[string]*kueuev1beta2.ClusterQueue) map[string]*kueuev1beta2.ClusterQueue {
	out := make(map[string]*kueuev1beta2.ClusterQueue, len(queues))
	for name, cq := range queues {
		if live, err := c.ClusterQueues.Get(name); err == nil && cq != nil {
			cq = cq.DeepCopy()
			cq.Status = *live.Status.DeepCopy()
		}
		out[name] = cq
	}
	return out
}

// inactiveForWhatTheCopyLeavesOut: Kueue keeps the queue inactive for its
// admission checks or its flavors' topology, which the copy leaves out. The
// copy holds it (stopPolicy Hold), so that it admits nothing there either.
func inactiveForWhatTheCopyLeavesOut(cq *kueuev1beta2.ClusterQueue) bool {
	c := apimeta.FindStatusCondition(cq.Status.Conditions, kueuev1beta2.ClusterQueueActive)
	if c == nil || c.Status != metav1.ConditionFalse {
		return false
	}
	switch c.Reason {
	case kueuev1beta2.ClusterQueueActiveReasonAdmissionCheckNotFound, kueuev1beta2.ClusterQueueActiveReasonAdmissionCheckInactive,
		kueuev1beta2.ClusterQueueActiveReasonMultipleMultiKueueAdmissionChecks, kueuev1beta2.ClusterQueueActiveReasonMultiKueueAdmissionCheckAppliedPerFlavor,
		kueuev1beta2.ClusterQueueActiveReasonMultiKueueWithProvisioningRequest, kueuev1beta2.ClusterQueueActiveReasonTopologyNotFound:
		return true
	}
	return false
}

// uncertainOf says what the preview cannot know of a queue's admissions.
func uncertainOf(cq *kueuev1beta2.ClusterQueue) string {
	if s := cq.Spec.AdmissionChecksStrategy; s != nil && len(s.AdmissionChecks) > 0 {
		return "Its queue runs admission checks (such as a provisioning request) after quota: whether they pass is not known in advance."
	}
	if cq.Spec.ConcurrentAdmissionPolicy != nil {
		return "Its queue tries each flavor at once and moves running tasks to preferred flavors (Kueue's concurrent admission), which the preview does not run: the flavor a task gets is not known in advance."
	}
	return ""
}

// applyChange is the copy as ch leaves it.
func applyChange(now impact.Cluster, ch ImpactChange) impact.Cluster {
	after := now
	after.ClusterQueues = replaced(now.ClusterQueues, ch.Queues, func(cq *kueuev1beta2.ClusterQueue) string { return cq.Name }, forCopy)
	after.Cohorts = replaced(now.Cohorts, ch.Cohorts, func(co *kueuev1beta2.Cohort) string { return co.Name }, nil)
	after.LocalQueues = append(append([]*kueuev1beta2.LocalQueue(nil), now.LocalQueues...), ch.LocalQueues...)
	if len(ch.Priorities) > 0 || len(ch.DeletedNamespaces) > 0 {
		after.Workloads = make([]*impact.Shape, 0, len(now.Workloads))
		for _, sh := range now.Workloads {
			if slices.Contains(ch.DeletedNamespaces, sh.Namespace) {
				continue
			}
			if sh.PriorityClass != nil {
				if v, ok := ch.Priorities[sh.PriorityClass.Name]; ok {
					moved := *sh
					moved.Priority = &v
					sh = &moved
				}
			}
			after.Workloads = append(after.Workloads, sh)
		}
		after.LocalQueues = slices.DeleteFunc(after.LocalQueues, func(lq *kueuev1beta2.LocalQueue) bool {
			return slices.Contains(ch.DeletedNamespaces, lq.Namespace)
		})
	}
	known := map[string]map[string]string{}
	for _, ns := range now.Namespaces {
		known[ns.Name] = ns.Labels
	}
	after.Namespaces = namespacesOf(after.LocalQueues, func(namespace string) map[string]string { return known[namespace] })
	return after
}

// replaced is objs with changes applied by name: a changed one replaced
// (nil removes it), a new one added; prepare (when not nil) readies what
// comes from the change for the copy.
func replaced[T any](objs []*T, changes map[string]*T, name func(*T) string, prepare func(*T) *T) []*T {
	ready := func(o *T) *T {
		if prepare != nil {
			return prepare(o)
		}
		return o
	}
	out := make([]*T, 0, len(objs)+len(changes))
	seen := map[string]bool{}
	for _, o := range objs {
		next, changed := changes[name(o)]
		seen[name(o)] = true
		switch {
		case !changed:
			out = append(out, o)
		case next != nil:
			out = append(out, ready(next))
		}
	}
	for n, o := range changes {
		if !seen[n] && o != nil {
			out = append(out, ready(o))
		}
	}
	return out
}

// withUsage are the queues with Kueue's usage of r in their status.
func withUsage(cqs []*kueuev1beta2.ClusterQueue, r *impact.Result) []*kueuev1beta2.ClusterQueue {
	out := make([]*kueuev1beta2.ClusterQueue, 0, len(cqs))
	for _, cq := range cqs {
		withStatus := cq.DeepCopy()
		withStatus.Status.FlavorsUsage = r.Usage[cq.Name]
		out = append(out, withStatus)
	}
	return out
}

// noTopologyNodes is the key of the taint the copy gives a topology-aware
// flavor whose labels no schedulable node has.
const noTopologyNodes = "quota-console.openquota.dev/no-topology-domain"

// anyNodeHas reports whether a schedulable node has every label of want.
func anyNodeHas(nodes []*corev1.Node, want map[string]string) bool {
	sel := labels.SelectorFromSet(want)
	for _, n := range nodes {
		if domain.NodeSchedulable(n) && sel.Matches(labels.Set(n.Labels)) {
			return true
		}
	}
	return false
}

// noTopologyNodesRE finds what Kueue's flavor assigner says of the copy's
// taint.
var noTopologyNodesRE = regexp.MustCompile(`untolerated taint \{` + regexp.QuoteMeta(noTopologyNodes) + `[^}]*\} in flavor ([^\s,;]+)`)

// copyWords is a message of the copy's Kueue as Kueue would say it of the
// cluster: the copy's taint on a topology-aware flavor without nodes is
// the cluster's "no topology domains" there.
func copyWords(msg string) string {
	return noTopologyNodesRE.ReplaceAllString(msg, "no topology domains in flavor $1: no ready node has its labels")
}

// whatIfName names the job a what-if adds to the copy.
const whatIfName = "what-if"

// WhatIf answers what Kueue would do with job if it were submitted now to
// its team's queue: Kueue's scheduler over a copy of the team's cohort
// tree with the job added, created now.
func (c *Cache) WhatIf(ctx context.Context, s domain.Settings, cfg SchedulerConfig, job domain.WhatIf, shapes domain.ShapeLookup) (domain.WhatIfAnswer, error) {
	if !c.Synced() {
		return domain.WhatIfAnswer{}, ErrNoPreview
	}
	release, err := c.previews.take(ctx, previewWait)
	if err != nil {
		return domain.WhatIfAnswer{}, err
	}
	defer release()
	start := time.Now()
	limit := impact.NewLimit(previewTimeLimit) // from the request: the copy's making counts
	cq := c.queueOfTeam(s, job.Team)
	if cq == nil {
		return domain.WhatIfAnswer{}, fmt.Errorf("there is no team %q", job.Team)
	}
	lq, lqs := c.localQueueOf(cq)
	if lq == nil {
		return domain.WhatIfAnswer{}, fmt.Errorf("team %s has %w", job.Team, ErrNoLocalQueue)
	}
	copyOf, facts, err := c.impactCopy(cfg, ImpactChange{Queues: map[string]*kueuev1beta2.ClusterQueue{cq.Name: cq}})
	if err != nil {
		return domain.WhatIfAnswer{}, err
	}
	sh := &impact.Shape{Namespace: lq.Namespace, Name: whatIfName, UID: whatIfName, Queue: kueuev1beta2.LocalQueueName(lq.Name),
		Created: metav1.NewTime(time.Now())}
	switch {
	case job.PodClassPriority != nil:
		sh.PriorityClass, sh.Priority = kueuev1beta2.NewPodPriorityClassRef(job.Class), job.PodClassPriority
	case job.Class != "":
		sh.PriorityClass = kueuev1beta2.NewWorkloadPriorityClassRef(job.Class)
		if wpc, err := c.WorkloadPriorityClasses.Get(job.Class); err == nil {
			sh.Priority = &wpc.Value
		}
	}
	for i, r := range job.Rows {
		shape, _ := shapes(r.InstanceType)
		ps := impact.PodSetShape{Name: kueuev1beta2.PodSetReference(fmt.Sprintf("pods-%d", i)), Count: r.Pods, Requests: r.PodRequests(shape)}
		if rf, err := c.ResourceFlavors.Get(r.InstanceType); err == nil {
			ps.NodeSelector = rf.Spec.NodeLabels
			// A job asked for on a flavor is one meant for it: it tolerates
			// the flavor's taints (spot nodes, say), as its pods would.
			ps.Tolerations = tolerating(rf.Spec.NodeTaints)
		}
		sh.PodSets = append(sh.PodSets, ps)
	}
	copyOf.Workloads = append(copyOf.Workloads, sh)
	copyOf.Limit = limit
	res, err := impact.Simulate(ctx, copyOf)
	if err != nil {
		return domain.WhatIfAnswer{}, err
	}
	a := domain.WhatIfAnswer{LocalQueue: lq.Namespace + "/" + lq.Name, LocalQueues: lqs}
	if o := res.Workloads[sh.Key()]; o != nil {
		a.Admitted = o.Fate == impact.Admitted
		a.Position, a.Reason, a.Uncertain = o.Position, copyWords(o.Message), o.Uncertain
	}
	if a.Admitted {
		for _, u := range res.Usage[cq.Name] {
			for _, r := range u.Resources {
				a.Borrowing = a.Borrowing || !r.Borrowed.IsZero()
			}
		}
	}
	a.Preempts = preemptedBy(whatIfName, res, facts, time.Now())
	a.Kueue = fmt.Sprintf("Computed with Kueue %s's own scheduler on a copy of the team's cohort tree (%d ClusterQueues, %d Workloads) with the job added: %s in %s.",
		kueueVersion, len(copyOf.ClusterQueues), len(copyOf.Workloads), cyclesWord(res.Cycles), time.Since(start).Round(time.Millisecond))
	return a, nil
}

// preemptedBy are the tasks the copy's Workload of UID uid preempts: not
// evictions under way, nor what other waiting tasks preempt in the same
// cycles.
func preemptedBy(uid string, res *impact.Result, facts map[string]*domain.TaskFacts, now time.Time) []domain.ImpactTask {
	var out []domain.ImpactTask
	for key, o := range res.Workloads {
		f := facts[key]
		if o.Fate != impact.Preempted || f == nil || domain.ParsePreemptor(o.Message).UID != uid {
			continue
		}
		t := domain.ImpactTaskOf(f)
		t.Ran = f.RunAt(now)
		t.GPUHours = float64(t.GPUs) * t.Ran.Hours()
		out = append(out, t)
	}
	slices.SortFunc(out, func(x, y domain.ImpactTask) int {
		return cmp.Or(cmp.Compare(x.Team, y.Team), cmp.Compare(x.Namespace, y.Namespace), cmp.Compare(x.Name, y.Name))
	})
	return out
}

// stopped is 1 for a LocalQueue with a stop policy, 0 otherwise.
func stopped(lq *kueuev1beta2.LocalQueue) int {
	if ptr.Deref(lq.Spec.StopPolicy, kueuev1beta2.None) != kueuev1beta2.None {
		return 1
	}
	return 0
}

// tolerating are the tolerations of taints.
func tolerating(taints []corev1.Taint) []corev1.Toleration {
	var out []corev1.Toleration
	for _, t := range taints {
		out = append(out, corev1.Toleration{Key: t.Key, Operator: corev1.TolerationOpEqual, Value: t.Value, Effect: t.Effect})
	}
	return out
}

// queueOfTeam is the ClusterQueue of the team the pages name name: a
// console team's, or one the console does not manage (named by
// Settings.TeamOfClusterQueue); nil when there is none.
func (c *Cache) queueOfTeam(s domain.Settings, name string) *kueuev1beta2.ClusterQueue {
	if cq, _, ok := c.Team(s, name); ok {
		return cq
	}
	cqs, err := c.ClusterQueues.List(labels.Everything())
	if err != nil {
		return nil
	}
	for _, cq := range cqs {
		if !domain.ManagedByConsole(cq) && s.TeamOfClusterQueue(cq) == name {
			return cq
		}
	}
	return nil
}

// localQueueOf is the first LocalQueue, by namespace and name, that feeds
// the ClusterQueue in a namespace it admits (a console team has one), one
// that is not stopped before one that is.
func (c *Cache) localQueueOf(cq *kueuev1beta2.ClusterQueue) (found *kueuev1beta2.LocalQueue, of int) {
	lqs, err := c.LocalQueues.List(labels.Everything())
	if err != nil {
		return nil, 0
	}
	for _, lq := range lqs {
		if string(lq.Spec.ClusterQueue) != cq.Name || !domain.AdmitsNamespace(cq, lq.Namespace, c.namespaceLabels(lq.Namespace)) {
			continue
		}
		of++
		if found == nil || cmp.Or(cmp.Compare(stopped(lq), stopped(found)), cmp.Compare(lq.Namespace+"/"+lq.Name, found.Namespace+"/"+found.Name)) < 0 {
			found = lq
		}
	}
	return found, of
}
