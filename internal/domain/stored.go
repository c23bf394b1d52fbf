package domain

import (
	"encoding/json"
	"strings"

	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// TeamState is a team the console manages: the allocation it acts on
// (TrustedTeam) and its ClusterQueue.
type TeamState struct {
	Team
	ClusterQueue *kueuev1beta2.ClusterQueue
}

// TeamFromClusterQueue reads the allocation annotation of a ClusterQueue;
// ok is false for queues the console does not manage, or whose annotation
// does not decode. Anyone who may patch ClusterQueues can write it: the
// console acts on TrustedTeam and shows where the two differ
// (AllocationDrift).
func TeamFromClusterQueue(cq *kueuev1beta2.ClusterQueue) (Team, bool) {
	name := ManagedTeam(cq)
	if name == "" {
		return Team{}, false
	}
	var t Team
	if err := json.Unmarshal([]byte(cq.Annotations[AllocationAnnotation]), &t); err != nil {
		return Team{}, false
	}
	t.Name = name
	return t, true
}

// AnnotationWithoutMembers is the allocation annotation of a team's
// ClusterQueue without the members that earlier versions of the console
// wrote there (allocationAnnotation writes none); ok is false when it names
// none, or is not the console's.
func AnnotationWithoutMembers(cq *kueuev1beta2.ClusterQueue) (annotation string, ok bool) {
	t, ok := TeamFromClusterQueue(cq)
	if !ok || len(t.Members) == 0 {
		return "", false
	}
	var raw map[string]json.RawMessage // every field as it is, members aside
	if err := json.Unmarshal([]byte(cq.Annotations[AllocationAnnotation]), &raw); err != nil {
		return "", false
	}
	delete(raw, "members")
	out, err := json.Marshal(raw)
	return string(out), err == nil
}

// ManagedTeam is the team whose ClusterQueue cq is, by its labels ("" for
// queues the console does not manage).
func ManagedTeam(cq *kueuev1beta2.ClusterQueue) string {
	if cq.Labels[ManagedByLabel] != ManagedByValue {
		return ""
	}
	return cq.Labels[TeamLabel]
}

// TrustedTeam is the allocation the console acts on for a ClusterQueue it
// manages, what the edit form loads and a re-apply writes: the allocation
// of the team's latest saved revision (latest; nil when there is none),
// which only the console writes, in its own namespace. A team with no
// revision yet (made before revisions were kept) gets its allocation
// annotation without members: the annotation is writable by anyone who may
// patch ClusterQueues, so it never decides who is bound to the team. ok is
// false for queues the console does not manage, and for a team with
// neither a revision nor a readable annotation.
func TrustedTeam(cq *kueuev1beta2.ClusterQueue, latest *TeamRevision) (t Team, saved, ok bool) {
	name := ManagedTeam(cq)
	if name == "" {
		return Team{}, false, false
	}
	if latest != nil && latest.Allocation.Name == name {
		return latest.Allocation, true, true
	}
	if t, ok = TeamFromClusterQueue(cq); !ok {
		return Team{}, false, false
	}
	t.Members = nil
	return t, false, true
}

// LatestRevisionData keeps, of a revisions ConfigMap's data, the newest
// revision's entry only: all a team's current allocation needs.
func LatestRevisionData(data map[string]string) map[string]string {
	newest := ""
	for k := range data {
		if strings.HasPrefix(k, revisionKeyPrefix) && (len(k) > len(newest) || len(k) == len(newest) && k > newest) {
			newest = k
		}
	}
	if newest == "" {
		return nil
	}
	return map[string]string{newest: data[newest]}
}

// LatestRevision is the newest revision of a revisions ConfigMap's data (nil
// when none decodes).
func LatestRevision[T any](data map[string]string) *Revision[T] {
	revs := DecodeRevisions[T](data)
	if len(revs) == 0 {
		return nil
	}
	return &revs[len(revs)-1]
}
