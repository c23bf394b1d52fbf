package impact

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	config "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/kueuetest"
)

// names are queue names as Kueue's examples write them: the Workload
// builder takes the ClusterQueue from In.
type names struct{}

func (names) TeamOfNamespace(string) (string, bool) { return "", false }
func (names) ClusterQueue(string) string            { return "" }

var t0 = time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)

func flavor() *kueue.ResourceFlavor {
	return &kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "ml.p5.48xlarge"}}
}

func queue(name string, gpus int64) *kueuetest.ClusterQueueWrapper {
	w := kueuetest.MakeClusterQueue(name).Cohort("pool").Nominal(gpus, nil).Quota("ml.p5.48xlarge", corev1.ResourceCPU, "100")
	w.Spec.NamespaceSelector = &metav1.LabelSelector{}
	w.Spec.Preemption = &kueue.ClusterQueuePreemption{ReclaimWithinCohort: kueue.PreemptionPolicyAny,
		WithinClusterQueue: kueue.PreemptionPolicyLowerPriority}
	return w
}

func running(ns, name, cq string, gpus int64, at time.Time) *Shape {
	return ShapeOf(kueuetest.MakeWorkload(names{}, ns, name).Queue("lq").In(cq).GPUs(gpus, 1).Created(at).Admitted(at, "ml.p5.48xlarge").Obj())
}

func pending(ns, name string, gpus int64, at time.Time) *Shape {
	return ShapeOf(kueuetest.MakeWorkload(names{}, ns, name).Queue("lq").GPUs(gpus, 1).Created(at).Obj())
}

// evicting is s as Kueue leaves a Workload it just preempted: evicted,
// still holding its quota until its job stops.
func evicting(s *Shape) *Shape {
	s.Conditions = append(s.Conditions,
		metav1.Condition{Type: kueue.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: kueue.WorkloadEvictedByPreemption},
		metav1.Condition{Type: kueue.WorkloadPreempted, Status: metav1.ConditionTrue, Reason: kueue.InCohortReclamationReason})
	return s
}

func cluster(cqs []*kueue.ClusterQueue, wls ...*Shape) Cluster {
	c := Cluster{Flavors: []*kueue.ResourceFlavor{flavor()}, ClusterQueues: cqs, Workloads: wls}
	for _, cq := range cqs {
		c.LocalQueues = append(c.LocalQueues, kueuetest.MakeLocalQueue(cq.Name, "lq", cq.Name))
		c.Namespaces = append(c.Namespaces, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cq.Name}})
	}
	return c
}

// stopLocalQueue gives the LocalQueue of namespace ns a stop policy.
func stopLocalQueue(c Cluster, ns string, policy kueue.StopPolicy) Cluster {
	for _, lq := range c.LocalQueues {
		if lq.Namespace == ns {
			lq.Spec.StopPolicy = ptr.To(policy)
		}
	}
	return c
}

func fates(r *Result) map[string]Fate {
	out := map[string]Fate{}
	for k, o := range r.Workloads {
		out[k] = o.Fate
	}
	return out
}

func TestKueueSchedulesTheCopy(t *testing.T) {
	tests := map[string]struct {
		cluster Cluster
		want    map[string]Fate
	}{
		"a lender reclaims what it lent": {
			cluster: cluster([]*kueue.ClusterQueue{queue("a", 8).Obj(), queue("b", 8).Obj()},
				running("b", "b1", "b", 8, t0), running("b", "b2", "b", 8, t0.Add(time.Minute)),
				pending("a", "a1", 8, t0.Add(2*time.Minute))),
			want: map[string]Fate{"b/b1": StaysAdmitted, "b/b2": Preempted, "a/a1": Admitted},
		},
		"idle quota admits what waits": {
			cluster: cluster([]*kueue.ClusterQueue{queue("a", 8).Obj(), queue("b", 16).Obj()},
				running("a", "a1", "a", 8, t0), pending("a", "a2", 8, t0.Add(time.Minute)), pending("a", "a3", 16, t0.Add(2*time.Minute))),
			want: map[string]Fate{"a/a1": StaysAdmitted, "a/a2": Admitted, "a/a3": StaysPending},
		},
		"the last head fits": {
			cluster: cluster([]*kueue.ClusterQueue{queue("a", 8).Obj(), queue("b", 16).Obj()},
				running("a", "a1", "a", 8, t0), pending("a", "a2", 8, t0.Add(time.Minute))),
			want: map[string]Fate{"a/a1": StaysAdmitted, "a/a2": Admitted},
		},
		"an eviction under way completes, and what waited for it is admitted": {
			cluster: cluster([]*kueue.ClusterQueue{queue("a", 8).Obj(), queue("b", 8).Obj()},
				running("b", "b1", "b", 8, t0), evicting(running("b", "b2", "b", 8, t0.Add(time.Minute))),
				pending("a", "a1", 8, t0.Add(2*time.Minute))),
			want: map[string]Fate{"b/b1": StaysAdmitted, "b/b2": Preempted, "a/a1": Admitted},
		},
		"a task in a stopped LocalQueue waits, and reclaims nothing": {
			cluster: stopLocalQueue(cluster([]*kueue.ClusterQueue{queue("a", 8).Obj(), queue("b", 8).Obj()},
				running("b", "b1", "b", 8, t0), running("b", "b2", "b", 8, t0.Add(time.Minute)),
				pending("a", "a1", 8, t0.Add(2*time.Minute))), "a", kueue.Hold),
			want: map[string]Fate{"b/b1": StaysAdmitted, "b/b2": StaysAdmitted, "a/a1": StaysPending},
		},
		"a queue that does not lend keeps its quota": {
			cluster: cluster([]*kueue.ClusterQueue{queue("a", 8).Obj(), kueuetest.MakeClusterQueue("b").Cohort("pool").Nominal(8, ptr.To[int64](0)).Quota("ml.p5.48xlarge", corev1.ResourceCPU, "100").Obj()},
				running("a", "a1", "a", 8, t0), pending("a", "a2", 8, t0.Add(time.Minute))),
			want: map[string]Fate{"a/a1": StaysAdmitted, "a/a2": StaysPending},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var (
				r    *Result
				err  error
				done = make(chan struct{})
			)
			go func() {
				defer close(done)
				r, err = Simulate(context.Background(), tc.cluster)
			}()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("the preview never returned")
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, fates(r)); diff != "" {
				t.Errorf("fates (-want +got):\n%s", diff)
			}
		})
	}
}

// A quota cut alone preempts nothing in Kueue, with or without fair
// sharing: it takes as much capacity from the cohort as it makes the team
// borrow, so a waiting task finds no more room than before. Turning on
// preemption in a team does: its waiting task of a higher class then
// preempts its own running one of a lower class.
func TestWhatAChangeLetsKueuePreempt(t *testing.T) {
	fs := &config.FairSharing{PreemptionStrategies: []config.PreemptionStrategy{config.LessThanOrEqualToFinalShare, config.LessThanInitialShare}}
	low := func(s *Shape) *Shape { s.Priority = ptr.To[int32](10); return s }
	high := func(s *Shape) *Shape { s.Priority = ptr.To[int32](90); return s }
	workloads := func() []*Shape {
		return []*Shape{low(running("a", "a1", "a", 8, t0)), low(running("a", "a2", "a", 8, t0.Add(time.Minute))),
			low(running("b", "b1", "b", 8, t0.Add(2*time.Minute))), high(pending("b", "b2", 8, t0.Add(3*time.Minute)))}
	}
	never := func(w *kueuetest.ClusterQueueWrapper) *kueuetest.ClusterQueueWrapper {
		w.Spec.Preemption.WithinClusterQueue = kueue.PreemptionPolicyNever
		return w
	}
	for name, tc := range map[string]struct {
		a, b *kueue.ClusterQueue
		want map[string]Fate
	}{
		"as it is": {queue("a", 16).Obj(), never(queue("b", 8)).Obj(),
			map[string]Fate{"a/a1": StaysAdmitted, "a/a2": StaysAdmitted, "b/b1": StaysAdmitted, "b/b2": StaysPending}},
		"a's quota cut to 8": {queue("a", 8).Obj(), never(queue("b", 8)).Obj(),
			map[string]Fate{"a/a1": StaysAdmitted, "a/a2": StaysAdmitted, "b/b1": StaysAdmitted, "b/b2": StaysPending}},
		"a's quota cut to 4": {queue("a", 4).Obj(), never(queue("b", 8)).Obj(),
			map[string]Fate{"a/a1": StaysAdmitted, "a/a2": StaysAdmitted, "b/b1": StaysAdmitted, "b/b2": StaysPending}},
		"b preempts lower priority": {queue("a", 16).Obj(), queue("b", 8).Obj(),
			map[string]Fate{"a/a1": StaysAdmitted, "a/a2": StaysAdmitted, "b/b1": Preempted, "b/b2": Admitted}},
	} {
		t.Run(name, func(t *testing.T) {
			c := cluster([]*kueue.ClusterQueue{tc.a, tc.b}, workloads()...)
			c.FairSharing = fs
			r, err := Simulate(context.Background(), c)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, fates(r)); diff != "" {
				t.Errorf("fates (-want +got):\n%s", diff)
			}
		})
	}
}

// The preview ends when no queue has a head left, however its last cycle
// went: the last head admitted, a queue Kueue keeps inactive (a flavor
// missing), a Workload in a namespace the copy lacks. It ran forever after
// admitting the last head (Kueue's queue holds it in flight until its
// Workload's update comes back).
func TestThePreviewEnds(t *testing.T) {
	missingFlavor := queue("b", 8).Obj()
	missingFlavor.Spec.ResourceGroups[0].Flavors[0].Name = "ml.none"
	noNamespace := cluster([]*kueue.ClusterQueue{queue("a", 8).Obj()}, pending("a", "a1", 8, t0))
	noNamespace.Namespaces = nil
	for name, tc := range map[string]struct {
		cluster Cluster
		want    map[string]Fate
	}{
		"the one pending job is admitted": {cluster([]*kueue.ClusterQueue{queue("a", 8).Obj()}, pending("a", "a1", 8, t0)),
			map[string]Fate{"a/a1": Admitted}},
		"every pending job is admitted": {cluster([]*kueue.ClusterQueue{queue("a", 8).Obj()}, pending("a", "a1", 4, t0), pending("a", "a2", 4, t0.Add(time.Minute))),
			map[string]Fate{"a/a1": Admitted, "a/a2": Admitted}},
		"a queue with a missing flavor": {cluster([]*kueue.ClusterQueue{missingFlavor}, pending("b", "b1", 8, t0)),
			map[string]Fate{"b/b1": StaysPending}},
		"a namespace the copy lacks": {noNamespace, map[string]Fate{"a/a1": StaysPending}},
	} {
		t.Run(name, func(t *testing.T) {
			done := make(chan map[string]Fate, 1)
			go func() {
				r, err := Simulate(context.Background(), tc.cluster)
				if err != nil {
					t.Error(err)
					done <- nil
					return
				}
				done <- fates(r)
			}()
			select {
			case got := <-done:
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("fates (-want +got):\n%s", diff)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the preview never ended")
			}
		})
	}
}

// Runs sharing a Limit stop, once its time is up, at the furthest cycle
// any of them had reached, so neither is compared at a cycle the other
// had not run.
func TestLimitStopsRunsAtTheSameCycle(t *testing.T) {
	l := NewLimit(time.Hour)
	if l.stop(3, time.Millisecond) || l.stop(1, time.Millisecond) {
		t.Fatal("a run stopped before the limit's time was up")
	}
	l.deadline = time.Now() // the time is up
	for _, tc := range []struct {
		cycles int
		want   bool
	}{{1, false}, {2, false}, {3, true}, {4, true}} {
		if got := l.stop(tc.cycles, time.Millisecond); got != tc.want {
			t.Errorf("stop(%d) = %v, want %v (stopAt %d)", tc.cycles, got, tc.want, l.stopAt)
		}
	}
	var none *Limit
	if none.stop(1_000, time.Hour) {
		t.Error("a run without a limit stopped")
	}
}

// A cycle cannot be cut short, so a Limit does not let a run start one
// that, as long as the longest cycle any run sharing it took, would end
// past its deadline; but every run does at least one.
func TestLimitDoesNotStartACycleItExpectsToOverrun(t *testing.T) {
	for _, tc := range []struct {
		name    string
		left    time.Duration // until the deadline
		cycles  int
		longest time.Duration // the cycles so far, the longest
		want    bool
	}{
		{"room for another cycle", time.Hour, 2, time.Second, false},
		{"another cycle would overrun", time.Second, 2, time.Minute, true},
		{"no cycle yet, whatever the time", -time.Second, 0, 0, false},
		{"one cycle done, out of time", -time.Second, 1, time.Millisecond, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := NewLimit(tc.left)
			if got := l.stop(tc.cycles, tc.longest); got != tc.want {
				t.Errorf("stop(%d, %s) with %s left = %v, want %v", tc.cycles, tc.longest, tc.left, got, tc.want)
			}
		})
	}
	// The longest cycle of one run counts for the others.
	l := NewLimit(time.Hour)
	if l.stop(1, 10*time.Minute) {
		t.Fatal("a run stopped with 50 minutes to spare after a cycle of 10")
	}
	l.deadline = time.Now().Add(5 * time.Minute)
	if !l.stop(1, time.Millisecond) {
		t.Error("a run of short cycles started one more, which the other run's 10 minutes say would end past the deadline")
	}
}

// A run whose time is up before it starts still runs one cycle, then
// stops: the heads Kueue has not tried are pending and uncertain, and what
// the cycle did stands.
func TestARunCutShort(t *testing.T) {
	c := cluster([]*kueue.ClusterQueue{queue("a", 8).Obj()},
		pending("a", "a1", 4, t0), pending("a", "a2", 4, t0.Add(time.Minute)), pending("a", "a3", 4, t0.Add(2*time.Minute)))
	c.Limit = NewLimit(0)
	r, err := Simulate(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Cut || r.Cycles != 1 {
		t.Errorf("cut %v after %d cycles, want cut after 1", r.Cut, r.Cycles)
	}
	want := map[string]Fate{"a/a1": Admitted, "a/a2": StaysPending, "a/a3": StaysPending}
	if diff := cmp.Diff(want, fates(r)); diff != "" {
		t.Errorf("fates (-want +got):\n%s", diff)
	}
	for _, key := range []string{"a/a2", "a/a3"} {
		if r.Workloads[key].Uncertain == "" {
			t.Errorf("%s, not tried yet, is not named uncertain", key)
		}
	}
	if r.Workloads["a/a1"].Uncertain != "" {
		t.Errorf("a/a1, admitted in the cycle run, is named uncertain: %s", r.Workloads["a/a1"].Uncertain)
	}
}

// A StrictFIFO queue (as Kueue's admission fair sharing example makes it)
// keeps a head that does not fit at its front, and Kueue tries it every
// cycle: its tasks stay pending in their order, with Kueue's reason, and
// are not named uncertain.
func TestAStrictFIFOQueueWaitsBehindItsHead(t *testing.T) {
	strict := queue("a", 8).Obj()
	strict.Spec.QueueingStrategy = kueue.StrictFIFO
	r, err := Simulate(context.Background(), cluster([]*kueue.ClusterQueue{strict},
		running("a", "a1", "a", 8, t0), pending("a", "a2", 4, t0.Add(time.Minute)), pending("a", "a3", 4, t0.Add(2*time.Minute))))
	if err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		Fate      Fate
		Position  int
		Uncertain string
	}
	got := map[string]outcome{}
	for k, o := range r.Workloads {
		got[k] = outcome{o.Fate, o.Position, o.Uncertain}
	}
	want := map[string]outcome{"a/a1": {StaysAdmitted, 0, ""}, "a/a2": {StaysPending, 1, ""}, "a/a3": {StaysPending, 2, ""}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("outcomes (-want +got):\n%s", diff)
	}
	if m := r.Workloads["a/a2"].Message; m == "" {
		t.Error("the head has no reason from Kueue")
	}
}

// Under Kueue's concurrent admission a job's Variants (one per flavor) are
// Kueue's attempts at it: the copy holds the job's own Workload, which
// bears its admitted Variant's admission, once.
func TestTheCopyHoldsAJobNotItsVariants(t *testing.T) {
	parent := kueuetest.MakeWorkload(names{}, "a", "job-x").WithUID("uid-x").Queue("lq").In("a").GPUs(2, 1).Created(t0).Admitted(t0, "ml.p5.48xlarge").Obj()
	variant := kueuetest.MakeWorkload(names{}, "a", "job-x-variant-spot").Queue("lq").In("a").GPUs(2, 1).Created(t0).
		VariantOf(parent, "ml.p5.48xlarge").Admitted(t0, "ml.p5.48xlarge").Obj()
	if ShapeOf(parent) == nil || ShapeOf(variant) != nil {
		t.Errorf("shapes of the job %v and of its Variant %v: want the job's only", ShapeOf(parent), ShapeOf(variant))
	}
}

// Kueue counts a Workload's resources after its configuration's
// resources.transformations and excludeResourcePrefixes, so the copy does
// too. As Kueue's HAMi example has it: a pod asking for 2 vGPUs of 30 cores
// each counts 60 nvidia.com/total-gpucores, which the queue covers (it does
// not cover nvidia.com/gpucores); the EFA devices it asks for count in no
// queue. Without them the copy found a resource the queue does not cover
// and kept the job pending, where Kueue admits it.
func TestTheCopyCountsResourcesAsKueuesConfigurationSays(t *testing.T) {
	hami := kueuetest.MakeClusterQueue("hami").Quota("hami-flavor", "nvidia.com/gpu", "4").
		Quota("hami-flavor", "nvidia.com/total-gpucores", "100").Quota("hami-flavor", "nvidia.com/total-gpumem", "4096")
	hami.Spec.NamespaceSelector = &metav1.LabelSelector{}
	vgpu := func(name string, cores string, at time.Time) *Shape {
		limits := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("2"), "nvidia.com/gpucores": resource.MustParse(cores),
			"nvidia.com/gpumem": resource.MustParse("1024"), "vpc.amazonaws.com/efa": resource.MustParse("1")}
		return ShapeOf(kueuetest.MakeWorkload(names{}, "hami", name).Queue("lq").Created(at).
			PodSpec("main", 1, corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{Limits: limits}}}}).Obj())
	}
	resources := &config.Resources{
		ExcludeResourcePrefixes: []string{"vpc.amazonaws.com/efa"},
		Transformations: []config.ResourceTransformation{
			{Input: "nvidia.com/gpucores", Strategy: ptr.To(config.Replace), MultiplyBy: "nvidia.com/gpu",
				Outputs: corev1.ResourceList{"nvidia.com/total-gpucores": resource.MustParse("1")}},
			{Input: "nvidia.com/gpumem", Strategy: ptr.To(config.Replace), MultiplyBy: "nvidia.com/gpu",
				Outputs: corev1.ResourceList{"nvidia.com/total-gpumem": resource.MustParse("1")}},
		},
	}
	c := cluster([]*kueue.ClusterQueue{hami.Obj()}, vgpu("fits", "30", t0), vgpu("too-many-cores", "30", t0.Add(time.Minute)))
	c.Flavors = []*kueue.ResourceFlavor{{ObjectMeta: metav1.ObjectMeta{Name: "hami-flavor"}}}
	c.Resources = resources
	r, err := Simulate(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	// 60 of 100 cores, then 120: the second waits for cores, not for GPUs.
	want := map[string]Fate{"hami/fits": Admitted, "hami/too-many-cores": StaysPending}
	if diff := cmp.Diff(want, fates(r)); diff != "" {
		t.Errorf("fates (-want +got):\n%s", diff)
	}
}

// Kueue charges the devices a pod asks for through Dynamic Resource
// Allocation (resource claims from a ResourceClaimTemplate) from its
// deviceClassMappings, which the copy does not have: a waiting job with
// claims that the copy admits is named uncertain, never promised, and so
// is what it admits beside it in the same cohort tree.
func TestAJobWithResourceClaimsIsUncertain(t *testing.T) {
	withClaims := kueuetest.MakeWorkload(names{}, "a", "dra").Queue("lq").Created(t0).PodSpec("main", 1, corev1.PodSpec{
		Containers: []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}, Claims: []corev1.ResourceClaim{{Name: "gpu"}}}}},
		ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("single-gpu")}},
	}).Obj()
	r, err := Simulate(context.Background(), cluster([]*kueue.ClusterQueue{queue("a", 8).Obj()},
		ShapeOf(withClaims), pending("a", "plain", 1, t0.Add(time.Minute))))
	if err != nil {
		t.Fatal(err)
	}
	if o := r.Workloads["a/dra"]; o.Fate != Admitted || !strings.Contains(o.Uncertain, "Dynamic Resource Allocation") {
		t.Errorf("the job with claims: %+v, want admitted and named uncertain for its claims", o)
	}
	if o := r.Workloads["a/plain"]; o.Fate != Admitted || !strings.Contains(o.Uncertain, "admitted beside it") {
		t.Errorf("the job admitted beside it: %+v, want admitted and named uncertain (the copy did not count the claims)", o)
	}
	// Without a job with claims, nothing is uncertain.
	r, err = Simulate(context.Background(), cluster([]*kueue.ClusterQueue{queue("a", 8).Obj()}, pending("a", "plain", 1, t0.Add(time.Minute))))
	if err != nil {
		t.Fatal(err)
	}
	if o := r.Workloads["a/plain"]; o.Fate != Admitted || o.Uncertain != "" {
		t.Errorf("the job alone: %+v, want admitted and certain", o)
	}
}
