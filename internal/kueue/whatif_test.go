package kueue

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/kueue/impact"
	"github.com/openquota/console/internal/kueuetest"
)

// The what-if names only the tasks its job preempts: not an eviction under
// way, nor what another waiting task preempts in the same cycles.
func TestTheWhatIfNamesOnlyWhatItsJobPreempts(t *testing.T) {
	by := func(uid string) string {
		return "Preempted to accommodate a workload (UID: " + uid + ", JobUID: UNKNOWN) due to reclamation within the cohort; preemptor path: /pool/a; preemptee path: /pool/b"
	}
	res := &impact.Result{Workloads: map[string]*impact.Outcome{
		"b/for-the-job":  {Fate: impact.Preempted, Message: by(whatIfName)},
		"b/for-another":  {Fate: impact.Preempted, Message: by("0b6f1a2c")},
		"b/evicting":     {Fate: impact.Preempted, Message: ""},
		"b/stays":        {Fate: impact.StaysAdmitted},
		"a/what-if":      {Fate: impact.Admitted},
		"b/no-such-task": {Fate: impact.Preempted, Message: by(whatIfName)},
	}}
	facts := map[string]*domain.TaskFacts{}
	for _, name := range []string{"for-the-job", "for-another", "evicting", "stays"} {
		facts["b/"+name] = &domain.TaskFacts{Namespace: "b", Name: name, Team: "b"}
	}
	var got []string
	for _, task := range preemptedBy(whatIfName, res, facts, time.Now()) {
		got = append(got, task.Name)
	}
	if diff := cmp.Diff([]string{"for-the-job"}, got); diff != "" {
		t.Errorf("preempted by the job (-want +got):\n%s", diff)
	}
}

// A job asked for on a flavor tolerates its taints, as Kueue's example of
// a tainted spot flavor has its jobs do; and the team's LocalQueue it goes
// to is one that admits (not stopped) when the team has one.
func TestTheWhatIfTakesTheFlavorsTaintsAndAnOpenLocalQueue(t *testing.T) {
	taints := []corev1.Taint{{Key: "spot", Value: "true", Effect: corev1.TaintEffectNoSchedule}}
	want := []corev1.Toleration{{Key: "spot", Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule}}
	if diff := cmp.Diff(want, tolerating(taints)); diff != "" {
		t.Errorf("tolerations (-want +got):\n%s", diff)
	}
	held := kueuetest.MakeLocalQueue("team", "a-held", "q")
	held.Spec.StopPolicy = ptr.To(kueuev1beta2.Hold)
	open := kueuetest.MakeLocalQueue("team", "b-open", "q")
	if stopped(held) != 1 || stopped(open) != 0 {
		t.Errorf("stopped: held %d, open %d", stopped(held), stopped(open))
	}
}
