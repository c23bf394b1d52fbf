package kueue_test

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/kueue"
	"github.com/openquota/console/internal/testenv"
	"github.com/openquota/console/sandbox"
	"github.com/openquota/console/sandbox/sandboxtest"
)

type testClients = testenv.Clients

func clients(t *testing.T) testClients {
	t.Helper()
	return testenv.SandboxClients(t, sandboxtest.Env(t))
}

// isolated gives each test its own namespace prefix and cohort, so tests
// sharing the sandbox never borrow from each other.
func isolated(t *testing.T) domain.Settings {
	id := rand.String(5)
	return domain.Settings{NamespacePrefix: "t" + id + "-", Cohort: "cohort-" + id}
}

func TestCacheOverviewMatchesSandboxFleet(t *testing.T) {
	c := clients(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cache := kueue.NewCache(c.Kube, c.Kueue, domain.DefaultSettings, slog.New(slog.NewTextHandler(io.Discard, nil)))
	cache.Start(ctx)
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return cache.Ready() == nil, nil
	}); err != nil {
		t.Fatalf("cache never ready: %v", cache.Ready())
	}
	nodes, err := cache.Nodes.List(labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]domain.InstanceTypeCapacity{}
	for _, row := range domain.BuildOverview(domain.DefaultSettings, nodes, nil).InstanceTypes {
		got[row.Type] = row
	}
	want := map[string]domain.InstanceTypeCapacity{}
	for _, n := range sandbox.Fleet() {
		row := want[n.Shape.Type]
		row.Type, row.GPUModel = n.Shape.Type, n.Shape.GPUModel
		row.Count++
		if n.NotReady {
			row.NotReady++
		} else {
			row.Ready++
		}
		row.GPUs += n.WholeGPUs()
		row.GPUMemGiB += n.WholeGPUs() * n.Shape.GPUMemGiB
		row.VCPU += n.Shape.VCPU
		row.MemoryGiB += n.Shape.MemoryGiB
		row.Neuron += n.Shape.Neuron
		row.EFA += n.Shape.EFA
		for p, count := range n.Shape.Partitions {
			if row.Partitions == nil {
				row.Partitions = map[string]int64{}
			}
			row.Partitions[p] += count
		}
		want[n.Shape.Type] = row
	}
	// Other tests add nodes of types of their own for a while: the fleet's
	// types are compared.
	maps.DeleteFunc(got, func(typ string, _ domain.InstanceTypeCapacity) bool { _, fleet := want[typ]; return !fleet })
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("overview by instance type (-fleet +cache):\n%s", diff)
	}
}

// startCache runs a cache with settings s until the test ends, and waits
// until it has read the cluster.
func startCache(t *testing.T, c testClients, s domain.Settings) *kueue.Cache {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cache := kueue.NewCache(c.Kube, c.Kueue, s, slog.New(slog.NewTextHandler(io.Discard, nil)))
	cache.Start(ctx)
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return cache.Synced(), nil
	}); err != nil {
		t.Fatal("the cache never synced")
	}
	return cache
}

func applyTeam(t *testing.T, c testClients, s domain.Settings, team domain.Team) {
	t.Helper()
	objs, err := domain.BuildTeam(s, team, domain.LookupShape)
	if err != nil {
		t.Fatal(err)
	}
	if err := (kueue.Applier{Kube: c.Kube, Kueue: c.Kueue}).ApplyTeam(context.Background(), objs); err != nil {
		t.Fatalf("apply team %s: %v", team.Name, err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_ = c.Kube.CoreV1().Namespaces().Delete(ctx, s.Namespace(team.Name), metav1.DeleteOptions{})
		_ = c.Kueue.KueueV1beta2().ClusterQueues().Delete(ctx, s.ClusterQueue(team.Name), metav1.DeleteOptions{})
	})
}

func gpuJob(name string, gpus int64) *batchv1.Job {
	res := corev1.ResourceList{
		domain.ResourceGPU:    *resource.NewQuantity(gpus, resource.DecimalSI),
		corev1.ResourceCPU:    resource.MustParse("1"),
		corev1.ResourceMemory: resource.MustParse("1Gi"),
	}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: batchv1.JobSpec{
			Suspend: ptr.To(true),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "main", Image: "trainer", Resources: corev1.ResourceRequirements{Requests: res, Limits: res}}},
			}},
		},
	}
}

// submit creates a job in the team's LocalQueue and waits for its Workload to be admitted.
func submitAdmitted(t *testing.T, c testClients, s domain.Settings, team string, job *batchv1.Job) *kueuev1beta2.Workload {
	t.Helper()
	ctx := context.Background()
	ns := s.Namespace(team)
	job.Labels = map[string]string{"kueue.x-k8s.io/queue-name": s.LocalQueue(team)}
	if _, err := c.Kube.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var admitted *kueuev1beta2.Workload
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		wls, err := c.Kueue.KueueV1beta2().Workloads(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for i := range wls.Items {
			wl := &wls.Items[i]
			if strings.Contains(wl.Name, job.Name) && wl.Status.Admission != nil {
				admitted = wl
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("job %s/%s was not admitted: %v", ns, job.Name, err)
	}
	return admitted
}

func TestApplyTeamIsAdmittedAndBorrows(t *testing.T) {
	c := clients(t)
	s := isolated(t)
	gpus := func(v int64) *int64 { return &v }
	lender := domain.Team{Name: "lender", Enabled: true, Preemption: domain.PreemptLowerPriority,
		Lending: domain.LendAndBorrow, BorrowLimitPercent: 50,
		Quota: []domain.QuotaInput{{InstanceType: "ml.p5.48xlarge", GPUs: gpus(4)}}}
	borrower := lender
	borrower.Name, borrower.FairShareWeight = "borrower", 10
	borrower.Quota = []domain.QuotaInput{{InstanceType: "ml.p5.48xlarge", GPUs: gpus(2)}}
	applyTeam(t, c, s, lender)
	applyTeam(t, c, s, borrower)

	// What Kueue stored, after its webhooks defaulted and validated it.
	cq, err := c.Kueue.KueueV1beta2().ClusterQueues().Get(context.Background(), s.ClusterQueue("borrower"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cq.Spec.CohortName != kueuev1beta2.CohortReference(s.Cohort) || cq.Spec.FairSharing.Weight.Value() != 10 {
		t.Errorf("stored ClusterQueue: cohort %q weight %v", cq.Spec.CohortName, cq.Spec.FairSharing.Weight)
	}
	if got := cq.Labels[domain.ManagedByLabel]; got != domain.ManagedByValue {
		t.Errorf("managed-by label = %q", got)
	}

	// Within quota: admitted on the team's own flavor.
	wl := submitAdmitted(t, c, s, "borrower", gpuJob("within", 2))
	if got := wl.Status.Admission.PodSetAssignments[0].Flavors[domain.ResourceGPU]; got != "ml.p5.48xlarge" {
		t.Errorf("admitted on flavor %q", got)
	}
	// Beyond its own 2 GPUs: borrows one from the lender (borrow limit 50 % of 2).
	submitAdmitted(t, c, s, "borrower", gpuJob("beyond", 1))
	err = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		cq, err := c.Kueue.KueueV1beta2().ClusterQueues().Get(ctx, s.ClusterQueue("borrower"), metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return borrowedGPUs(cq) == 1, nil
	})
	if err != nil {
		t.Errorf("borrower never showed 1 borrowed GPU in its status: %v", err)
	}
}

func borrowedGPUs(cq *kueuev1beta2.ClusterQueue) int64 {
	var n int64
	for _, f := range cq.Status.FlavorsReservation {
		for _, r := range f.Resources {
			if r.Name == domain.ResourceGPU {
				n += r.Borrowed.Value()
			}
		}
	}
	return n
}

func TestKueueWebhookRejectsNegativeQuota(t *testing.T) {
	c := clients(t)
	s := isolated(t)
	cq := &kueuev1beta2.ClusterQueue{
		ObjectMeta: metav1.ObjectMeta{Name: s.ClusterQueue("negative")},
		Spec: kueuev1beta2.ClusterQueueSpec{ResourceGroups: []kueuev1beta2.ResourceGroup{{
			CoveredResources: []corev1.ResourceName{domain.ResourceGPU},
			Flavors: []kueuev1beta2.FlavorQuotas{{Name: "ml.p5.48xlarge", Resources: []kueuev1beta2.ResourceQuota{
				{Name: domain.ResourceGPU, NominalQuota: resource.MustParse("-1")},
			}}},
		}}},
	}
	_, err := c.Kueue.KueueV1beta2().ClusterQueues().Create(context.Background(), cq, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err == nil {
		t.Fatal("a negative nominal quota was accepted: Kueue's validation is not active")
	}
	if !strings.Contains(err.Error(), "nominalQuota") {
		t.Errorf("rejection does not name the field: %v", err)
	}
}

func TestApplyIsIdempotent(t *testing.T) {
	c := clients(t)
	s := isolated(t)
	team := domain.Team{Name: "again", Enabled: true, Lending: domain.DontLend, Preemption: domain.PreemptNever,
		Quota: []domain.QuotaInput{{InstanceType: "ml.g5.2xlarge", Count: ptr.To[int64](1)}}}
	applyTeam(t, c, s, team)
	before, err := c.Kueue.KueueV1beta2().ClusterQueues().Get(context.Background(), s.ClusterQueue("again"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	applyTeam(t, c, s, team)
	after, err := c.Kueue.KueueV1beta2().ClusterQueues().Get(context.Background(), s.ClusterQueue("again"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if before.Generation != after.Generation {
		t.Errorf("re-applying the same team changed the spec: generation %d -> %d", before.Generation, after.Generation)
	}
	if diff := cmp.Diff(before.Spec, after.Spec); diff != "" {
		t.Errorf("spec changed (-before +after):\n%s", diff)
	}
}
