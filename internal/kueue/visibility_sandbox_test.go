package kueue_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	kueueclient "sigs.k8s.io/kueue/client-go/clientset/versioned"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/kueue"
	"github.com/openquota/console/internal/testenv"
)

// Positions are Kueue's own: a team with room for one 2-GPU job admits the
// first and queues the others in order, and Known gives their places (0
// next) without a page ever waiting for the visibility API.
func TestPositionsFromKueuesVisibilityAPI(t *testing.T) {
	c := clients(t)
	s := isolated(t)
	want := queueThree(t, c, s)
	p := kueue.NewPositions(c.Kueue, time.Second, nil)
	if got, ok := p.Known(context.Background(), s.ClusterQueue("queued")); ok {
		t.Fatalf("positions before any answer: %v", got)
	}
	wantPositions(t, p, s.ClusterQueue("queued"), want)
}

// The console installed with its chart reads the positions with its
// ServiceAccount's token: the RBAC the chart gives it (deploy/rbac, rendered
// from the chart) must let it, or every install silently falls back to its
// own queue order.
func TestPositionsWithTheChartsServiceAccount(t *testing.T) {
	c := clients(t)
	s := isolated(t)
	want := queueThree(t, c, s)
	ctx := context.Background()
	saCfg := testenv.ConsoleConfig(t)
	asConsole := kueueclient.NewForConfigOrDie(saCfg)
	if _, err := asConsole.VisibilityV1beta2().ClusterQueues().GetPendingWorkloadsSummary(ctx, s.ClusterQueue("queued"), metav1.GetOptions{}); err != nil {
		t.Errorf("the visibility API as the console's ServiceAccount: %v", err)
	}
	wantPositions(t, kueue.NewPositions(asConsole, time.Second, nil), s.ClusterQueue("queued"), want)
}

// queueThree makes team "queued" with room for one 2-GPU job, admits one and
// queues three more, a second apart; it returns the places Kueue gives the
// waiting ones, by domain.LocalQueueKey.
func queueThree(t *testing.T, c testClients, s domain.Settings) map[string]int {
	t.Helper()
	gpus := int64(2)
	applyTeam(t, c, s, domain.Team{Name: "queued", Enabled: true, Preemption: domain.PreemptNever, Lending: domain.DontLend,
		Quota: []domain.QuotaInput{{InstanceType: "ml.p5.48xlarge", GPUs: &gpus}}})
	submitAdmitted(t, c, s, "queued", gpuJob("first", 2))
	ctx := context.Background()
	ns := s.Namespace("queued")
	var want = map[string]int{}
	for i := range 3 {
		name := fmt.Sprintf("waiting-%d", i)
		job := gpuJob(name, 2)
		job.Labels = map[string]string{"kueue.x-k8s.io/queue-name": s.LocalQueue("queued")}
		if _, err := c.Kube.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// Kueue orders by the Workloads' creation seconds: each Workload is
		// made (by Kueue's job reconciler, which a busy machine delays) a
		// second after the one before.
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			wls, err := c.Kueue.KueueV1beta2().Workloads(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			for _, wl := range wls.Items {
				if len(wl.OwnerReferences) > 0 && wl.OwnerReferences[0].Name == name {
					want[domain.LocalQueueKey(ns, wl.Name)] = i
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			t.Fatalf("the Workload of job %s: %v", name, err)
		}
		time.Sleep(1100 * time.Millisecond)
	}
	// Kueue's order is by creation: waiting-0 next.
	return want
}

// wantPositions waits until p knows the places in want.
func wantPositions(t *testing.T, p *kueue.Positions, clusterQueue string, want map[string]int) {
	t.Helper()
	var got map[string]int
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		got, _ = p.Known(ctx, clusterQueue)
		return cmp.Equal(want, got), nil
	})
	if err != nil {
		t.Fatalf("positions (-Kueue's order +known):\n%s", cmp.Diff(want, got))
	}
}
