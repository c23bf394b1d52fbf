package impact

import (
	"context"
	_ "unsafe" // go:linkname

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	"sigs.k8s.io/kueue/pkg/scheduler"
	"sigs.k8s.io/kueue/pkg/util/routine"
	"sigs.k8s.io/kueue/pkg/util/wait"
)

// Kueue runs its scheduler as a loop that blocks while no queue has a head.
// The preview needs one cycle at a time and to know when no head is left, so
// it calls the cycle and reads the queues itself, and has the cycle write
// its admissions before it returns; all are Kueue's own code
// of the version in go.mod (a Kueue upgrade that renames them fails the
// build, and TestKueueSchedulesTheCopy).

//go:linkname scheduleOnce sigs.k8s.io/kueue/pkg/scheduler.(*Scheduler).schedule
func scheduleOnce(s *scheduler.Scheduler, ctx context.Context) wait.SpeedSignal

//go:linkname setAdmissionRoutine sigs.k8s.io/kueue/pkg/scheduler.(*Scheduler).setAdmissionRoutineWrapper
func setAdmissionRoutine(s *scheduler.Scheduler, w routine.Wrapper)

//go:linkname queueOf sigs.k8s.io/kueue/pkg/cache/queue.(*Manager).getClusterQueue
func queueOf(m *qcache.Manager, name kueue.ClusterQueueReference) *qcache.ClusterQueue
