package kueue

import (
	"context"
	"errors"
	"slices"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/domain"
)

// What the pages and the write path read from the informers' caches, never
// from the apiserver. A lister over an informer's cache cannot fail (it
// errs only on a malformed selector), so these return no error.

// Teams returns the teams this console manages (named with its settings'
// prefix; not those being deleted), by name, each with the allocation the
// console acts on (domain.TrustedTeam: its latest saved revision). The
// teams are shared with other callers: do not change them.
func (c *Cache) Teams(s domain.Settings) []domain.TeamState {
	all, _ := c.ClusterQueues.List(labels.SelectorFromSet(labels.Set{domain.ManagedByLabel: domain.ManagedByValue}))
	var out []domain.TeamState
	for _, cq := range all {
		if cq.DeletionTimestamp != nil {
			continue // being deleted: Kueue holds it until its workloads are gone
		}
		if t, _, ok := c.trusted(s, cq); ok && (cq.Name == s.ClusterQueue(t.Name) || domain.Imported(cq)) {
			out = append(out, domain.TeamState{Team: t, ClusterQueue: cq})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// trustedTeams remembers each team's trusted allocation until its
// ClusterQueue or its revisions change: Kueue updates queue status all the
// time, but the teams list would otherwise decode every allocation on every
// request.
type trustedTeams struct {
	mu     sync.Mutex
	byName map[string]trustedEntry
}

type trustedEntry struct {
	generation int64
	raw        string // the allocation annotation it was read with
	label      string // the team label
	revisions  string // the revisions ConfigMap's resourceVersion ("" without one)
	team       domain.Team
	saved, ok  bool
}

// trusted is domain.TrustedTeam of cq with the team's latest revision in
// the cache; saved reports whether there is one.
func (c *Cache) trusted(s domain.Settings, cq *kueuev1beta2.ClusterQueue) (t domain.Team, saved, ok bool) {
	name := domain.ManagedTeam(cq)
	var revisions *corev1.ConfigMap
	if name != "" && c.LatestTeamRevisions != nil {
		revisions, _ = c.LatestTeamRevisions.Get(domain.TeamRevisionsName(s, name))
	}
	key := trustedEntry{generation: cq.Generation, raw: cq.Annotations[domain.AllocationAnnotation], label: name}
	if revisions != nil {
		key.revisions = revisions.ResourceVersion
	}
	st := &c.stored
	st.mu.Lock()
	defer st.mu.Unlock()
	if got, found := st.byName[cq.Name]; found && got.generation == key.generation && got.raw == key.raw &&
		got.label == key.label && got.revisions == key.revisions {
		return got.team, got.saved, got.ok
	}
	var latest *domain.TeamRevision
	if revisions != nil {
		latest = domain.LatestRevision[domain.Team](revisions.Data)
	}
	key.team, key.saved, key.ok = domain.TrustedTeam(cq, latest)
	if st.byName == nil || len(st.byName) > 10000 {
		st.byName = map[string]trustedEntry{}
	}
	st.byName[cq.Name] = key
	return key.team, key.saved, key.ok
}

// Team returns a team this console manages, with the allocation it acts on
// (see Teams); ok is false when there is none (cq is then the ClusterQueue
// of that name the console does not manage, or nil).
func (c *Cache) Team(s domain.Settings, name string) (*kueuev1beta2.ClusterQueue, domain.Team, bool) {
	cq, team, _, ok := c.SavedTeam(s, name)
	return cq, team, ok
}

// SavedTeam is Team, and whether its allocation comes from a saved
// revision (saved false: a team made before revisions were kept, whose
// members are not known).
func (c *Cache) SavedTeam(s domain.Settings, name string) (cq *kueuev1beta2.ClusterQueue, team domain.Team, saved, ok bool) {
	cq, err := c.ClusterQueues.Get(s.ClusterQueue(name))
	if err != nil {
		if cq = c.importedQueue(name); cq == nil {
			return nil, domain.Team{}, false, false
		}
	}
	team, saved, ok = c.trusted(s, cq)
	return cq, team, saved, ok && team.Name == name
}

// TeamOfTask names the team of a task as the live pages count it: the team
// of its ClusterQueue (clusterQueue, its admission's; else the one its
// LocalQueue feeds). ok is false when neither is known.
func (c *Cache) TeamOfTask(s domain.Settings, namespace, localQueue, clusterQueue string) (string, bool) {
	clusterQueue = c.clusterQueueOfTask(namespace, localQueue, clusterQueue)
	if clusterQueue == "" {
		return "", false
	}
	cq, err := c.ClusterQueues.Get(clusterQueue)
	if err != nil {
		return "", false
	}
	return s.TeamOfClusterQueue(cq), true
}

// clusterQueueOfTask names a task's ClusterQueue: its admission's
// (clusterQueue), else the one its LocalQueue feeds; "" when neither is
// known.
func (c *Cache) clusterQueueOfTask(namespace, localQueue, clusterQueue string) string {
	if clusterQueue == "" && localQueue != "" {
		if lq, err := c.LocalQueues.LocalQueues(namespace).Get(localQueue); err == nil {
			clusterQueue = string(lq.Spec.ClusterQueue)
		}
	}
	return clusterQueue
}

// importedQueue is the ClusterQueue imported as team name, nil when none.
func (c *Cache) importedQueue(name string) *kueuev1beta2.ClusterQueue {
	found, _ := c.ClusterQueues.List(labels.SelectorFromSet(labels.Set{domain.ManagedByLabel: domain.ManagedByValue,
		domain.TeamLabel: name, domain.ImportedLabel: "true"}))
	if len(found) != 1 {
		return nil
	}
	return found[0]
}

// ConsoleCohorts are the cohorts a team may be put in: the console's own
// and those it created (named after it, "<cohort>-…"), by name.
func (c *Cache) ConsoleCohorts(s domain.Settings) []string {
	out := []string{s.Cohort}
	all, _ := c.Cohorts.List(labels.SelectorFromSet(labels.Set{domain.ManagedByLabel: domain.ManagedByValue}))
	for _, co := range all {
		if s.ConsoleCohort(co.Name) && co.Name != s.Cohort && co.DeletionTimestamp == nil {
			out = append(out, co.Name)
		}
	}
	slices.Sort(out[1:])
	return out
}

// Policy returns the stored cluster policy. It is decoded again only when
// a priority class or a cohort is redefined: decoding it for every request
// was about 6 % of the policy page's time.
func (c *Cache) Policy(s domain.Settings) domain.Policy {
	key := keptPolicyKey{cohort: s.Cohort, redefinitions: c.Redefinitions("WorkloadPriorityClass", "Cohort")}
	c.policy.mu.Lock()
	kept := c.policy.kept
	c.policy.mu.Unlock()
	if kept.ok && kept.key == key {
		return kept.policy.Copy()
	}
	classes, _ := c.WorkloadPriorityClasses.List(labels.Everything())
	cohort, err := c.Cohorts.Get(s.Cohort)
	if err != nil {
		cohort = nil // none stored yet
	}
	policy := domain.ReadPolicy(cohort, classes)
	c.policy.mu.Lock()
	c.policy.kept = storedPolicy{key: key, policy: policy.Copy(), ok: true}
	c.policy.mu.Unlock()
	return policy
}

// keptPolicy is the policy as last decoded, and what it was decoded from.
type keptPolicy struct {
	mu   sync.Mutex
	kept storedPolicy
}

type storedPolicy struct {
	key    keptPolicyKey
	policy domain.Policy
	ok     bool
}

// keptPolicyKey: the cohort the policy is read from, and the
// redefinitions of the objects it is stored in, counted before they are
// read (a change meanwhile makes the next read decode it again).
type keptPolicyKey struct {
	cohort        string
	redefinitions uint64
}

// Fleet is the instance shapes (the catalog merged with the live nodes) and
// how many instances of each type can take tasks.
func (c *Cache) Fleet() (domain.ShapeLookup, map[string]int) {
	nodes, _ := c.Nodes.List(labels.Everything())
	return domain.LiveShapes(nodes)
}

// ConfigMapRef names a key of a ConfigMap.
type ConfigMapRef struct{ Namespace, Name, Key string }

// SchedulerConfig reads what of Kueue's configuration decides admission
// beyond the queues (fair sharing, how resources are counted), for the
// impact preview.
func (a Applier) SchedulerConfig(ctx context.Context, ref ConfigMapRef) (SchedulerConfig, error) {
	if ref.Name == "" {
		return SchedulerConfig{}, errors.New("no ConfigMap named for Kueue's configuration")
	}
	cm, err := a.records().CoreV1().ConfigMaps(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		return SchedulerConfig{}, err
	}
	cfg, err := domain.ReadKueueConfig(cm.Data[ref.Key])
	return SchedulerConfig{FairSharing: cfg.FairSharing, AdmissionFairSharing: cfg.AdmissionFairSharing, Resources: cfg.Resources,
		ManageJobsWithoutQueueName: cfg.ManageJobsWithoutQueueName}, err
}

// CohortRoot is the root of cohort's tree, following the parents of the
// Cohort objects in the cache (domain.RootCohort).
func (c *Cache) CohortRoot(cohort string) string {
	return domain.RootCohort(cohort, func(name string) string {
		if co, err := c.Cohorts.Get(name); err == nil {
			return string(co.Spec.ParentName)
		}
		return ""
	})
}
