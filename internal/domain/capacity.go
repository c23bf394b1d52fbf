// This file compares what teams are allocated with what the cluster has.

package domain

import "sort"

// Capacity is what n instances of a shape offer.
func Capacity(shape InstanceShape, instances int) Quota {
	n := int64(instances)
	return Quota{GPUs: n * shape.SchedulableGPUs(), Neuron: n * shape.Neuron, EFA: n * shape.EFA,
		CPUMilli: n * shape.VCPU * 1000, MemoryMiB: n * shape.MemoryGiB * 1024}
}

// Exceeds is the console's one rule for quota above what the cluster has
// (planned capacity: allowed, and flagged): more GPUs, Neuron devices, vCPU
// or memory than c.
func (q Quota) Exceeds(c Quota) bool {
	return q.GPUs > c.GPUs || q.Neuron > c.Neuron || q.CPUMilli > c.CPUMilli || q.MemoryMiB > c.MemoryMiB
}

func (q *Quota) add(o Quota) {
	q.GPUs += o.GPUs
	q.Neuron += o.Neuron
	q.EFA += o.EFA
	q.CPUMilli += o.CPUMilli
	q.MemoryMiB += o.MemoryMiB
}

// TeamTotal is a team's quota summed over its instance types (types the
// console does not know are left out).
func TeamTotal(t Team, shapes ShapeLookup) Quota {
	var total Quota
	for _, row := range t.Quota {
		if shape, ok := shapes(row.InstanceType); ok {
			total.add(DeriveQuota(row, shape))
		}
	}
	return total
}

// StateTotal is TeamTotal of st with, for an imported queue, its quota on
// flavors that are not instance types the console knows (KeptQuota), which
// the team keeps as they are: its quota, though no instance type's.
func StateTotal(st TeamState, shapes ShapeLookup) Quota {
	total := TeamTotal(st.Team, shapes)
	if st.ClusterQueue == nil {
		return total
	}
	quotas := flavorQuotas(st.ClusterQueue.Spec.ResourceGroups)
	for _, f := range quotas.order {
		if _, known := shapes(f); known {
			continue
		}
		var kept Amount
		for _, r := range quotas.byFlavor[f] {
			kept.addUnits(r.Name, units(r.Name, r.NominalQuota))
		}
		total.add(Quota{GPUs: kept.GPUs, Neuron: kept.Neuron, CPUMilli: kept.CPUMilli, MemoryMiB: kept.MemoryMiB})
	}
	return total
}

// TypeAllocation compares the teams' summed quota of one instance type with
// what the cluster has.
type TypeAllocation struct {
	Type      string
	Instances int // ready in the cluster (LiveShapes): what can take tasks now
	Allocated Quota
	Capacity  Quota
}

// OverCapacity is whether the teams were given more than the cluster has.
func (a TypeAllocation) OverCapacity() bool { return a.Allocated.Exceeds(a.Capacity) }

// AllocationByType sums every team's derived quota per instance type, and
// lists the instance types with ready instances that no team has quota of
// (capacity nobody was given).
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
				a = &TypeAllocation{Type: row.InstanceType, Instances: available[row.InstanceType],
					Capacity: Capacity(shape, available[row.InstanceType])}
				byType[row.InstanceType] = a
			}
			a.Allocated.add(DeriveQuota(row, shape))
		}
	}
	for typ, n := range available {
		if shape, ok := shapes(typ); ok && n > 0 && byType[typ] == nil {
			byType[typ] = &TypeAllocation{Type: typ, Instances: n, Capacity: Capacity(shape, n)}
		}
	}
	out := make([]TypeAllocation, 0, len(byType))
	for _, a := range byType {
		out = append(out, *a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Type < out[j].Type })
	return out
}
