package impact

import (
	"math"
	"runtime/debug"
	"testing"
)

// A run raises the soft memory limit by its headroom while it lasts, runs
// under way add up, and the limit is the console's again once they end; a
// runtime without a limit is left without one.
func TestRoomToRun(t *testing.T) {
	orig := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(orig) })

	const base = 208 << 20
	debug.SetMemoryLimit(base)
	first := roomToRun()
	if got := debug.SetMemoryLimit(-1); got != base+runHeadroom {
		t.Fatalf("limit during one run = %d MiB, want %d", got>>20, (base+runHeadroom)>>20)
	}
	second := roomToRun()
	if got := debug.SetMemoryLimit(-1); got != base+2*runHeadroom {
		t.Fatalf("limit during two runs = %d MiB, want %d", got>>20, (base+2*runHeadroom)>>20)
	}
	first()
	if got := debug.SetMemoryLimit(-1); got != base+runHeadroom {
		t.Errorf("limit after one of two runs ended = %d MiB, want %d", got>>20, (base+runHeadroom)>>20)
	}
	second()
	if got := debug.SetMemoryLimit(-1); got != base {
		t.Errorf("limit after the runs = %d MiB, want the console's %d", got>>20, base>>20)
	}

	debug.SetMemoryLimit(math.MaxInt64)
	roomToRun()()
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("a runtime without a soft limit got one of %d MiB", got>>20)
	}
}
