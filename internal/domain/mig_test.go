package domain

import (
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openquota/console/internal/kueuetest"
)

func TestPartitions(t *testing.T) {
	for _, tt := range []struct {
		resource corev1.ResourceName
		profile  string
		slices   int64
	}{
		{"nvidia.com/mig-1g.10gb", "mig-1g.10gb", 1},
		{"nvidia.com/mig-3g.40gb", "mig-3g.40gb", 3},
		{"nvidia.com/mig-7g.186gb", "mig-7g.186gb", 7},
		{"nvidia.com/mig-1g.10gb+me", "mig-1g.10gb+me", 1},
		{"nvidia.com/gpu", "", 0},
		{"nvidia.com/mig-8g.10gb", "", 0},
	} {
		p, ok := PartitionOf(tt.resource)
		s, _ := PartitionSlices(p)
		if p != tt.profile || ok != (tt.profile != "") || s != tt.slices {
			t.Errorf("%s: profile %q (%v), %d slices; want %q, %d", tt.resource, p, ok, s, tt.profile, tt.slices)
		}
	}
}

func TestDeriveQuotaWithPartitions(t *testing.T) {
	p4de, _ := LookupShape("ml.p4de.24xlarge") // 8 GPUs, 96 vCPU, 1152 GiB
	p4de.Partitions = map[string]int64{"mig-1g.10gb": 14, "mig-3g.40gb": 4}
	n := func(v int64) *int64 { return &v }
	for _, tt := range []struct {
		name string
		in   QuotaInput
		want Quota
	}{
		// 7 × 1g is one GPU's worth: 12 vCPU, 144 GiB.
		{"partitions alone", QuotaInput{Partition: "mig-1g.10gb", Partitions: n(7)},
			Quota{Partition: "mig-1g.10gb", Partitions: 7, CPUMilli: 12000, MemoryMiB: 144 << 10, EFA: 1}},
		{"beside GPUs", QuotaInput{GPUs: n(2), Partition: "mig-3g.40gb", Partitions: n(7)},
			Quota{GPUs: 2, Partition: "mig-3g.40gb", Partitions: 7, CPUMilli: 60000, MemoryMiB: 720 << 10, EFA: 3}},
		{"a count gives the instances' partitions", QuotaInput{Count: n(2), Partition: "mig-1g.10gb"},
			Quota{GPUs: 16, Partition: "mig-1g.10gb", Partitions: 28, CPUMilli: 192000, MemoryMiB: 2304 << 10, EFA: 8}},
		{"vCPU given wins", QuotaInput{Partition: "mig-1g.10gb", Partitions: n(7), VCPU: n(4)},
			Quota{Partition: "mig-1g.10gb", Partitions: 7, CPUMilli: 4000, MemoryMiB: 48 << 10, EFA: 1}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.InstanceType = p4de.Type
			if diff := cmp.Diff(tt.want, DeriveQuota(tt.in, p4de)); diff != "" {
				t.Errorf("DeriveQuota (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTaskPartitions(t *testing.T) {
	s, now := DefaultSettings, time.Now()
	spec := corev1.PodSpec{Containers: []corev1.Container{
		{Name: "main", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{PartitionResource("mig-1g.10gb"): resource.MustParse("2")}}},
		{Name: "side", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{PartitionResource("mig-3g.40gb"): resource.MustParse("1")}}},
	}}
	wl := kueuetest.MakeWorkload(s, s.Namespace("nlp"), "notebook").Queue(s.LocalQueue("nlp")).PodSpec("main", 3, spec).Created(now).Obj()
	if got := ReadWorkload(wl, s).Partitions; got != "6 × mig-1g.10gb, 3 × mig-3g.40gb" {
		t.Errorf("partitions %q", got)
	}
	if got := GPUEquivalent("mig-3g.40gb", 7); got != 3 {
		t.Errorf("7 × 3g is %v GPUs, want 3", got)
	}
}

func TestPartitionHours(t *testing.T) {
	hours, whole := PartitionHours("3 × mig-1g.10gb, 2 × mig-3g.40gb", 90*time.Minute)
	if hours != 7.5 || math.Abs(whole-9.0/7*1.5) > 1e-9 {
		t.Errorf("partition-hours %v, GPU-equivalent %v", hours, whole)
	}
	if h, w := PartitionHours("", time.Hour); h != 0 || w != 0 {
		t.Errorf("no partitions: %v, %v", h, w)
	}
}

func TestOverviewCountsPartitions(t *testing.T) {
	node := func(name string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{InstanceTypeLabel: "ml.p4de.24xlarge"}},
			Status: corev1.NodeStatus{Capacity: corev1.ResourceList{ResourceGPU: resource.MustParse("4"),
				PartitionResource("mig-1g.10gb"): resource.MustParse("14"), PartitionResource("mig-3g.40gb"): resource.MustParse("4")},
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	}
	ov := BuildOverview(DefaultSettings, []*corev1.Node{node("a"), node("b")}, nil)
	if got := PartitionsWord(ov.InstanceTypes[0].Partitions); got != "28 × mig-1g.10gb, 8 × mig-3g.40gb" {
		t.Errorf("partitions %q", got)
	}
	if ov.InstanceTypes[0].GPUs != 8 {
		t.Errorf("whole GPUs %d, want 8", ov.InstanceTypes[0].GPUs)
	}
}
