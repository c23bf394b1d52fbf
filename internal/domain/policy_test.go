package domain

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

func TestBuildPriorityClasses(t *testing.T) {
	classes := []PriorityClass{{Name: "inference", Weight: 90}, {Name: "batch", Weight: 10}}
	values := func(p Policy) map[string]int32 {
		out := map[string]int32{}
		for _, c := range BuildPriorityClasses(DefaultSettings, p) {
			out[*c.Name] = *c.Value
			if c.Annotations[WeightAnnotation] == "" || c.Labels[ManagedByLabel] != ManagedByValue {
				t.Errorf("%s lacks the weight annotation or the managed-by label", *c.Name)
			}
		}
		return out
	}
	if diff := cmp.Diff(map[string]int32{"inference": 90, "batch": 10}, values(Policy{Prioritization: TaskRanking, Classes: classes})); diff != "" {
		t.Errorf("task ranking values (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int32{"inference": 0, "batch": 0}, values(Policy{Prioritization: FirstComeFirstServe, Classes: classes})); diff != "" {
		t.Errorf("first-come-first-serve values (-want +got):\n%s", diff)
	}
}

func TestReadPolicy(t *testing.T) {
	stored := Policy{Prioritization: TaskRanking, IdleAllocation: IdleFairShare, Classes: []PriorityClass{{Name: "a", Weight: 5}}}
	cohortAC, err := BuildCohort(DefaultSettings, stored)
	if err != nil {
		t.Fatal(err)
	}
	cohort := &kueuev1beta2.Cohort{ObjectMeta: metav1.ObjectMeta{Name: "shared-pool", Annotations: cohortAC.Annotations}}
	if diff := cmp.Diff(stored, ReadPolicy(cohort, nil)); diff != "" {
		t.Errorf("stored policy (-want +got):\n%s", diff)
	}
	// Without a stored policy, the managed classes are found with their weights.
	wpc := func(name string, value int32, weight string, managed bool) *kueuev1beta2.WorkloadPriorityClass {
		o := &kueuev1beta2.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{}}, Value: value}
		if weight != "" {
			o.Annotations[WeightAnnotation] = weight
		}
		if managed {
			o.Labels = map[string]string{ManagedByLabel: ManagedByValue}
		}
		return o
	}
	got := ReadPolicy(nil, []*kueuev1beta2.WorkloadPriorityClass{wpc("low", 0, "20", true), wpc("high", 70, "", true), wpc("theirs", 1000, "", false)})
	want := Policy{Prioritization: FirstComeFirstServe, IdleAllocation: IdleFirstComeFirstServe,
		Classes: []PriorityClass{{Name: "high", Weight: 70}, {Name: "low", Weight: 20}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("policy from classes (-want +got):\n%s", diff)
	}
	// Tasks that name no class count in the lowest one.
	if order := classOrder(got, nil, nil); order[len(order)-1] != "low" {
		t.Errorf("class order %v: the lowest class is not low", order)
	}
}

func TestKueueFairSharingAndMismatch(t *testing.T) {
	cases := []struct {
		name     string
		config   string
		idle     IdleAllocation
		enabled  bool
		mismatch bool
	}{
		{"fair sharing on, policy fair share", "fairSharing:\n  preemptionStrategies: [LessThanOrEqualToFinalShare]\n", IdleFairShare, true, false},
		{"fair sharing off, policy fair share", "namespace: kueue-system\n", IdleFairShare, false, true},
		{"fair sharing on, policy FCFS", "fairSharing: {}\n", IdleFirstComeFirstServe, true, true},
		{"fair sharing off, policy FCFS", "namespace: kueue-system\n", IdleFirstComeFirstServe, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			settings, err := ReadKueueSettings("apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n" + tc.config)
			if err != nil {
				t.Fatal(err)
			}
			enabled := settings.FairSharing
			if enabled != tc.enabled {
				t.Errorf("enabled = %v, want %v", enabled, tc.enabled)
			}
			if got := FairSharingMismatch(Policy{IdleAllocation: tc.idle}, enabled) != ""; got != tc.mismatch {
				t.Errorf("mismatch = %v, want %v", got, tc.mismatch)
			}
		})
	}
	if _, err := ReadKueueSettings("fairSharing: [not, a, map"); err == nil {
		t.Error("broken YAML accepted")
	}
}

// Kueue lets a Job that names no LocalQueue run outside every quota unless
// its configuration says manageJobsWithoutQueueName: the page says so.
func TestUnqueuedJobsWarning(t *testing.T) {
	for _, tc := range []struct {
		config string
		warns  bool
	}{
		{"namespace: kueue-system\n", true},
		{"manageJobsWithoutQueueName: false\n", true},
		{"manageJobsWithoutQueueName: true\n", false},
	} {
		settings, err := ReadKueueSettings("apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n" + tc.config)
		if err != nil {
			t.Fatal(err)
		}
		if got := UnqueuedJobsWarning(settings) != ""; got != tc.warns {
			t.Errorf("%q: warns = %v, want %v", tc.config, got, tc.warns)
		}
	}
}
