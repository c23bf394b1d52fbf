package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/openquota/console/internal/app"
	"github.com/openquota/console/internal/leader"
	"github.com/openquota/console/internal/taskhistory"
)

// taskHistoryOptions are the task history's flags.
type taskHistoryOptions struct {
	store     string // sqlite, postgres or none
	path      string
	dsnFile   string
	retention time.Duration
	lease     string
	// pathSet: --history-path was given, not defaulted.
	pathSet bool
}

func (h *taskHistoryOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&h.store, "history-store", taskhistory.DriverSQLite, "where the task history is kept: sqlite (a file, --history-path), postgres (a server, --history-dsn-file; for several replicas) or none")
	fs.StringVar(&h.path, "history-path", "", "--history-store sqlite: the database file (default: one per cluster under the user's cache folder)")
	fs.StringVar(&h.dsnFile, "history-dsn-file", "", "--history-store postgres: file holding the PostgreSQL connection string (e.g. a mounted Secret)")
	fs.DurationVar(&h.retention, "history-retention", taskhistory.DefaultRetention, "how long the task history keeps records")
	fs.StringVar(&h.lease, "leader-election-lease", app.DefaultLease, "the Lease (in --state-namespace) that elects the one replica recording the task history")
}

func (h *taskHistoryOptions) check() error {
	switch h.store {
	case taskhistory.DriverSQLite:
		if h.pathSet && h.path == "" {
			return errors.New("--history-path must not be empty")
		}
	case taskhistory.DriverPostgres:
		if h.dsnFile == "" {
			return errors.New("--history-store postgres needs --history-dsn-file")
		}
	case app.TaskHistoryOff:
	default:
		return fmt.Errorf("--history-store must be sqlite, postgres or none, not %q", h.store)
	}
	if h.retention <= 0 {
		return errors.New("--history-retention must be positive")
	}
	if h.lease == "" {
		return errors.New("--leader-election-lease must not be empty")
	}
	return nil
}

// config is the task history's part of the app's Config: the DSN read
// from its file, and this replica's name in the Lease (the pod's name, which
// the chart sets in POD_NAME; elsewhere the host name and a random suffix,
// so that two processes on one machine are two candidates).
func (h taskHistoryOptions) config() (app.TaskHistoryConfig, error) {
	c := app.TaskHistoryConfig{Driver: h.store, Path: h.path, Retention: h.retention, Lease: h.lease, Identity: os.Getenv("POD_NAME")}
	if c.Identity == "" {
		c.Identity = leader.DefaultIdentity()
	}
	if h.store == taskhistory.DriverPostgres {
		dsn, err := os.ReadFile(h.dsnFile)
		if err != nil {
			return c, fmt.Errorf("--history-dsn-file: %w", err)
		}
		c.DSN = strings.TrimSpace(string(dsn))
		if c.DSN == "" {
			// A Secret created without its key mounts an empty file: say so
			// at start rather than retry a connection for ever.
			return c, fmt.Errorf("--history-dsn-file: %s is empty: it must hold the PostgreSQL connection string", h.dsnFile)
		}
	}
	return c, nil
}
