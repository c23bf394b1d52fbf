package app

import (
	"context"
	"errors"
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

// TaskHistoryConfig says where the task history is kept and how its
// recorder is elected.
type TaskHistoryConfig struct {
	// Driver is taskhistory.DriverSQLite, taskhistory.DriverPostgres or
	// TaskHistoryOff.
	Driver string
	// Path is the SQLite file; "" is a file per cluster under the user's
	// cache folder.
	Path string
	// DSN is the PostgreSQL connection string.
	DSN       string
	Retention time.Duration
	// Lease (in the state namespace) elects the one replica that records;
	// Identity is this replica's name in it.
	Lease, Identity string
	// Store, when set, is an open store to read and record to instead
	// (its opener closes it).
	Store *taskhistory.Store
}

// TaskHistoryOff is the Driver of a console without a task history.
const TaskHistoryOff = "none"

// DefaultLease is the Lease the console's RBAC (deploy/rbac, the chart)
// lets it hold.
const DefaultLease = "quota-console-leader"

// TaskHistory is the task history as the pages see it: the store's
// queries, or why there is none (off, or not reachable yet). A PostgreSQL
// store that does not answer at start is opened later, in the background.
type TaskHistory struct {
	mu    sync.RWMutex
	store *taskhistory.Store
	err   error
	// owned: the store was opened here, and is closed here.
	owned bool

	recorder atomic.Pointer[taskhistory.Recorder]
	leading  atomic.Bool
	// enabled: started with a store (--history-store sqlite or postgres).
	enabled atomic.Bool
	// recorded is closed when the recorder and its Lease have stopped
	// (nil: none was started).
	recorded chan struct{}
	// stalled: the store did not answer a query in time (query).
	stalled atomic.Pointer[stall]
}

// Store is the store, or why there is none.
func (h *TaskHistory) Store() (*taskhistory.Store, error) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.store, h.err
}

// Recorder is the recorder, once the store is open (nil before, and
// without one).
func (h *TaskHistory) Recorder() *taskhistory.Recorder { return h.recorder.Load() }

func (h *TaskHistory) set(s *taskhistory.Store, err error) {
	h.mu.Lock()
	h.store, h.err = s, err
	h.mu.Unlock()
}

// close waits for the recorder to stop (it ends with the context its App
// was started with) and closes a store opened here.
func (h *TaskHistory) close() error {
	if h.recorded != nil {
		select {
		case <-h.recorded:
		case <-time.After(15 * time.Second):
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.store == nil || !h.owned {
		return nil
	}
	err := h.store.Close()
	h.store, h.err = nil, errors.New("the task history store is closed")
	return err
}

// Recording is nil unless this replica records and its last write to the
// store failed (the recorder retries it).
func (h *TaskHistory) Recording() error {
	if rec := h.recorder.Load(); rec != nil && h.leading.Load() && rec.Stats().Failing {
		return errors.New("the task history store refuses or does not answer the recorder's writes")
	}
	return nil
}

// Available is nil when there is a store to ask.
func (h *TaskHistory) Available() error {
	_, err := h.query()
	return err
}

// The queries the pages make, each of the store as it is now. A store
// that did not answer one in time is not asked again for stallFor: each
// page would otherwise wait out its own timeout, one after another.

func (h *TaskHistory) TaskStats(ctx context.Context, w taskhistory.Window) (*taskhistory.WindowStats, error) {
	s, err := h.query()
	if err != nil {
		return nil, err
	}
	out, err := s.TaskStats(ctx, w)
	return out, h.after(err)
}

func (h *TaskHistory) AdmissionRates(ctx context.Context, w taskhistory.Window) (taskhistory.AdmissionRates, error) {
	s, err := h.query()
	if err != nil {
		return taskhistory.AdmissionRates{}, err
	}
	out, err := s.AdmissionRates(ctx, w)
	return out, h.after(err)
}

func (h *TaskHistory) Preemptions(ctx context.Context, q taskhistory.PreemptionQuery) (*taskhistory.PreemptionPage, error) {
	s, err := h.query()
	if err != nil {
		return nil, err
	}
	out, err := s.Preemptions(ctx, q)
	return out, h.after(err)
}

func (h *TaskHistory) PreemptionsByTeam(ctx context.Context, w taskhistory.Window, team string) ([]taskhistory.PreemptedBy, []taskhistory.Period, error) {
	s, err := h.query()
	if err != nil {
		return nil, nil, err
	}
	by, gaps, err := s.PreemptionsByTeam(ctx, w, team)
	return by, gaps, h.after(err)
}

func (h *TaskHistory) UsageSummary(ctx context.Context, w taskhistory.Window) (*taskhistory.UsageSummary, error) {
	s, err := h.query()
	if err != nil {
		return nil, err
	}
	out, err := s.UsageSummary(ctx, w)
	return out, h.after(err)
}

func (h *TaskHistory) TaskReport(ctx context.Context, q taskhistory.ReportQuery, each func(taskhistory.ReportRow) error) (string, []taskhistory.Period, error) {
	s, err := h.query()
	if err != nil {
		return "", nil, err
	}
	name, gaps, err := s.TaskReport(ctx, q, each)
	return name, gaps, h.after(err)
}

// stallFor is how long a store that did not answer a query in time is not
// asked again.
const stallFor = 15 * time.Second

// stall is why the store is not asked, until when.
type stall struct {
	until time.Time
	err   error
}

// query is the store to ask, or why there is none to ask now.
func (h *TaskHistory) query() (*taskhistory.Store, error) {
	if st := h.stalled.Load(); st != nil && time.Now().Before(st.until) {
		return nil, st.err
	}
	return h.Store()
}

// after notes how a query ended: one that ran out of time stalls the
// store for stallFor.
func (h *TaskHistory) after(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		h.stalled.Store(&stall{until: time.Now().Add(stallFor),
			err: fmt.Errorf("the task history store did not answer in time; it is asked again in %s: %w", stallFor, err)})
	}
	return err
}

// recording is what the recorder follows and where it keeps its Lease.
type recording struct {
	server   string // the apiserver's URL
	kube     kubernetes.Interface
	cache    *kueue.Cache
	settings domain.Settings
	metrics  *metrics.Console
	log      *slog.Logger
}

// retryOpen is how often a store that could not be opened is tried again.
const retryOpen = 30 * time.Second

// startTaskHistory opens the store and, once it is open, campaigns for the
// Lease and records while holding it. It registers the cache hooks, so it
// runs before the cache starts. A store that cannot be opened (a SQLite
// file that is not a database or has a newer schema, an unreachable
// PostgreSQL) is tried again every retryOpen; the console runs without it
// meanwhile.
func startTaskHistory(ctx context.Context, o TaskHistoryConfig, r recording) (*TaskHistory, error) {
	h := &TaskHistory{}
	r.metrics.RegisterTaskHistory(h.leading.Load, func() metrics.TaskHistoryStats {
		st := metrics.TaskHistoryStats{Enabled: h.enabled.Load(), StoreOpen: h.Available() == nil && h.Recording() == nil}
		if rec := h.recorder.Load(); rec != nil {
			s := rec.Stats()
			st.Written, st.Dropped, st.WriteErrors = s.Written, s.Dropped, s.WriteErrors
		}
		return st
	})
	if o.Lease == "" {
		o.Lease = DefaultLease
	}
	if o.Store != nil {
		h.enabled.Store(true)
		h.set(o.Store, nil)
		hooks(r.cache, h)
		h.recorded = make(chan struct{})
		go record(ctx, o, r, h, o.Store)
		return h, nil
	}
	if o.Driver == TaskHistoryOff || o.Driver == "" {
		h.set(nil, fmt.Errorf("%w (--history-store none)", taskhistory.ErrOff))
		return h, nil
	}
	if o.Driver == taskhistory.DriverSQLite && o.Path == "" {
		o.Path = defaultTaskHistoryPath(r.server)
		// The default file lives under the user's cache folder, which a
		// container without a home (the image) lacks: run without history
		// rather than not at all.
		if o.Path == "" {
			h.set(nil, fmt.Errorf("%w: no user cache folder for its file; set --history-path", taskhistory.ErrOff))
			r.log.Warn("task history off: no user cache folder for its file; set --history-path")
			return h, nil
		}
		if err := os.MkdirAll(filepath.Dir(o.Path), 0o700); err != nil {
			h.set(nil, fmt.Errorf("%w: no folder for %s (%v); set --history-path", taskhistory.ErrOff, o.Path, err))
			r.log.Warn("task history off: the default file's folder cannot be created; set --history-path", "path", o.Path, "err", err)
			return h, nil
		}
	}
	h.enabled.Store(true)
	hooks(r.cache, h)
	cfg := taskhistory.Config{Driver: o.Driver, Path: o.Path, DSN: o.DSN, Retention: o.Retention}
	open := func() (*taskhistory.Store, error) {
		octx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		return taskhistory.Open(octx, cfg)
	}
	h.owned = true
	h.recorded = make(chan struct{})
	store, err := open()
	switch {
	case err == nil:
		h.set(store, nil)
		r.log.Info("task history", "store", store.Name(), "retention", o.Retention)
		go record(ctx, o, r, h, store)
	default:
		// A store that cannot be opened degrades the pages that read it,
		// never the console: a damaged SQLite file, a read-only mount or
		// an unreachable PostgreSQL is tried again every retryOpen.
		unavailable := "the task history store is unreachable"
		if o.Driver == taskhistory.DriverSQLite {
			unavailable = "the task history file cannot be opened"
		}
		h.set(nil, fmt.Errorf("%s: %w", unavailable, err))
		r.log.Error(unavailable+"; starting without history and trying again every 30 s", "err", err)
		go func() {
			for {
				select {
				case <-ctx.Done():
					close(h.recorded)
					return
				case <-time.After(retryOpen):
				}
				store, err := open()
				if err != nil {
					h.set(nil, fmt.Errorf("%s: %w", unavailable, err))
					r.log.Debug(unavailable+", still", "err", err)
					continue
				}
				h.set(store, nil)
				r.log.Info("task history store reachable", "store", store.Name())
				record(ctx, o, r, h, store)
				return
			}
		}()
	}
	return h, nil
}

// defaultTaskHistoryPath is a file under the user's cache folder named
// after the cluster's apiserver: a console pointed at another cluster keeps
// another history.
func defaultTaskHistoryPath(server string) string {
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

// hooks feed the recorder, once there is one, from the cache's informers.
func hooks(c *kueue.Cache, h *TaskHistory) {
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
		case *kueuev1beta2.Cohort:
			r.ObserveCohorts()
		}
	})
}

// record runs the recorder until ctx ends, while this replica holds the
// Lease when the store is shared; then it closes h.recorded.
func record(ctx context.Context, o TaskHistoryConfig, r recording, h *TaskHistory, store *taskhistory.Store) {
	defer close(h.recorded)
	identity := o.Identity
	if identity == "" {
		identity = leader.DefaultIdentity()
	}
	rec := taskhistory.NewRecorder(store, taskhistory.RecorderConfig{
		TeamPrefix: r.settings.NamespacePrefix,
		TeamOf: func(namespace, localQueue, clusterQueue string) (string, bool) {
			return r.cache.TeamOfTask(r.settings, namespace, localQueue, clusterQueue)
		},
		Identity: identity,
		Workloads: func(ctx context.Context, page func([]*kueuev1beta2.Workload) error) error {
			return r.cache.WorkloadPages(ctx, 500, page)
		},
		ClusterQueues: func() ([]*kueuev1beta2.ClusterQueue, error) {
			return r.cache.ClusterQueues.List(labels.Everything())
		},
		CohortTree: r.cache.CohortRoot,
		Synced:     r.cache.Synced,
		// The backfill reads every Workload whole: give the memory it used
		// back to the system rather than hold it as idle heap.
		Backfilled: debug.FreeOSMemory,
		Log:        r.log,
	})
	h.recorder.Store(rec)
	if !store.Shared() {
		// A SQLite file is this console's alone: it records without the
		// Lease, which would keep it from recording while any other
		// console of the cluster (another store's) holds it.
		h.leading.Store(true)
		defer h.leading.Store(false)
		_ = rec.Run(ctx)
		return
	}
	// A local run may have no state namespace yet: the Lease lives there.
	kueue.EnsureNamespace(ctx, r.kube, r.settings.State(), r.log)
	err := leader.Run(ctx, leader.Config{Client: r.kube, Namespace: r.settings.State(), Name: o.Lease, Identity: identity, Log: r.log},
		func(ctx context.Context) {
			h.leading.Store(true)
			defer h.leading.Store(false)
			_ = rec.Run(ctx)
		}, nil)
	if err != nil {
		r.log.Error("task history: leader election", "err", err)
	}
}
