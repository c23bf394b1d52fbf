package app_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/testenv"
)

// The what-if on a ClusterQueue the console does not manage, made as Kueue's
// examples make it (vCPU and memory on a flavor that is no instance type),
// answers as Kueue then does, by the queue's own rules: two jobs of 3 vCPU
// run and one of 6 waits in a quota of 9 vCPU; a job of 3 vCPU goes ahead
// of the waiting one in a BestEffortFIFO queue, and waits behind it in a
// StrictFIFO queue. A queue whose admission check does not exist admits
// nothing (Kueue keeps it inactive): the job waits there too.
func TestWhatIfOnAQueueTheConsoleDoesNotManage(t *testing.T) {
	c := newConsole(t)
	clients := testenv.Clients{Kube: c.kube, Kueue: c.kueue}
	for _, tc := range []struct {
		name     string
		strategy kueuev1beta2.QueueingStrategy
		check    string // an admission check the queue names; "" none
		want     wiAnswer
	}{
		{"BestEffortFIFO", kueuev1beta2.BestEffortFIFO, "", wiAnswer{Admitted: true}},
		{"StrictFIFO", kueuev1beta2.StrictFIFO, "", wiAnswer{Position: 2}},
		{"an admission check that does not exist", kueuev1beta2.BestEffortFIFO, "no-such-check", wiAnswer{Position: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var flavor string
			h := testenv.ApplyHandMadeWith(t, clients, gpuFlavor, "", func(cq *kueuev1beta2.ClusterQueue) {
				flavor = string(cq.Spec.ResourceGroups[1].Flavors[0].Name) // the setup's flavor without node labels
				cq.Spec.QueueingStrategy = tc.strategy
				if tc.check != "" {
					cq.Spec.AdmissionChecksStrategy = &kueuev1beta2.AdmissionChecksStrategy{
						AdmissionChecks: []kueuev1beta2.AdmissionCheckStrategyRule{{Name: kueuev1beta2.AdmissionCheckReference(tc.check)}}}
				}
				cq.Spec.ResourceGroups = []kueuev1beta2.ResourceGroup{{
					CoveredResources: []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory},
					Flavors: []kueuev1beta2.FlavorQuotas{{Name: kueuev1beta2.ResourceFlavorReference(flavor), Resources: []kueuev1beta2.ResourceQuota{
						{Name: corev1.ResourceCPU, NominalQuota: resource.MustParse("9")},
						{Name: corev1.ResourceMemory, NominalQuota: resource.MustParse("36Gi")},
					}}},
				}}
			})
			ns := h.Namespaces[0]
			submit := func(name string, pods int32, cpu string) *kueuev1beta2.Workload {
				t.Helper()
				res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("200Mi")}
				wl := &kueuev1beta2.Workload{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
					Spec: kueuev1beta2.WorkloadSpec{QueueName: "user-queue", PodSets: []kueuev1beta2.PodSet{{Name: "main", Count: pods,
						Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
							Containers: []corev1.Container{{Name: "main", Image: "job", Resources: corev1.ResourceRequirements{Requests: res}}}}}}}}}
				out, err := c.kueue.KueueV1beta2().Workloads(ns).Create(context.Background(), wl, metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				time.Sleep(1100 * time.Millisecond) // Kueue orders waiting jobs by creation, to the second
				return out
			}
			tasks := 0
			if tc.check == "" {
				submit("run-1", 3, "1")
				submit("run-2", 3, "1")
				h.WaitAdmitted(t, 2, 2)
				submit("wait-6", 6, "1")
				tasks = 3
			} else {
				c.eventually(t, "/usage/"+h.ClusterQueue, `id="team-inactive"`) // Kueue said it admits nothing
			}
			if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
				return len(c.csv(t, "/tasks?format=csv&table=tasks&state=all&team="+h.ClusterQueue)) == tasks, nil
			}); err != nil {
				t.Fatalf("the console never saw the queue's %d tasks", tasks)
			}

			q := url.Values{"team": {h.ClusterQueue}, "row.0.instanceType": {flavor}, "row.0.pods": {"3"}, "row.0.vcpu": {"1"}, "format": {"json"}}
			code, body := c.get(t, "/whatif?"+q.Encode())
			var reply whatIfReply
			if err := json.Unmarshal([]byte(body), &reply); err != nil || code != http.StatusOK {
				t.Fatalf("the what-if: %d %.400s (%v)", code, body, err)
			}
			predicted := wiAnswer{Admitted: reply.Admitted, Position: reply.Position}
			if diff := gocmp.Diff(tc.want, predicted); diff != "" {
				t.Errorf("the case no longer asks what it says (-case +what-if):\n%s\n%+v", diff, reply)
			}
			if reply.Uncertain != "" {
				t.Errorf("the answer is named uncertain: %s", reply.Uncertain)
			}

			asked := submit("asked", 3, "1")
			var actual wiAnswer
			_ = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
				cur, err := c.kueue.KueueV1beta2().Workloads(ns).Get(ctx, asked.Name, metav1.GetOptions{})
				if err != nil {
					return false, nil
				}
				actual.Admitted = apimeta.IsStatusConditionTrue(cur.Status.Conditions, kueuev1beta2.WorkloadQuotaReserved)
				if actual.Admitted {
					return true, nil
				}
				sum, err := c.kueue.VisibilityV1beta2().ClusterQueues().GetPendingWorkloadsSummary(ctx, h.ClusterQueue, metav1.GetOptions{})
				if err != nil {
					return false, nil
				}
				for _, it := range sum.Items {
					if it.Name == asked.Name {
						actual.Position = int(it.PositionInClusterQueue) + 1
					}
				}
				return actual.Position > 0 && !predicted.Admitted, nil
			})
			if diff := gocmp.Diff(predicted, actual); diff != "" {
				t.Errorf("the what-if and Kueue disagree (-what-if +Kueue):\n%s", diff)
			}
		})
	}
}
