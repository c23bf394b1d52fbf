package domain

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// quantityEqual compares quantities by value, not by their cached string form.
var quantityEqual = cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })

func shapeOf(t *testing.T, name string) InstanceShape {
	t.Helper()
	s, ok := LookupShape(name)
	if !ok {
		t.Fatalf("catalog has no %s", name)
	}
	return s
}

func TestDeriveQuota(t *testing.T) {
	cases := []struct {
		name  string
		shape string
		in    QuotaInput
		want  Quota
	}{
		{"count multiplies the whole shape", "ml.p5.48xlarge", QuotaInput{Count: ptr.To[int64](2)},
			Quota{GPUs: 16, EFA: 64, CPUMilli: 384_000, MemoryMiB: 4096 * 1024}},
		{"GPUs give vCPU and memory in proportion", "ml.p5.48xlarge", QuotaInput{GPUs: ptr.To[int64](2)},
			Quota{GPUs: 2, EFA: 8, CPUMilli: 48_000, MemoryMiB: 512 * 1024}},
		{"more GPUs than one instance", "ml.g5.2xlarge", QuotaInput{GPUs: ptr.To[int64](2)},
			Quota{GPUs: 2, CPUMilli: 16_000, MemoryMiB: 64 * 1024}},
		{"given vCPU sets memory by the vCPU fraction", "ml.g6.12xlarge", QuotaInput{GPUs: ptr.To[int64](2), VCPU: ptr.To[int64](48)},
			Quota{GPUs: 2, EFA: 1, CPUMilli: 48_000, MemoryMiB: 192 * 1024}},
		{"vCPU alone on a CPU instance", "ml.c5.2xlarge", QuotaInput{VCPU: ptr.To[int64](2)},
			Quota{CPUMilli: 2_000, MemoryMiB: 4 * 1024}},
		{"Neuron devices give vCPU, memory and EFA", "ml.trn1.32xlarge", QuotaInput{Neuron: ptr.To[int64](4)},
			Quota{Neuron: 4, EFA: 2, CPUMilli: 32_000, MemoryMiB: 128 * 1024}},
		{"EFA rounds to whole devices", "ml.g6.12xlarge", QuotaInput{GPUs: ptr.To[int64](1)},
			Quota{GPUs: 1, EFA: 0, CPUMilli: 12_000, MemoryMiB: 48 * 1024}},
		{"memory override wins", "ml.p5.48xlarge", QuotaInput{GPUs: ptr.To[int64](2), MemoryGiB: ptr.To[int64](300)},
			Quota{GPUs: 2, EFA: 8, CPUMilli: 48_000, MemoryMiB: 300 * 1024}},
		{"vCPU and memory overrides together", "ml.p5.48xlarge", QuotaInput{GPUs: ptr.To[int64](4), VCPU: ptr.To[int64](10), MemoryGiB: ptr.To[int64](100)},
			Quota{GPUs: 4, EFA: 16, CPUMilli: 10_000, MemoryMiB: 100 * 1024}},
		{"count with a memory override", "ml.g5.2xlarge", QuotaInput{Count: ptr.To[int64](3), MemoryGiB: ptr.To[int64](50)},
			Quota{GPUs: 3, CPUMilli: 24_000, MemoryMiB: 50 * 1024}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := DeriveQuota(tc.in, shapeOf(t, tc.shape))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("DeriveQuota (-want +got):\n%s", diff)
			}
		})
	}
}

// clusterQueueOf decodes the applied ClusterQueue into the API type, as the
// apiserver would see it.
func clusterQueueOf(t *testing.T, objs TeamObjects) kueuev1beta2.ClusterQueue {
	t.Helper()
	data, err := json.Marshal(objs.ClusterQueue)
	if err != nil {
		t.Fatal(err)
	}
	var cq kueuev1beta2.ClusterQueue
	if err := json.Unmarshal(data, &cq); err != nil {
		t.Fatal(err)
	}
	return cq
}

func quota(name corev1.ResourceName, nominal, borrowing string) kueuev1beta2.ResourceQuota {
	return kueuev1beta2.ResourceQuota{Name: name, NominalQuota: resource.MustParse(nominal), BorrowingLimit: ptr.To(resource.MustParse(borrowing))}
}

// The documented example: team onlygputeam, ml.g6.12xlarge with 2 GPUs and
// 48 vCPU, LendAndBorrow 50 %, weight 10, preemption LowerPriority.
func TestBuildTeamGoldenCase(t *testing.T) {
	team := Team{
		Name: "onlygputeam", Enabled: true, FairShareWeight: 10, Preemption: PreemptLowerPriority,
		Lending: LendAndBorrow, BorrowLimitPercent: 50,
		Quota: []QuotaInput{{InstanceType: "ml.g6.12xlarge", GPUs: ptr.To[int64](2), VCPU: ptr.To[int64](48)}},
	}
	objs, err := BuildTeam(DefaultSettings, team, LookupShape)
	if err != nil {
		t.Fatal(err)
	}
	cq := clusterQueueOf(t, objs)
	want := kueuev1beta2.ClusterQueueSpec{
		CohortName:        "shared-pool",
		QueueingStrategy:  kueuev1beta2.BestEffortFIFO,
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "hyperpod-ns-onlygputeam"}},
		FlavorFungibility: &kueuev1beta2.FlavorFungibility{WhenCanBorrow: kueuev1beta2.TryNextFlavor, WhenCanPreempt: kueuev1beta2.TryNextFlavor},
		Preemption: &kueuev1beta2.ClusterQueuePreemption{
			ReclaimWithinCohort: kueuev1beta2.PreemptionPolicyAny,
			WithinClusterQueue:  kueuev1beta2.PreemptionPolicyLowerPriority,
			BorrowWithinCohort:  &kueuev1beta2.BorrowWithinCohort{Policy: kueuev1beta2.BorrowWithinCohortPolicyLowerPriority},
		},
		FairSharing: &kueuev1beta2.FairSharing{Weight: ptr.To(resource.MustParse("10"))},
		StopPolicy:  ptr.To(kueuev1beta2.None),
		ResourceGroups: []kueuev1beta2.ResourceGroup{{
			CoveredResources: []corev1.ResourceName{"nvidia.com/gpu", "aws.amazon.com/neurondevice", "cpu", "memory", "vpc.amazonaws.com/efa"},
			Flavors: []kueuev1beta2.FlavorQuotas{{
				Name: "ml.g6.12xlarge",
				Resources: []kueuev1beta2.ResourceQuota{
					quota("nvidia.com/gpu", "2", "1"),
					quota("aws.amazon.com/neurondevice", "0", "0"),
					quota("cpu", "48", "24"),
					quota("memory", "192Gi", "96Gi"),
					quota("vpc.amazonaws.com/efa", "1", "0"),
				},
			}},
		}},
	}
	if diff := cmp.Diff(want, cq.Spec, quantityEqual); diff != "" {
		t.Errorf("ClusterQueue spec (-want +got):\n%s", diff)
	}
	if cq.Name != "hyperpod-ns-onlygputeam-clusterqueue" {
		t.Errorf("ClusterQueue name = %q", cq.Name)
	}
	if got := *objs.LocalQueue.Name + " in " + *objs.LocalQueue.Namespace + " -> " + string(*objs.LocalQueue.Spec.ClusterQueue); got !=
		"hyperpod-ns-onlygputeam-localqueue in hyperpod-ns-onlygputeam -> hyperpod-ns-onlygputeam-clusterqueue" {
		t.Errorf("LocalQueue = %s", got)
	}
	var typed Team
	if err := json.Unmarshal([]byte(cq.Annotations[AllocationAnnotation]), &typed); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(team, typed); diff != "" {
		t.Errorf("allocation annotation does not round-trip (-want +got):\n%s", diff)
	}
}

// A team namespace enforces the console's Pod Security level, so members'
// Jobs never run privileged whatever the cluster's default; its other labels
// are the console's own.
func TestTeamNamespaceEnforcesPodSecurity(t *testing.T) {
	team := Team{Name: "nlp", Enabled: true, Quota: []QuotaInput{{InstanceType: "ml.p5.48xlarge", GPUs: ptr.To[int64](8)}}}
	for _, tc := range []struct {
		level, want string
	}{{"", "baseline"}, {"restricted", "restricted"}} {
		s := DefaultSettings
		s.PodSecurity = tc.level
		objs, err := BuildTeam(s, team, LookupShape)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{ManagedByLabel: ManagedByValue, TeamLabel: "nlp", PodSecurityEnforceLabel: tc.want}
		if diff := cmp.Diff(want, objs.Namespace.Labels); diff != "" {
			t.Errorf("level %q: namespace labels (-want +got):\n%s", tc.level, diff)
		}
		if _, ok := objs.LocalQueue.Labels[PodSecurityEnforceLabel]; ok {
			t.Errorf("the LocalQueue carries the namespace's Pod Security label")
		}
	}
}

func TestBuildTeamLendingAndActivation(t *testing.T) {
	base := Team{Name: "t", Enabled: true, Preemption: PreemptNever, BorrowLimitPercent: 50,
		Quota: []QuotaInput{{InstanceType: "ml.p5.48xlarge", GPUs: ptr.To[int64](4)}}}
	type limits struct{ Borrowing, Lending *resource.Quantity }
	gpuLimits := func(cq kueuev1beta2.ClusterQueue) limits {
		r := cq.Spec.ResourceGroups[0].Flavors[0].Resources[0]
		return limits{r.BorrowingLimit, r.LendingLimit}
	}
	q := func(s string) *resource.Quantity { return ptr.To(resource.MustParse(s)) }
	cases := []struct {
		name     string
		lending  Lending
		percent  int64
		lendGPUs *int64
		want     limits
	}{
		{"LendAndBorrow 50 %", LendAndBorrow, 50, nil, limits{Borrowing: q("2")}},
		{"LendAndBorrow 150 %", LendAndBorrow, 150, nil, limits{Borrowing: q("6")}},
		{"LendAndBorrow rounds whole GPUs down", LendAndBorrow, 30, nil, limits{Borrowing: q("1")}},
		{"Lend borrows nothing and lends all", Lend, 50, nil, limits{Borrowing: q("0")}},
		{"DontLend neither lends nor borrows", DontLend, 50, nil, limits{Borrowing: q("0"), Lending: q("0")}},
		{"LendAndBorrow lends up to its lend limit", LendAndBorrow, 50, ptr.To[int64](3), limits{Borrowing: q("2"), Lending: q("3")}},
		{"Lend lends up to its lend limit", Lend, 50, ptr.To[int64](3), limits{Borrowing: q("0"), Lending: q("3")}},
		{"DontLend lends nothing, whatever the row says", DontLend, 50, ptr.To[int64](3), limits{Borrowing: q("0"), Lending: q("0")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			team := base
			team.Lending, team.BorrowLimitPercent = tc.lending, tc.percent
			team.Quota = []QuotaInput{base.Quota[0]}
			team.Quota[0].LendGPUs = tc.lendGPUs
			objs, err := BuildTeam(DefaultSettings, team, LookupShape)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, gpuLimits(clusterQueueOf(t, objs)), quantityEqual); diff != "" {
				t.Errorf("GPU limits (-want +got):\n%s", diff)
			}
		})
	}

	disabled := base
	disabled.Enabled = false
	objs, err := BuildTeam(DefaultSettings, disabled, LookupShape)
	if err != nil {
		t.Fatal(err)
	}
	cq := clusterQueueOf(t, objs)
	if got := *cq.Spec.StopPolicy; got != kueuev1beta2.Hold {
		t.Errorf("disabled team: stopPolicy = %s, want Hold", got)
	}
	if got := cq.Spec.Preemption.WithinClusterQueue; got != kueuev1beta2.PreemptionPolicyNever {
		t.Errorf("preemption Never: withinClusterQueue = %s", got)
	}
}

// The lend-limit rules: at most the nominal quota (Kueue refuses more), and
// none on a team that doesn't lend.
func TestLendLimitProblems(t *testing.T) {
	p5 := func(set func(*QuotaInput)) QuotaInput {
		row := QuotaInput{InstanceType: "ml.p5.48xlarge", GPUs: ptr.To[int64](4)} // 96 vCPU, 1024 GiB
		set(&row)
		return row
	}
	cases := []struct {
		name    string
		lending Lending
		row     QuotaInput
		want    []LimitProblem
	}{
		{"none", LendAndBorrow, p5(func(*QuotaInput) {}), nil},
		{"up to the quota", LendAndBorrow, p5(func(q *QuotaInput) {
			q.LendGPUs, q.LendVCPU, q.LendMemoryGiB = ptr.To[int64](4), ptr.To[int64](96), ptr.To[int64](1024)
		}), nil},
		{"0 lends nothing", Lend, p5(func(q *QuotaInput) { q.LendGPUs = ptr.To[int64](0) }), nil},
		{"above the quota", Lend, p5(func(q *QuotaInput) { q.LendGPUs, q.LendMemoryGiB = ptr.To[int64](5), ptr.To[int64](1025) }),
			[]LimitProblem{{"lendGPUs", "Lend at most the team's quota of ml.p5.48xlarge: 4 GPUs."},
				{"lendMemoryGiB", "Lend at most the team's quota of ml.p5.48xlarge: 1024 GiB memory."}}},
		{"a resource the quota has none of", LendAndBorrow, p5(func(q *QuotaInput) { q.LendNeuron = ptr.To[int64](1) }),
			[]LimitProblem{{"lendNeuron", "The team has no Neuron devices of ml.p5.48xlarge to lend."}}},
		{"a team that doesn't lend", DontLend, p5(func(q *QuotaInput) { q.LendVCPU, q.LendGPUs = ptr.To[int64](10), ptr.To[int64](9) }),
			[]LimitProblem{{"lendGPUs", "The team doesn't lend: clear the lend limits, or choose Lend only or Lend and borrow."}}},
	}
	shape, _ := LookupShape("ml.p5.48xlarge")
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Team{Lending: tc.lending}.LendLimitProblems(tc.row, shape)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("LendLimitProblems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBuildTeamUnknownInstanceType(t *testing.T) {
	_, err := BuildTeam(DefaultSettings, Team{Name: "t", Quota: []QuotaInput{{InstanceType: "ml.nope", GPUs: ptr.To[int64](1)}}}, LookupShape)
	if err == nil {
		t.Fatal("want an error for an unknown instance type")
	}
}

// The largest quota the form accepts, at the largest borrow limit, still
// gives positive limits (v × percent would overflow an int64 in bytes).
func TestBorrowingLimitOfHugeMemoryQuota(t *testing.T) {
	team := Team{Name: "huge", Enabled: true, Lending: LendAndBorrow, BorrowLimitPercent: 500, Preemption: PreemptNever,
		Quota: []QuotaInput{{InstanceType: "ml.p5.48xlarge", Count: ptr.To[int64](10_000)}}}
	objs, err := BuildTeam(DefaultSettings, team, LookupShape)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range clusterQueueOf(t, objs).Spec.ResourceGroups[0].Flavors[0].Resources {
		nominal := r.NominalQuota.AsApproximateFloat64()
		if got := r.BorrowingLimit.AsApproximateFloat64(); got < 0 || got < 4.99*nominal || got > 5*nominal {
			t.Errorf("%s: borrowing limit %s for nominal %s at 500 %%", r.Name, r.BorrowingLimit, &r.NominalQuota)
		}
	}
}

// The quota per instance type lists what the teams were given against what
// is ready, and the ready instance types nobody was given (idle capacity).
func TestAllocationByTypeListsCapacityNobodyWasGiven(t *testing.T) {
	gpus := int64(16)
	teams := []Team{{Name: "nlp", Quota: []QuotaInput{{InstanceType: "ml.p5.48xlarge", GPUs: &gpus}}}}
	got := AllocationByType(teams, LookupShape, map[string]int{"ml.p5.48xlarge": 4, "ml.g5.2xlarge": 2, "ml.g6.12xlarge": 0})
	var types []string
	for _, a := range got {
		types = append(types, fmt.Sprintf("%s %d/%d GPUs", a.Type, a.Allocated.GPUs, a.Capacity.GPUs))
	}
	want := []string{"ml.g5.2xlarge 0/2 GPUs", "ml.p5.48xlarge 16/32 GPUs"}
	if diff := cmp.Diff(want, types); diff != "" {
		t.Errorf("allocation by type (-want +got):\n%s", diff)
	}
}
