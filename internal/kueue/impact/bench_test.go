package impact

import (
	"context"
	"encoding/json"
	"os"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	config "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/kueuetest"
)

type syntheticNames struct{}

func (syntheticNames) Namespace(team string) string { return "hyperpod-ns-" + team }
func (syntheticNames) ClusterQueue(team string) string {
	return "hyperpod-ns-" + team + "-clusterqueue"
}
func (syntheticNames) LocalQueue(team string) string { return "hyperpod-ns-" + team + "-localqueue" }

// synthetic is the load test's cluster: 200 teams of 8 GPUs in one cohort
// (borrowing up to 4 more) and n Workloads, admitted as far as the quota
// goes (about 1 000) and the rest pending, as Kueue leaves a cluster.
func synthetic(n int) Cluster {
	o := kueuetest.Cluster(syntheticNames{}, "shared-pool", 200, n, time.Now())
	c := Cluster{Flavors: []*kueue.ResourceFlavor{flavor()}, LocalQueues: o.LocalQueues, PendingPerQueue: 10}
	for _, cq := range o.ClusterQueues {
		cq = cq.DeepCopy()
		cq.Spec.NamespaceSelector = &metav1.LabelSelector{}
		cq.Spec.Preemption = &kueue.ClusterQueuePreemption{ReclaimWithinCohort: kueue.PreemptionPolicyAny,
			WithinClusterQueue: kueue.PreemptionPolicyLowerPriority}
		c.ClusterQueues = append(c.ClusterQueues, cq)
	}
	held := map[string]int64{}
	for _, wl := range o.Workloads {
		s := ShapeOf(wl)
		if s == nil {
			continue
		}
		if s.Admitted() {
			gpus := s.PodSets[0].Requests.Name(kueuetest.GPU, resource.DecimalSI).Value()
			if held[s.Namespace]+gpus > 12 {
				s.Admission, s.Conditions = nil, nil
			} else {
				held[s.Namespace] += gpus
			}
		}
		c.Workloads = append(c.Workloads, s)
	}
	return c
}

// BenchmarkSimulate is one preview's work at 200 teams and 50 000
// Workloads: the cluster as it is and with one team's quota cut in half.
func BenchmarkSimulate(b *testing.B) {
	b.Run("fairSharing=off", func(b *testing.B) { benchmarkSimulate(b, synthetic(50_000)) })
	fair := synthetic(50_000)
	fair.FairSharing = &config.FairSharing{}
	b.Run("fairSharing=on", func(b *testing.B) { benchmarkSimulate(b, fair) })
}

func benchmarkSimulate(b *testing.B, now Cluster) {
	after := now
	after.ClusterQueues = append([]*kueue.ClusterQueue(nil), now.ClusterQueues...)
	cut := after.ClusterQueues[7].DeepCopy()
	cut.Spec.ResourceGroups[0].Flavors[0].Resources[0].NominalQuota = *resource.NewQuantity(4, resource.DecimalSI)
	after.ClusterQueues[7] = cut
	b.ReportAllocs()
	for b.Loop() {
		for _, c := range []Cluster{now, after} {
			r, err := Simulate(context.Background(), c)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(r.Cycles), "cycles")
		}
	}
}

// BenchmarkSimulateDump runs the pair of copies in the file IMPACT_CLUSTER
// names (written by the kueue package's TestDumpImpactCopy from a sandbox),
// under the one-second limit the console gives a preview.
func BenchmarkSimulateDump(b *testing.B) {
	path := os.Getenv("IMPACT_CLUSTER")
	if path == "" {
		b.Skip("IMPACT_CLUSTER not set")
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	var dump struct{ Now, After Cluster }
	if err := json.Unmarshal(raw, &dump); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		l := NewLimit(time.Second)
		dump.Now.Limit, dump.After.Limit = l, l
		var wg sync.WaitGroup
		wg.Go(func() {
			if _, err := Simulate(context.Background(), dump.Now); err != nil {
				b.Error(err)
			}
		})
		r, err := Simulate(context.Background(), dump.After)
		wg.Wait()
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(r.Cycles), "cycles")
	}
}
