package domain

import (
	"math"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// QuotaInput is one quota row as the admin typed it: nil means "not given".
type QuotaInput struct {
	InstanceType string `json:"instanceType"`
	Count        *int64 `json:"count,omitempty"`
	GPUs         *int64 `json:"gpus,omitempty"`
	Neuron       *int64 `json:"neuron,omitempty"`
	VCPU         *int64 `json:"vcpu,omitempty"`
	MemoryGiB    *int64 `json:"memoryGiB,omitempty"`
	// Absolute borrow limits of the instance type, per resource (HyperPod's
	// AbsoluteBorrowLimits, Kueue's borrowingLimit): nil takes the team's
	// borrow percentage. They apply when the team lends and borrows.
	BorrowGPUs      *int64 `json:"borrowGPUs,omitempty"`
	BorrowNeuron    *int64 `json:"borrowNeuron,omitempty"`
	BorrowVCPU      *int64 `json:"borrowVCPU,omitempty"`
	BorrowMemoryGiB *int64 `json:"borrowMemoryGiB,omitempty"`
}

// absoluteBorrow is the row's absolute borrow limit of resource r, nil
// when the percentage applies.
func (q *QuotaInput) absoluteBorrow(r corev1.ResourceName) **int64 {
	switch r {
	case ResourceGPU:
		return &q.BorrowGPUs
	case ResourceNeuron:
		return &q.BorrowNeuron
	case corev1.ResourceCPU:
		return &q.BorrowVCPU
	case corev1.ResourceMemory:
		return &q.BorrowMemoryGiB
	}
	return nil
}

// HasAbsoluteBorrow reports whether the row sets any absolute borrow limit.
func (q QuotaInput) HasAbsoluteBorrow() bool {
	return q.BorrowGPUs != nil || q.BorrowNeuron != nil || q.BorrowVCPU != nil || q.BorrowMemoryGiB != nil
}

// borrowingLimit is what the team may borrow of resource r of row, whose
// nominal quota is nominal: the row's absolute limit when it has one, else
// the team's percentage of the nominal quota.
func (t Team) borrowingLimit(row QuotaInput, nominal resource.Quantity, r corev1.ResourceName) resource.Quantity {
	if abs := row.absoluteBorrow(r); abs != nil && *abs != nil {
		return unitsQuantity(r, **abs)
	}
	return percentOf(nominal, t.BorrowLimitPercent, r)
}

// unitsQuantity is n of the units the form takes for r: devices, whole
// vCPUs, GiB of memory.
func unitsQuantity(r corev1.ResourceName, n int64) resource.Quantity {
	switch r {
	case corev1.ResourceCPU:
		return *resource.NewQuantity(n, resource.DecimalSI)
	case corev1.ResourceMemory:
		return *resource.NewQuantity(n<<30, resource.BinarySI)
	}
	return *resource.NewQuantity(n, resource.DecimalSI)
}

// Member is a user or group that may submit and watch the team's jobs.
type Member struct {
	Kind string `json:"kind"` // "User" or "Group"
	Name string `json:"name"`
}

// Team is a team's compute allocation as the admin states it.
type Team struct {
	Name               string       `json:"name"`
	Description        string       `json:"description,omitempty"`
	Enabled            bool         `json:"enabled"`
	Members            []Member     `json:"members,omitempty"`
	FairShareWeight    int64        `json:"fairShareWeight"`
	Preemption         Preemption   `json:"preemption"`
	Lending            Lending      `json:"lending"`
	BorrowLimitPercent int64        `json:"borrowLimitPercent"`
	Quota              []QuotaInput `json:"quota"`
	// Cohort is the cohort its ClusterQueue is in: "" for the console's
	// cohort (Settings.CohortOf); an imported queue's own otherwise.
	Cohort string `json:"cohort,omitempty"`
}

// TeamText is a free-text field of a team, stated once: the form field it
// is typed in, its length limit, the annotation of the team namespace that
// carries it into the cluster, and its name in a revision's diff.
type TeamText struct {
	Key        string // the form field
	Words      string // in sentences and revision diffs
	Max        int    // characters
	Annotation string // on the team namespace
	Of         func(*Team) *string
}

// TeamTexts are the team's free-text fields.
var TeamTexts = []TeamText{
	{Key: "description", Words: "description", Max: 1024, Annotation: "quota-console.openquota.dev/description",
		Of: func(t *Team) *string { return &t.Description }},
}

// Quota is a resolved quota for one instance type.
type Quota struct {
	GPUs      int64
	Neuron    int64
	EFA       int64
	CPUMilli  int64
	MemoryMiB int64
}

// DeriveQuota resolves a quota row against an instance shape:
//   - a count N gives N times every resource of the shape;
//   - GPUs (or Neuron devices) g give vCPU, memory and EFA in proportion g/per-instance;
//   - vCPU given without memory gives memory in proportion vCPU/instance vCPU;
//   - given vCPU and memory always win over derived ones;
//   - whole-device resources (GPU, Neuron, EFA) are rounded to whole devices.
func DeriveQuota(in QuotaInput, shape InstanceShape) Quota {
	var q Quota
	var fraction float64 // of one instance, for what the admin left out
	switch {
	case in.Count != nil:
		fraction = float64(*in.Count)
		q.GPUs, q.Neuron = *in.Count*shape.GPUs, *in.Count*shape.Neuron
	case in.GPUs != nil:
		q.GPUs = *in.GPUs
		fraction = ratio(*in.GPUs, shape.GPUs)
	case in.Neuron != nil:
		q.Neuron = *in.Neuron
		fraction = ratio(*in.Neuron, shape.Neuron)
	case in.VCPU != nil:
		fraction = ratio(*in.VCPU, shape.VCPU)
	}
	q.EFA = int64(math.Round(fraction * float64(shape.EFA)))
	q.CPUMilli = int64(math.Round(fraction * float64(shape.VCPU) * 1000))
	q.MemoryMiB = int64(math.Round(fraction * float64(shape.MemoryGiB) * 1024))
	if in.VCPU != nil {
		q.CPUMilli = *in.VCPU * 1000
		if in.MemoryGiB == nil {
			q.MemoryMiB = int64(math.Round(ratio(*in.VCPU, shape.VCPU) * float64(shape.MemoryGiB) * 1024))
		}
	}
	if in.MemoryGiB != nil {
		q.MemoryMiB = *in.MemoryGiB * 1024
	}
	return q
}

func ratio(part, whole int64) float64 {
	if whole == 0 {
		return 0
	}
	return float64(part) / float64(whole)
}

// AbsoluteBorrowWords lists the absolute borrow limits in words
// ("ml.p5.48xlarge: 6 GPUs, 30 vCPU"), "" when there are none.
func (t Team) AbsoluteBorrowWords() string {
	var rows []string
	for _, q := range t.Quota {
		var parts []string
		for _, l := range []struct {
			n    *int64
			unit string
		}{{q.BorrowGPUs, "GPUs"}, {q.BorrowNeuron, "Neuron devices"}, {q.BorrowVCPU, "vCPU"}, {q.BorrowMemoryGiB, "GiB memory"}} {
			if l.n != nil {
				parts = append(parts, strconv.FormatInt(*l.n, 10)+" "+l.unit)
			}
		}
		if len(parts) > 0 {
			rows = append(rows, q.InstanceType+": "+strings.Join(parts, ", "))
		}
	}
	return strings.Join(rows, "; ")
}
