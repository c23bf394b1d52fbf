// Package taskhistory owns the console's task history: what happened to every
// Kueue Workload (a task) and to the ClusterQueues' quotas, kept after the
// Workloads are gone, and the questions the pages ask of it.
//
// It has three parts:
//
//   - the Store: one schema with versioned migrations, embedded SQLite
//     (modernc.org/sqlite, no cgo) or PostgreSQL (pgx), retention; the
//     pages' queries and the recorder use separate connection pools, and
//     the per-task report reads in batches, holding no connection while its
//     caller writes them out, so slow readers never stop the recorder;
//   - the Recorder: follows Workloads and ClusterQueues through the informer
//     events the console already receives, backfills at start, writes in
//     batches off the informer goroutine, and records which periods it
//     covered;
//   - the queries: task statistics of a window, preemption history, usage
//     summary per team, instance type and day, a per-task report, and
//     admission rates.
//
// It depends on the Kubernetes and Kueue API types and on internal/domain for
// the console's rules (ReadWorkload, the one reading of a Workload; the
// statistics; the borrowing rule Borrows, which the store applies to what
// it recorded; the lending rule LentShares; team names). It must not import the web layer: no echo, no
// internal/handlers, no web/templates. Handlers call it; it never calls them.
//
// # Wiring
//
//	store, err := taskhistory.Open(ctx, taskhistory.Config{Driver: taskhistory.DriverSQLite, Path: file})
//	rec := taskhistory.NewRecorder(store, taskhistory.RecorderConfig{TeamPrefix: prefix, Identity: pod,
//		Workloads: cache.WorkloadPages, ClusterQueues: queueLister, Synced: cache.Synced})
//	cache.OnWorkload(rec.Observe)                   // every Workload the informer receives, whole
//	cache.OnChange(...)                             // deletions: rec.DeletedUID; ClusterQueues: rec.ObserveClusterQueue
//	go leader.Run(ctx, leaderConfig, func(ctx context.Context) { _ = rec.Run(ctx) }, nil)
//
// Following is through the informer's events only: the console's cache
// keeps just each Workload's task, so the recorder sees each Workload whole
// in the informer's transform (Observe), with no previous state; it keeps a
// hash of the last change it queued per UID and queues a Workload only when
// that changes. A deletion comes with the UID only (DeletedUID): the task
// ends from its record, as Gone ends it from a last state. Only the
// backfill lists: at start (once per leadership), and after the queue
// overflowed, it reads every Workload from the apiserver in pages
// (RecorderConfig.Workloads), writes each page, and keeps only the UIDs, to
// end the recorded tasks deleted while no recorder ran.
//
// Every replica registers the hooks; only the one holding the Lease runs
// the recorder, and the others' hooks do nothing. Queries may run on
// every replica.
//
// # Time, gaps and coverage
//
// Times are kept to the millisecond (Kubernetes keeps condition times to the
// second). Each recorder run is recorded with its start, heartbeats and end;
// a period no run covered, or in which the recorder had to drop events (its
// queue overflowed), is a gap. Every query result that spans time carries
// its Gaps, so that a page shows them as gaps, never as zero.
//
// # Statistics: completed facts and the live read model
//
// TaskStats returns completed facts only, per (team, class): the wait of each
// task whose current admission happened in the window (domain.FactsOf's Wait,
// from its wait start to that admission), and the run of each task that
// finished in the window having run (FactsOf's Run: finish − admission + time
// run before earlier evictions). A task deleted before it finished counts as
// finished at its deletion. The statistics of a page combine them with what
// is still live, taken from the live read model (domain.FactsOf on the
// Workloads in the cache), by this rule:
//
//   - run: history's runs, plus the run so far of every task running now;
//   - wait: history's waits, plus the wait so far of every task still waiting
//     (pending or preempted, active, not admitted);
//   - count and sum add up; the longest is the larger of the two; a team's
//     longest per class is taken over both before the teams' longest are
//     averaged;
//   - a task counts once in Samples: history counts tasks with a wait or a run
//     in the window; a running task adds one unless its admission is in the
//     window (history already counted it); a waiting task adds one.
//
// ClassStats and TeamClassStats apply this rule; for the same tasks their
// results equal domain.StatsByClass and domain.StatsByTeamAndClass.
package taskhistory
