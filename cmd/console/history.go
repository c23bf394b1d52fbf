package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/kueue"
	"github.com/openquota/console/internal/leader"
	"github.com/openquota/console/internal/metrics"
	"github.com/openquota/console/internal/taskhistory"
)

// historyOptions are the task history's flags.
type historyOptions struct {
	store     string // sqlite, postgres or none
	path      string
	dsnFile   string
	retention time.Duration
	lease     string
	// pathSet: --history-path was given, not defaulted.
	pathSet bool
}

const historyOff = "none"

func (h *historyOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&h.store, "history-store", taskhistory.DriverSQLite, "where the task history is kept: sqlite (a file, --history-path), postgres (a server, --history-dsn-file; for several replicas) or none")
	fs.StringVar(&h.path, "history-path", "", "--history-store sqlite: the database file (default: one per cluster under the user's cache folder)")
	fs.StringVar(&h.dsnFile, "history-dsn-file", "", "--history-store postgres: file holding the PostgreSQL connection string (e.g. a mounted Secret)")
	fs.DurationVar(&h.retention, "history-retention", taskhistory.DefaultRetention, "how long the task history keeps records")
	fs.StringVar(&h.lease, "leader-election-lease", "quota-console", "the Lease (in --state-namespace) that elects the one replica recording the task history")
}

// defaultHistoryPath is a file under the user's cache folder named after
// the cluster's apiserver: a console pointed at another cluster keeps
// another history.
func defaultHistoryPath(server string) string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' {
			return r
		}
		return '_'
	}, strings.TrimPrefix(strings.TrimPrefix(server, "https://"), "http://"))
	return filepath.Join(dir, "quota-console", "history-"+name+".db")
}

func (h *historyOptions) check() error {
	switch h.store {
	case taskhistory.DriverSQLite:
		if h.pathSet && h.path == "" {
			return errors.New("--history-path must not be empty")
		}
	case taskhistory.DriverPostgres:
		if h.dsnFile == "" {
			return errors.New("--history-store postgres needs --history-dsn-file")
		}
	case historyOff:
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

// history is the task history as pages see it: the store, or why there is
// none. A PostgreSQL store that does not answer at start is opened later,
// in the background.
type history struct {
	mu    sync.RWMutex
	store *taskhistory.Store
	err   error

	recorder atomic.Pointer[taskhistory.Recorder]
	leading  atomic.Bool
}

// Get is the handlers' Deps.History.
func (h *history) Get() (*taskhistory.Store, error) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.store, h.err
}

func (h *history) set(s *taskhistory.Store, err error) {
	h.mu.Lock()
	h.store, h.err = s, err
	h.mu.Unlock()
}

// historyDeps are what the recorder follows and where it keeps its Lease.
type historyDeps struct {
	server   string // the apiserver's URL
	kube     kubernetes.Interface
	cache    *kueue.Cache
	settings domain.Settings
	metrics  *metrics.Console
	log      *slog.Logger
}

// retryOpen is how often an unreachable PostgreSQL store is tried again.
const retryOpen = 30 * time.Second

// startHistory opens the store and, once it is open, campaigns for the
// Lease and records while holding it. It registers the cache hooks, so it
// runs before the cache starts. A SQLite file that cannot be opened (not a
// database, a newer schema) stops the start; an unreachable PostgreSQL does
// not.
func startHistory(ctx context.Context, o historyOptions, d historyDeps) (*history, error) {
	h := &history{}
	d.metrics.RegisterHistory(h.leading.Load, func() metrics.HistoryStats {
		if r := h.recorder.Load(); r != nil {
			st := r.Stats()
			return metrics.HistoryStats{Written: st.Written, Dropped: st.Dropped, WriteErrors: st.WriteErrors}
		}
		return metrics.HistoryStats{}
	})
	if o.store == historyOff {
		h.set(nil, errors.New("history is off (--history-store none)"))
		return h, nil
	}
	if o.store == taskhistory.DriverSQLite && !o.pathSet {
		o.path = defaultHistoryPath(d.server)
		// The default file lives under the user's cache folder, which a
		// container without a home (the image) lacks: run without history
		// rather than not at all. A path given by flag must work.
		if o.path == "" {
			h.set(nil, errors.New("history is off: no user cache folder for its file; set --history-path"))
			d.log.Warn("task history off: no user cache folder for its file; set --history-path")
			return h, nil
		}
		if err := os.MkdirAll(filepath.Dir(o.path), 0o700); err != nil {
			h.set(nil, fmt.Errorf("history is off: no folder for %s (%v); set --history-path", o.path, err))
			d.log.Warn("task history off: the default file's folder cannot be created; set --history-path", "path", o.path, "err", err)
			return h, nil
		}
	}
	hooks(d.cache, h)
	cfg := taskhistory.Config{Driver: o.store, Path: o.path, Retention: o.retention}
	if o.store == taskhistory.DriverPostgres {
		dsn, err := os.ReadFile(o.dsnFile)
		if err != nil {
			return nil, fmt.Errorf("--history-dsn-file: %w", err)
		}
		cfg.DSN = strings.TrimSpace(string(dsn))
	}
	open := func() (*taskhistory.Store, error) {
		octx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		return taskhistory.Open(octx, cfg)
	}
	store, err := open()
	switch {
	case err == nil:
		h.set(store, nil)
		d.log.Info("task history", "store", store.Name(), "retention", o.retention)
		go record(ctx, o, d, h, store)
	case o.store == taskhistory.DriverSQLite:
		return nil, err
	default:
		h.set(nil, fmt.Errorf("the task history store is unreachable: %w", err))
		d.log.Warn("task history store unreachable; starting without history and retrying every 30 s", "err", err)
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-time.After(retryOpen):
				}
				store, err := open()
				if err != nil {
					h.set(nil, fmt.Errorf("the task history store is unreachable: %w", err))
					d.log.Debug("task history store still unreachable", "err", err)
					continue
				}
				h.set(store, nil)
				d.log.Info("task history store reachable", "store", store.Name())
				record(ctx, o, d, h, store)
				return
			}
		}()
	}
	return h, nil
}

// hooks feed the recorder, once there is one, from the cache's informers.
func hooks(c *kueue.Cache, h *history) {
	c.OnWorkload(func(wl *kueuev1beta2.Workload) {
		if r := h.recorder.Load(); r != nil {
			r.Observe(wl)
		}
	})
	c.OnChange(func(ev kueue.Event) {
		r := h.recorder.Load()
		if r == nil {
			return
		}
		switch o := ev.Object.(type) {
		case *kueue.WorkloadTask:
			if ev.Deleted {
				at := time.Now()
				if o.DeletionTimestamp != nil && o.DeletionTimestamp.Time.Before(at) {
					at = o.DeletionTimestamp.Time
				}
				r.DeletedUID(string(o.UID), at)
			}
		case *kueuev1beta2.ClusterQueue:
			if ev.Deleted {
				r.ClusterQueueDeleted(o)
			} else {
				r.ObserveClusterQueue(nil, o)
			}
		}
	})
}

// record runs the recorder while this replica holds the Lease, until ctx
// ends.
func record(ctx context.Context, o historyOptions, d historyDeps, h *history, store *taskhistory.Store) {
	// The pod's name (the chart sets POD_NAME); elsewhere the host name and
	// a random suffix, so that two processes on one machine are two
	// candidates.
	identity := os.Getenv("POD_NAME")
	if identity == "" {
		identity = leader.DefaultIdentity()
	}
	rec := taskhistory.NewRecorder(store, taskhistory.RecorderConfig{
		TeamPrefix: d.settings.NamespacePrefix,
		Identity:   identity,
		Workloads: func(ctx context.Context, page func([]*kueuev1beta2.Workload) error) error {
			return d.cache.WorkloadPages(ctx, 500, page)
		},
		ClusterQueues: func() ([]*kueuev1beta2.ClusterQueue, error) {
			return d.cache.ClusterQueues.List(labels.Everything())
		},
		Synced: d.cache.Synced,
		// The backfill reads every Workload whole: give the memory it used
		// back to the system rather than hold it as idle heap.
		Backfilled: debug.FreeOSMemory,
		Log:        d.log,
	})
	h.recorder.Store(rec)
	// A local run may have no state namespace yet: the Lease lives there.
	kueue.EnsureNamespace(ctx, d.kube, d.settings.StateNamespace, d.log)
	err := leader.Run(ctx, leader.Config{Client: d.kube, Namespace: d.settings.StateNamespace, Name: o.lease, Identity: identity, Log: d.log},
		func(ctx context.Context) {
			h.leading.Store(true)
			defer h.leading.Store(false)
			_ = rec.Run(ctx)
		}, nil)
	if err != nil {
		d.log.Error("task history: leader election", "err", err)
	}
}
