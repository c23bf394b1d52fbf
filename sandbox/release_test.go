package sandbox

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

func cond(typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: reason + " message"}
}

var (
	evictedByPreemption = cond(kueuev1beta2.WorkloadEvicted, metav1.ConditionTrue, kueuev1beta2.WorkloadEvictedByPreemption)
	notEvicted          = cond(kueuev1beta2.WorkloadEvicted, metav1.ConditionFalse, "NoLongerEvicted")
	reserved            = cond(kueuev1beta2.WorkloadQuotaReserved, metav1.ConditionTrue, "QuotaReserved")
	notReserved         = cond(kueuev1beta2.WorkloadQuotaReserved, metav1.ConditionFalse, "Pending")
	admitted            = cond(kueuev1beta2.WorkloadAdmitted, metav1.ConditionTrue, "Admitted")
	finished            = cond(kueuev1beta2.WorkloadFinished, metav1.ConditionTrue, "Succeeded")
)

// Only what Kueue's job reconciler would release, and only for Workloads no
// job owns: an owned one is its job controller's.
func TestNeedsRelease(t *testing.T) {
	deleting := metav1.Now()
	owner := []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "train", UID: "u1"}}
	tests := []struct {
		name       string
		owners     []metav1.OwnerReference
		deleting   *metav1.Time
		conditions []metav1.Condition
	}{
		{name: "evicted-reserved", conditions: []metav1.Condition{reserved, admitted, evictedByPreemption}},
		{name: "evicted-reserved-not-admitted", conditions: []metav1.Condition{reserved, evictedByPreemption}},
		{name: "evicted-released", conditions: []metav1.Condition{notReserved, evictedByPreemption}},
		{name: "evicted-never-reserved", conditions: []metav1.Condition{evictedByPreemption}},
		{name: "admitted", conditions: []metav1.Condition{reserved, admitted}},
		{name: "no-longer-evicted", conditions: []metav1.Condition{reserved, admitted, notEvicted}},
		{name: "pending"},
		{name: "owned", owners: owner, conditions: []metav1.Condition{reserved, admitted, evictedByPreemption}},
		{name: "deleting", deleting: &deleting, conditions: []metav1.Condition{reserved, admitted, evictedByPreemption}},
		{name: "finished", conditions: []metav1.Condition{reserved, admitted, evictedByPreemption, finished}},
	}
	var got []string
	for _, tc := range tests {
		wl := &kueuev1beta2.Workload{ObjectMeta: metav1.ObjectMeta{Name: tc.name, OwnerReferences: tc.owners, DeletionTimestamp: tc.deleting}}
		wl.Status.Conditions = tc.conditions
		if needsRelease(wl) {
			got = append(got, tc.name)
		}
		trimmed, err := trimWorkload(wl)
		if err != nil {
			t.Fatal(err)
		}
		if needsRelease(trimmed.(*kueuev1beta2.Workload)) != needsRelease(wl) {
			t.Errorf("%s: the trimmed copy decides otherwise than the Workload", tc.name)
		}
	}
	want := []string{"evicted-reserved", "evicted-reserved-not-admitted"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("released (-want +got):\n%s", diff)
	}
}

// A released Workload is pending again, without an admission, requeued
// when a preemption evicted it, as Kueue's job reconciler leaves it.
func TestReleaseReservation(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	type result struct {
		Updated    bool
		Admission  bool
		Conditions map[string]string // type: status/reason
	}
	tests := []struct {
		name    string
		evicted metav1.Condition
		want    result
	}{
		{name: "preempted", evicted: evictedByPreemption, want: result{Updated: true, Conditions: map[string]string{
			"Admitted": "False/NoReservation", "Evicted": "True/Preempted", "QuotaReserved": "False/Pending", "Requeued": "True/Preempted"}}},
		{name: "deactivated", evicted: cond(kueuev1beta2.WorkloadEvicted, metav1.ConditionTrue, kueuev1beta2.WorkloadDeactivated), want: result{Updated: true, Conditions: map[string]string{
			"Admitted": "False/NoReservation", "Evicted": "True/Deactivated", "QuotaReserved": "False/Pending", "Requeued": "False/Deactivated"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wl := &kueuev1beta2.Workload{}
			wl.Status.Admission = &kueuev1beta2.Admission{ClusterQueue: "team-000"}
			wl.Status.Conditions = []metav1.Condition{reserved, admitted, tc.evicted}
			got := result{Updated: releaseReservation(wl, now), Admission: wl.Status.Admission != nil, Conditions: map[string]string{}}
			for _, c := range wl.Status.Conditions {
				got.Conditions[c.Type] = string(c.Status) + "/" + c.Reason
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if needsRelease(wl) {
				t.Error("still needs a release after it")
			}
			if releaseReservation(wl, now.Add(time.Second)) {
				t.Error("a second release changed the Workload again")
			}
		})
	}
}
