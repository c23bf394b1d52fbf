package cluster

import (
	"sort"

	"github.com/openquota/console/internal/domain"
	"k8s.io/apimachinery/pkg/labels"
	kueuelisters "sigs.k8s.io/kueue/client-go/listers/kueue/v1beta2"
)

// ListTeams returns the console-managed teams, by name.
func ListTeams(cqs kueuelisters.ClusterQueueLister) ([]domain.StoredTeam, error) {
	all, err := cqs.List(labels.SelectorFromSet(labels.Set{domain.ManagedByLabel: domain.ManagedByValue}))
	if err != nil {
		return nil, err
	}
	var out []domain.StoredTeam
	for _, cq := range all {
		if cq.DeletionTimestamp != nil {
			continue // being deleted: Kueue holds it until its workloads are gone
		}
		if t, ok := domain.TeamFromClusterQueue(cq); ok {
			out = append(out, domain.StoredTeam{Team: t, ClusterQueue: cq})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
