// This file reads Kueue's admission fair sharing: a ClusterQueue that
// orders its pending tasks by each LocalQueue's recent use.

package domain

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	configv1beta2 "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// RecentUseConfig is how Kueue counts recent use (its configuration's
// admissionFairSharing).
type RecentUseConfig struct {
	HalfLife, Sampling time.Duration
	// Weights weigh each resource's use; a resource not named weighs 1.
	Weights map[corev1.ResourceName]float64
}

// RecentUseConfigOf reads Kueue's configuration; nil when it has no
// admissionFairSharing, so Kueue orders no queue by recent use.
func RecentUseConfigOf(c *configv1beta2.AdmissionFairSharing) *RecentUseConfig {
	if c == nil {
		return nil
	}
	return &RecentUseConfig{HalfLife: c.UsageHalfLifeTime.Duration, Sampling: c.UsageSamplingInterval.Duration, Weights: c.ResourceWeights}
}

// RecentUseMeaning says what ordering by recent use does on this cluster,
// for the team form and the policy page; known is false when Kueue's
// configuration could not be read.
func RecentUseMeaning(c *RecentUseConfig, known bool) string {
	const what = "Among the team's namespaces (its LocalQueues), the one that used the least lately goes first; " +
		"within a namespace, tasks keep their priority, then arrival order. "
	switch {
	case !known:
		return what + "Kueue's configuration could not be read, so whether Kueue applies it is not known."
	case c == nil:
		return what + "Kueue does not apply it yet: its configuration has no admissionFairSharing. " +
			"Set admissionFairSharing (usageHalfLifeTime, usageSamplingInterval) in Kueue's configuration and restart Kueue."
	}
	return what + fmt.Sprintf("Kueue counts use with a half-life of %s, sampled every %s. ", c.HalfLife, c.Sampling) + RecentUseRestartNote
}

// RecentUseRestartNote is when Kueue applies a change of the order: Kueue v0.19
// keeps the order a ClusterQueue's waiting tasks had when it read the queue
// first, until it restarts (its queue manager does not rebuild the queue's
// order on an update).
const RecentUseRestartNote = "Kueue applies the choice when it creates the queue; a change to an existing queue takes effect when Kueue restarts."

// RecentUseChangeNote says when a change of an existing team's order takes
// effect; "" when the order does not change.
func RecentUseChangeNote(before, after Team) string {
	if before.RecentUseOrder == after.RecentUseOrder {
		return ""
	}
	return "The order of waiting tasks changes: " + RecentUseRestartNote
}

// LocalQueueUse is one LocalQueue's recent use, as Kueue keeps it in the
// LocalQueue's status.
type LocalQueueUse struct {
	Namespace, Name string
	// Weight is the LocalQueue's fair-sharing weight (1 unless set).
	Weight float64
	// Consumed is its decayed use, a fraction of devices, cores and GiB;
	// Score what Kueue orders by (the weighted sum of every consumed
	// resource over Weight): the lowest goes first.
	Consumed   RecentAmount
	Score      float64
	LastUpdate time.Time
	// Counted: Kueue has sampled its use (the status has it).
	Counted bool
}

// LocalQueueUses are the recent use of the LocalQueues feeding
// clusterQueue, in the order Kueue gives them: the least used first, then
// by namespace and name.
func LocalQueueUses(clusterQueue string, lqs []*kueuev1beta2.LocalQueue, c *RecentUseConfig) []LocalQueueUse {
	var weights map[corev1.ResourceName]float64
	if c != nil {
		weights = c.Weights
	}
	var out []LocalQueueUse
	for _, lq := range lqs {
		if string(lq.Spec.ClusterQueue) != clusterQueue {
			continue
		}
		u := LocalQueueUse{Namespace: lq.Namespace, Name: lq.Name, Weight: 1}
		if fs := lq.Spec.FairSharing; fs != nil && fs.Weight != nil {
			u.Weight = fs.Weight.AsApproximateFloat64()
		}
		var consumed corev1.ResourceList
		if st := lq.Status.FairSharing; st != nil && st.AdmissionFairSharingStatus != nil {
			consumed, u.Counted = st.AdmissionFairSharingStatus.ConsumedResources, true
			u.LastUpdate = st.AdmissionFairSharingStatus.LastUpdate.Time
		}
		var sum float64
		for _, r := range slices.Sorted(maps.Keys(consumed)) {
			q := consumed[r]
			u.Consumed.add(r, q.AsApproximateFloat64())
			w, ok := weights[r]
			if !ok {
				w = 1
			}
			sum += w * q.AsApproximateFloat64()
		}
		// Kueue's rule: a queue of weight 0 or less goes last.
		u.Score = math.Inf(1)
		if u.Weight > 0 {
			u.Score = sum / u.Weight
		}
		out = append(out, u)
	}
	slices.SortFunc(out, func(a, b LocalQueueUse) int {
		return cmp.Or(cmp.Compare(a.Score, b.Score), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// RecentAmount is decayed use: fractions of GPUs, Neuron devices, vCPU and
// GiB of memory.
type RecentAmount struct{ GPUs, Neuron, VCPU, MemoryGiB float64 }

func (a *RecentAmount) add(r corev1.ResourceName, v float64) {
	switch r {
	case ResourceGPU:
		a.GPUs += v
	case ResourceNeuron:
		a.Neuron += v
	case corev1.ResourceCPU:
		a.VCPU += v
	case corev1.ResourceMemory:
		a.MemoryGiB += v / (1 << 30)
	}
}
