package domain

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

var driftSettings = Settings{NamespacePrefix: "hp-", Cohort: "pool"}

// liveOf is what the cluster holds right after applying objs: the built
// objects as API types, with what Kueue defaults filled in.
func liveOf(t *testing.T, objs TeamObjects) LiveTeamObjects {
	t.Helper()
	live := LiveTeamObjects{ClusterQueue: &kueuev1beta2.ClusterQueue{}, LocalQueue: &kueuev1beta2.LocalQueue{},
		Flavors: map[string]*kueuev1beta2.ResourceFlavor{}}
	if err := viaJSON(objs.ClusterQueue, live.ClusterQueue); err != nil {
		t.Fatal(err)
	}
	if err := viaJSON(objs.LocalQueue, live.LocalQueue); err != nil {
		t.Fatal(err)
	}
	live.LocalQueue.Spec.StopPolicy = ptr.To(kueuev1beta2.None) // Kueue's default
	for _, ac := range objs.Flavors {
		rf := &kueuev1beta2.ResourceFlavor{}
		if err := viaJSON(ac, rf); err != nil {
			t.Fatal(err)
		}
		live.Flavors[rf.Name] = rf
	}
	return live
}

func build(t *testing.T, team Team) TeamObjects {
	t.Helper()
	objs, err := BuildTeam(driftSettings, team, LookupShape)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// resourceOf finds a [flavor, resource] quota of a live ClusterQueue.
func resourceOf(cq *kueuev1beta2.ClusterQueue, flavor string, r corev1.ResourceName) *kueuev1beta2.ResourceQuota {
	for gi := range cq.Spec.ResourceGroups {
		for fi := range cq.Spec.ResourceGroups[gi].Flavors {
			f := &cq.Spec.ResourceGroups[gi].Flavors[fi]
			if string(f.Name) != flavor {
				continue
			}
			for ri := range f.Resources {
				if f.Resources[ri].Name == r {
					return &f.Resources[ri]
				}
			}
		}
	}
	return nil
}

func forEachResource(cq *kueuev1beta2.ClusterQueue, fn func(*kueuev1beta2.ResourceQuota)) {
	for gi := range cq.Spec.ResourceGroups {
		for fi := range cq.Spec.ResourceGroups[gi].Flavors {
			for ri := range cq.Spec.ResourceGroups[gi].Flavors[fi].Resources {
				fn(&cq.Spec.ResourceGroups[gi].Flavors[fi].Resources[ri])
			}
		}
	}
}

func TestDriftOf(t *testing.T) {
	const cq, lq, p5 = "ClusterQueue hp-research-clusterqueue", "LocalQueue hp-research/hp-research-localqueue", "ml.p5.48xlarge"
	cases := []struct {
		name string
		edit func(*LiveTeamObjects)
		want []Drift
	}{
		{"as applied, with Kueue's defaults", func(*LiveTeamObjects) {}, nil},
		{"same values written differently", func(l *LiveTeamObjects) {
			resourceOf(l.ClusterQueue, p5, corev1.ResourceCPU).NominalQuota = resource.MustParse("96000m")
			resourceOf(l.ClusterQueue, p5, corev1.ResourceMemory).NominalQuota = resource.MustParse("1048576Mi")
			l.ClusterQueue.Spec.FairSharing.Weight = ptr.To(resource.MustParse("10"))
		}, nil},
		{"GPUs raised by hand", func(l *LiveTeamObjects) {
			resourceOf(l.ClusterQueue, p5, ResourceGPU).NominalQuota = resource.MustParse("6")
		}, []Drift{{Object: cq, Field: "GPUs quota on ml.p5.48xlarge", Want: "4", Got: "6"}}},
		{"stopped by hand", func(l *LiveTeamObjects) { l.ClusterQueue.Spec.StopPolicy = ptr.To(kueuev1beta2.Hold) },
			[]Drift{{Object: cq, Field: "status", Want: "Enabled (stopPolicy None)", Got: "Disabled (stopPolicy Hold)"}}},
		{"borrowing limit removed, weight dropped to the default", func(l *LiveTeamObjects) {
			resourceOf(l.ClusterQueue, p5, ResourceGPU).BorrowingLimit = nil
			l.ClusterQueue.Spec.FairSharing = nil
		}, []Drift{
			{Object: cq, Field: "fair-share weight", Want: "10", Got: "1"},
			{Object: cq, Field: "GPUs borrowing limit on ml.p5.48xlarge", Want: "2", Got: "unlimited"},
		}},
		{"lending limit set by hand", func(l *LiveTeamObjects) {
			resourceOf(l.ClusterQueue, p5, ResourceGPU).LendingLimit = resource.NewQuantity(2, resource.DecimalSI)
		}, []Drift{{Object: cq, Field: "GPUs lending limit on ml.p5.48xlarge", Want: "no limit", Got: "2"}}},
		{"another cohort and preemption", func(l *LiveTeamObjects) {
			l.ClusterQueue.Spec.CohortName = "elsewhere"
			l.ClusterQueue.Spec.Preemption.WithinClusterQueue = kueuev1beta2.PreemptionPolicyNever
		}, []Drift{
			{Object: cq, Field: "cohort", Want: "pool", Got: "elsewhere"},
			{Object: cq, Field: "preemption within the team (withinClusterQueue)", Want: "LowerPriority", Got: "Never"},
		}},
		{"a flavor added by hand", func(l *LiveTeamObjects) {
			g := &l.ClusterQueue.Spec.ResourceGroups[0]
			g.Flavors = append(g.Flavors, kueuev1beta2.FlavorQuotas{Name: "ml.g5.2xlarge", Resources: []kueuev1beta2.ResourceQuota{
				{Name: ResourceGPU, NominalQuota: resource.MustParse("2")}, {Name: corev1.ResourceCPU, NominalQuota: resource.MustParse("16")}}})
		}, []Drift{{Object: cq, Field: "quota on ml.g5.2xlarge", Got: "2 GPUs, 16 vCPU"}}},
		{"local queue deleted", func(l *LiveTeamObjects) { l.LocalQueue = nil },
			[]Drift{{Object: lq, Field: "the LocalQueue", Want: "present"}}},
		{"local queue pointed elsewhere", func(l *LiveTeamObjects) { l.LocalQueue.Spec.ClusterQueue = "other" },
			[]Drift{{Object: lq, Field: "the ClusterQueue it feeds", Want: "hp-research-clusterqueue", Got: "other"}}},
		{"flavor deleted", func(l *LiveTeamObjects) { delete(l.Flavors, p5) },
			[]Drift{{Object: "ResourceFlavor ml.p5.48xlarge", Field: "the ResourceFlavor", Want: "present"}}},
		{"flavor node label edited, taint added", func(l *LiveTeamObjects) {
			l.Flavors[p5].Spec.NodeLabels[InstanceTypeLabel] = "ml.p4d.24xlarge"
			l.Flavors[p5].Spec.NodeTaints = []corev1.Taint{{Key: "gpu", Effect: corev1.TaintEffectNoSchedule}}
		}, []Drift{{Object: "ResourceFlavor ml.p5.48xlarge", Field: "node label " + InstanceTypeLabel, Want: p5, Got: "ml.p4d.24xlarge"}}},
		{"cluster queue deleted", func(l *LiveTeamObjects) { l.ClusterQueue = nil },
			[]Drift{{Object: cq, Field: "the ClusterQueue", Want: "present"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs := build(t, baseTeam())
			live := liveOf(t, objs)
			tc.edit(&live)
			got, err := DriftOf(objs, live)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("DriftOf (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDriftWords(t *testing.T) {
	cases := map[string]Drift{
		"ClusterQueue q: GPUs quota on t is 6 in the cluster, the allocation says 4":              {Object: "ClusterQueue q", Field: "GPUs quota on t", Want: "4", Got: "6"},
		"LocalQueue n/l: the LocalQueue is missing in the cluster (the allocation says present)":  {Object: "LocalQueue n/l", Field: "the LocalQueue", Want: "present"},
		"ClusterQueue q: quota on t is 2 GPUs in the cluster, which the allocation does not have": {Object: "ClusterQueue q", Field: "quota on t", Got: "2 GPUs"},
	}
	for want, d := range cases {
		if got := d.String(); got != want {
			t.Errorf("got  %q\nwant %q", got, want)
		}
	}
	quantities := []struct {
		r    corev1.ResourceName
		q    string
		want string
	}{
		{corev1.ResourceMemory, "768Gi", "768 GiB"},
		{corev1.ResourceMemory, "1536Mi", "1.5 GiB"},
		{corev1.ResourceCPU, "32640m", "32.64"},
		{corev1.ResourceCPU, "48", "48"},
		{ResourceGPU, "4", "4"},
	}
	for _, tc := range quantities {
		if got := QuantityWord(tc.r, resource.MustParse(tc.q)); got != tc.want {
			t.Errorf("QuantityWord(%s, %s) = %q, want %q", tc.r, tc.q, got, tc.want)
		}
	}
}

func TestAdoptTeam(t *testing.T) {
	const p5 = "ml.p5.48xlarge"
	const keptPercent = "Borrowing limits do not all follow one percentage: the allocation keeps its 50 % for all."
	setAll := func(l *LiveTeamObjects, fn func(*kueuev1beta2.ResourceQuota)) { forEachResource(l.ClusterQueue, fn) }
	q := func(s string) *resource.Quantity { return ptr.To(resource.MustParse(s)) }
	cases := []struct {
		name string
		edit func(*LiveTeamObjects)
		want func(*Team)
		// what applying the adopted allocation still sets back
		remaining []string
		notes     []string
	}{
		{"nothing edited", func(*LiveTeamObjects) {}, func(*Team) {}, nil, nil},
		{"GPUs raised alone: vCPU stays, memory follows vCPU, EFA follows GPUs",
			func(l *LiveTeamObjects) {
				resourceOf(l.ClusterQueue, p5, ResourceGPU).NominalQuota = resource.MustParse("6")
			},
			func(t *Team) {
				t.Quota[0] = QuotaInput{InstanceType: p5, GPUs: ptr.To[int64](6), VCPU: ptr.To[int64](96)}
			},
			[]string{"GPUs borrowing limit on ml.p5.48xlarge", "EFA quota on ml.p5.48xlarge", "EFA borrowing limit on ml.p5.48xlarge"},
			[]string{keptPercent, "EFA quota on ml.p5.48xlarge follows the GPUs (24), not the 16 set by hand."}},
		{"the whole quota scaled consistently",
			func(l *LiveTeamObjects) {
				for r, v := range map[corev1.ResourceName][2]string{ResourceGPU: {"6", "3"}, corev1.ResourceCPU: {"144", "72"},
					corev1.ResourceMemory: {"1536Gi", "768Gi"}, ResourceEFA: {"24", "12"}} {
					rq := resourceOf(l.ClusterQueue, p5, r)
					rq.NominalQuota, rq.BorrowingLimit = resource.MustParse(v[0]), q(v[1])
				}
			},
			func(t *Team) { t.Quota[0] = QuotaInput{InstanceType: p5, GPUs: ptr.To[int64](6)} }, nil, nil},
		{"memory set by hand",
			func(l *LiveTeamObjects) {
				resourceOf(l.ClusterQueue, p5, corev1.ResourceMemory).NominalQuota = resource.MustParse("300Gi")
			},
			func(t *Team) { t.Quota[0].MemoryGiB = ptr.To[int64](300) },
			[]string{"memory borrowing limit on ml.p5.48xlarge"}, []string{keptPercent}},
		{"stopped, weight and preemption changed",
			func(l *LiveTeamObjects) {
				l.ClusterQueue.Spec.StopPolicy = ptr.To(kueuev1beta2.Hold)
				l.ClusterQueue.Spec.FairSharing.Weight = q("25")
				l.ClusterQueue.Spec.Preemption.WithinClusterQueue = kueuev1beta2.PreemptionPolicyNever
				l.ClusterQueue.Spec.Preemption.BorrowWithinCohort.Policy = kueuev1beta2.BorrowWithinCohortPolicyNever
			},
			func(t *Team) { t.Enabled, t.FairShareWeight, t.Preemption = false, 25, PreemptNever }, nil, nil},
		{"borrowing limits doubled on every resource",
			func(l *LiveTeamObjects) {
				setAll(l, func(r *kueuev1beta2.ResourceQuota) { r.BorrowingLimit = ptr.To(r.NominalQuota.DeepCopy()) })
			},
			func(t *Team) { t.BorrowLimitPercent = 100 }, nil, nil},
		{"no more lending",
			func(l *LiveTeamObjects) {
				setAll(l, func(r *kueuev1beta2.ResourceQuota) { r.BorrowingLimit, r.LendingLimit = q("0"), q("0") })
			},
			func(t *Team) { t.Lending = DontLend }, nil, nil},
		{"borrowing limits set by hand: adopted as absolute limits, the percentage stays for the rest",
			func(l *LiveTeamObjects) {
				resourceOf(l.ClusterQueue, p5, ResourceGPU).BorrowingLimit = q("4")
				resourceOf(l.ClusterQueue, p5, corev1.ResourceCPU).BorrowingLimit = q("10")
			},
			func(t *Team) { t.Quota[0].BorrowGPUs, t.Quota[0].BorrowVCPU = ptr.To[int64](4), ptr.To[int64](10) },
			nil, nil},
		{"borrowing limits that neither one nor the stored percentage explains: the GPUs' wins, the others are absolute",
			func(l *LiveTeamObjects) {
				limits := map[corev1.ResourceName]string{ResourceGPU: "4", corev1.ResourceCPU: "10", corev1.ResourceMemory: "100Gi", ResourceEFA: "1"}
				setAll(l, func(r *kueuev1beta2.ResourceQuota) {
					if v, ok := limits[r.Name]; ok {
						r.BorrowingLimit = q(v)
					}
				})
			},
			func(t *Team) {
				t.BorrowLimitPercent = 100
				t.Quota[0].BorrowVCPU, t.Quota[0].BorrowMemoryGiB = ptr.To[int64](10), ptr.To[int64](100)
			},
			[]string{"EFA borrowing limit on ml.p5.48xlarge"},
			[]string{"The EFA borrowing limit on ml.p5.48xlarge set by hand is not kept: it follows the borrow percentage."}},
		{"lending limits set by hand: adopted as absolute lend limits",
			func(l *LiveTeamObjects) {
				resourceOf(l.ClusterQueue, p5, ResourceGPU).LendingLimit = q("2")
				resourceOf(l.ClusterQueue, p5, corev1.ResourceCPU).LendingLimit = q("40")
			},
			func(t *Team) { t.Quota[0].LendGPUs, t.Quota[0].LendVCPU = ptr.To[int64](2), ptr.To[int64](40) },
			nil, nil},
		{"a lend-only team's lending limit is adopted with it",
			func(l *LiveTeamObjects) {
				setAll(l, func(r *kueuev1beta2.ResourceQuota) { r.BorrowingLimit = q("0") })
				resourceOf(l.ClusterQueue, p5, corev1.ResourceMemory).LendingLimit = q("512Gi")
			},
			func(t *Team) { t.Lending, t.Quota[0].LendMemoryGiB = Lend, ptr.To[int64](512) }, nil, nil},
		{"lending limits the form cannot express: vCPU rounded down, EFA's not kept",
			func(l *LiveTeamObjects) {
				resourceOf(l.ClusterQueue, p5, corev1.ResourceCPU).LendingLimit = q("40500m")
				resourceOf(l.ClusterQueue, p5, ResourceEFA).LendingLimit = q("4")
			},
			func(t *Team) { t.Quota[0].LendVCPU = ptr.To[int64](40) },
			[]string{"vCPU lending limit on ml.p5.48xlarge", "EFA lending limit on ml.p5.48xlarge"},
			[]string{"The vCPU lending limit on ml.p5.48xlarge (40.5) rounded down to 40.",
				"The EFA lending limit on ml.p5.48xlarge set by hand is not kept: the team lends all its idle EFA."}},
		{"another cohort cannot be adopted",
			func(l *LiveTeamObjects) { l.ClusterQueue.Spec.CohortName = "elsewhere" },
			func(*Team) {}, []string{"cohort"}, []string{"The cohort elsewhere is not one of the console's: not adopted."}},
		{"a cohort of the console is adopted",
			func(l *LiveTeamObjects) { l.ClusterQueue.Spec.CohortName = "pool-research" },
			func(t *Team) { t.Cohort = "pool-research" }, nil, nil},
		{"an unknown instance type is left out",
			func(l *LiveTeamObjects) {
				g := &l.ClusterQueue.Spec.ResourceGroups[0]
				g.Flavors = append(g.Flavors, kueuev1beta2.FlavorQuotas{Name: "custom-type", Resources: []kueuev1beta2.ResourceQuota{
					{Name: ResourceGPU, NominalQuota: resource.MustParse("1"), BorrowingLimit: q("0")}}})
			},
			func(*Team) {}, []string{"quota on custom-type"},
			[]string{"The quota on custom-type is not adopted: the console does not know that instance type."}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			stored := baseTeam()
			live := liveOf(t, build(t, stored))
			tc.edit(&live)
			got, notes := AdoptTeam(driftSettings, stored, live.ClusterQueue, LookupShape)
			want := baseTeam()
			tc.want(&want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("adopted allocation (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.notes, notes); diff != "" {
				t.Errorf("notes (-want +got):\n%s", diff)
			}
			remaining, err := DriftOf(build(t, got), live)
			if err != nil {
				t.Fatal(err)
			}
			var fields []string
			for _, d := range remaining {
				fields = append(fields, d.Field)
			}
			if diff := cmp.Diff(tc.remaining, fields); diff != "" {
				t.Errorf("drift left after adopting (-want +got):\n%s\n%v", diff, remaining)
			}
		})
	}
}

func TestPolicyDriftOf(t *testing.T) {
	p := Policy{Prioritization: TaskRanking, Classes: []PriorityClass{{Name: "high", Weight: 80}, {Name: "low", Weight: 20}}}
	liveClasses := func() []*kueuev1beta2.WorkloadPriorityClass {
		var out []*kueuev1beta2.WorkloadPriorityClass
		for _, ac := range BuildPriorityClasses(DefaultSettings, p) {
			c := &kueuev1beta2.WorkloadPriorityClass{}
			if err := viaJSON(ac, c); err != nil {
				t.Fatal(err)
			}
			out = append(out, c)
		}
		return out
	}
	if got, err := PolicyDriftOf(DefaultSettings, p, liveClasses()); err != nil || len(got) != 0 {
		t.Errorf("as applied: %v %v", got, err)
	}
	edited := liveClasses()
	edited[0].Value = 1000
	stray := &kueuev1beta2.WorkloadPriorityClass{Value: 5}
	stray.Name, stray.Labels = "old", map[string]string{ManagedByLabel: ManagedByValue}
	foreign := &kueuev1beta2.WorkloadPriorityClass{Value: 7}
	foreign.Name = "someone-elses"
	got, err := PolicyDriftOf(DefaultSettings, p, append(edited[:1], stray, foreign))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, d := range got {
		lines = append(lines, d.String())
	}
	want := []string{
		"WorkloadPriorityClass high: value is 1000 in the cluster, the allocation says 80",
		"WorkloadPriorityClass low: the priority class is missing in the cluster (the allocation says present)",
		"WorkloadPriorityClass old: the priority class is present (value 5) in the cluster, which the allocation does not have",
	}
	if diff := cmp.Diff(want, lines); diff != "" {
		t.Errorf("PolicyDriftOf (-want +got):\n%s", diff)
	}
	if strings.Contains(strings.Join(lines, "\n"), "someone-elses") {
		t.Errorf("a class the console does not manage counted as drift")
	}
}
