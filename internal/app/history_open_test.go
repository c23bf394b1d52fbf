package app_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openquota/console/internal/app"
	"github.com/openquota/console/internal/taskhistory"
)

// A SQLite task history that cannot be opened (a damaged file on the
// console's volume, a read-only mount) stopped the whole console, which a
// Deployment then restarted for ever. The console starts without the
// history, its pages say so, and it tries the file again.
func TestAConsoleStartsWhenItsSQLiteHistoryCannotBeOpened(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.db")
	if err := os.WriteFile(path, []byte(strings.Repeat("this is not a database\n", 400)), 0o600); err != nil {
		t.Fatal(err)
	}
	c := startConsole(t, setup{taskHistory: app.TaskHistoryConfig{Driver: taskhistory.DriverSQLite, Path: path}})
	if err := c.app.TaskHistory.Available(); err == nil || !strings.Contains(err.Error(), "cannot be opened") {
		t.Errorf("the task history: %v, want it unavailable, saying it cannot be opened", err)
	}
	code, body := c.get(t, "/tasks")
	if code != 200 || !strings.Contains(body, "The task history is unavailable right now.") {
		t.Errorf("/tasks: %d, want the page saying the task history is unavailable:\n%.1500s", code, body)
	}
}
