package domain

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/kueuetest"
)

// Which running tasks borrow, by Borrows: in each ClusterQueue, flavor and
// resource with a quota, the tasks holding quota in admission order; a task
// borrows while those before it and it hold more than the nominal quota.
func TestBorrowing(t *testing.T) {
	const trn1 = "ml.trn1.32xlarge"
	nlpCQ := func() *kueuetest.ClusterQueueWrapper {
		return kueuetest.MakeClusterQueue(DefaultSettings.ClusterQueue("nlp")).Cohort(DefaultSettings.Cohort).Quota(p5, ResourceGPU, "12")
	}
	cvCQ := kueuetest.MakeClusterQueue(DefaultSettings.ClusterQueue("cv")).Cohort(DefaultSettings.Cohort).Quota(p5, ResourceGPU, "8").Obj()
	cpuPod := func(cpu string) corev1.PodSpec {
		return corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}}
	}
	const p4de = "ml.p4de.24xlarge"
	migPod := corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
		Limits: corev1.ResourceList{PartitionResource("mig-1g.10gb"): resource.MustParse("1")}}}}}
	neuronPod := corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
		Limits: corev1.ResourceList{ResourceNeuron: resource.MustParse("16")}}}}}
	cases := []struct {
		name string
		wls  []*kueuev1beta2.Workload
		cqs  []*kueuev1beta2.ClusterQueue
		want map[string]bool
	}{
		{
			// Kueue admitted newest-high when 16 of 12 GPUs were held: it
			// borrowed, whatever its priority.
			name: "admission order, not priority",
			wls: []*kueuev1beta2.Workload{
				newWorkload(nlp, "old").Queue("lq").Priority(10).GPUs(8, 1).Created(at(0)).Admitted(at(1), p5).Obj(),
				newWorkload(nlp, "new").Queue("lq").Priority(10).GPUs(8, 1).Created(at(0)).Admitted(at(5), p5).Obj(),
				newWorkload(nlp, "newest-high").Queue("lq").Priority(100).GPUs(4, 1).Created(at(0)).Admitted(at(9), p5).Obj(),
				newWorkload(cv, "cv").Queue("lq").Priority(10).GPUs(8, 1).Created(at(0)).Admitted(at(1), p5).Obj(),
			},
			cqs:  []*kueuev1beta2.ClusterQueue{nlpCQ().Obj(), cvCQ},
			want: map[string]bool{"old": false, "new": true, "newest-high": true, "cv": false},
		},
		{
			name: "an earlier task's end lets the later ones fit",
			wls: []*kueuev1beta2.Workload{
				newWorkload(nlp, "old").Queue("lq").GPUs(8, 1).Created(at(0)).Admitted(at(1), p5).Finished(at(20), "Succeeded").Obj(),
				newWorkload(nlp, "new").Queue("lq").GPUs(8, 1).Created(at(0)).Admitted(at(5), p5).Obj(),
				newWorkload(nlp, "newest").Queue("lq").GPUs(4, 1).Created(at(0)).Admitted(at(9), p5).Obj(),
			},
			cqs:  []*kueuev1beta2.ClusterQueue{nlpCQ().Obj()},
			want: map[string]bool{"old": false, "new": false, "newest": false},
		},
		{
			name: "admitted in the same second: by name",
			wls: []*kueuev1beta2.Workload{
				newWorkload(cv, "b").Queue("lq").GPUs(8, 1).Created(at(0)).Admitted(at(5), p5).Obj(),
				newWorkload(cv, "a").Queue("lq").GPUs(8, 1).Created(at(0)).Admitted(at(5), p5).Obj(),
			},
			cqs:  []*kueuev1beta2.ClusterQueue{cvCQ},
			want: map[string]bool{"a": false, "b": true},
		},
		{
			// Its quota was cut below what it holds: a queue in no cohort
			// borrows from no one (Kueue counts nothing borrowed).
			name: "over the quota of a queue in no cohort",
			wls: []*kueuev1beta2.Workload{
				newWorkload(cv, "a").Queue("lq").GPUs(8, 1).Created(at(0)).Admitted(at(1), p5).Obj(),
				newWorkload(cv, "b").Queue("lq").GPUs(8, 1).Created(at(0)).Admitted(at(2), p5).Obj(),
			},
			cqs:  []*kueuev1beta2.ClusterQueue{kueuetest.MakeClusterQueue(DefaultSettings.ClusterQueue("cv")).Quota(p5, ResourceGPU, "8").Obj()},
			want: map[string]bool{"a": false, "b": false},
		},
		{
			name: "one task of 16 GPUs in a quota of 8",
			wls:  []*kueuev1beta2.Workload{newWorkload(cv, "big").Queue("lq").GPUs(8, 2).Created(at(0)).Admitted(at(1), p5).Obj()},
			cqs:  []*kueuev1beta2.ClusterQueue{cvCQ},
			want: map[string]bool{"big": true},
		},
		{
			name: "vCPU, and GPUs not asked for are not borrowed",
			wls: []*kueuev1beta2.Workload{
				newWorkload(nlp, "x").Queue("lq").PodSpec("main", 1, cpuPod("3")).Created(at(0)).Admitted(at(1), p5).Obj(),
				newWorkload(nlp, "y").Queue("lq").PodSpec("main", 1, cpuPod("3")).Created(at(0)).Admitted(at(2), p5).Obj(),
				newWorkload(nlp, "gpus").Queue("lq").GPUs(8, 2).Created(at(0)).Admitted(at(3), p5).Obj(),
				newWorkload(nlp, "cpu-after").Queue("lq").PodSpec("main", 1, cpuPod("500m")).Created(at(0)).Admitted(at(4), p5).Obj(),
			},
			cqs:  []*kueuev1beta2.ClusterQueue{nlpCQ().Quota(p5, corev1.ResourceCPU, "100").Obj()},
			want: map[string]bool{"x": false, "y": false, "gpus": true, "cpu-after": false},
		},
		{
			name: "vCPU past its quota",
			wls: []*kueuev1beta2.Workload{
				newWorkload(nlp, "x").Queue("lq").PodSpec("main", 1, cpuPod("3")).Created(at(0)).Admitted(at(1), p5).Obj(),
				newWorkload(nlp, "y").Queue("lq").PodSpec("main", 1, cpuPod("3")).Created(at(0)).Admitted(at(2), p5).Obj(),
			},
			cqs:  []*kueuev1beta2.ClusterQueue{nlpCQ().Quota(p5, corev1.ResourceCPU, "4").Obj()},
			want: map[string]bool{"x": false, "y": true},
		},
		{
			name: "Neuron devices on their own flavor, beside GPUs",
			wls: []*kueuev1beta2.Workload{
				newWorkload(nlp, "gpus").Queue("lq").GPUs(8, 1).Created(at(0)).Admitted(at(1), p5).Obj(),
				newWorkload(nlp, "neuron").Queue("lq").PodSpec("main", 2, neuronPod).Created(at(0)).Admitted(at(2), trn1).Obj(),
			},
			cqs:  []*kueuev1beta2.ClusterQueue{nlpCQ().Quota(trn1, ResourceNeuron, "16").Obj()},
			want: map[string]bool{"gpus": false, "neuron": true},
		},
		{
			// The quota of 2 1g.10gb partitions is held by the first; the
			// second's 1 partition is borrowed, as Kueue counts it.
			name: "MIG partitions past their profile's quota",
			wls: []*kueuev1beta2.Workload{
				newWorkload(nlp, "first").Queue("lq").PodSpec("main", 2, migPod).Created(at(0)).Admitted(at(1), p4de).Obj(),
				newWorkload(nlp, "second").Queue("lq").PodSpec("main", 1, migPod).Created(at(0)).Admitted(at(2), p4de).Obj(),
			},
			cqs:  []*kueuev1beta2.ClusterQueue{nlpCQ().Quota(p4de, PartitionResource("mig-1g.10gb"), "2").Obj()},
			want: map[string]bool{"first": false, "second": true},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := map[string]bool{}
			for _, task := range snapshotTasks(SnapshotInput{Settings: DefaultSettings, Workloads: tc.wls, ClusterQueues: tc.cqs}, at(60)) {
				got[task.Name] = task.Borrowing
				if shown := task.State == TaskAdmitted && task.Borrowing; shown != (task.Reason == admittedPhrase(Task{Flavors: task.Flavors, Borrowing: true})) {
					t.Errorf("%s: borrowing %v, reason %q", task.Name, task.Borrowing, task.Reason)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("borrowing (-want +got):\n%s", diff)
			}
		})
	}
}

// BorrowsAmong, the rule the task history applies to what it recorded.
func TestBorrowsAmong(t *testing.T) {
	gpus := func(n int64) FlavorAmount { return FlavorAmount{Amount: Amount{GPUs: n}} }
	mig := func(n int64) FlavorAmount { return FlavorAmount{Partitions: map[string]int64{"mig-1g.10gb": n}} }
	quota := map[corev1.ResourceName]int64{ResourceGPU: 8}
	migQuota := map[corev1.ResourceName]int64{PartitionResource("mig-1g.10gb"): 2, PartitionResource("mig-3g.40gb"): 4}
	y := Holding{At: 100, Namespace: "ns", Name: "y", Amount: gpus(8)}
	cases := []struct {
		name    string
		y       Holding
		others  []Holding
		nominal map[corev1.ResourceName]int64
		want    bool
	}{
		{"alone, within the quota", y, nil, quota, false},
		{"alone, past the quota", Holding{At: 100, Amount: gpus(16)}, nil, quota, true},
		{"after one still holding", y, []Holding{{At: 50, Amount: gpus(1)}}, quota, true},
		{"after one that ended before it began", y, []Holding{{At: 50, Ended: 100, Amount: gpus(8)}}, quota, false},
		{"before one admitted later", y, []Holding{{At: 150, Amount: gpus(8)}}, quota, false},
		{"the same second, an earlier name", y, []Holding{{At: 100, Namespace: "ns", Name: "x", Amount: gpus(8)}}, quota, true},
		{"the same second, a later name", y, []Holding{{At: 100, Namespace: "ns", Name: "z", Amount: gpus(8)}}, quota, false},
		{"a resource without a quota", y, []Holding{{At: 50, Amount: gpus(8)}}, map[corev1.ResourceName]int64{corev1.ResourceCPU: 1000}, false},
		{"memory is not accounted", Holding{At: 100, Amount: FlavorAmount{Amount: Amount{MemoryMiB: 2048}}}, nil, map[corev1.ResourceName]int64{corev1.ResourceMemory: 1024}, false},
		{"vCPU past its quota", Holding{At: 100, Amount: FlavorAmount{Amount: Amount{CPUMilli: 1500}}}, nil, map[corev1.ResourceName]int64{corev1.ResourceCPU: 1000}, true},
		{"partitions within their profile's quota", Holding{At: 100, Amount: mig(1)}, []Holding{{At: 50, Amount: mig(1)}}, migQuota, false},
		{"partitions past their profile's quota", Holding{At: 100, Amount: mig(2)}, []Holding{{At: 50, Amount: mig(1)}}, migQuota, true},
		{"partitions of another profile's quota", Holding{At: 100, Amount: mig(2)}, nil, map[corev1.ResourceName]int64{PartitionResource("mig-3g.40gb"): 1}, false},
	}
	for _, tc := range cases {
		if got := BorrowsAmong(tc.y, tc.others, tc.nominal); got != tc.want {
			t.Errorf("%s: borrows %v, want %v", tc.name, got, tc.want)
		}
	}
}
