package kueue_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/kueue"
)

// Kueue writes a ClusterQueue's usage into its status with every
// admission: the queue changes, but is not redefined (the teams page keeps
// its rendering). A new quota redefines it.
func TestAdmissionsDoNotRedefineAQueue(t *testing.T) {
	c := clients(t)
	s := isolated(t)
	gpus := int64(4)
	team := domain.Team{Name: "steady", Enabled: true, Preemption: domain.PreemptLowerPriority, Lending: domain.DontLend,
		Quota: []domain.QuotaInput{{InstanceType: "ml.p5.48xlarge", GPUs: &gpus}}}
	applyTeam(t, c, s, team)
	ctx := context.Background()
	queues := c.Kueue.KueueV1beta2().ClusterQueues()
	before, err := queues.Get(ctx, s.ClusterQueue(team.Name), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	submitAdmitted(t, c, s, team.Name, gpuJob("steady-job", 2))
	var admitted *kueuev1beta2.ClusterQueue
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		admitted, err = queues.Get(ctx, before.Name, metav1.GetOptions{})
		return err == nil && admitted.Status.AdmittedWorkloads == 1, err
	}); err != nil {
		t.Fatalf("Kueue never counted the admission in the queue's status: %v", err)
	}
	if admitted.ResourceVersion == before.ResourceVersion {
		t.Fatal("the queue did not change with the admission")
	}
	if kueue.Redefined(before, admitted) {
		t.Errorf("an admission redefined the queue: generation %d → %d", before.Generation, admitted.Generation)
	}

	gpus = 6
	applyTeam(t, c, s, team)
	requoted, err := queues.Get(ctx, before.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !kueue.Redefined(admitted, requoted) {
		t.Errorf("a new quota did not redefine the queue: generation %d → %d", admitted.Generation, requoted.Generation)
	}
}
