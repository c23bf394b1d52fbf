package domain

import (
	"strings"

	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// Labels and annotations the console puts on what it writes.
const (
	// AnnotationPrefix starts the console's own annotations.
	AnnotationPrefix = "quota-console.openquota.dev/"
	ManagedByLabel   = "app.kubernetes.io/managed-by"
	ManagedByValue   = "quota-console"
	TeamLabel        = "quota-console.openquota.dev/team"
	// AllocationAnnotation keeps the allocation as the admin typed it, so the
	// edit form shows it back exactly; the Kueue objects stay the truth.
	AllocationAnnotation = "quota-console.openquota.dev/allocation"
	FieldManager         = "quota-console"
)

// Settings are the console-wide naming choices.
type Settings struct {
	NamespacePrefix string // "hyperpod-ns-"
	Cohort          string // "shared-pool"
	// StateNamespace is the console's own namespace, where it keeps revision
	// histories; "" means DefaultStateNamespace.
	StateNamespace string
	// PodSecurity is the Pod Security level team namespaces enforce (see
	// PodSecurityLevels); "" means DefaultPodSecurity.
	PodSecurity string
	// ClusterName names the cluster in reports (the HyperPod layout's
	// ClusterName line); "" names it by its apiserver's address.
	ClusterName string
}

// PodSecurityEnforceLabel is the Pod Security admission's label of the level
// a namespace enforces.
const PodSecurityEnforceLabel = "pod-security.kubernetes.io/enforce"

// DefaultPodSecurity is the level of team namespaces unless set otherwise:
// members' Jobs run without host access or privileges.
const DefaultPodSecurity = "baseline"

// PodSecurityLevels are the levels a team namespace may enforce; never
// "privileged", which would let members' pods take over their nodes.
var PodSecurityLevels = []string{"baseline", "restricted"}

// TeamPodSecurity is the Pod Security level of team namespaces.
func (s Settings) TeamPodSecurity() string {
	if s.PodSecurity == "" {
		return DefaultPodSecurity
	}
	return s.PodSecurity
}

// DefaultStateNamespace is the console's own namespace unless set otherwise.
const DefaultStateNamespace = "quota-console"

// DefaultSettings match what existing job specs and CLIs expect.
var DefaultSettings = Settings{NamespacePrefix: "hyperpod-ns-", Cohort: "shared-pool", StateNamespace: DefaultStateNamespace}

// State is the console's own namespace.
func (s Settings) State() string {
	if s.StateNamespace == "" {
		return DefaultStateNamespace
	}
	return s.StateNamespace
}

// Suffixes of a team's queue names.
const (
	clusterQueueSuffix = "-clusterqueue"
	localQueueSuffix   = "-localqueue"
)

// Names of a team's objects.
func (s Settings) Namespace(team string) string    { return s.NamespacePrefix + team }
func (s Settings) ClusterQueue(team string) string { return s.Namespace(team) + clusterQueueSuffix }
func (s Settings) LocalQueue(team string) string   { return s.Namespace(team) + localQueueSuffix }

// TeamOfNamespace inverts Settings.Namespace: the team whose namespace ns is.
func (s Settings) TeamOfNamespace(ns string) (string, bool) {
	team, ok := strings.CutPrefix(ns, s.NamespacePrefix)
	if !ok || team == "" {
		return "", false
	}
	return team, true
}

// TeamOfClusterQueueName inverts Settings.ClusterQueue: the team whose
// ClusterQueue is named name.
func (s Settings) TeamOfClusterQueueName(name string) (string, bool) {
	ns, ok := strings.CutSuffix(name, clusterQueueSuffix)
	if !ok {
		return "", false
	}
	return s.TeamOfNamespace(ns)
}

// ConsoleCohort reports whether a cohort's name is one the console may
// write: its own cohort, or one named after it ("shared-pool-research").
func (s Settings) ConsoleCohort(name string) bool {
	return name == s.Cohort || strings.HasPrefix(name, s.Cohort+"-")
}

// CohortOf is the cohort a team's ClusterQueue is in.
func (s Settings) CohortOf(t Team) string {
	if t.Cohort == "" {
		return s.Cohort
	}
	return t.Cohort
}

// TeamOfQueueName is the team a ClusterQueue named name serves when only
// its name is known (Kueue's metrics): the team of a conventional name,
// else the queue's own name, which is also what an adopted queue keeps.
func (s Settings) TeamOfQueueName(name string) string {
	if team, ok := s.TeamOfClusterQueueName(name); ok {
		return team
	}
	return name
}

// TeamOfClusterQueue names the team a ClusterQueue serves: the console's
// team label, when the queue is the one the console would look that team
// up by (its conventional name, or imported: the import labels beside the
// console's managed-by label); else the team its
// conventional name gives; else the queue's own name (a queue the console
// does not manage is shown as a team of its own). A labelled copy of a
// team's queue, or one another console made with another prefix, is then
// a queue of its own, not a second queue of the same team.
func (s Settings) TeamOfClusterQueue(cq *kueuev1beta2.ClusterQueue) string {
	if t := cq.Labels[TeamLabel]; t != "" && (cq.Name == s.ClusterQueue(t) || Imported(cq)) {
		return t
	}
	if team, ok := s.TeamOfClusterQueueName(cq.Name); ok {
		return team
	}
	return cq.Name
}
