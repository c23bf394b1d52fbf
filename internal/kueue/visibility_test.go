package kueue

import (
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	visibilityv1beta2 "sigs.k8s.io/kueue/apis/visibility/v1beta2"
)

// Kueue lists the Variants of a job under concurrent admission where it
// would list the job: the job takes its first Variant's place, once.
func TestPositionsCountAJobsVariantsOnce(t *testing.T) {
	pending := func(name string, pos int32, parent string) visibilityv1beta2.PendingWorkload {
		w := visibilityv1beta2.PendingWorkload{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, PositionInClusterQueue: pos}
		if parent != "" {
			w.OwnerReferences = []metav1.OwnerReference{{APIVersion: kueuev1beta2.SchemeGroupVersion.String(), Kind: "Workload", Name: parent}}
		}
		return w
	}
	for _, tc := range []struct {
		name  string
		items []visibilityv1beta2.PendingWorkload
		want  map[string]int
	}{
		{"no variants", []visibilityv1beta2.PendingWorkload{pending("a", 0, ""), pending("b", 1, "")},
			map[string]int{"default/a": 0, "default/b": 1}},
		{"variants of two jobs", []visibilityv1beta2.PendingWorkload{
			pending("job-a-variant-spot", 2, "job-a"), pending("job-a-variant-reservation", 0, "job-a"),
			pending("job-b-variant-reservation", 1, "job-b"), pending("plain", 3, ""), pending("job-b-variant-spot", 4, "job-b")},
			map[string]int{"default/job-a": 0, "default/job-b": 1, "default/plain": 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := gocmp.Diff(tc.want, positionsOf(tc.items)); diff != "" {
				t.Errorf("positions (-want +got):\n%s", diff)
			}
		})
	}
}
