// Package kueuetest builds Kueue objects for tests and benchmarks, in the
// style of Kueue's pkg/util/testing wrappers: the Workloads, ClusterQueues
// and clusters that the console's tests share. It must not import the
// console's packages (the domain's own tests use it).
package kueuetest

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// ClusterNames are the naming rules of a synthetic cluster (domain.Settings
// has them).
type ClusterNames interface {
	Namespace(team string) string
	ClusterQueue(team string) string
	LocalQueue(team string) string
}

// Objects are a cluster's Kueue objects.
type Objects struct {
	ClusterQueues []*kueuev1beta2.ClusterQueue
	LocalQueues   []*kueuev1beta2.LocalQueue
	Workloads     []*kueuev1beta2.Workload
	Classes       []*kueuev1beta2.WorkloadPriorityClass
}

// Cluster returns a cohort of teams ClusterQueues (8 GPUs each on
// ml.p5.48xlarge) and workloads spread over them: a third running, a third
// pending, a sixth preempted, a sixth finished, over four priority classes.
func Cluster(s ClusterNames, cohort string, teams, workloads int, now time.Time) Objects {
	var in Objects
	classes := []string{"inference", "training", "experimentation", "batch"}
	for i, c := range classes {
		in.Classes = append(in.Classes, &kueuev1beta2.WorkloadPriorityClass{
			ObjectMeta: metav1.ObjectMeta{Name: c}, Value: int32(90 - 30*i)})
	}
	gpu := func(n int64) resource.Quantity { return *resource.NewQuantity(n, resource.DecimalSI) }
	for t := 0; t < teams; t++ {
		team := fmt.Sprintf("team-%03d", t)
		cq := &kueuev1beta2.ClusterQueue{
			// The console's labels, as on the queues it creates.
			ObjectMeta: metav1.ObjectMeta{Name: s.ClusterQueue(team), Labels: map[string]string{
				"app.kubernetes.io/managed-by": "quota-console", "quota-console.openquota.dev/team": team}},
			Spec: kueuev1beta2.ClusterQueueSpec{CohortName: kueuev1beta2.CohortReference(cohort),
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: s.Namespace(team)}},
				ResourceGroups: []kueuev1beta2.ResourceGroup{{
					CoveredResources: []corev1.ResourceName{GPU},
					Flavors: []kueuev1beta2.FlavorQuotas{{Name: "ml.p5.48xlarge", Resources: []kueuev1beta2.ResourceQuota{
						{Name: GPU, NominalQuota: gpu(8)}}}},
				}}},
			Status: kueuev1beta2.ClusterQueueStatus{FlavorsUsage: []kueuev1beta2.FlavorUsage{{Name: "ml.p5.48xlarge",
				Resources: []kueuev1beta2.ResourceUsage{{Name: GPU, Total: gpu(int64(t % 12)), Borrowed: gpu(int64(max(0, t%12-8)))}}}}},
		}
		in.ClusterQueues = append(in.ClusterQueues, cq)
		in.LocalQueues = append(in.LocalQueues, &kueuev1beta2.LocalQueue{
			ObjectMeta: metav1.ObjectMeta{Name: s.LocalQueue(team), Namespace: s.Namespace(team)},
			Spec:       kueuev1beta2.LocalQueueSpec{ClusterQueue: kueuev1beta2.ClusterQueueReference(cq.Name)},
		})
	}
	for i := 0; i < workloads; i++ {
		team := fmt.Sprintf("team-%03d", i%teams)
		created := now.Add(-time.Duration(i%(7*24*60)) * time.Minute)
		wl := &kueuev1beta2.Workload{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("job-%06d", i), Namespace: s.Namespace(team),
				UID: types.UID(fmt.Sprintf("uid-%06d", i)), CreationTimestamp: metav1.NewTime(created)},
			Spec: kueuev1beta2.WorkloadSpec{
				QueueName:        kueuev1beta2.LocalQueueName(s.LocalQueue(team)),
				PriorityClassRef: &kueuev1beta2.PriorityClassRef{Group: "kueue.x-k8s.io", Kind: "WorkloadPriorityClass", Name: classes[i%len(classes)]},
				PodSets: []kueuev1beta2.PodSet{{Name: "main", Count: 1, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{GPU: gpu(int64(1 + i%4))}}}}}}}},
			},
		}
		admitted := metav1.NewTime(created.Add(time.Duration(i%600) * time.Second))
		cond := func(typ, reason string, at metav1.Time, msg string) metav1.Condition {
			return metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: reason, LastTransitionTime: at, Message: msg}
		}
		admit := func() {
			wl.Status.Admission = &kueuev1beta2.Admission{ClusterQueue: kueuev1beta2.ClusterQueueReference(s.ClusterQueue(team)),
				PodSetAssignments: []kueuev1beta2.PodSetAssignment{{Name: "main", Flavors: map[corev1.ResourceName]kueuev1beta2.ResourceFlavorReference{GPU: "ml.p5.48xlarge"}}}}
			wl.Status.Conditions = append(wl.Status.Conditions, cond("QuotaReserved", "QuotaReserved", admitted, ""), cond("Admitted", "Admitted", admitted, ""))
		}
		switch i % 6 {
		case 0, 1:
			admit()
		case 2, 3:
			wl.Status.Conditions = []metav1.Condition{{Type: "QuotaReserved", Status: metav1.ConditionFalse, Reason: "Pending", LastTransitionTime: metav1.NewTime(created),
				Message: "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor ml.p5.48xlarge, 2 more needed"}}
		case 4:
			wl.Status.Conditions = []metav1.Condition{
				cond("Evicted", "Preempted", admitted, "Preempted to accommodate a workload due to reclamation within the cohort; preemptor path: /shared/x"),
				cond("Preempted", "InCohortReclamation", admitted, "Preempted to accommodate a workload due to reclamation within the cohort"),
				{Type: "QuotaReserved", Status: metav1.ConditionFalse, Reason: "Pending", LastTransitionTime: admitted},
			}
		case 5:
			admit()
			wl.Status.Conditions = append(wl.Status.Conditions, cond("Finished", "Succeeded", metav1.NewTime(admitted.Add(30*time.Minute)), "Job finished successfully"))
		}
		in.Workloads = append(in.Workloads, wl)
	}
	return in
}

// AddQuickStart adds the queues of Kueue's getting-started example as
// kubectl writes them: ClusterQueue "cluster-queue" of 9 vCPU and 36 GiB on
// "default-flavor" (a flavor that is no instance type), fed by LocalQueue
// "user-queue" in namespace default.
func (o *Objects) AddQuickStart() {
	o.ClusterQueues = append(o.ClusterQueues, MakeClusterQueue("cluster-queue").
		Quota("default-flavor", corev1.ResourceCPU, "9").Quota("default-flavor", corev1.ResourceMemory, "36Gi").
		WrittenBy("kubectl-client-side-apply").Obj())
	o.LocalQueues = append(o.LocalQueues, MakeLocalQueue("default", "user-queue", "cluster-queue"))
}
