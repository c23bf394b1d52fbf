package domain

import (
	"encoding/json"

	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// StoredTeam is a team as read back from its ClusterQueue.
type StoredTeam struct {
	Team
	ClusterQueue *kueuev1beta2.ClusterQueue
}

// TeamFromClusterQueue reads the allocation the console stored on a
// ClusterQueue; ok is false for queues the console does not manage.
func TeamFromClusterQueue(cq *kueuev1beta2.ClusterQueue) (Team, bool) {
	if cq.Labels[ManagedByLabel] != ManagedByValue || cq.Labels[TeamLabel] == "" {
		return Team{}, false
	}
	var t Team
	if err := json.Unmarshal([]byte(cq.Annotations[AllocationAnnotation]), &t); err != nil {
		return Team{}, false
	}
	t.Name = cq.Labels[TeamLabel]
	return t, true
}
