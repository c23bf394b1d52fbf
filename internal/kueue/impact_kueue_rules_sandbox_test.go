package kueue_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/kueue"
	"github.com/openquota/console/internal/testenv"
)

// A ClusterQueue that admits only the namespaces its namespaceSelector
// selects, with LocalQueues in one it selects and one it does not, as
// platform teams write them: Kueue keeps a job of the other namespace
// pending ("doesn't match ClusterQueue selector"). The preview of a quota
// raise claimed that job admitted, and the what-if asked in the first
// LocalQueue by name, the one whose jobs never start; both follow the
// selector now.
func TestThePreviewAndTheWhatIfFollowTheNamespaceSelector(t *testing.T) {
	c := clients(t)
	s := isolated(t)
	ctx := context.Background()
	id := rand.String(5)
	flavor, queue, label := "sel-flavor-"+id, "sel-queue-"+id, "sel-"+id
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	createFlavor(t, c, flavor)
	cq := cpuQueue(queue, flavor, "", "1")
	cq.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{label: "yes"}}
	createQueue(t, c, cq)
	// The namespace it does not select comes first by name.
	outside := testenv.Namespace(t, c.Kube, s.NamespacePrefix+"a-outside")
	inside := testenv.Namespace(t, c.Kube, s.NamespacePrefix+"b-inside")
	_, err := c.Kube.CoreV1().Namespaces().Patch(ctx, inside, types.MergePatchType, []byte(`{"metadata":{"labels":{"`+label+`":"yes"}}}`), metav1.PatchOptions{})
	must("labelling the namespace", err)
	for _, ns := range []string{outside, inside} {
		_, err = c.Kueue.KueueV1beta2().LocalQueues(ns).Create(ctx, &kueuev1beta2.LocalQueue{ObjectMeta: metav1.ObjectMeta{Name: "lq", Namespace: ns},
			Spec: kueuev1beta2.LocalQueueSpec{ClusterQueue: kueuev1beta2.ClusterQueueReference(queue)}}, metav1.CreateOptions{})
		must("creating the LocalQueue in "+ns, err)
	}
	testenv.WorkloadOf(t, c.Kueue, testenv.Submit(t, c.Kube, testenv.Job{Namespace: inside, LocalQueue: "lq", Name: "in-1"}), "admitted", quotaReserved(metav1.ConditionTrue, ""))
	testenv.WorkloadOf(t, c.Kueue, testenv.Submit(t, c.Kube, testenv.Job{Namespace: outside, LocalQueue: "lq", Name: "out-1"}),
		"pending outside the selector", quotaReserved(metav1.ConditionFalse, "selector"))
	time.Sleep(1100 * time.Millisecond) // Kueue orders equal jobs by creation, in seconds: out-1 first
	testenv.WorkloadOf(t, c.Kueue, testenv.Submit(t, c.Kube, testenv.Job{Namespace: inside, LocalQueue: "lq", Name: "in-2"}),
		"pending for quota", quotaReserved(metav1.ConditionFalse, ""))

	cache := startCache(t, c, s)
	raised := cq.DeepCopy()
	raised.Spec.ResourceGroups[0].Flavors[0].Resources[0].NominalQuota = resource.MustParse("2")
	im, err := cache.Impact(ctx, s, kueue.SchedulerConfig{}, kueue.ImpactChange{What: "a raise", Queues: map[string]*kueuev1beta2.ClusterQueue{queue: raised}})
	must("the preview", err)
	var admitted []string
	for _, task := range im.Admitted {
		admitted = append(admitted, task.Namespace+"/"+task.Name)
	}
	if len(admitted) != 1 || !strings.HasPrefix(admitted[0], inside+"/") {
		t.Errorf("the raise admits %v, want the second job of %s only (Kueue keeps %s's pending)", admitted, inside, outside)
	}

	noShapes := func(string) (domain.InstanceShape, bool) { return domain.InstanceShape{}, false }
	a, err := cache.WhatIf(ctx, s, kueue.SchedulerConfig{}, domain.WhatIf{Team: queue,
		Rows: []domain.WhatIfRow{{InstanceType: flavor, Pods: 1, CPUMilli: 1000, MemoryMiB: 1024}}}, noShapes)
	must("the what-if", err)
	if a.LocalQueue != inside+"/lq" || a.Admitted {
		t.Errorf("the what-if asked in %s (admitted %v), want %s/lq, where it waits behind in-2", a.LocalQueue, a.Admitted, inside)
	}
}

// quotaReserved is whether a Workload's QuotaReserved condition has status
// want and a message containing message.
func quotaReserved(want metav1.ConditionStatus, message string) func(*kueuev1beta2.Workload) bool {
	return func(w *kueuev1beta2.Workload) bool {
		cond := apimeta.FindStatusCondition(w.Status.Conditions, kueuev1beta2.WorkloadQuotaReserved)
		return cond != nil && cond.Status == want && strings.Contains(cond.Message, message)
	}
}

// createFlavor makes a ResourceFlavor without node labels, deleted when
// the test ends.
func createFlavor(t *testing.T, c testClients, name string) {
	t.Helper()
	if _, err := c.Kueue.KueueV1beta2().ResourceFlavors().Create(context.Background(), &kueuev1beta2.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Kueue.KueueV1beta2().ResourceFlavors().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// createQueue makes cq, deleted when the test ends.
func createQueue(t *testing.T, c testClients, cq *kueuev1beta2.ClusterQueue) {
	t.Helper()
	if _, err := c.Kueue.KueueV1beta2().ClusterQueues().Create(context.Background(), cq, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Kueue.KueueV1beta2().ClusterQueues().Delete(context.Background(), cq.Name, metav1.DeleteOptions{})
	})
}

// cpuQueue is a ClusterQueue of cpu vCPU (and memory) on flavor in cohort,
// admitting every namespace.
func cpuQueue(name, flavor, cohort, cpu string) *kueuev1beta2.ClusterQueue {
	return &kueuev1beta2.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: kueuev1beta2.ClusterQueueSpec{NamespaceSelector: &metav1.LabelSelector{}, CohortName: kueuev1beta2.CohortReference(cohort),
			ResourceGroups: []kueuev1beta2.ResourceGroup{{
				CoveredResources: []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory},
				Flavors: []kueuev1beta2.FlavorQuotas{{Name: kueuev1beta2.ResourceFlavorReference(flavor), Resources: []kueuev1beta2.ResourceQuota{
					{Name: corev1.ResourceCPU, NominalQuota: resource.MustParse(cpu)}, {Name: corev1.ResourceMemory, NominalQuota: resource.MustParse("10Gi")}}}},
			}}}}
}

// A borrowing queue moved to another cohort leaves room in its old one,
// where a task waits: Kueue looks again at once at the waiting tasks of
// the tree a queue joins, not of the one it leaves, so that task starts at
// the next change there, seconds or much later. The preview names it
// uncertain, with why, instead of admitted.
func TestAQueueMovingOutLeavesItsOldTreesTasksUncertain(t *testing.T) {
	c := clients(t)
	s := isolated(t)
	ctx := context.Background()
	id := rand.String(5)
	flavor, from, to := "move-flavor-"+id, "move-from-"+id, "move-to-"+id
	qa, qb := "move-a-"+id, "move-b-"+id
	createFlavor(t, c, flavor)
	ns := testenv.Namespace(t, c.Kube, s.NamespacePrefix+"move")
	for _, q := range []*kueuev1beta2.ClusterQueue{cpuQueue(qa, flavor, from, "0"), cpuQueue(qb, flavor, from, "2")} {
		createQueue(t, c, q)
		if _, err := c.Kueue.KueueV1beta2().LocalQueues(ns).Create(ctx, &kueuev1beta2.LocalQueue{ObjectMeta: metav1.ObjectMeta{Name: q.Name, Namespace: ns},
			Spec: kueuev1beta2.LocalQueueSpec{ClusterQueue: kueuev1beta2.ClusterQueueReference(q.Name)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// a-1 borrows b's second vCPU; b-1 takes the first; b-2 waits.
	testenv.WorkloadOf(t, c.Kueue, testenv.Submit(t, c.Kube, testenv.Job{Namespace: ns, LocalQueue: qa, Name: "a-1"}), "admitted", quotaReserved(metav1.ConditionTrue, ""))
	testenv.WorkloadOf(t, c.Kueue, testenv.Submit(t, c.Kube, testenv.Job{Namespace: ns, LocalQueue: qb, Name: "b-1"}), "admitted", quotaReserved(metav1.ConditionTrue, ""))
	testenv.WorkloadOf(t, c.Kueue, testenv.Submit(t, c.Kube, testenv.Job{Namespace: ns, LocalQueue: qb, Name: "b-2"}), "pending", quotaReserved(metav1.ConditionFalse, ""))

	cache := startCache(t, c, s)
	live, err := c.Kueue.KueueV1beta2().ClusterQueues().Get(ctx, qa, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	moved := live.DeepCopy()
	moved.Spec.CohortName = kueuev1beta2.CohortReference(to)
	im, err := cache.Impact(ctx, s, kueue.SchedulerConfig{}, kueue.ImpactChange{What: "a move", Queues: map[string]*kueuev1beta2.ClusterQueue{qa: moved}})
	if err != nil {
		t.Fatal(err)
	}
	var uncertain, admitted []string
	for _, task := range im.Uncertain {
		if strings.Contains(task.Why, "cohort tree") {
			uncertain = append(uncertain, task.Name)
		}
	}
	for _, task := range im.Admitted {
		admitted = append(admitted, task.Name)
	}
	if len(uncertain) != 1 || !strings.Contains(uncertain[0], "b-2") || len(admitted) != 0 {
		t.Errorf("moving %s out: uncertain for its old tree %v, admitted %v; want b-2 uncertain and none admitted", qa, uncertain, admitted)
	}
}
