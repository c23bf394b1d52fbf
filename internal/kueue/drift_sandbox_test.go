package kueue_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/kueue"
)

// A kubectl edit of a managed ClusterQueue shows as drift from the informer
// cache, for that team only; re-applying the allocation clears it.
func TestTeamDriftFromTheCache(t *testing.T) {
	c := clients(t)
	s := isolated(t)
	a := kueue.Applier{Kube: c.Kube, Kueue: c.Kueue}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cache := kueue.NewCache(c.Kube, c.Kueue, s, slog.New(slog.NewTextHandler(io.Discard, nil)))
	cache.Start(ctx)
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return cache.Ready() == nil, nil
	}); err != nil {
		t.Fatalf("cache never ready: %v", cache.Ready())
	}
	team := domain.Team{Name: "edited", Enabled: true, FairShareWeight: 3, Preemption: domain.PreemptNever,
		Lending: domain.Lend, Quota: []domain.QuotaInput{{InstanceType: "ml.g5.2xlarge", Count: ptr.To[int64](2)}}}
	other := team
	other.Name = "untouched"
	applyAs(t, a, s, "alice", team)
	applyAs(t, a, s, "alice", other)

	drifted := func(want map[string]bool) {
		t.Helper()
		var got map[string]bool
		err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			got = cache.DriftedTeams(s, domain.LookupShape)
			return cmp.Equal(want, got), nil
		})
		if err != nil {
			t.Fatalf("drifted teams %v, want %v", got, want)
		}
	}
	drifted(map[string]bool{})

	cq, err := c.Kueue.KueueV1beta2().ClusterQueues().Get(ctx, s.ClusterQueue("edited"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cq.Spec.ResourceGroups[0].Flavors[0].Resources[0].NominalQuota = resource.MustParse("5")
	cq.Spec.FairSharing.Weight = ptr.To(resource.MustParse("7"))
	if _, err := c.Kueue.KueueV1beta2().ClusterQueues().Update(ctx, cq, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	drifted(map[string]bool{"edited": true})
	rep, _, err := cache.TeamDrift(s, "edited", domain.LookupShape)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, d := range rep.Differences {
		lines = append(lines, d.String())
	}
	object := "ClusterQueue " + s.ClusterQueue("edited")
	want := []string{
		object + ": fair-share weight is 7 in the cluster, the allocation says 3",
		object + ": GPUs quota on ml.g5.2xlarge is 5 in the cluster, the allocation says 2",
	}
	if diff := cmp.Diff(want, lines); diff != "" {
		t.Errorf("drift (-want +got):\n%s", diff)
	}

	objs, err := domain.BuildTeam(s, rep.Team, domain.LookupShape)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.ApplyTeam(kueue.WithNote(as("bob"), "re-applied over hand edits"), objs); err != nil {
		t.Fatal(err)
	}
	drifted(map[string]bool{})
	hist, err := a.TeamRevisions(ctx, s, "edited")
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 2 || hist[0].By != "bob" || hist[0].Note != "re-applied over hand edits" || len(domain.DiffTeams(hist[1].Allocation, hist[0].Allocation)) != 0 {
		t.Errorf("history after re-applying over hand edits: %+v", hist)
	}
}
