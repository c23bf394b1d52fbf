package domain

import (
	"cmp"
	"sort"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// Resource names the console reads and writes.
const (
	ResourceGPU    corev1.ResourceName = "nvidia.com/gpu"
	ResourceNeuron corev1.ResourceName = "aws.amazon.com/neurondevice"
	ResourceEFA    corev1.ResourceName = "vpc.amazonaws.com/efa"

	InstanceTypeLabel = "node.kubernetes.io/instance-type"
	GPUProductLabel   = "nvidia.com/gpu.product"

	// UnlabelledType groups nodes without an instance-type label.
	UnlabelledType = "(no instance type)"
)

// InstanceTypeCapacity sums the nodes of one instance type.
type InstanceTypeCapacity struct {
	Type      string
	GPUModel  string
	Count     int
	Ready     int // Ready and schedulable
	NotReady  int // pending recovery: not Ready, or cordoned
	GPUs      int64
	GPUMemGiB int64 // GPU memory: GPUs × per-GPU memory (node label, else catalog)
	VCPU      int64
	MemoryGiB int64
	Neuron    int64
	EFA       int64
	// Partitions are the nodes' MIG partitions by profile; nil without any.
	Partitions map[string]int64
}

// QueueQuota is one ClusterQueue as the overview lists it.
type QueueQuota struct {
	Name   string
	Team   string // the team it serves (Settings.TeamOfClusterQueue)
	Cohort string
	// Nominal is its nominal quota summed over flavors.
	Nominal Amount
	Stopped bool
	// Stop says how it is stopped (StopWords); Drained: HoldAndDrain.
	Stop    string
	Drained bool
	// Inactive is why Kueue admits nothing in it although it is not
	// stopped (Inactive); "" while it admits.
	Inactive string
}

// Overview is the cluster as the overview page shows it.
type Overview struct {
	InstanceTypes []InstanceTypeCapacity
	Total         InstanceTypeCapacity
	Queues        []QueueQuota
	// Cohorts is the cohort tree (CohortTree).
	Cohorts []CohortRow
}

// NodeSchedulable reports whether a node can take new tasks: Ready and not cordoned.
func NodeSchedulable(n *corev1.Node) bool {
	if n.Spec.Unschedulable {
		return false
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// BuildOverview sums node capacity by instance type and lists ClusterQueues
// with their nominal GPU quota. Capacity counts every node, ready or not:
// it is what the cluster owns.
func BuildOverview(s Settings, nodes []*corev1.Node, queues []*kueuev1beta2.ClusterQueue) Overview {
	byType := map[string]*InstanceTypeCapacity{}
	var ov Overview
	for _, n := range nodes {
		t := n.Labels[InstanceTypeLabel]
		if t == "" {
			t = UnlabelledType
		}
		row := byType[t]
		if row == nil {
			row = &InstanceTypeCapacity{Type: t}
			byType[t] = row
		}
		if row.GPUModel == "" {
			row.GPUModel = n.Labels[GPUProductLabel]
		}
		for _, r := range []*InstanceTypeCapacity{row, &ov.Total} {
			r.Count++
			if NodeSchedulable(n) {
				r.Ready++
			} else {
				r.NotReady++
			}
			capacity := n.Status.Capacity
			r.GPUs += quantity(capacity, ResourceGPU)
			r.GPUMemGiB += quantity(capacity, ResourceGPU) * gpuMemoryGiB(n)
			r.VCPU += quantity(capacity, corev1.ResourceCPU)
			r.MemoryGiB += gib(capacity)
			r.Neuron += quantity(capacity, ResourceNeuron)
			r.EFA += quantity(capacity, ResourceEFA)
			for p, n := range partitionsOf(capacity) {
				if r.Partitions == nil {
					r.Partitions = map[string]int64{}
				}
				r.Partitions[p] += n
			}
		}
	}
	for _, row := range byType {
		ov.InstanceTypes = append(ov.InstanceTypes, *row)
	}
	sort.Slice(ov.InstanceTypes, func(i, j int) bool { return ov.InstanceTypes[i].Type < ov.InstanceTypes[j].Type })
	ov.Total.Type = "Total"

	for _, cq := range queues {
		q := QueueQuota{Name: cq.Name, Team: s.TeamOfClusterQueue(cq), Cohort: string(cq.Spec.CohortName), Stopped: Stopped(cq), Stop: StopWords(cq), Drained: Drained(cq), Inactive: Inactive(cq)}
		for _, rg := range cq.Spec.ResourceGroups {
			for _, f := range rg.Flavors {
				for _, r := range f.Resources {
					q.Nominal.addUnits(r.Name, units(r.Name, r.NominalQuota))
				}
			}
		}
		ov.Queues = append(ov.Queues, q)
	}
	sort.Slice(ov.Queues, func(i, j int) bool { return ov.Queues[i].Name < ov.Queues[j].Name })
	return ov
}

// gpuMemoryGiB is the memory of one of the node's GPUs: GPU feature
// discovery's nvidia.com/gpu.memory label (MiB), else the catalog's figure.
func gpuMemoryGiB(n *corev1.Node) int64 {
	if mib, err := strconv.ParseInt(n.Labels["nvidia.com/gpu.memory"], 10, 64); err == nil {
		return mib / 1024
	}
	if s, ok := LookupShape(n.Labels[InstanceTypeLabel]); ok {
		return s.GPUMemGiB
	}
	return 0
}

// StopWords says how a ClusterQueue is stopped, "" while it is not: Hold
// keeps its running tasks, HoldAndDrain evicts them.
func StopWords(cq *kueuev1beta2.ClusterQueue) string {
	switch ptr.Deref(cq.Spec.StopPolicy, kueuev1beta2.None) {
	case kueuev1beta2.Hold:
		return "Held (stopPolicy Hold): Kueue admits no new task; the running ones go on"
	case kueuev1beta2.HoldAndDrain:
		return "Held and drained (stopPolicy HoldAndDrain): Kueue admits no new task and evicts the running ones"
	}
	return ""
}

// Drained reports whether a ClusterQueue's stop policy evicts its running tasks.
func Drained(cq *kueuev1beta2.ClusterQueue) bool {
	return ptr.Deref(cq.Spec.StopPolicy, kueuev1beta2.None) == kueuev1beta2.HoldAndDrain
}

// Stopped reports whether a ClusterQueue admits no new workloads.
func Stopped(cq *kueuev1beta2.ClusterQueue) bool {
	return cq.Spec.StopPolicy != nil && *cq.Spec.StopPolicy != kueuev1beta2.None
}

// Inactive is why Kueue admits no new Workload in a queue that is not
// stopped, in Kueue's words (its Active condition: a missing flavor, an
// inactive admission check); "" while it is active or stopped.
func Inactive(cq *kueuev1beta2.ClusterQueue) string {
	c := apimeta.FindStatusCondition(cq.Status.Conditions, kueuev1beta2.ClusterQueueActive)
	if Stopped(cq) || c == nil || c.Status != metav1.ConditionFalse {
		return ""
	}
	return cmp.Or(c.Message, c.Reason)
}

func quantity(l corev1.ResourceList, name corev1.ResourceName) int64 {
	q, ok := l[name]
	if !ok {
		return 0
	}
	return q.Value()
}

func gib(l corev1.ResourceList) int64 {
	q, ok := l[corev1.ResourceMemory]
	if !ok {
		return 0
	}
	return q.Value() >> 30
}
