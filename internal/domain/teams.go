package domain

import (
	"encoding/json"
	"sort"

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

// TypeAllocation compares the teams' summed quota of one instance type with
// what the cluster has.
type TypeAllocation struct {
	Type              string
	Instances         int // in the cluster
	GPUs, Neuron      int64
	CapacityGPUs      int64
	CPUMilli          int64
	CapacityCPUMilli  int64
	MemoryMiB         int64
	CapacityMemoryMiB int64
	OverCapacity      bool // planned capacity: allowed, flagged
}

// AllocationByType sums every team's derived quota per instance type.
func AllocationByType(teams []Team, shapes ShapeLookup, available map[string]int) []TypeAllocation {
	byType := map[string]*TypeAllocation{}
	for _, t := range teams {
		for _, row := range t.Quota {
			shape, ok := shapes(row.InstanceType)
			if !ok {
				continue
			}
			a := byType[row.InstanceType]
			if a == nil {
				n := int64(available[row.InstanceType])
				a = &TypeAllocation{Type: row.InstanceType, Instances: available[row.InstanceType],
					CapacityGPUs: n * shape.GPUs, CapacityCPUMilli: n * shape.VCPU * 1000, CapacityMemoryMiB: n * shape.MemoryGiB * 1024}
				byType[row.InstanceType] = a
			}
			q := DeriveQuota(row, shape)
			a.GPUs += q.GPUs
			a.Neuron += q.Neuron
			a.CPUMilli += q.CPUMilli
			a.MemoryMiB += q.MemoryMiB
		}
	}
	out := make([]TypeAllocation, 0, len(byType))
	for _, a := range byType {
		a.OverCapacity = a.GPUs > a.CapacityGPUs || a.CPUMilli > a.CapacityCPUMilli || a.MemoryMiB > a.CapacityMemoryMiB
		out = append(out, *a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Type < out[j].Type })
	return out
}
