package kueue

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/kueue/impact"
)

// TestDumpImpactCopy writes the copies a preview of the load test's change
// (team-007's quota cut to 4 GPUs) runs on, read from the cluster of
// IMPACT_DUMP_KUBECONFIG, to IMPACT_DUMP as JSON: the input of
// impact's BenchmarkSimulateDump. It only runs when both are set.
func TestDumpImpactCopy(t *testing.T) {
	out, kubeconfig := os.Getenv("IMPACT_DUMP"), os.Getenv("IMPACT_DUMP_KUBECONFIG")
	if out == "" || kubeconfig == "" {
		t.Skip("IMPACT_DUMP and IMPACT_DUMP_KUBECONFIG not set")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 500, 1000
	clients, err := NewClients(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := domain.DefaultSettings
	c := NewCache(clients.Kube, clients.Kueue, s, slog.New(slog.NewTextHandler(io.Discard, nil)))
	c.Start(ctx)
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 5*time.Minute, true, func(context.Context) (bool, error) {
		return c.Synced(), nil
	}); err != nil {
		t.Fatal("the cache never synced")
	}
	sc, err := (Applier{Kube: clients.Kube, Kueue: clients.Kueue}).SchedulerConfig(ctx,
		ConfigMapRef{Namespace: "kueue-system", Name: "kueue-manager-config", Key: "controller_manager_config.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	cq, err := c.ClusterQueues.Get(s.ClusterQueue("team-007"))
	if err != nil {
		t.Fatal(err)
	}
	cut := cq.DeepCopy()
	cut.Spec.ResourceGroups[0].Flavors[0].Resources[0].NominalQuota = *resource.NewQuantity(4, resource.DecimalSI)
	ch := ImpactChange{Queues: map[string]*kueuev1beta2.ClusterQueue{cut.Name: cut}}
	now, _, err := c.impactCopy(sc, ch)
	if err != nil {
		t.Fatal(err)
	}
	dump := struct{ Now, After impact.Cluster }{now, applyChange(now, ch)}
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := json.NewEncoder(f).Encode(dump); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d ClusterQueues, %d Workloads, fair sharing %v", len(now.ClusterQueues), len(now.Workloads), sc.FairSharing != nil)
}
