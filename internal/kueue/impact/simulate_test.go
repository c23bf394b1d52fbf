package impact

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
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

func cluster(cqs []*kueue.ClusterQueue, wls ...*Shape) Cluster {
	c := Cluster{Flavors: []*kueue.ResourceFlavor{flavor()}, ClusterQueues: cqs, Workloads: wls}
	for _, cq := range cqs {
		c.LocalQueues = append(c.LocalQueues, kueuetest.MakeLocalQueue(cq.Name, "lq", cq.Name))
		c.Namespaces = append(c.Namespaces, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cq.Name}})
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
