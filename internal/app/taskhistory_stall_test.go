package app

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openquota/console/internal/taskhistory"
)

// A store that did not answer a query in time is not asked again for a
// while: the next pages say so at once instead of each waiting out its
// own timeout. After the while, it is asked again.
func TestAStoreThatDidNotAnswerIsNotAskedAgainForAWhile(t *testing.T) {
	store, err := taskhistory.Open(context.Background(), taskhistory.Config{Driver: taskhistory.DriverSQLite,
		Path: filepath.Join(t.TempDir(), "history.db"), Retention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	h := &TaskHistory{}
	h.set(store, nil)
	now := time.Now()
	w := taskhistory.Window{From: now.Add(-time.Hour), To: now}

	if _, err := h.TaskStats(context.Background(), w); err != nil {
		t.Fatalf("a store that answers: %v", err)
	}
	late, cancel := context.WithDeadline(context.Background(), now.Add(-time.Second))
	defer cancel()
	if _, err := h.TaskStats(late, w); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a query out of time: %v", err)
	}
	_, err = h.UsageSummary(context.Background(), w)
	if err == nil || !strings.Contains(err.Error(), "did not answer in time") {
		t.Errorf("the next query asked the store: %v", err)
	}
	if h.Available() == nil {
		t.Error("a stalled store is said to be available")
	}
	h.stalled.Store(&stall{until: time.Now().Add(-time.Second), err: errors.New("over")})
	if _, err := h.TaskStats(context.Background(), w); err != nil {
		t.Errorf("after the while, the store is asked again: %v", err)
	}
}
