package impact

import (
	"math"
	"runtime/debug"
	"sync"
)

// runHeadroom is the memory one run may hold beyond the console's steady
// memory. The console runs under a soft memory limit close to what it holds
// (--memory-limit-mib); a run over a cohort of 200 queues allocates hundreds
// of MB of short-lived objects, and with no room above the limit the
// runtime collects almost continuously, which made such a preview two to
// three times slower. Two runs (a preview) stay within the 100 MiB a
// preview may use beyond the console's steady memory, with the runtime's
// own slack (50 MiB a run took 116 MiB).
const runHeadroom = 40 << 20

var memory struct {
	sync.Mutex
	runs int
	base int64 // the soft limit before the runs under way raised it
}

// roomToRun raises the Go runtime's soft memory limit by runHeadroom for as
// long as a run lasts, and returns what lowers it again. Without a limit
// (Go's default) it leaves the runtime alone.
func roomToRun() (done func()) {
	memory.Lock()
	defer memory.Unlock()
	if memory.runs == 0 {
		memory.base = debug.SetMemoryLimit(-1)
	}
	if memory.base == math.MaxInt64 {
		return func() {}
	}
	memory.runs++
	debug.SetMemoryLimit(memory.base + int64(memory.runs)*runHeadroom)
	return func() {
		memory.Lock()
		defer memory.Unlock()
		memory.runs--
		debug.SetMemoryLimit(memory.base + int64(memory.runs)*runHeadroom)
	}
}
