package taskhistory

import (
	"database/sql"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/domain"
)

// Quota is a ClusterQueue's quota of one resource on one flavor, in the
// units of Resources (GPUs, Neuron devices, vCPU millicores, memory MiB)
// or in partitions for a MIG profile. A nil limit is no limit.
type Quota struct {
	Flavor, Resource string
	Nominal          int64
	BorrowingLimit   *int64
	LendingLimit     *int64
}

// QueueState is a ClusterQueue's quota as seen at At; Deleted: it is gone.
type QueueState struct {
	ClusterQueue string
	// Team is the team the queue serves (domain.Settings.TeamOfClusterQueue).
	Team, Cohort string
	At           time.Time
	// Created is when the ClusterQueue was made (zero: not known): a
	// queue's first recorded quota holds from then.
	Created time.Time
	Quotas  []Quota
	Deleted bool
}

// followed are the resources whose quota the history keeps, besides every
// MIG profile (isFollowed).
var followed = []corev1.ResourceName{domain.ResourceGPU, domain.ResourceNeuron, corev1.ResourceCPU, corev1.ResourceMemory}

// isFollowed reports whether the history keeps the quota of r.
func isFollowed(r corev1.ResourceName) bool {
	_, mig := domain.PartitionOf(r)
	return mig || slices.Contains(followed, r)
}

// QueueOf reads a ClusterQueue's quotas of the followed resources, seen at
// at; teamPrefix is the namespace prefix of team namespaces.
//
// The state's time is at rounded down to the second, as Kubernetes rounds
// the times of Kueue's conditions: the admissions a quota allows are
// recorded at the second they happened, rounded down, so a quota recorded
// at the millisecond the recorder saw it would begin after the admissions
// it allowed in the same second, which would count as borrowed until then.
func QueueOf(cq *kueuev1beta2.ClusterQueue, teamPrefix string, at time.Time) QueueState {
	team := domain.Settings{NamespacePrefix: teamPrefix}.TeamOfClusterQueue(cq)
	q := QueueState{ClusterQueue: cq.Name, Team: team, Cohort: string(cq.Spec.CohortName), At: at.Truncate(time.Second),
		Created: cq.CreationTimestamp.Time}
	for _, rg := range cq.Spec.ResourceGroups {
		for _, f := range rg.Flavors {
			for _, r := range f.Resources {
				if !isFollowed(r.Name) {
					continue
				}
				q.Quotas = append(q.Quotas, Quota{Flavor: string(f.Name), Resource: string(r.Name),
					Nominal: amount(r.Name, r.NominalQuota), BorrowingLimit: limit(r.Name, r.BorrowingLimit), LendingLimit: limit(r.Name, r.LendingLimit)})
			}
		}
	}
	return q
}

// QueueGone is a ClusterQueue deleted at at.
func QueueGone(cq *kueuev1beta2.ClusterQueue, teamPrefix string, at time.Time) QueueState {
	q := QueueOf(cq, teamPrefix, at)
	q.Quotas, q.Deleted = nil, true
	return q
}

func amount(name corev1.ResourceName, q resource.Quantity) int64 { return domain.Units(name, q) }

func limit(name corev1.ResourceName, q *resource.Quantity) *int64 {
	if q == nil {
		return nil
	}
	v := amount(name, *q)
	return &v
}

type quotaRow struct {
	flavor, resource string
	fromMS           int64
	team, cohort     string
	nominal          int64
	borrowing        sql.NullInt64
	lending          sql.NullInt64
}

func nullInt(p *int64) sql.NullInt64 {
	if p == nil {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: *p, Valid: true}
}

// writeQueue closes the quota rows that changed and opens the new ones; it
// returns how many rows it wrote. A queue without open rows (new to the
// history) gets its quota from its creation: the tasks waiting for it are
// admitted the moment it exists, before the recorder sees it.
func (t *txn) writeQueue(q QueueState) (int, error) {
	at := ms(q.At)
	if !q.Deleted {
		if _, err := t.exec(`INSERT INTO queues (cluster_queue, team, cohort) VALUES (?, ?, ?)
			ON CONFLICT (cluster_queue) DO UPDATE SET team = excluded.team, cohort = excluded.cohort
			WHERE queues.team <> excluded.team OR queues.cohort <> excluded.cohort`, q.ClusterQueue, q.Team, q.Cohort); err != nil {
			return 0, err
		}
	}
	open, err := t.openQuotas(q.ClusterQueue)
	if err != nil {
		return 0, err
	}
	want := map[string]quotaRow{}
	for _, qu := range q.Quotas {
		want[qu.Flavor+"\x00"+qu.Resource] = quotaRow{flavor: qu.Flavor, resource: qu.Resource, team: q.Team, cohort: q.Cohort,
			nominal: qu.Nominal, borrowing: nullInt(qu.BorrowingLimit), lending: nullInt(qu.LendingLimit)}
	}
	written := 0
	for _, o := range open {
		key := o.flavor + "\x00" + o.resource
		if w, ok := want[key]; ok && w.team == o.team && w.cohort == o.cohort && w.nominal == o.nominal && w.borrowing == o.borrowing && w.lending == o.lending {
			delete(want, key)
			continue
		}
		if _, err := t.exec(`UPDATE quotas SET to_ms = ? WHERE cluster_queue = ? AND flavor = ? AND resource = ? AND from_ms = ?`,
			max(at, o.fromMS), q.ClusterQueue, o.flavor, o.resource, o.fromMS); err != nil {
			return 0, err
		}
		written++
	}
	from := at
	if len(open) == 0 && !q.Created.IsZero() && q.Created.Before(q.At) {
		from = ms(q.Created)
	}
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		w := want[k]
		if _, err := t.exec(`INSERT INTO quotas (cluster_queue, flavor, resource, from_ms, to_ms, team, cohort, nominal, borrowing_limit, lending_limit)
			VALUES (?, ?, ?, ?, NULL, ?, ?, ?, ?, ?) ON CONFLICT (cluster_queue, flavor, resource, from_ms) DO UPDATE SET
			to_ms = NULL, team = excluded.team, cohort = excluded.cohort, nominal = excluded.nominal,
			borrowing_limit = excluded.borrowing_limit, lending_limit = excluded.lending_limit`,
			q.ClusterQueue, w.flavor, w.resource, from, w.team, w.cohort, w.nominal, w.borrowing, w.lending); err != nil {
			return 0, err
		}
		written++
	}
	return written, nil
}

func (t *txn) openQuotas(cq string) ([]quotaRow, error) {
	st, err := t.stmt(`SELECT flavor, resource, from_ms, team, cohort, nominal, borrowing_limit, lending_limit FROM quotas
		WHERE cluster_queue = ? AND to_ms IS NULL`)
	if err != nil {
		return nil, err
	}
	rows, err := st.QueryContext(t.ctx, cq)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []quotaRow
	for rows.Next() {
		var r quotaRow
		if err := rows.Scan(&r.flavor, &r.resource, &r.fromMS, &r.team, &r.cohort, &r.nominal, &r.borrowing, &r.lending); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
