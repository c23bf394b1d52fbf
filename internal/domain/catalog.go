package domain

import (
	"sort"

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
}

// Catalog lists common SageMaker HyperPod instance types. Live nodes override
// these figures (see MergeNodes); the catalog lets admins plan for types the
// cluster does not have yet.
var Catalog = []InstanceShape{
	{Type: "ml.p4d.24xlarge", GPUModel: "NVIDIA-A100-SXM4-40GB", GPUs: 8, VCPU: 96, MemoryGiB: 1152, EFA: 4, GPUMemGiB: 40},
	{Type: "ml.p4de.24xlarge", GPUModel: "NVIDIA-A100-SXM4-80GB", GPUs: 8, VCPU: 96, MemoryGiB: 1152, EFA: 4, GPUMemGiB: 80},
	{Type: "ml.p5.48xlarge", GPUModel: "NVIDIA-H100-80GB-HBM3", GPUs: 8, VCPU: 192, MemoryGiB: 2048, EFA: 32, GPUMemGiB: 80},
	{Type: "ml.p5e.48xlarge", GPUModel: "NVIDIA-H200", GPUs: 8, VCPU: 192, MemoryGiB: 2048, EFA: 32, GPUMemGiB: 141},
	{Type: "ml.p5en.48xlarge", GPUModel: "NVIDIA-H200", GPUs: 8, VCPU: 192, MemoryGiB: 2048, EFA: 16, GPUMemGiB: 141},
	{Type: "ml.p6-b200.48xlarge", GPUModel: "NVIDIA-B200", GPUs: 8, VCPU: 192, MemoryGiB: 2048, EFA: 8, GPUMemGiB: 179},
	{Type: "ml.g5.xlarge", GPUModel: "NVIDIA-A10G", GPUs: 1, VCPU: 4, MemoryGiB: 16, GPUMemGiB: 24},
	{Type: "ml.g5.2xlarge", GPUModel: "NVIDIA-A10G", GPUs: 1, VCPU: 8, MemoryGiB: 32, GPUMemGiB: 24},
	{Type: "ml.g5.4xlarge", GPUModel: "NVIDIA-A10G", GPUs: 1, VCPU: 16, MemoryGiB: 64, GPUMemGiB: 24},
	{Type: "ml.g5.8xlarge", GPUModel: "NVIDIA-A10G", GPUs: 1, VCPU: 32, MemoryGiB: 128, EFA: 1, GPUMemGiB: 24},
	{Type: "ml.g5.12xlarge", GPUModel: "NVIDIA-A10G", GPUs: 4, VCPU: 48, MemoryGiB: 192, EFA: 1, GPUMemGiB: 24},
	{Type: "ml.g5.24xlarge", GPUModel: "NVIDIA-A10G", GPUs: 4, VCPU: 96, MemoryGiB: 384, EFA: 1, GPUMemGiB: 24},
	{Type: "ml.g5.48xlarge", GPUModel: "NVIDIA-A10G", GPUs: 8, VCPU: 192, MemoryGiB: 768, EFA: 1, GPUMemGiB: 24},
	{Type: "ml.g6.xlarge", GPUModel: "NVIDIA-L4", GPUs: 1, VCPU: 4, MemoryGiB: 16, GPUMemGiB: 24},
	{Type: "ml.g6.2xlarge", GPUModel: "NVIDIA-L4", GPUs: 1, VCPU: 8, MemoryGiB: 32, GPUMemGiB: 24},
	{Type: "ml.g6.12xlarge", GPUModel: "NVIDIA-L4", GPUs: 4, VCPU: 48, MemoryGiB: 192, EFA: 1, GPUMemGiB: 24},
	{Type: "ml.g6.48xlarge", GPUModel: "NVIDIA-L4", GPUs: 8, VCPU: 192, MemoryGiB: 768, EFA: 1, GPUMemGiB: 24},
	{Type: "ml.g6e.12xlarge", GPUModel: "NVIDIA-L40S", GPUs: 4, VCPU: 48, MemoryGiB: 384, EFA: 1, GPUMemGiB: 48},
	{Type: "ml.g6e.48xlarge", GPUModel: "NVIDIA-L40S", GPUs: 8, VCPU: 192, MemoryGiB: 1536, EFA: 4, GPUMemGiB: 48},
	{Type: "ml.trn1.2xlarge", Neuron: 1, VCPU: 8, MemoryGiB: 32},
	{Type: "ml.trn1.32xlarge", Neuron: 16, VCPU: 128, MemoryGiB: 512, EFA: 8},
	{Type: "ml.trn1n.32xlarge", Neuron: 16, VCPU: 128, MemoryGiB: 512, EFA: 16},
	{Type: "ml.trn2.48xlarge", Neuron: 16, VCPU: 192, MemoryGiB: 2048, EFA: 16},
	{Type: "ml.inf2.xlarge", Neuron: 1, VCPU: 4, MemoryGiB: 16},
	{Type: "ml.inf2.24xlarge", Neuron: 6, VCPU: 96, MemoryGiB: 384},
	{Type: "ml.inf2.48xlarge", Neuron: 12, VCPU: 192, MemoryGiB: 768},
	{Type: "ml.c5.xlarge", VCPU: 4, MemoryGiB: 8},
	{Type: "ml.c5.2xlarge", VCPU: 8, MemoryGiB: 16},
	{Type: "ml.c5.4xlarge", VCPU: 16, MemoryGiB: 32},
	{Type: "ml.c5.9xlarge", VCPU: 36, MemoryGiB: 72},
	{Type: "ml.m5.xlarge", VCPU: 4, MemoryGiB: 16},
	{Type: "ml.m5.2xlarge", VCPU: 8, MemoryGiB: 32},
	{Type: "ml.m5.4xlarge", VCPU: 16, MemoryGiB: 64},
	{Type: "ml.m5.12xlarge", VCPU: 48, MemoryGiB: 192},
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
		}
	}
	lookup := func(instanceType string) (InstanceShape, bool) {
		if s, ok := LookupShape(instanceType); ok {
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
