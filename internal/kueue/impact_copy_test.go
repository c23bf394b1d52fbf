package kueue

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/kueuetest"
)

// A queue Kueue keeps inactive for what the copy leaves out (its admission
// checks, its flavors' topology) is held in the copy, so that it admits
// nothing there either; one inactive for what the copy has (a missing
// flavor) or stopped keeps its own spec, and an active one is not held.
func TestTheCopyHoldsWhatTheClusterKeepsInactive(t *testing.T) {
	inactive := func(reason string) *kueuev1beta2.ClusterQueue {
		cq := kueuetest.MakeClusterQueue("cluster-queue").Nominal(8, nil).Obj()
		cq.Status.Conditions = []metav1.Condition{{Type: kueuev1beta2.ClusterQueueActive, Status: metav1.ConditionFalse, Reason: reason}}
		return cq
	}
	stopped := inactive(kueuev1beta2.ClusterQueueActiveReasonStopped)
	drain := kueuev1beta2.HoldAndDrain
	stopped.Spec.StopPolicy = &drain
	hold, none := kueuev1beta2.Hold, kueuev1beta2.StopPolicy("")
	for _, tc := range []struct {
		name string
		cq   *kueuev1beta2.ClusterQueue
		want kueuev1beta2.StopPolicy
	}{
		{"an inactive admission check", inactive(kueuev1beta2.ClusterQueueActiveReasonAdmissionCheckInactive), hold},
		{"a missing admission check", inactive(kueuev1beta2.ClusterQueueActiveReasonAdmissionCheckNotFound), hold},
		{"a missing topology", inactive(kueuev1beta2.ClusterQueueActiveReasonTopologyNotFound), hold},
		{"a missing flavor: the copy lacks it too", inactive(kueuev1beta2.ClusterQueueActiveReasonFlavorNotFound), none},
		{"stopped: its own stop policy", stopped, drain},
		{"active", kueuetest.MakeClusterQueue("cluster-queue").Nominal(8, nil).Obj(), none},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := none
			if p := forCopy(tc.cq).Spec.StopPolicy; p != nil {
				got = *p
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("the copy's stop policy (-want +got):\n%s", diff)
			}
		})
	}
}
