package taskhistory

// migrations are the schema, one version each, applied in order and never
// edited once released: a change is a new version. {{serial}} and {{blob}}
// are each dialect's auto-numbered primary key and bytes; {{clustered}}
// stores a table in its primary key's order (SQLite's WITHOUT ROWID: no
// second copy of the key). Times are Unix
// milliseconds (_ms), durations milliseconds; resources are GPUs, Neuron
// devices, vCPU millicores and memory MiB.
var migrations = []string{
	// 1: the first schema.
	`
CREATE TABLE runs (
	id {{serial}},
	identity TEXT NOT NULL,
	started_ms BIGINT NOT NULL,
	heartbeat_ms BIGINT NOT NULL,
	ended_ms BIGINT
);
CREATE INDEX runs_heartbeat ON runs (heartbeat_ms);

-- Periods in which the recorder dropped events (its queue overflowed).
CREATE TABLE lost (
	id {{serial}},
	from_ms BIGINT NOT NULL,
	to_ms BIGINT NOT NULL,
	reason TEXT NOT NULL
);
CREATE INDEX lost_to ON lost (to_ms);

-- One row per Workload: its latest summary (see Task). wait_ms, run_ms and
-- span_class are derived on write for the statistics.
CREATE TABLE tasks (
	uid TEXT PRIMARY KEY,
	namespace TEXT NOT NULL,
	name TEXT NOT NULL,
	owner_kind TEXT NOT NULL,
	owner_name TEXT NOT NULL,
	owner_uid TEXT NOT NULL,
	team TEXT NOT NULL,
	class TEXT NOT NULL,
	priority INTEGER NOT NULL,
	cluster_queue TEXT NOT NULL,
	local_queue TEXT NOT NULL,
	created_ms BIGINT NOT NULL,
	gpus BIGINT NOT NULL,
	neuron BIGINT NOT NULL,
	cpu_milli BIGINT NOT NULL,
	memory_mib BIGINT NOT NULL,
	pod_sets TEXT NOT NULL,
	state TEXT NOT NULL,
	wait_start_ms BIGINT NOT NULL,
	admitted_ms BIGINT,
	finished_ms BIGINT,
	released_ms BIGINT,
	past_ms BIGINT NOT NULL,
	outcome TEXT NOT NULL,
	finish_reason TEXT NOT NULL,
	flavors TEXT NOT NULL,
	deleted_ms BIGINT,
	wait_ms BIGINT,
	run_ms BIGINT,
	span_class INTEGER,
	first_admitted_ms BIGINT,
	ended_ms BIGINT,
	gpu_ms BIGINT NOT NULL,
	borrowed INTEGER NOT NULL,
	preempted INTEGER NOT NULL
);
-- The statistics read the facts of a period from these indexes alone.
CREATE INDEX tasks_admitted ON tasks (admitted_ms, team, class, wait_ms);
CREATE INDEX tasks_finished ON tasks (finished_ms, team, class, run_ms, admitted_ms) WHERE run_ms IS NOT NULL;
CREATE INDEX tasks_span ON tasks (span_class, admitted_ms, finished_ms) WHERE span_class IS NOT NULL;
CREATE INDEX tasks_open ON tasks (deleted_ms) WHERE deleted_ms IS NULL;
CREATE INDEX tasks_ended ON tasks (ended_ms);
CREATE INDEX tasks_not_ended ON tasks (uid) WHERE ended_ms IS NULL;

-- Every event of every task (see Event).
CREATE TABLE events (
	uid TEXT NOT NULL,
	kind TEXT NOT NULL,
	at_ms BIGINT NOT NULL,
	cluster_queue TEXT NOT NULL,
	class TEXT NOT NULL,
	flavors TEXT NOT NULL,
	borrowed INTEGER NOT NULL,
	reason TEXT NOT NULL,
	message TEXT NOT NULL,
	PRIMARY KEY (uid, kind, at_ms)
){{clustered}};
CREATE INDEX events_admitted ON events (cluster_queue, at_ms) WHERE kind = 'admitted';

-- What each admission held on each flavor, and when it ended.
CREATE TABLE admissions (
	uid TEXT NOT NULL,
	admitted_ms BIGINT NOT NULL,
	flavor TEXT NOT NULL,
	cluster_queue TEXT NOT NULL,
	team TEXT NOT NULL,
	borrowed INTEGER NOT NULL,
	gpus BIGINT NOT NULL,
	neuron BIGINT NOT NULL,
	cpu_milli BIGINT NOT NULL,
	memory_mib BIGINT NOT NULL,
	ended_ms BIGINT,
	PRIMARY KEY (uid, admitted_ms, flavor)
){{clustered}};
CREATE INDEX admissions_open ON admissions (ended_ms) WHERE ended_ms IS NULL;
CREATE INDEX admissions_ended ON admissions (ended_ms);

CREATE TABLE preemptions (
	uid TEXT NOT NULL,
	at_ms BIGINT NOT NULL,
	team TEXT NOT NULL,
	class TEXT NOT NULL,
	cluster_queue TEXT NOT NULL,
	gpus BIGINT NOT NULL,
	admitted_ms BIGINT,
	lost_gpu_ms BIGINT,
	reason TEXT NOT NULL,
	reason_words TEXT NOT NULL,
	message TEXT NOT NULL,
	preemptor_uid TEXT NOT NULL,
	preemptor_job_uid TEXT NOT NULL,
	preemptor_cluster_queue TEXT NOT NULL,
	PRIMARY KEY (uid, at_ms)
){{clustered}};
CREATE INDEX preemptions_at ON preemptions (at_ms);
CREATE INDEX preemptions_team ON preemptions (team, at_ms);
CREATE INDEX preemptions_class ON preemptions (class, at_ms);
CREATE INDEX preemptions_preemptor ON preemptions (preemptor_uid);

-- ClusterQueues: their team and cohort as last seen.
CREATE TABLE queues (
	cluster_queue TEXT PRIMARY KEY,
	team TEXT NOT NULL,
	cohort TEXT NOT NULL
);

-- Quota over time, per ClusterQueue, flavor and resource: each row holds
-- from from_ms until to_ms (NULL: still). NULL limits: none.
CREATE TABLE quotas (
	cluster_queue TEXT NOT NULL,
	flavor TEXT NOT NULL,
	resource TEXT NOT NULL,
	from_ms BIGINT NOT NULL,
	to_ms BIGINT,
	team TEXT NOT NULL,
	cohort TEXT NOT NULL,
	nominal BIGINT NOT NULL,
	borrowing_limit BIGINT,
	lending_limit BIGINT,
	PRIMARY KEY (cluster_queue, flavor, resource, from_ms)
){{clustered}};
CREATE INDEX quotas_open ON quotas (to_ms) WHERE to_ms IS NULL;
CREATE INDEX quotas_to ON quotas (to_ms);

-- The statistics rollup (see rollup.go): per UTC hour and day, the
-- completed facts of every team and class, encoded in data.
CREATE TABLE stats_rollup (
	span_ms BIGINT NOT NULL,
	start_ms BIGINT NOT NULL,
	data {{blob}} NOT NULL,
	PRIMARY KEY (span_ms, start_ms)
){{clustered}};
`,
	// 2: admissions by time, for the admission rates of every queue at once.
	`CREATE INDEX events_admitted_at ON events (at_ms, cluster_queue, class) WHERE kind = 'admitted';`,
	// 3: the admissions holding each ClusterQueue's flavor, with what they
	// hold, to decide which borrowed (borrowed.go) from the index alone.
	`CREATE INDEX admissions_queue ON admissions (cluster_queue, flavor, ended_ms, admitted_ms, gpus, neuron, cpu_milli, borrowed);`,
	// 4: the MIG partitions a task asks for, in words, and the time its
	// ended admissions held them, for partition-hours in the report.
	`ALTER TABLE tasks ADD COLUMN partitions TEXT NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN held_ms BIGINT NOT NULL DEFAULT 0;`,
	// 5: the Workload's labels, in words, for the report's labels column.
	// Rows written before have none.
	`ALTER TABLE tasks ADD COLUMN labels TEXT NOT NULL DEFAULT '';`,
	// 6: the MIG partitions each admission holds on its flavor, in words
	// (domain.PartitionsWord), for partition-hours in the usage summary.
	// Admissions written before hold none.
	`ALTER TABLE admissions ADD COLUMN partitions TEXT NOT NULL DEFAULT '';`,
}
