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
// it calls the cycle and reads the queues itself; both are Kueue's own code
// of the version in go.mod (a Kueue upgrade that renames them fails the
// build, and TestKueueSchedulesTheCopy).

//go:linkname scheduleOnce sigs.k8s.io/kueue/pkg/scheduler.(*Scheduler).schedule
func scheduleOnce(s *scheduler.Scheduler, ctx context.Context) wait.SpeedSignal

//go:linkname queueOf sigs.k8s.io/kueue/pkg/cache/queue.(*Manager).getClusterQueue
func queueOf(m *qcache.Manager, name kueue.ClusterQueueReference) *qcache.ClusterQueue

// Kueue writes an admission from a goroutine of its own; the preview runs it
// within the cycle (as Kueue's own scheduler tests do with this setter), so
// that the copy holds every admission when the cycle returns.
//
//go:linkname setAdmissionRoutineWrapper sigs.k8s.io/kueue/pkg/scheduler.(*Scheduler).setAdmissionRoutineWrapper
func setAdmissionRoutineWrapper(s *scheduler.Scheduler, w routine.Wrapper)

// inline runs a function where it is called.
type inline struct{}

func (inline) Run(f func()) { f() }
