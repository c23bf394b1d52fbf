package app_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/openquota/console/internal/app"
	"github.com/openquota/console/internal/taskhistory"
)

// A console that stops closes the store it opened (cmd/console calls Close
// after its server has stopped): SQLite's file is left consistent and
// PostgreSQL's connections are given back.
func TestStoppedAppClosesItsTaskHistoryStore(t *testing.T) {
	s := ownSettings()
	lease := "test-close-" + rand.String(8)
	c := startConsole(t, setup{settings: s, taskHistory: app.TaskHistoryConfig{Driver: taskhistory.DriverSQLite,
		Path: filepath.Join(t.TempDir(), "history.db"), Lease: lease, Identity: "app-test-" + rand.String(5)}})
	t.Cleanup(func() {
		_ = c.kube.CoordinationV1().Leases(s.State()).Delete(context.Background(), lease, metav1.DeleteOptions{})
	})
	st, err := c.app.TaskHistory.Store()
	if err != nil {
		t.Fatalf("the task history store did not open: %v", err)
	}
	now := time.Now()
	window := taskhistory.Window{From: now.Add(-time.Hour), To: now}
	if _, err := st.TaskStats(context.Background(), window); err != nil {
		t.Fatalf("the open store does not answer: %v", err)
	}

	c.stop()
	if err := c.app.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := st.TaskStats(context.Background(), window); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("the store still answers after the app stopped (err %v): it was not closed", err)
	}
	if err := c.app.TaskHistory.Available(); err == nil {
		t.Error("the pages still see a task history after the app stopped")
	}
}
