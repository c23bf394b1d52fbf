// This file reads GPU partitions (NVIDIA MIG): the NVIDIA device plugin's
// mixed strategy offers each MIG profile as an extended resource of its own,
// nvidia.com/mig-<profile>.

package domain

import (
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// migResourcePrefix starts the resource name of every MIG profile.
const migResourcePrefix = "nvidia.com/mig-"

// migProfile is a MIG profile's name as the device plugin spells it:
// compute slices (of a GPU's 7), memory, and "+me" for media extensions.
var migProfile = regexp.MustCompile(`^mig-([1-7])g\.(\d+)gb(\+me)?$`)

// gpuSlices is how many compute slices one GPU has for MIG.
const gpuSlices = 7

// PartitionSlices are the compute slices of a MIG profile ("mig-3g.40gb"
// has 3 of a GPU's 7); ok is false when profile is not one.
func PartitionSlices(profile string) (slices int64, ok bool) {
	m := migProfile.FindStringSubmatch(profile)
	if m == nil {
		return 0, false
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return n, true
}

// PartitionResource is the resource name of a MIG profile.
func PartitionResource(profile string) corev1.ResourceName {
	return corev1.ResourceName("nvidia.com/" + profile)
}

// PartitionOf is the MIG profile a resource name offers; ok is false when
// it offers none.
func PartitionOf(r corev1.ResourceName) (profile string, ok bool) {
	rest, found := strings.CutPrefix(string(r), migResourcePrefix)
	if !found {
		return "", false
	}
	profile = "mig-" + rest
	if _, ok := PartitionSlices(profile); !ok {
		return "", false
	}
	return profile, true
}

// GPUEquivalent is how many whole GPUs n partitions of profile are worth,
// by their compute slices.
func GPUEquivalent(profile string, n float64) float64 {
	s, _ := PartitionSlices(profile)
	return n * float64(s) / gpuSlices
}

// partitionsOf are the MIG profiles of a node's resources, by profile.
func partitionsOf(l corev1.ResourceList) map[string]int64 { return partitionsIn(l, 1) }

// partitionsIn are the MIG partitions of l, times n, by profile; nil for
// none.
func partitionsIn(l corev1.ResourceList, n int64) map[string]int64 {
	var out map[string]int64
	for r, q := range l {
		if p, ok := PartitionOf(r); ok && q.Value() > 0 {
			if out == nil {
				out = map[string]int64{}
			}
			out[p] += q.Value() * n
		}
	}
	return out
}

// Profiles are the MIG profiles an instance shape offers, sorted.
func (s InstanceShape) Profiles() []string {
	return slices.Sorted(maps.Keys(s.Partitions))
}

// PartitionHours are partition-hours and their whole-GPU equivalent, for a
// task whose pods hold partitions (in the words of WorkloadReading's
// Partitions) for held.
func PartitionHours(partitions string, held time.Duration) (hours, gpuEquivalent float64) {
	for profile, count := range PartitionCounts(partitions) {
		hours += float64(count) * held.Hours()
		gpuEquivalent += GPUEquivalent(profile, float64(count)) * held.Hours()
	}
	return hours, gpuEquivalent
}

// PartitionCounts reads partitions in the words of PartitionsWord back
// into counts by profile; nil for none.
func PartitionCounts(partitions string) map[string]int64 {
	if partitions == "" {
		return nil
	}
	out := map[string]int64{}
	for _, part := range strings.Split(partitions, ", ") {
		n, profile, ok := strings.Cut(part, " × ")
		count, err := strconv.ParseInt(n, 10, 64)
		if ok && err == nil {
			out[profile] += count
		}
	}
	return out
}

// PartitionUsage is a team's quota and use of one MIG profile, summed over
// flavors, in partitions.
type PartitionUsage struct {
	Allocated, InUse, Borrowed, Lent, Pending int64
}

// Partition is the team's quota and use of a MIG profile: from its limits
// (Kueue's figures per flavor and resource) and its waiting tasks' demand.
func (u TeamUsage) Partition(profile string) PartitionUsage {
	p := PartitionUsage{Pending: u.PendingPartitions[profile]}
	r := PartitionResource(profile)
	for _, l := range u.Limits {
		if l.Resource == r {
			p.Allocated += l.Nominal
			p.InUse += l.InUse
			p.Borrowed += l.Borrowed
			p.Lent += l.Lent
		}
	}
	return p
}

// UsedProfiles are the MIG profiles some team has quota of or waits for,
// sorted.
func UsedProfiles(rows []TeamUsage) []string {
	seen := map[string]bool{}
	for _, u := range rows {
		for _, l := range u.Limits {
			if p, ok := PartitionOf(l.Resource); ok {
				seen[p] = true
			}
		}
		for p := range u.PendingPartitions {
			seen[p] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// PartitionsWord names partitions by profile: "28 × mig-1g.10gb,
// 8 × mig-3g.40gb"; "" for none.
func PartitionsWord(partitions map[string]int64) string {
	var parts []string
	for _, p := range slices.Sorted(maps.Keys(partitions)) {
		parts = append(parts, strconv.FormatInt(partitions[p], 10)+" × "+p)
	}
	return strings.Join(parts, ", ")
}
