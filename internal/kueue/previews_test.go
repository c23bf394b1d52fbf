package kueue

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Many what-ifs at once (a member asking over and over, at 200 teams a
// second of a core each) ran Kueue's scheduler side by side without bound.
// At most maxPreviews run at once; the others wait for a slot, and those
// that find none in time are told the console is busy.
func TestPreviewsAreBounded(t *testing.T) {
	slots := newPreviewSlots(maxPreviews)
	var running, most atomic.Int32
	var busy atomic.Int32
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			release, err := slots.take(context.Background(), 30*time.Millisecond)
			if errors.Is(err, ErrPreviewBusy) {
				busy.Add(1)
				return
			}
			if err != nil {
				t.Error(err)
				return
			}
			defer release()
			n := running.Add(1)
			for {
				m := most.Load()
				if n <= m || most.CompareAndSwap(m, n) {
					break
				}
			}
			time.Sleep(20 * time.Millisecond)
			running.Add(-1)
		}()
	}
	wg.Wait()
	if most.Load() > maxPreviews {
		t.Errorf("%d previews ran at once, more than %d", most.Load(), maxPreviews)
	}
	if busy.Load() == 0 {
		t.Error("20 previews of 20 ms, waiting 30 ms for one of 2 slots: none was told the console is busy")
	}
	// Once they are done, a slot is free at once.
	release, err := slots.take(context.Background(), 0)
	if err != nil {
		t.Fatalf("a preview after the others: %v", err)
	}
	release()
}
