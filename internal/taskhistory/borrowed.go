package taskhistory

import (
	"database/sql"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/openquota/console/internal/domain"
)

// This file decides, from the record alone, whether each admission
// borrowed: domain.Borrows over what the admissions of its ClusterQueue's
// flavor that began before it (domain.CompareAdmissions) and still held
// quota then held, what it took, and the nominal quota in force then. The
// usage summary's borrowed hours are the same excess over the nominal
// quota, over time, so a task the summary counts borrowed hours for is
// marked borrowed.
//
// An admission written after later ones (a backfill reads Workloads in no
// order of time), or an earlier admission found to have ended sooner,
// changes what was held before the later ones: they are decided again, so
// that the answer depends on what is recorded, not on the order it was
// written in. Written as it happens, an admission is the latest of its
// queue and is decided once.

// heldRow is an admission of one ClusterQueue's flavor, holding quota
// during [admitted, ended).
type heldRow struct {
	uid             string
	admitted        int64
	ended           sql.NullInt64
	amount          FlavorUsage // its Flavor unset
	borrowed        bool
	namespace, name string // looked up for admissions at the same time only
}

// queueFlavor is one flavor of one ClusterQueue.
type queueFlavor struct{ clusterQueue, flavor string }

// endAdmissions ends, at at, uid's open admissions that began before at
// (also at at, with through), and returns the queues' flavors they held,
// whose later admissions must be decided again.
func (t *txn) endAdmissions(uid string, at int64, through bool) (int64, []queueFlavor, error) {
	began := "admitted_ms < ?"
	if through {
		began = "admitted_ms <= ?"
	}
	st, err := t.stmt(`UPDATE admissions SET ended_ms = ? WHERE uid = ? AND ended_ms IS NULL AND ` + began + ` RETURNING cluster_queue, flavor`)
	if err != nil {
		return 0, nil, err
	}
	rows, err := st.QueryContext(t.ctx, at, uid, at)
	if err != nil {
		return 0, nil, err
	}
	defer rows.Close()
	var n int64
	var out []queueFlavor
	for rows.Next() {
		var g queueFlavor
		if err := rows.Scan(&g.clusterQueue, &g.flavor); err != nil {
			return 0, nil, err
		}
		n++
		if !slices.Contains(out, g) {
			out = append(out, g)
		}
	}
	return n, out, rows.Err()
}

// decideBorrowed decides whether the admissions of each queue's flavor that
// began at or after from borrowed, and records what changed on the
// admission, its event and its task. self is the task being written (its
// row may not be stored yet).
func (t *txn) decideBorrowed(self *taskRow, from int64, groups []queueFlavor) error {
	changed := map[[2]any]bool{} // uid, admitted_ms
	for _, g := range groups {
		if g.flavor == "" {
			continue // an admission of nothing the history follows
		}
		if err := t.decideGroup(self, g, from, changed); err != nil {
			return err
		}
	}
	tasks := map[string]bool{}
	for k := range changed {
		uid, at := k[0].(string), k[1].(int64)
		if _, err := t.exec(`UPDATE events SET borrowed = (SELECT COALESCE(MAX(borrowed), 0) FROM admissions WHERE uid = ? AND admitted_ms = ?)
			WHERE uid = ? AND kind = 'admitted' AND at_ms = ?`, uid, at, uid, at); err != nil {
			return err
		}
		tasks[uid] = true
	}
	for uid := range tasks {
		if self != nil && uid == self.uid {
			continue // its row is written from denormalize
		}
		if _, err := t.exec(`UPDATE tasks SET borrowed = (SELECT COALESCE(MAX(borrowed), 0) FROM admissions WHERE uid = ?) WHERE uid = ?`, uid, uid); err != nil {
			return err
		}
	}
	return nil
}

func (t *txn) decideGroup(self *taskRow, g queueFlavor, from int64, changed map[[2]any]bool) error {
	// In one statement: every admission that held quota at or after from
	// (the ones to decide, and those that held quota before them), then
	// the flavor's quotas while the queue was in a cohort (domain.CanBorrowIn:
	// without them nothing borrows).
	st, err := t.stmt(`SELECT 0, uid, admitted_ms, ended_ms, gpus, neuron, cpu_milli, partitions, borrowed FROM admissions
		WHERE cluster_queue = ? AND flavor = ? AND ended_ms IS NULL
		UNION ALL
		SELECT 0, uid, admitted_ms, ended_ms, gpus, neuron, cpu_milli, partitions, borrowed FROM admissions
		WHERE cluster_queue = ? AND flavor = ? AND ended_ms > ?
		UNION ALL
		SELECT 1, resource, from_ms, to_ms, nominal, 0, 0, '', 0 FROM quotas
		WHERE cluster_queue = ? AND flavor = ? AND cohort <> ''`)
	if err != nil {
		return err
	}
	rows, err := st.QueryContext(t.ctx, g.clusterQueue, g.flavor, g.clusterQueue, g.flavor, from, g.clusterQueue, g.flavor)
	if err != nil {
		return err
	}
	var held []*heldRow
	var quotas []nominalRow
	for rows.Next() {
		var h heldRow
		var quota, borrowed int64
		var partitions string
		if err := rows.Scan(&quota, &h.uid, &h.admitted, &h.ended, &h.amount.GPUs, &h.amount.Neuron, &h.amount.CPUMilli, &partitions, &borrowed); err != nil {
			rows.Close()
			return err
		}
		if quota == 1 {
			quotas = append(quotas, nominalRow{resource: corev1.ResourceName(h.uid), from: h.admitted, to: h.ended, nominal: h.amount.GPUs})
			continue
		}
		h.borrowed = borrowed != 0
		if partitions != "" {
			h.amount.Partitions = domain.PartitionCounts(partitions)
		}
		held = append(held, &h)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if err := t.namesOfTies(self, held, from); err != nil {
		return err
	}
	for _, y := range held {
		if y.admitted < from {
			continue
		}
		borrows := borrowsAt(y, held, quotas)
		if borrows == y.borrowed {
			continue
		}
		if _, err := t.exec(`UPDATE admissions SET borrowed = ? WHERE uid = ? AND admitted_ms = ? AND flavor = ?`,
			boolInt(borrows), y.uid, y.admitted, g.flavor); err != nil {
			return err
		}
		changed[[2]any{y.uid, y.admitted}] = true
	}
	return nil
}

// nominalRow is a nominal quota of one resource of a flavor, in force during
// [from, to).
type nominalRow struct {
	resource corev1.ResourceName
	from     int64
	to       sql.NullInt64
	nominal  int64
}

// namesOfTies looks up the namespace and name of the admissions that began
// at the same time as another, at or after from: CompareAdmissions orders
// them by name.
func (t *txn) namesOfTies(self *taskRow, held []*heldRow, from int64) error {
	began := map[int64]int{}
	for _, h := range held {
		if h.admitted >= from {
			began[h.admitted]++
		}
	}
	var uids []any
	byUID := map[string][]*heldRow{}
	for _, h := range held {
		switch {
		case began[h.admitted] < 2:
		case self != nil && h.uid == self.uid: // its row may not be written yet
			h.namespace, h.name = self.namespace, self.name
		default:
			if byUID[h.uid] == nil {
				uids = append(uids, h.uid)
			}
			byUID[h.uid] = append(byUID[h.uid], h)
		}
	}
	if len(uids) == 0 {
		return nil
	}
	marks := strings.TrimSuffix(strings.Repeat("?, ", len(uids)), ", ")
	rows, err := t.tx.QueryContext(t.ctx, t.s.q(`SELECT uid, namespace, name FROM tasks WHERE uid IN (`+marks+`)`), uids...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var uid, namespace, name string
		if err := rows.Scan(&uid, &namespace, &name); err != nil {
			return err
		}
		for _, h := range byUID[uid] {
			h.namespace, h.name = namespace, name
		}
	}
	return rows.Err()
}

// borrowsAt decides admission y by domain.BorrowsAmong, with the nominal
// quotas in force when it began.
func borrowsAt(y *heldRow, held []*heldRow, quotas []nominalRow) bool {
	var others []domain.Holding
	for _, x := range held {
		if x.uid != y.uid {
			others = append(others, x.holding())
		}
	}
	nominal := map[corev1.ResourceName]int64{}
	since := map[corev1.ResourceName]int64{}
	for _, q := range quotas {
		if q.from <= y.admitted && (!q.to.Valid || q.to.Int64 > y.admitted) {
			if s, ok := since[q.resource]; !ok || q.from >= s { // the latest in force
				nominal[q.resource], since[q.resource] = q.nominal, q.from
			}
		}
	}
	return domain.BorrowsAmong(y.holding(), others, nominal)
}

func (h *heldRow) holding() domain.Holding {
	return domain.Holding{At: h.admitted, Ended: h.ended.Int64, Namespace: h.namespace, Name: h.name, Amount: h.amount}
}
