package taskhistory

import (
	"database/sql"
	"slices"

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
	amount          Resources
	borrowed        bool
	namespace, name string
	namesKnown      bool
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
	groups, err := t.groupsOf(`SELECT cluster_queue, flavor FROM admissions WHERE uid = ? AND ended_ms IS NULL AND `+began, uid, at)
	if err != nil {
		return 0, nil, err
	}
	n, err := t.exec(`UPDATE admissions SET ended_ms = ? WHERE uid = ? AND ended_ms IS NULL AND `+began, at, uid, at)
	return n, groups, err
}

func (t *txn) groupsOf(query string, args ...any) ([]queueFlavor, error) {
	st, err := t.stmt(query)
	if err != nil {
		return nil, err
	}
	rows, err := st.QueryContext(t.ctx, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []queueFlavor
	for rows.Next() {
		var g queueFlavor
		if err := rows.Scan(&g.clusterQueue, &g.flavor); err != nil {
			return nil, err
		}
		if !slices.Contains(out, g) {
			out = append(out, g)
		}
	}
	return out, rows.Err()
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
	// Every admission that held quota at or after from: the ones to decide,
	// and those that held quota before them.
	st, err := t.stmt(`SELECT uid, admitted_ms, ended_ms, gpus, neuron, cpu_milli, borrowed FROM admissions
		WHERE cluster_queue = ? AND flavor = ? AND ended_ms IS NULL
		UNION ALL
		SELECT uid, admitted_ms, ended_ms, gpus, neuron, cpu_milli, borrowed FROM admissions
		WHERE cluster_queue = ? AND flavor = ? AND ended_ms > ?`)
	if err != nil {
		return err
	}
	rows, err := st.QueryContext(t.ctx, g.clusterQueue, g.flavor, g.clusterQueue, g.flavor, from)
	if err != nil {
		return err
	}
	var held []*heldRow
	for rows.Next() {
		var h heldRow
		var borrowed int64
		if err := rows.Scan(&h.uid, &h.admitted, &h.ended, &h.amount.GPUs, &h.amount.Neuron, &h.amount.CPUMilli, &borrowed); err != nil {
			rows.Close()
			return err
		}
		h.borrowed = borrowed != 0
		held = append(held, &h)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, y := range held {
		if y.admitted < from {
			continue
		}
		borrows, err := t.borrows(self, g, y, held)
		if err != nil {
			return err
		}
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

// borrows decides admission y of g: domain.Borrows on each resource its
// queue has a nominal quota for when y began.
func (t *txn) borrows(self *taskRow, g queueFlavor, y *heldRow, held []*heldRow) (bool, error) {
	var before Resources
	for _, x := range held {
		if x == y || x.uid == y.uid || x.admitted > y.admitted || (x.ended.Valid && x.ended.Int64 <= y.admitted) {
			continue
		}
		if x.admitted == y.admitted { // the same second: by name, as the live pages order them
			for _, h := range []*heldRow{x, y} {
				if err := t.names(self, h); err != nil {
					return false, err
				}
			}
			if domain.CompareAdmissions(x.admitted, x.namespace, x.name, y.admitted, y.namespace, y.name) > 0 {
				continue
			}
		}
		before = before.Plus(x.amount)
	}
	nominal, err := t.nominalAt(g, y.admitted)
	if err != nil {
		return false, err
	}
	for r, n := range nominal {
		if domain.Borrows(before.Of(r), y.amount.Of(r), n) {
			return true, nil
		}
	}
	return false, nil
}

// names looks up h's task's namespace and name.
func (t *txn) names(self *taskRow, h *heldRow) error {
	if h.namesKnown {
		return nil
	}
	h.namesKnown = true
	if self != nil && h.uid == self.uid {
		h.namespace, h.name = self.namespace, self.name
		return nil
	}
	row, err := t.queryRow(`SELECT namespace, name FROM tasks WHERE uid = ?`, h.uid)
	if err != nil {
		return err
	}
	if err := row.Scan(&h.namespace, &h.name); err != nil && err != sql.ErrNoRows {
		return err
	}
	return nil
}

// nominalAt is g's nominal quota of each borrowed resource in force at at;
// a resource without a recorded quota is left out.
func (t *txn) nominalAt(g queueFlavor, at int64) (map[corev1.ResourceName]int64, error) {
	st, err := t.stmt(`SELECT resource, nominal, from_ms FROM quotas WHERE cluster_queue = ? AND flavor = ? AND from_ms <= ? AND (to_ms IS NULL OR to_ms > ?)`)
	if err != nil {
		return nil, err
	}
	rows, err := st.QueryContext(t.ctx, g.clusterQueue, g.flavor, at, at)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[corev1.ResourceName]int64{}
	since := map[corev1.ResourceName]int64{}
	for rows.Next() {
		var res string
		var nominal, fromMS int64
		if err := rows.Scan(&res, &nominal, &fromMS); err != nil {
			return nil, err
		}
		r := corev1.ResourceName(res)
		if !slices.Contains(domain.BorrowedResources, r) {
			continue
		}
		if s, ok := since[r]; !ok || fromMS >= s { // the latest row in force
			out[r], since[r] = nominal, fromMS
		}
	}
	return out, rows.Err()
}
