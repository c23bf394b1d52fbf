package taskhistory

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/openquota/console/internal/domain"
)

// ResourceHours are one resource's hours of a team on one instance type and
// day: GPU-hours, Neuron-device-hours, vCPU-hours or partition-hours of a
// MIG profile.
type ResourceHours struct {
	// Allocated is the nominal quota over time.
	Allocated float64
	// Used is what the team's admitted tasks held.
	Used float64
	// Borrowed is the use above the nominal quota.
	Borrowed float64
	// Lent is the team's share of what its cohort borrowed (domain.LentShares).
	Lent float64
}

// UsageRow is one team's hours on one instance type (flavor) on one UTC day.
type UsageRow struct {
	Day                time.Time
	Team, InstanceType string
	GPU, Neuron, VCPU  ResourceHours
	// Partitions are the partition-hours of each MIG profile
	// ("mig-1g.10gb"), by the same rules; nil for none.
	Partitions map[string]ResourceHours
}

// PartitionGPUHours are the whole-GPU-hours the row's partition-hours of
// every MIG profile are worth (domain.GPUEquivalent).
func (r UsageRow) PartitionGPUHours() ResourceHours {
	var out ResourceHours
	for _, p := range slices.Sorted(maps.Keys(r.Partitions)) {
		h, per := r.Partitions[p], domain.GPUEquivalent(p, 1)
		out.Allocated += h.Allocated * per
		out.Used += h.Used * per
		out.Borrowed += h.Borrowed * per
		out.Lent += h.Lent * per
	}
	return out
}

// Profiles are the MIG profiles of the rows of the teams sees accepts
// (nil: every team), sorted.
func Profiles(rows []UsageRow, sees func(team string) bool) []string {
	seen := map[string]bool{}
	for _, r := range rows {
		if r.Partitions == nil || sees != nil && !sees(r.Team) {
			continue
		}
		for p := range r.Partitions {
			seen[p] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// UsageDay is one UTC day of a usage summary and its periods without a
// record: the day's figures cover the rest of it.
type UsageDay struct {
	Day     time.Time
	Missing []Period
}

// UsageSummary is the usage per team, instance type and UTC day of a window.
type UsageSummary struct {
	Rows []UsageRow // by day, team, instance type
	Days []UsageDay // every day the window touches
	// UpTo is when the figures end: the window's end, or the time of the
	// query when that is earlier.
	UpTo time.Time
}

// usageResources are the resources of the summary besides MIG profiles, in
// the order of the admissions table's gpus, neuron, cpu_milli columns.
var usageResources = []corev1.ResourceName{domain.ResourceGPU, domain.ResourceNeuron, corev1.ResourceCPU}

// anyPartition matches the resource name of every MIG profile in SQL.
var anyPartition = string(domain.PartitionResource("mig-")) + "%"

// UsageSummary integrates the recorded quotas and admissions over the
// recorded parts of w (up to now), per team, instance type and UTC day. At
// every instant, per ClusterQueue, flavor and resource: allocated is the
// nominal quota, used the sum of the admitted tasks' amounts, borrowed
// max(used − nominal, 0), and lent the queue's domain.LentShares of its
// cohort's borrowing. Each MIG profile counts as a resource of its own, in
// partitions. Teams are the ClusterQueues' (QueueState.Team).
func (s *Store) UsageSummary(ctx context.Context, w Window) (*UsageSummary, error) {
	fail := func(err error) (*UsageSummary, error) {
		return nil, fmt.Errorf("task history store %s: usage summary: %w", s.name, err)
	}
	now := s.clock()
	from, to := ceilMS(w.From), ceilMS(w.To)
	end := min(to, ms(now))
	out := &UsageSummary{UpTo: fromMS(max(from, end))}
	if from >= to {
		return out, nil
	}
	gaps, err := s.gaps(ctx, s.db, w, now)
	if err != nil {
		return fail(err)
	}
	for d := dayOf(from); d < to; d += dayMS {
		day := span{max(d, from), min(d+dayMS, to)}
		out.Days = append(out.Days, UsageDay{Day: fromMS(d), Missing: periods(intersect(spans(gaps), day))})
	}
	if from >= end {
		return out, nil
	}
	sw := newSweep(from, end, subtract(span{from, end}, spans(gaps)))
	if err := s.loadQuotas(ctx, sw); err != nil {
		return fail(err)
	}
	if err := s.loadAdmissions(ctx, sw); err != nil {
		return fail(err)
	}
	out.Rows = sw.run()
	return out, nil
}

func (s *Store) loadQuotas(ctx context.Context, sw *sweep) error {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT cluster_queue, flavor, resource, from_ms, to_ms, team, cohort, nominal, lending_limit
		FROM quotas WHERE from_ms < ? AND (to_ms IS NULL OR to_ms > ?) AND (resource IN (?, ?, ?) OR resource LIKE ?)`),
		sw.end, sw.start, string(domain.ResourceGPU), string(domain.ResourceNeuron), string(corev1.ResourceCPU), anyPartition)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var cq, flavor, res, team, cohort string
		var fromMS, nominal int64
		var toMS, lending sql.NullInt64
		if err := rows.Scan(&cq, &flavor, &res, &fromMS, &toMS, &team, &cohort, &nominal, &lending); err != nil {
			return err
		}
		if !isSummed(corev1.ResourceName(res)) {
			continue
		}
		lend := math.Inf(1)
		if lending.Valid {
			lend = float64(lending.Int64)
		}
		stop := sw.end
		if toMS.Valid {
			stop = min(toMS.Int64, sw.end)
		}
		sw.quota(queueKey{cq, flavor, res}, max(fromMS, sw.start), stop, float64(nominal), lend, team, cohort)
	}
	return rows.Err()
}

func (s *Store) loadAdmissions(ctx context.Context, sw *sweep) error {
	type queue struct{ team, cohort string }
	queues := map[string]queue{}
	rows, err := s.db.QueryContext(ctx, `SELECT cluster_queue, team, cohort FROM queues`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var name string
		var q queue
		if err := rows.Scan(&name, &q.team, &q.cohort); err != nil {
			rows.Close()
			return err
		}
		queues[name] = q
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	// Two indexed halves: ended in the window, and still open.
	rows, err = s.db.QueryContext(ctx, s.q(`SELECT cluster_queue, flavor, team, admitted_ms, ended_ms, gpus, neuron, cpu_milli, partitions
		FROM admissions WHERE ended_ms > ? AND admitted_ms < ?
		UNION ALL
		SELECT cluster_queue, flavor, team, admitted_ms, ended_ms, gpus, neuron, cpu_milli, partitions
		FROM admissions WHERE ended_ms IS NULL AND admitted_ms < ?`), sw.start, sw.end, sw.end)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var cq, flavor, taskTeam, partitions string
		var admitted int64
		var ended sql.NullInt64
		var amounts [3]int64
		if err := rows.Scan(&cq, &flavor, &taskTeam, &admitted, &ended, &amounts[0], &amounts[1], &amounts[2], &partitions); err != nil {
			return err
		}
		stop := sw.end
		if ended.Valid {
			stop = min(ended.Int64, sw.end)
		}
		q := queues[cq]
		use := func(r corev1.ResourceName, amount int64) {
			sw.use(queueKey{cq, flavor, string(r)}, max(admitted, sw.start), stop, float64(amount), cmp.Or(q.team, taskTeam), q.cohort)
		}
		for i, r := range usageResources {
			if amounts[i] != 0 {
				use(r, amounts[i])
			}
		}
		for profile, n := range domain.PartitionCounts(partitions) {
			if _, ok := domain.PartitionSlices(profile); ok && n > 0 {
				use(domain.PartitionResource(profile), n)
			}
		}
	}
	return rows.Err()
}

// isSummed reports whether the summary counts resource r: one of
// usageResources, or a MIG profile.
func isSummed(r corev1.ResourceName) bool {
	_, mig := domain.PartitionOf(r)
	return mig || slices.Contains(usageResources, r)
}

// queueKey is one ClusterQueue's flavor and resource.
type queueKey struct{ cq, flavor, resource string }

// queueState is a queueKey's quota and use between two steps.
type queueState struct {
	key           queueKey
	team, cohort  string
	nominal, used float64
	lendingLimit  float64
	quotaRows     int // quota rows in force (0: no quota)
	group         *group
	// idx is its place in its group; borrowed its use above nominal quota,
	// as last counted in the group's.
	idx      int
	borrowed float64
	// hours is the row of day where the queue's hours go; unit turns its
	// amounts into the row's (vCPU: 1000 millicores).
	hours *ResourceHours
	day   int64
	unit  float64
}

// group is the queues that share borrowing: one cohort, flavor and resource
// (a queue without cohort is alone). uses is LentShares' input, kept up to
// date queue by queue; lent its output since last (lending: not all zero);
// borrowed the queues' use above nominal quota, summed.
type group struct {
	queues   []*queueState
	uses     []domain.QuotaUse
	lent     []float64
	lending  bool
	borrowed float64
	last     int64
}

// quotaStep is a step of a queue's quota or use at an instant.
type quotaStep struct {
	at int64
	st *queueState
	// quota: a quota row begins (+1) or ends (-1); else used += delta.
	quota        int
	delta        float64
	nominal      float64
	lendingLimit float64
	team, cohort string
}

// sweep integrates the piecewise constant quota and use of every queue
// over time, cut at its steps, UTC days and the edges of the covered spans.
type sweep struct {
	start, end int64
	covered    []span
	states     map[queueKey]*queueState
	groups     map[string]*group
	steps      []quotaStep
	acc        map[usageKey]*usageAcc
}

// usageAcc is a row being summed, with its MIG profiles' hours kept by
// address (a map's values have none) until the row is done.
type usageAcc struct {
	row        UsageRow
	partitions map[string]*ResourceHours
}

// partition is where the row's hours of a MIG profile add up.
func (a *usageAcc) partition(profile string) *ResourceHours {
	h := a.partitions[profile]
	if h == nil {
		if a.partitions == nil {
			a.partitions = map[string]*ResourceHours{}
		}
		h = &ResourceHours{}
		a.partitions[profile] = h
	}
	return h
}

// done is the row with its MIG profiles' hours.
func (a *usageAcc) done() UsageRow {
	r := a.row
	if a.partitions != nil {
		r.Partitions = make(map[string]ResourceHours, len(a.partitions))
		for p, h := range a.partitions {
			r.Partitions[p] = *h
		}
	}
	return r
}

type usageKey struct {
	day          int64
	team, flavor string
}

func newSweep(start, end int64, covered []span) *sweep {
	return &sweep{start: start, end: end, covered: covered, states: map[queueKey]*queueState{},
		groups: map[string]*group{}, acc: map[usageKey]*usageAcc{}}
}

func (sw *sweep) state(k queueKey, team, cohort string) *queueState {
	st := sw.states[k]
	if st == nil {
		st = &queueState{key: k, team: team, cohort: cohort, lendingLimit: math.Inf(1)}
		sw.states[k] = st
	}
	return st
}

// quota adds a quota row in force over [from, to).
func (sw *sweep) quota(k queueKey, from, to int64, nominal, lendingLimit float64, team, cohort string) {
	if from >= to {
		return
	}
	st := sw.state(k, team, cohort)
	sw.steps = append(sw.steps,
		quotaStep{at: from, st: st, quota: 1, nominal: nominal, lendingLimit: lendingLimit, team: team, cohort: cohort},
		quotaStep{at: to, st: st, quota: -1})
}

// use adds an admission's amount held over [from, to).
func (sw *sweep) use(k queueKey, from, to int64, amount float64, team, cohort string) {
	if from >= to {
		return
	}
	st := sw.state(k, team, cohort)
	sw.steps = append(sw.steps, quotaStep{at: from, st: st, delta: amount}, quotaStep{at: to, st: st, delta: -amount})
}

func (sw *sweep) groupOf(st *queueState) *group {
	key := st.cohort
	if key == "" {
		key = "\x00" + st.key.cq // no cohort: lends to and borrows from nobody
	}
	key += "\x00" + st.key.flavor + "\x00" + st.key.resource
	g := sw.groups[key]
	if g == nil {
		g = &group{last: sw.start}
		sw.groups[key] = g
	}
	return g
}

func (sw *sweep) join(st *queueState) {
	g := sw.groupOf(st)
	st.idx, st.group, st.borrowed = len(g.queues), g, 0
	g.queues = append(g.queues, st)
	g.uses = append(g.uses, domain.QuotaUse{})
	g.lent = append(g.lent, 0)
	sw.relend(st)
}

func (sw *sweep) leave(st *queueState) {
	g := st.group
	g.queues = slices.Delete(g.queues, st.idx, st.idx+1)
	g.uses = slices.Delete(g.uses, st.idx, st.idx+1)
	g.lent = slices.Delete(g.lent, st.idx, st.idx+1)
	for i := st.idx; i < len(g.queues); i++ {
		g.queues[i].idx = i
	}
	g.borrowed -= st.borrowed
	st.group, st.borrowed = nil, 0
	if len(g.queues) > 0 {
		sw.relend(g.queues[0])
	}
}

// run applies the steps in time order and returns the rows.
func (sw *sweep) run() []UsageRow {
	for _, st := range sw.states {
		sw.join(st)
	}
	var cuts []int64
	for d := ceilDay(sw.start); d < sw.end; d += dayMS {
		cuts = append(cuts, d)
	}
	for _, c := range sw.covered {
		cuts = append(cuts, c.from, c.to)
	}
	slices.Sort(cuts)
	// At one instant, ends before beginnings: a quota replaced by another
	// is never counted twice.
	slices.SortStableFunc(sw.steps, func(a, b quotaStep) int {
		return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.quota, b.quota), cmp.Compare(a.delta, b.delta))
	})
	for _, c := range sw.steps {
		for len(cuts) > 0 && cuts[0] <= c.at {
			for _, g := range sw.groups {
				sw.flush(g, cuts[0])
			}
			cuts = cuts[1:]
		}
		st := c.st
		sw.flush(st.group, c.at)
		switch c.quota {
		case 1:
			st.quotaRows++
			if team := cmp.Or(c.team, st.team); team != st.team {
				st.team, st.hours = team, nil
			}
			st.nominal, st.lendingLimit = c.nominal, c.lendingLimit
			if c.cohort != st.cohort {
				sw.leave(st)
				st.cohort = c.cohort
				sw.flush(sw.groupOf(st), c.at)
				sw.join(st)
			}
		case -1:
			if st.quotaRows--; st.quotaRows == 0 {
				st.nominal, st.lendingLimit = 0, math.Inf(1)
			}
		default:
			st.used += c.delta
		}
		sw.relend(st)
	}
	for _, cut := range cuts {
		for _, g := range sw.groups {
			sw.flush(g, cut)
		}
	}
	for _, g := range sw.groups {
		sw.flush(g, sw.end)
	}
	rows := make([]UsageRow, 0, len(sw.acc))
	for _, a := range sw.acc {
		rows = append(rows, a.done())
	}
	slices.SortFunc(rows, func(a, b UsageRow) int {
		return cmp.Or(a.Day.Compare(b.Day), cmp.Compare(a.Team, b.Team), cmp.Compare(a.InstanceType, b.InstanceType))
	})
	return rows
}

// relend updates st's group after st changed: its LentShares input, the
// group's borrowing, and the lent shares. Without borrowing in the group
// nobody lends: LentShares would give zeros.
func (sw *sweep) relend(st *queueState) {
	g := st.group
	g.uses[st.idx] = domain.QuotaUse{Nominal: st.nominal, Used: st.used, LendingLimit: st.lendingLimit}
	b := max(st.used-st.nominal, 0) // whole units: the sums stay exact
	if !domain.CanBorrowIn(st.cohort) {
		b = 0
	}
	g.borrowed += b - st.borrowed
	st.borrowed = b
	if g.borrowed == 0 {
		if g.lending {
			clear(g.lent)
			g.lending = false
		}
		return
	}
	g.lent, g.lending = domain.LentShares(g.uses), true
}

// flush integrates a group from its last flush to t. Cuts at days and
// coverage edges flush every group, so [last, t) lies in one day and is
// wholly covered or not.
func (sw *sweep) flush(g *group, t int64) {
	if t <= g.last {
		return
	}
	from := g.last
	g.last = t
	if !sw.isCovered(from) {
		return
	}
	hours := float64(t-from) / float64(time.Hour/time.Millisecond)
	day := dayOf(from)
	for i, st := range g.queues {
		h := sw.hoursOf(st, day)
		if h == nil {
			continue
		}
		u := hours / st.unit
		h.Allocated += st.nominal * u
		h.Used += st.used * u
		h.Borrowed += st.borrowed * u
		h.Lent += g.lent[i] * u
	}
}

// hoursOf is where a queue's hours of day add up (nil: not a team's
// queue); it keeps the last one, as most flushes hit the same day.
func (sw *sweep) hoursOf(st *queueState, day int64) *ResourceHours {
	if st.team == "" {
		return nil
	}
	if st.hours != nil && st.day == day {
		return st.hours
	}
	k := usageKey{day, st.team, st.key.flavor}
	acc := sw.acc[k]
	if acc == nil {
		acc = &usageAcc{row: UsageRow{Day: fromMS(day), Team: st.team, InstanceType: st.key.flavor}}
		sw.acc[k] = acc
	}
	row := &acc.row
	switch r := corev1.ResourceName(st.key.resource); r {
	case domain.ResourceGPU:
		st.hours, st.unit = &row.GPU, 1
	case domain.ResourceNeuron:
		st.hours, st.unit = &row.Neuron, 1
	case corev1.ResourceCPU:
		st.hours, st.unit = &row.VCPU, 1000
	default: // a MIG profile (isSummed)
		profile, _ := domain.PartitionOf(r)
		st.hours, st.unit = acc.partition(profile), 1
	}
	st.day = day
	return st.hours
}

// isCovered reports whether instant t is in a covered span.
func (sw *sweep) isCovered(t int64) bool {
	i, _ := slices.BinarySearchFunc(sw.covered, t, func(s span, t int64) int {
		switch {
		case s.to <= t:
			return -1
		case s.from > t:
			return 1
		}
		return 0
	})
	return i < len(sw.covered) && sw.covered[i].from <= t && t < sw.covered[i].to
}
