package domain

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

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

// A team's use of a MIG profile is Kueue's figures of the profile's
// resource, summed over flavors, and its waiting tasks' partitions.
func TestTeamPartitionUsage(t *testing.T) {
	s, now := DefaultSettings, time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	mig := PartitionResource("mig-1g.10gb")
	cq := testCQ("nlp").Quota("ml.p4de.24xlarge", mig, "14").Quota("ml.p4de.24xlarge", ResourceGPU, "2").Obj()
	cq.Status.FlavorsUsage = []kueuev1beta2.FlavorUsage{{Name: "ml.p4de.24xlarge", Resources: []kueuev1beta2.ResourceUsage{
		{Name: mig, Total: resource.MustParse("16"), Borrowed: resource.MustParse("2")}}}}
	spec := func(n string) corev1.PodSpec {
		return corev1.PodSpec{Containers: []corev1.Container{{Name: "main",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{mig: resource.MustParse(n)}}}}}
	}
	waiting := func(name, perPod string, pods int32) *kueuev1beta2.Workload {
		return newWorkload(s.Namespace("nlp"), name).Queue(s.LocalQueue("nlp")).PodSpec("main", pods, spec(perPod)).
			Created(now.Add(-time.Hour)).Pending("Pending", "", now.Add(-time.Hour)).Obj()
	}
	m := NewModel(s)
	m.Load(SnapshotInput{ClusterQueues: []*kueuev1beta2.ClusterQueue{cq},
		LocalQueues: []*kueuev1beta2.LocalQueue{kueuetest.MakeLocalQueue(s.Namespace("nlp"), s.LocalQueue("nlp"), s.ClusterQueue("nlp"))},
		Workloads:   []*kueuev1beta2.Workload{waiting("a", "2", 3), waiting("b", "1", 1)}})

	team := m.Snapshot(now).Teams[0]
	if diff := cmp.Diff(PartitionUsage{Allocated: 14, InUse: 16, Borrowed: 2, Pending: 7}, team.Partition("mig-1g.10gb")); diff != "" {
		t.Errorf("Partition (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"mig-1g.10gb"}, UsedProfiles([]TeamUsage{team})); diff != "" {
		t.Errorf("UsedProfiles (-want +got):\n%s", diff)
	}
	m.DeleteWorkload(s.Namespace("nlp"), "a")
	if got := m.Snapshot(now).Teams[0].Partition("mig-1g.10gb").Pending; got != 1 {
		t.Errorf("pending partitions after a task left: %d, want 1", got)
	}
	if got := m.Snapshot(now).Teams[0].Partition("mig-3g.40gb"); got != (PartitionUsage{}) {
		t.Errorf("a profile the team has nothing of: %+v", got)
	}
}

// Partitions held at low activity are idle, per profile.
func TestIdlePartitions(t *testing.T) {
	s, now := DefaultSettings, time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	mig := PartitionResource("mig-1g.10gb")
	cq := testCQ("nlp").Quota("ml.p4de.24xlarge", mig, "14").Obj()
	cq.Status.FlavorsUsage = []kueuev1beta2.FlavorUsage{{Name: "ml.p4de.24xlarge", Resources: []kueuev1beta2.ResourceUsage{
		{Name: mig, Total: resource.MustParse("7")}}}}
	snap := BuildSnapshot(SnapshotInput{Settings: s, ClusterQueues: []*kueuev1beta2.ClusterQueue{cq}}, now)
	for util, want := range map[float64]string{
		3:  "Team nlp holds 7 mig-1g.10gb partitions at 3 % activity",
		55: "",
	} {
		got := ""
		for _, i := range Insights(InsightInput{Snapshot: snap, Now: now, Thresholds: DefaultInsightThresholds,
			PartitionUtilization: map[string]map[string]float64{"nlp": {"mig-1g.10gb": util}}}) {
			if i.Rule == "idle-partitions" {
				got = i.Title
				if !strings.Contains(i.Evidence, "1.00 GPU-hours an hour") {
					t.Errorf("evidence %q", i.Evidence)
				}
			}
		}
		if got != want {
			t.Errorf("at %v %%: %q, want %q", util, got, want)
		}
	}
}

// Nodes that partition some of their GPUs offer the rest whole: the
// capacity of whole GPUs is theirs, as the overview counts it, while the
// shape keeps the physical GPUs that vCPU and memory are shared by.
func TestCapacityCountsTheGPUsLeftWhole(t *testing.T) {
	node := func(name string) *corev1.Node {
		a := corev1.ResourceList{ResourceGPU: resource.MustParse("4"), corev1.ResourceCPU: resource.MustParse("96"),
			PartitionResource("mig-1g.10gb"): resource.MustParse("14"), PartitionResource("mig-3g.40gb"): resource.MustParse("4")}
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{InstanceTypeLabel: "ml.p4de.24xlarge"}},
			Status: corev1.NodeStatus{Capacity: a, Allocatable: a, Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	}
	shapes, available := LiveShapes([]*corev1.Node{node("a"), node("b")})
	shape, ok := shapes("ml.p4de.24xlarge")
	if !ok || shape.GPUs != 8 || shape.SchedulableGPUs() != 4 {
		t.Fatalf("p4de shape: %+v (schedulable %d), want 8 GPUs of which 4 whole", shape, shape.SchedulableGPUs())
	}
	if got := Capacity(shape, available["ml.p4de.24xlarge"]).GPUs; got != 8 {
		t.Errorf("capacity of two partitioned p4de: %d whole GPUs, want 8", got)
	}
	p5, _ := shapes("ml.p5.48xlarge")
	if got := Capacity(p5, 2).GPUs; got != 16 {
		t.Errorf("two p5 without partitions: %d GPUs, want 16", got)
	}
}
