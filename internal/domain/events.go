package domain

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// Reasons of the Events the console emits for each recorded change.
const (
	ReasonTeamCreated      = "TeamCreated"
	ReasonTeamUpdated      = "TeamUpdated"
	ReasonTeamRolledBack   = "TeamRolledBack"
	ReasonPolicyUpdated    = "PolicyUpdated"
	ReasonPolicyRolledBack = "PolicyRolledBack"
)

// EventNamespace is where Events about cluster-scoped objects (ClusterQueues,
// the cohort) live: Kubernetes requires "default" for them. `kubectl describe
// clusterqueue <name>` shows them.
const EventNamespace = metav1.NamespaceDefault

const maxEventMessage = 1024

// TeamEvent announces a team's new revision on its ClusterQueue; prev is the
// revision before it, if any.
func TeamEvent(cq *kueuev1beta2.ClusterQueue, rev TeamRevision, prev *TeamRevision) *corev1.Event {
	team := rev.Allocation.Name
	reason, verb := ReasonTeamUpdated, fmt.Sprintf("updated team %s", team)
	switch rev.Action {
	case ActionCreate:
		reason, verb = ReasonTeamCreated, fmt.Sprintf("created team %s", team)
	case ActionRollback:
		reason, verb = ReasonTeamRolledBack, fmt.Sprintf("rolled team %s back to revision %d", team, rev.RolledBackTo)
	}
	changes := DescribeTeam(rev.Allocation)
	if prev != nil {
		changes = DiffTeams(prev.Allocation, rev.Allocation)
	}
	ref := corev1.ObjectReference{Kind: "ClusterQueue", APIVersion: kueuev1beta2.SchemeGroupVersion.String()}
	if cq != nil {
		ref.Name, ref.UID, ref.ResourceVersion = cq.Name, cq.UID, cq.ResourceVersion
	}
	return newEvent(ref, reason, message(rev.By, verb, rev.Revision, rev.Action, rev.Note, changes), rev)
}

// PolicyEvent announces the policy's new revision on the cohort that carries it.
func PolicyEvent(cohort *kueuev1beta2.Cohort, rev PolicyRevision, prev *PolicyRevision) *corev1.Event {
	reason, verb := ReasonPolicyUpdated, "updated the cluster policy"
	switch rev.Action {
	case ActionCreate:
		verb = "set the cluster policy"
	case ActionRollback:
		reason, verb = ReasonPolicyRolledBack, fmt.Sprintf("rolled the cluster policy back to revision %d", rev.RolledBackTo)
	}
	var changes []string
	if prev != nil {
		changes = DiffPolicies(prev.Allocation, rev.Allocation)
	} else {
		changes = DescribePolicy(rev.Allocation)
	}
	ref := corev1.ObjectReference{Kind: "Cohort", APIVersion: kueuev1beta2.SchemeGroupVersion.String()}
	if cohort != nil {
		ref.Name, ref.UID, ref.ResourceVersion = cohort.Name, cohort.UID, cohort.ResourceVersion
	}
	return newEvent(ref, reason, message(rev.By, verb, rev.Revision, rev.Action, rev.Note, changes), rev)
}

// message is "alice updated team a (revision 2): quota … GPUs 4 → 6; …".
func message(by, verb string, rev int, action Action, note string, changes []string) string {
	label := "revision"
	if action == ActionRollback {
		label = "now revision"
	}
	m := fmt.Sprintf("%s %s (%s %d)", by, verb, label, rev)
	if note != "" {
		m += ", " + note
	}
	if len(changes) > 0 {
		m += ": " + strings.Join(changes, "; ")
	}
	if r := []rune(m); len(r) > maxEventMessage {
		m = string(r[:maxEventMessage-1]) + "…"
	}
	return m
}

func newEvent[T any](ref corev1.ObjectReference, reason, msg string, rev Revision[T]) *corev1.Event {
	at := metav1.NewTime(rev.At)
	return &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name:      fmt.Sprintf("%s.%x", ref.Name, rev.At.UnixNano()+int64(rev.Revision)),
			Namespace: EventNamespace,
			Labels:    map[string]string{ManagedByLabel: ManagedByValue},
		},
		InvolvedObject: ref,
		Reason:         reason,
		Message:        msg,
		Type:           corev1.EventTypeNormal,
		Source:         corev1.EventSource{Component: FieldManager},
		FirstTimestamp: at,
		LastTimestamp:  at,
		Count:          1,
	}
}
