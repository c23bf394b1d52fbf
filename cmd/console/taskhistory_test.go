package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openquota/console/internal/taskhistory"
)

// An empty DSN file (a Secret made without its key) stops the console at
// start with a sentence, rather than a connection retried for ever.
func TestAnEmptyDSNFileIsRefusedAtStart(t *testing.T) {
	file := filepath.Join(t.TempDir(), "dsn")
	if err := os.WriteFile(file, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := taskHistoryOptions{store: taskhistory.DriverPostgres, dsnFile: file}.config()
	if err == nil || !strings.Contains(err.Error(), "is empty") {
		t.Errorf("an empty DSN file: %v, want it refused as empty", err)
	}
	if err := os.WriteFile(file, []byte("postgres://db/history\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if c, err := (taskHistoryOptions{store: taskhistory.DriverPostgres, dsnFile: file}).config(); err != nil || c.DSN != "postgres://db/history" {
		t.Errorf("a DSN file: %+v, %v", c, err)
	}
}
