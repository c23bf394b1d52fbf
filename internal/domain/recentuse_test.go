package domain

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/kueuetest"
)

func TestLocalQueueUses(t *testing.T) {
	at := time.Date(2026, 11, 27, 7, 0, 0, 0, time.UTC)
	used := func(lq *kueuev1beta2.LocalQueue, gpus, cpu string) *kueuev1beta2.LocalQueue {
		lq.Status.FairSharing = &kueuev1beta2.LocalQueueFairSharingStatus{AdmissionFairSharingStatus: &kueuev1beta2.LocalQueueAdmissionFairSharingStatus{
			ConsumedResources: corev1.ResourceList{ResourceGPU: resource.MustParse(gpus), corev1.ResourceCPU: resource.MustParse(cpu)},
			LastUpdate:        metav1.NewTime(at)}}
		return lq
	}
	weighted := func(lq *kueuev1beta2.LocalQueue, w string) *kueuev1beta2.LocalQueue {
		lq.Spec.FairSharing = &kueuev1beta2.FairSharing{Weight: ptrTo(resource.MustParse(w))}
		return lq
	}
	lqs := []*kueuev1beta2.LocalQueue{
		used(kueuetest.MakeLocalQueue("research", "user-queue", "cq"), "4", "8"),
		used(kueuetest.MakeLocalQueue("vision", "user-queue", "cq"), "1", "2"),
		weighted(used(kueuetest.MakeLocalQueue("heavy", "user-queue", "cq"), "8", "16"), "4"),
		kueuetest.MakeLocalQueue("new", "user-queue", "cq"),
		weighted(used(kueuetest.MakeLocalQueue("zero", "user-queue", "cq"), "0", "0"), "0"),
		kueuetest.MakeLocalQueue("other", "user-queue", "other-cq"),
	}
	got := LocalQueueUses("cq", lqs, &RecentUseConfig{Weights: map[corev1.ResourceName]float64{corev1.ResourceCPU: 0}})
	want := []LocalQueueUse{
		{Namespace: "new", Name: "user-queue", Weight: 1, Score: 0},
		{Namespace: "vision", Name: "user-queue", Weight: 1, Consumed: RecentAmount{GPUs: 1, VCPU: 2}, Score: 1, LastUpdate: at, Counted: true},
		{Namespace: "heavy", Name: "user-queue", Weight: 4, Consumed: RecentAmount{GPUs: 8, VCPU: 16}, Score: 2, LastUpdate: at, Counted: true},
		{Namespace: "research", Name: "user-queue", Weight: 1, Consumed: RecentAmount{GPUs: 4, VCPU: 8}, Score: 4, LastUpdate: at, Counted: true},
		{Namespace: "zero", Name: "user-queue", Weight: 0, Score: math.Inf(1), LastUpdate: at, Counted: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("LocalQueueUses (-want +got):\n%s", diff)
	}
}

func TestRecentUseMeaning(t *testing.T) {
	for _, tt := range []struct {
		name  string
		c     *RecentUseConfig
		known bool
		want  string
	}{
		{"configured", &RecentUseConfig{HalfLife: time.Hour, Sampling: 10 * time.Second}, true, "half-life of 1h0m0s, sampled every 10s"},
		{"not configured", nil, true, "Set admissionFairSharing (usageHalfLifeTime, usageSamplingInterval) in Kueue's configuration"},
		{"unreadable", nil, false, "could not be read"},
	} {
		if got := RecentUseMeaning(tt.c, tt.known); !strings.Contains(got, tt.want) {
			t.Errorf("%s: %q does not say %q", tt.name, got, tt.want)
		}
	}
}

// An imported queue's order is written only when the form changes it, and
// stated either way: the field may be another manager's.
func TestImportedTeamOrder(t *testing.T) {
	usage := &kueuev1beta2.AdmissionScope{AdmissionMode: kueuev1beta2.UsageBasedAdmissionFairSharing}
	none := &kueuev1beta2.AdmissionScope{AdmissionMode: kueuev1beta2.NoAdmissionFairSharing}
	for _, tt := range []struct {
		name      string
		live      *kueuev1beta2.AdmissionScope
		recentUse bool
		want      *kueuev1beta2.AdmissionScope
	}{
		{"unset, kept", nil, false, nil},
		{"unset, turned on", nil, true, usage},
		{"on, kept", usage, true, usage},
		{"on, turned off", usage, false, none},
		{"stated off, kept", none, false, none},
	} {
		t.Run(tt.name, func(t *testing.T) {
			live := kueuetest.MakeClusterQueue("research").Nominal(8, nil).Obj()
			live.Labels = ImportLabels("research")
			live.Spec.AdmissionScope = tt.live
			team := PlanImport(DefaultSettings, live, nil, func(string) bool { return false }, LookupShape).Team
			if team.RecentUseOrder != OrdersByRecentUse(tt.live) {
				t.Fatalf("imported as RecentUseOrder %v, the queue says %+v", team.RecentUseOrder, tt.live)
			}
			team.RecentUseOrder = tt.recentUse
			objs, err := BuildImportedTeam(DefaultSettings, team, live, LookupShape)
			if err != nil {
				t.Fatal(err)
			}
			var got *kueuev1beta2.AdmissionScope
			if s := objs.ClusterQueue.Spec.AdmissionScope; s != nil && s.AdmissionMode != nil {
				got = &kueuev1beta2.AdmissionScope{AdmissionMode: *s.AdmissionMode}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("admissionScope written (-want +got):\n%s", diff)
			}
		})
	}
	if note := RecentUseChangeNote(Team{}, Team{RecentUseOrder: true}); !strings.Contains(note, "when Kueue restarts") {
		t.Errorf("a changed order on an existing queue says %q", note)
	}
	if note := RecentUseChangeNote(Team{RecentUseOrder: true}, Team{RecentUseOrder: true}); note != "" {
		t.Errorf("an unchanged order says %q", note)
	}
}
