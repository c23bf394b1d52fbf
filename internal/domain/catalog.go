package domain

import (
	_ "embed"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// InstanceShape is what one instance of a type offers. Figures are the public
// specifications of the instance types; memory is in GiB.
type InstanceShape struct {
	Type      string
	GPUModel  string // product label value, e.g. NVIDIA-H100-80GB-HBM3
	GPUs      int64
	VCPU      int64
	MemoryGiB int64
	Neuron    int64 // aws.amazon.com/neurondevice
	EFA       int64 // vpc.amazonaws.com/efa
	GPUMemGiB int64 // memory of one GPU
	// Partitions are the MIG partitions of one instance by profile
	// ("mig-1g.10gb": 14), as its nodes offer them; nil without any.
	// WholeGPUs are then the GPUs its nodes offer unpartitioned.
	Partitions map[string]int64
	WholeGPUs  int64
}

// SchedulableGPUs are the GPUs one instance offers to tasks asking for
// whole GPUs: all of them, or, when its nodes partition some (MIG), the
// ones left whole. GPUs stays the physical count, which vCPU and memory
// are shared by.
func (s InstanceShape) SchedulableGPUs() int64 {
	if s.Partitions != nil {
		return s.WholeGPUs
	}
	return s.GPUs
}

// Catalog lists common SageMaker HyperPod instance types (catalog.tsv, from
// their public specifications). Live nodes override these figures (see
// LiveShapes); the catalog lets admins plan for types the cluster does not
// have yet.
var Catalog = parseCatalog(catalogTSV)

//go:embed catalog.tsv
var catalogTSV string

// parseCatalog reads the catalog's table: one instance type a line, fields
// separated by tabs in the order of its header, "-" for no GPU model.
func parseCatalog(table string) []InstanceShape {
	var out []InstanceShape
	for _, line := range strings.Split(table, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 8 {
			panic("catalog.tsv: " + line)
		}
		num := func(i int) int64 {
			n, err := strconv.ParseInt(f[i], 10, 64)
			if err != nil {
				panic("catalog.tsv: " + line)
			}
			return n
		}
		s := InstanceShape{Type: f[0], GPUModel: f[1], GPUs: num(2), VCPU: num(3), MemoryGiB: num(4), Neuron: num(5), EFA: num(6), GPUMemGiB: num(7)}
		if s.GPUModel == "-" {
			s.GPUModel = ""
		}
		out = append(out, s)
	}
	return out
}

// LookupShape returns the catalog entry of an instance type.
func LookupShape(instanceType string) (InstanceShape, bool) {
	for _, s := range Catalog {
		if s.Type == instanceType {
			return s, true
		}
	}
	return InstanceShape{}, false
}

// CatalogTypes returns the catalog's instance type names, sorted.
func CatalogTypes() []string {
	names := make([]string, 0, len(Catalog))
	for _, s := range Catalog {
		names = append(names, s.Type)
	}
	sort.Strings(names)
	return names
}

// LiveShapes merges the catalog with the cluster's nodes. Catalog types keep
// their published shape (what admins plan with; allocatable is a little less);
// a type only the cluster has takes its shape from a node's allocatable. It
// also counts the instances of each type that can take tasks (Ready and not
// cordoned): what an admin can plan on today.
func LiveShapes(nodes []*corev1.Node) (ShapeLookup, map[string]int) {
	live := map[string]InstanceShape{}
	available := map[string]int{}
	for _, n := range nodes {
		t := n.Labels[InstanceTypeLabel]
		if t == "" {
			continue
		}
		if NodeSchedulable(n) {
			available[t]++
		}
		if _, ok := live[t]; ok {
			continue
		}
		a := n.Status.Allocatable
		live[t] = InstanceShape{
			Type: t, GPUModel: n.Labels[GPUProductLabel],
			GPUs: quantity(a, ResourceGPU), VCPU: quantity(a, corev1.ResourceCPU), MemoryGiB: gib(a),
			Neuron: quantity(a, ResourceNeuron), EFA: quantity(a, ResourceEFA),
			Partitions: partitionsOf(a),
		}
		if live[t].Partitions != nil {
			s := live[t]
			s.WholeGPUs = s.GPUs
			live[t] = s
		}
	}
	lookup := func(instanceType string) (InstanceShape, bool) {
		if s, ok := LookupShape(instanceType); ok {
			// How a type's GPUs are partitioned is the cluster's choice:
			// the catalog cannot know it.
			s.Partitions, s.WholeGPUs = live[instanceType].Partitions, live[instanceType].GPUs
			return s, true
		}
		s, ok := live[instanceType]
		return s, ok
	}
	return lookup, available
}

// KnownTypes lists the catalog's types and the cluster's, sorted.
func KnownTypes(available map[string]int) []string {
	seen := map[string]bool{}
	var out []string
	for _, t := range CatalogTypes() {
		seen[t] = true
		out = append(out, t)
	}
	for t := range available {
		if !seen[t] {
			out = append(out, t)
		}
	}
	sort.Strings(out)
	return out
}
