package kueue

import (
	"context"
	"errors"
	"time"
)

// ErrPreviewBusy is a preview that found no free slot in time: the console
// is computing as many previews as it has cores.
var ErrPreviewBusy = errors.New("the console is computing other previews")

// maxPreviews is how many previews (impact and what-if) run at once: each
// runs Kueue's scheduler over a copy of the cohort tree, a second of a core
// and tens of MiB at 200 teams, so more at once would only share the cores
// and add up the memory. previewWait is how long one waits for a slot.
const (
	maxPreviews = 2
	previewWait = 3 * time.Second
)

// previewSlots bound the previews computed at once.
type previewSlots chan struct{}

func newPreviewSlots(n int) previewSlots { return make(previewSlots, n) }

// take waits for a slot, up to wait or the end of ctx; release gives it
// back. A member asking the what-if over and over holds one slot at a time
// per request and waits behind the others.
func (p previewSlots) take(ctx context.Context, wait time.Duration) (release func(), err error) {
	select {
	case p <- struct{}{}:
		return func() { <-p }, nil
	default:
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case p <- struct{}{}:
		return func() { <-p }, nil
	case <-timer.C:
		return nil, ErrPreviewBusy
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
