package domain

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/kueuetest"
)

// A save's preview names what it changes on the live queue: the fields the
// form changed and a hand edit it undoes; a save of what is there, nothing.
func TestQueueWritesNameWhatASaveChanges(t *testing.T) {
	live := kueuetest.MakeClusterQueue("q").Cohort("pool").Nominal(8, nil).Obj()
	live.Spec.Preemption = &kueuev1beta2.ClusterQueuePreemption{WithinClusterQueue: kueuev1beta2.PreemptionPolicyNever}
	live.Spec.FairSharing = &kueuev1beta2.FairSharing{Weight: resource.NewQuantity(3, resource.DecimalSI)}

	same := live.DeepCopy()
	if got := QueueWrites(live, same); len(got) != 0 {
		t.Errorf("saving the queue as it is writes %q", got)
	}

	next := kueuetest.MakeClusterQueue("q").Cohort("pool").Nominal(16, nil).Obj()
	next.Spec.Preemption = &kueuev1beta2.ClusterQueuePreemption{WithinClusterQueue: kueuev1beta2.PreemptionPolicyLowerPriority}
	next.Spec.FairSharing = &kueuev1beta2.FairSharing{Weight: resource.NewQuantity(5, resource.DecimalSI)}
	want := []string{
		"fair-share weight: 3 → 5",
		"preemption within the team (withinClusterQueue): Never → LowerPriority",
		"GPUs quota on ml.p5.48xlarge: 8 → 16",
	}
	if diff := cmp.Diff(want, QueueWrites(live, next)); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
	if got := QueueWrites(nil, next); got != nil {
		t.Errorf("a new queue: %q", got)
	}
}
