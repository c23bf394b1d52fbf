package domain

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// QuotaInput is one quota row as the admin typed it: nil means "not given".
type QuotaInput struct {
	InstanceType string `json:"instanceType"`
	Count        *int64 `json:"count,omitempty"`
	GPUs         *int64 `json:"gpus,omitempty"`
	Neuron       *int64 `json:"neuron,omitempty"`
	VCPU         *int64 `json:"vcpu,omitempty"`
	MemoryGiB    *int64 `json:"memoryGiB,omitempty"`
	// Partition is a MIG profile of the instance type's GPUs
	// ("mig-1g.10gb", HyperPod's AcceleratorPartition type) and Partitions
	// how many of them; vCPU and memory follow their share of a GPU unless
	// given.
	Partition  string `json:"partition,omitempty"`
	Partitions *int64 `json:"partitions,omitempty"`
	// Absolute borrow limits of the instance type, per resource (HyperPod's
	// AbsoluteBorrowLimits, Kueue's borrowingLimit): nil takes the team's
	// borrow percentage. They apply when the team lends and borrows.
	BorrowGPUs      *int64 `json:"borrowGPUs,omitempty"`
	BorrowNeuron    *int64 `json:"borrowNeuron,omitempty"`
	BorrowVCPU      *int64 `json:"borrowVCPU,omitempty"`
	BorrowMemoryGiB *int64 `json:"borrowMemoryGiB,omitempty"`
	// Absolute lend limits of the instance type, per resource (Kueue's
	// lendingLimit): how much of the team's idle quota other teams of the
	// cohort may use, at most the quota. nil lends all of it. They apply
	// when the team lends (LendAndBorrow or Lend).
	LendGPUs      *int64 `json:"lendGPUs,omitempty"`
	LendNeuron    *int64 `json:"lendNeuron,omitempty"`
	LendVCPU      *int64 `json:"lendVCPU,omitempty"`
	LendMemoryGiB *int64 `json:"lendMemoryGiB,omitempty"`
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

// absoluteLend is the row's absolute lend limit of resource r, nil when
// the team lends all of it.
func (q *QuotaInput) absoluteLend(r corev1.ResourceName) **int64 {
	switch r {
	case ResourceGPU:
		return &q.LendGPUs
	case ResourceNeuron:
		return &q.LendNeuron
	case corev1.ResourceCPU:
		return &q.LendVCPU
	case corev1.ResourceMemory:
		return &q.LendMemoryGiB
	}
	return nil
}

// HasAbsoluteLend reports whether the row sets any absolute lend limit.
func (q QuotaInput) HasAbsoluteLend() bool {
	return q.LendGPUs != nil || q.LendNeuron != nil || q.LendVCPU != nil || q.LendMemoryGiB != nil
}

// limits are the borrowing and lending limits of resource r of row, whose
// nominal quota is nominal, as the team's lending choice sets them (nil:
// none). Absolute borrow limits count only when the team borrows, absolute
// lend limits only when it lends: a team that doesn't lend lends nothing.
func (t Team) limits(row QuotaInput, nominal resource.Quantity, r corev1.ResourceName) (borrowing, lending *resource.Quantity) {
	zero := resource.MustParse("0")
	switch t.Lending {
	case LendAndBorrow:
		b := t.borrowingLimit(row, nominal, r)
		return &b, lendingLimit(row, r)
	case Lend:
		return &zero, lendingLimit(row, r)
	case DontLend:
		return &zero, ptrTo(resource.MustParse("0"))
	}
	return nil, nil
}

// lendingLimit is what others may use of the team's idle quota of resource
// r of row: its absolute lend limit, nil (all of it) without one.
func lendingLimit(row QuotaInput, r corev1.ResourceName) *resource.Quantity {
	if abs := row.absoluteLend(r); abs != nil && *abs != nil {
		return ptrTo(unitsQuantity(r, **abs))
	}
	return nil
}

// LimitProblem is an absolute limit of a quota row that cannot be written:
// Field is the row's field as in JSON and the form ("lendGPUs").
type LimitProblem struct{ Field, Message string }

// LendLimitProblems are what is wrong with the absolute lend limits of row
// (of instance type shape) for team t, at most one per field. Kueue refuses
// a lendingLimit above the nominal quota; a team that doesn't lend takes
// none rather than ignoring them, so the admin never sees a limit on the
// form that the cluster does not hold.
func (t Team) LendLimitProblems(row QuotaInput, shape InstanceShape) []LimitProblem {
	if !row.HasAbsoluteLend() {
		return nil
	}
	var out []LimitProblem
	nominal := DeriveQuota(row, shape)
	for _, f := range lendFields {
		n := *row.absoluteLend(f.resource)
		if n == nil {
			continue
		}
		if t.Lending == DontLend {
			return []LimitProblem{{f.field, "The team doesn't lend: clear the lend limits, or choose Lend only or Lend and borrow."}}
		}
		limit, quota := unitsQuantity(f.resource, *n), nominal.quantity(f.resource)
		if limit.Cmp(quota) <= 0 {
			continue
		}
		msg := fmt.Sprintf("Lend at most the team's quota of %s: %d %s.", row.InstanceType, formUnitsDown(f.resource, quota), f.unit)
		if quota.IsZero() {
			msg = fmt.Sprintf("The team has no %s of %s to lend.", f.unit, row.InstanceType)
		}
		out = append(out, LimitProblem{f.field, msg})
	}
	return out
}

// lendFields are the absolute lend limits: the resource each limits, its
// field, and its unit in messages.
var lendFields = []struct {
	resource    corev1.ResourceName
	field, unit string
}{
	{ResourceGPU, "lendGPUs", "GPUs"}, {ResourceNeuron, "lendNeuron", "Neuron devices"},
	{corev1.ResourceCPU, "lendVCPU", "vCPU"}, {corev1.ResourceMemory, "lendMemoryGiB", "GiB memory"},
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
	// RecentUseOrder orders the team's pending tasks by how much each of
	// its LocalQueues used lately (Kueue's admission fair sharing, the
	// ClusterQueue's admissionScope): a namespace that used little goes
	// before one that used much. Kueue applies it only while its
	// configuration has admissionFairSharing.
	RecentUseOrder bool `json:"recentUseOrder,omitempty"`
}

// AdmissionScopeOf is the admission scope that gives a team's queue its
// order: nil for Kueue's default (no admission fair sharing).
func AdmissionScopeOf(recentUseOrder bool) *kueuev1beta2.AdmissionScope {
	if !recentUseOrder {
		return nil
	}
	return &kueuev1beta2.AdmissionScope{AdmissionMode: kueuev1beta2.UsageBasedAdmissionFairSharing}
}

// OrdersByRecentUse reports whether a queue's admission scope orders it by
// its LocalQueues' recent use.
func OrdersByRecentUse(scope *kueuev1beta2.AdmissionScope) bool {
	return scope != nil && scope.AdmissionMode == kueuev1beta2.UsageBasedAdmissionFairSharing
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
	// Partitions of the MIG profile Partition ("" without).
	Partition  string
	Partitions int64
}

// DeriveQuota resolves a quota row against an instance shape:
//   - a count N gives N times every resource of the shape;
//   - GPUs (or Neuron devices) g give vCPU, memory and EFA in proportion g/per-instance;
//   - vCPU given without memory gives memory in proportion vCPU/instance vCPU;
//   - given vCPU and memory always win over derived ones;
//   - MIG partitions p of a profile count as their compute slices' share of
//     a GPU (p × slices / 7 GPUs) for vCPU and memory, beside any GPUs;
//   - whole-device resources (GPU, Neuron, EFA) are rounded to whole devices.
func DeriveQuota(in QuotaInput, shape InstanceShape) Quota {
	var q Quota
	var partitionGPUs float64 // the partitions' share of the GPUs
	if in.Partition != "" {
		q.Partition = in.Partition
		switch {
		case in.Partitions != nil:
			q.Partitions = *in.Partitions
		case in.Count != nil:
			q.Partitions = *in.Count * shape.Partitions[in.Partition]
		}
		partitionGPUs = GPUEquivalent(in.Partition, float64(q.Partitions))
	}
	var fraction float64 // of one instance, for what the admin left out
	switch {
	case in.Count != nil:
		fraction = float64(*in.Count)
		q.GPUs, q.Neuron = *in.Count*shape.GPUs, *in.Count*shape.Neuron
	case in.GPUs != nil:
		q.GPUs = *in.GPUs
		fraction = (float64(*in.GPUs) + partitionGPUs) / float64(max(shape.GPUs, 1))
	case in.Neuron != nil:
		q.Neuron = *in.Neuron
		fraction = ratio(*in.Neuron, shape.Neuron)
	case in.Partitions != nil:
		fraction = partitionGPUs / float64(max(shape.GPUs, 1))
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
	return t.absoluteWords(func(q QuotaInput) [4]*int64 {
		return [4]*int64{q.BorrowGPUs, q.BorrowNeuron, q.BorrowVCPU, q.BorrowMemoryGiB}
	})
}

// AbsoluteLendWords lists the absolute lend limits in words, as
// AbsoluteBorrowWords does.
func (t Team) AbsoluteLendWords() string {
	return t.absoluteWords(func(q QuotaInput) [4]*int64 { return [4]*int64{q.LendGPUs, q.LendNeuron, q.LendVCPU, q.LendMemoryGiB} })
}

// absoluteWords lists, per row, the GPU, Neuron, vCPU and memory limits
// that limits picks from it.
func (t Team) absoluteWords(limits func(QuotaInput) [4]*int64) string {
	var rows []string
	for _, q := range t.Quota {
		var parts []string
		units := [4]string{"GPUs", "Neuron devices", "vCPU", "GiB memory"}
		for i, n := range limits(q) {
			if n != nil {
				parts = append(parts, strconv.FormatInt(*n, 10)+" "+units[i])
			}
		}
		if len(parts) > 0 {
			rows = append(rows, q.InstanceType+": "+strings.Join(parts, ", "))
		}
	}
	return strings.Join(rows, "; ")
}
