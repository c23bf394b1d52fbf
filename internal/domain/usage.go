// This file computes the Team usage dashboard: quota, use, borrowing and
// lending per team.

package domain

import (
	"maps"
	"math"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// Amount is a quantity of the resources the dashboards show: GPUs, Neuron
// devices, vCPU in millicores, memory in MiB.
type Amount struct {
	GPUs      int64 `json:"gpus,omitempty"`
	Neuron    int64 `json:"neuron,omitempty"`
	CPUMilli  int64 `json:"cpuMilli,omitempty"`
	MemoryMiB int64 `json:"memoryMiB,omitempty"`
}

func (a *Amount) add(b Amount) { a.addTimes(b, 1) }

// addTimes adds n times b (n −1 takes it away).
func (a *Amount) addTimes(b Amount, n int64) {
	a.GPUs += n * b.GPUs
	a.Neuron += n * b.Neuron
	a.CPUMilli += n * b.CPUMilli
	a.MemoryMiB += n * b.MemoryMiB
}

// addUnits adds v of resource r, in the units Amount keeps (see units).
func (a *Amount) addUnits(r corev1.ResourceName, v int64) {
	switch r {
	case ResourceGPU:
		a.GPUs += v
	case ResourceNeuron:
		a.Neuron += v
	case corev1.ResourceCPU:
		a.CPUMilli += v
	case corev1.ResourceMemory:
		a.MemoryMiB += v
	}
}

// units is a quantity of r in the units Amount keeps: millicores of cpu,
// MiB of memory and storage, whole devices of the rest.
func units(r corev1.ResourceName, q resource.Quantity) int64 {
	switch r {
	case corev1.ResourceCPU:
		return q.MilliValue()
	case corev1.ResourceMemory, corev1.ResourceEphemeralStorage, corev1.ResourceStorage:
		return (q.Value() + 1<<19) >> 20 // MiB, to the nearest: summed over flavors, cut MiB would add up
	}
	return q.Value()
}

// TeamUsage is one team's row of the usage dashboard.
type TeamUsage struct {
	Team, ClusterQueue, Cohort string
	// Namespace names the namespaces whose LocalQueues feed the team's
	// ClusterQueue, comma-separated (Namespaces); the team namespace for a
	// console team without a LocalQueue yet.
	Namespace  string
	Namespaces []string
	// Manager is who manages the ClusterQueue when the console does not
	// (QueueManager); "" for the console's teams.
	Manager string
	// Imported: the console manages the queue since it imported it (it
	// keeps its own name and namespaces). Reconciler names a GitOps tool
	// that keeps the queue as its repository says (ReconciledBy).
	Imported   bool
	Reconciler string
	// RecentUseOrder: the queue orders its pending tasks by each
	// LocalQueue's recent use (admissionScope).
	RecentUseOrder bool
	Enabled        bool
	// Stop says how the queue is stopped (StopWords); "" while it is not;
	// Drained: HoldAndDrain.
	Stop    string
	Drained bool
	// StoppedLocalQueues are the LocalQueues feeding it that are stopped,
	// in words ("ns/name (stopPolicy Hold)"): Kueue admits none of their tasks.
	StoppedLocalQueues []string
	// Inactive is why Kueue admits no new task in the queue (Inactive); ""
	// while it does.
	Inactive  string
	Allocated Amount // nominal quota
	InUse     Amount // admitted tasks' usage, own and borrowed
	// Reserved is the quota Kueue holds for tasks, admitted or still
	// waiting for admission checks (status.flavorsReservation): others
	// cannot have it, although no task of it runs yet.
	Reserved      Amount
	Borrowed      Amount // usage above nominal, from other teams' quota
	Lent          Amount // its idle quota used by others (attributed)
	PendingDemand Amount // what its queued tasks ask for
	// PendingPartitions are the MIG partitions its queued tasks ask for,
	// by profile; nil for none.
	PendingPartitions           map[string]int64
	Running, Pending, Preempted int
	// Limits are its quota and limits per flavor and resource, in the
	// ClusterQueue's order, with what it borrows and lends there now.
	Limits []ResourceLimit
}

// ResourceLimit is a ClusterQueue's quota of one resource on one flavor:
// figures in the units Amount keeps (units).
type ResourceLimit struct {
	Flavor   string
	Resource corev1.ResourceName
	Nominal  int64
	// InUse is what its admitted tasks use of it (status.flavorsUsage).
	InUse int64
	// BorrowingLimit and LendingLimit are nil when unset (no limit).
	BorrowingLimit, LendingLimit *int64
	// Borrowed is what Kueue says the queue borrows (status.flavorsUsage);
	// Lent its LentShares share of what its cohort borrows.
	Borrowed, Lent int64
}

// unitsOf is a limit in the units Amount keeps, nil when unset.
func unitsOf(r corev1.ResourceName, q *resource.Quantity) *int64 {
	if q == nil {
		return nil
	}
	v := units(r, *q)
	return &v
}

// Halted says why Kueue admits no new task in the row's queue now ("" while
// it admits): stopped, or kept inactive (Inactive).
func (u *TeamUsage) Halted() string {
	switch {
	case !u.Enabled:
		return "its queue is stopped"
	case u.Inactive != "":
		return "Kueue keeps its queue inactive: " + u.Inactive
	}
	return ""
}

// limit is the row's quota of resource r on flavor, nil when it has none.
func (u *TeamUsage) limit(flavor string, r corev1.ResourceName) *ResourceLimit {
	for i := range u.Limits {
		if u.Limits[i].Flavor == flavor && u.Limits[i].Resource == r {
			return &u.Limits[i]
		}
	}
	return nil
}

// queueRows are the usage rows of the ClusterQueues, sorted by team,
// without task counts. forest is Kueue's Cohort objects (zero: each
// cohort a tree of its own, without quota of its own).
func queueRows(s Settings, cqs []*kueuev1beta2.ClusterQueue, served map[string][]string, forest CohortForest) []TeamUsage {
	rows := make([]TeamUsage, 0, len(cqs))
	index := map[string]int{} // ClusterQueue name -> row
	for _, cq := range cqs {
		team := s.TeamOfClusterQueue(cq)
		row := TeamUsage{Team: team, ClusterQueue: cq.Name, Namespaces: served[cq.Name],
			Cohort: string(cq.Spec.CohortName), Enabled: !Stopped(cq), Stop: StopWords(cq), Drained: Drained(cq), Inactive: Inactive(cq)}
		row.Imported, row.Reconciler = Imported(cq), ReconciledBy(cq)
		row.RecentUseOrder = OrdersByRecentUse(cq.Spec.AdmissionScope)
		if !ManagedByConsole(cq) {
			row.Manager = QueueManager(cq)
		} else if len(row.Namespaces) == 0 {
			row.Namespaces = []string{s.Namespace(team)}
		}
		row.Namespace = strings.Join(row.Namespaces, ", ")
		for _, rg := range cq.Spec.ResourceGroups {
			for _, f := range rg.Flavors {
				for _, r := range f.Resources {
					row.Allocated.addUnits(r.Name, units(r.Name, r.NominalQuota))
					row.Limits = append(row.Limits, ResourceLimit{Flavor: string(f.Name), Resource: r.Name, Nominal: units(r.Name, r.NominalQuota),
						BorrowingLimit: unitsOf(r.Name, r.BorrowingLimit), LendingLimit: unitsOf(r.Name, r.LendingLimit)})
				}
			}
		}
		for _, f := range cq.Status.FlavorsReservation {
			for _, r := range f.Resources {
				row.Reserved.addUnits(r.Name, units(r.Name, r.Total))
			}
		}
		for _, f := range cq.Status.FlavorsUsage {
			for _, r := range f.Resources {
				row.InUse.addUnits(r.Name, units(r.Name, r.Total))
				row.Borrowed.addUnits(r.Name, units(r.Name, r.Borrowed))
				if l := row.limit(string(f.Name), r.Name); l != nil {
					l.InUse, l.Borrowed = units(r.Name, r.Total), units(r.Name, r.Borrowed)
				}
			}
		}
		index[cq.Name] = len(rows)
		rows = append(rows, row)
	}
	attributeLending(cqs, rows, index, forest)
	sort.Slice(rows, func(i, j int) bool { return rows[i].Team < rows[j].Team })
	return rows
}

// CohortForest is what lending over Kueue's cohort trees needs of its
// Cohort objects: each one's parent ("" for a root), and its own quota per
// flavor and resource with its lending limit towards its parent.
type CohortForest struct {
	parents map[string]string
	own     map[string]map[flavorResource]QuotaUse
}

// CohortForestOf reads the Cohort objects.
func CohortForestOf(cohorts []*kueuev1beta2.Cohort) CohortForest {
	f := CohortForest{parents: map[string]string{}, own: map[string]map[flavorResource]QuotaUse{}}
	for _, co := range cohorts {
		f.parents[co.Name] = string(co.Spec.ParentName)
		if own := quotaUses(co.Spec.ResourceGroups, nil); len(own) > 0 {
			f.own[co.Name] = own
		}
	}
	return f
}

// quotaUses are resource groups' nominal quotas and lending limits per
// flavor and resource (flavorQuotasOf), with what usage holds there.
func quotaUses(groups []kueuev1beta2.ResourceGroup, usage []kueuev1beta2.FlavorUsage) map[flavorResource]QuotaUse {
	out := map[flavorResource]QuotaUse{}
	for _, fq := range flavorQuotasOf(groups, usage) {
		use := QuotaUse{Nominal: float64(fq.Nominal), Used: float64(fq.InUse), LendingLimit: math.Inf(1)}
		if fq.LendingLimit != nil {
			use.LendingLimit = float64(*fq.LendingLimit)
		}
		out[flavorResource{fq.Flavor, fq.Resource}] = use
	}
	return out
}

func (f CohortForest) parentOf(cohort string) string { return f.parents[cohort] }

// attributeLending gives each team the share of its cohort tree's borrowing
// that it lent, per flavor and resource (treeLending): a queue borrows from
// its own cohort first, then from further up its tree, where a cohort's
// lending limit caps what its subtree lends out of it; quota a cohort holds
// itself is lent by nobody's team.
func attributeLending(cqs []*kueuev1beta2.ClusterQueue, rows []TeamUsage, index map[string]int, forest CohortForest) {
	queues := map[flavorResource]map[string][]treeQueue{} // by cohort
	var keys []flavorResource
	for _, cq := range cqs {
		if cq.Spec.CohortName == "" {
			continue // a queue without cohort neither lends nor borrows
		}
		for k, use := range quotaUses(cq.Spec.ResourceGroups, cq.Status.FlavorsUsage) {
			if queues[k] == nil {
				queues[k] = map[string][]treeQueue{}
				keys = append(keys, k)
			}
			cohort := string(cq.Spec.CohortName)
			queues[k][cohort] = append(queues[k][cohort], treeQueue{row: index[cq.Name], use: use})
		}
	}
	for _, k := range keys {
		lent := treeLending(forest, k, queues[k])
		rowsOf := slices.Sorted(maps.Keys(lent))
		shares := make([]float64, len(rowsOf))
		for i, r := range rowsOf {
			shares[i] = lent[r]
		}
		for i, n := range wholeShares(shares) {
			row := &rows[rowsOf[i]]
			row.Lent.addUnits(k.resource, n)
			if l := row.limit(k.flavor, k.resource); l != nil {
				l.Lent += n
			}
		}
	}
}

// treeQueue is a ClusterQueue's row and its quota and use of one flavor
// and resource.
type treeQueue struct {
	row int
	use QuotaUse
}

// lender is idle quota a subtree may lend on: a queue's row, or -1 for a
// cohort's own quota, lent by nobody's team.
type lender struct {
	row    int
	amount float64
}

// treeLending attributes, on one flavor and resource, what the queues of
// each cohort tree borrow to the queues that lend it (by row), by the
// console's rule (LentShares) applied from the leaves up: at each cohort,
// what its queues and sub-cohorts need beyond their own quota comes first
// from the idle quota they lend (each in proportion to it), then from the
// cohort's own quota; what is left goes up to its parent, and so does the
// idle quota left, within the cohort's lending limit (each lender's part
// cut in proportion).
func treeLending(forest CohortForest, k flavorResource, queues map[string][]treeQueue) map[int]float64 {
	children := map[string][]string{}
	var cohorts []string
	seen := map[string]bool{}
	var add func(string)
	add = func(c string) {
		if seen[c] {
			return
		}
		seen[c] = true
		cohorts = append(cohorts, c)
		if p := forest.parentOf(c); p != "" {
			children[p] = append(children[p], c)
			add(p)
		}
	}
	for c := range queues {
		add(c)
	}
	for c, own := range forest.own {
		if _, ok := own[k]; ok {
			add(c)
		}
	}
	lent := map[int]float64{}
	visited := map[string]bool{}
	var visit func(c string) (need float64, avail []lender)
	visit = func(c string) (float64, []lender) {
		visited[c] = true
		var need float64
		var pool []lender
		for _, q := range queues[c] {
			need += math.Max(q.use.Used-q.use.Nominal, 0)
			if idle := math.Min(math.Max(q.use.Nominal-q.use.Used, 0), math.Max(q.use.LendingLimit, 0)); idle > 0 {
				pool = append(pool, lender{q.row, idle})
			}
		}
		slices.Sort(children[c])
		for _, child := range children[c] {
			if visited[child] {
				continue // a cycle, which Kueue refuses
			}
			n, a := visit(child)
			need += n
			pool = append(pool, a...)
		}
		// The queues' and sub-cohorts' idle quota first, in proportion.
		var idle float64
		for _, l := range pool {
			idle += l.amount
		}
		if take := math.Min(need, idle); take > 0 {
			share := take / idle
			for i := range pool {
				used := pool[i].amount * share
				if pool[i].row >= 0 {
					lent[pool[i].row] += used
				}
				pool[i].amount -= used
			}
			need -= take
		}
		// Then the cohort's own quota.
		own := forest.own[c][k]
		if free := math.Min(need, own.Nominal); free > 0 {
			need -= free
			own.Nominal -= free
		}
		if own.Nominal > 0 {
			pool = append(pool, lender{-1, own.Nominal})
		}
		// What the subtree may lend its parent: within the cohort's limit.
		if limit, ok := forest.own[c][k]; ok && !math.IsInf(limit.LendingLimit, 1) {
			var left float64
			for _, l := range pool {
				left += l.amount
			}
			if left > limit.LendingLimit && left > 0 {
				cut := math.Max(limit.LendingLimit, 0) / left
				for i := range pool {
					pool[i].amount *= cut
				}
			}
		}
		return need, pool
	}
	slices.Sort(cohorts)
	for _, c := range cohorts {
		if forest.parentOf(c) == "" || !seen[forest.parentOf(c)] {
			if !visited[c] {
				visit(c)
			}
		}
	}
	for _, c := range cohorts { // what a cycle left unvisited
		if !visited[c] {
			visit(c)
		}
	}
	return lent
}

// QuotaUse is one ClusterQueue's quota and use of one flavor and resource
// at one instant.
type QuotaUse struct {
	Nominal, Used float64
	// LendingLimit caps what others may use of the queue's quota (+Inf: no cap).
	LendingLimit float64
}

// LentShares is the console's one rule for who lent what: it attributes
// what the ClusterQueues of one cohort borrow on one flavor and resource at
// one instant to the queues that lend it. Kueue does not record who lent to
// whom. The borrowed amount (use beyond nominal, summed over the queues) is
// split in proportion to each queue's lendable idle quota: nominal − own use,
// floored at 0 and capped by its lending limit. No queue lends more than it
// has idle; what exceeds the cohort's idle quota (borrowed from a parent
// cohort's or the cohort's own quota) is attributed to no queue.
func LentShares(qs []QuotaUse) []float64 {
	lent := make([]float64, len(qs))
	idle := make([]float64, len(qs))
	var borrowed, totalIdle float64
	for i, q := range qs {
		borrowed += math.Max(q.Used-q.Nominal, 0)
		idle[i] = math.Min(math.Max(q.Nominal-q.Used, 0), math.Max(q.LendingLimit, 0))
		totalIdle += idle[i]
	}
	if borrowed <= 0 || totalIdle <= 0 {
		return lent
	}
	share := math.Min(borrowed/totalIdle, 1)
	for i := range qs {
		lent[i] = idle[i] * share
	}
	return lent
}

// wholeShares rounds shares to whole units so that they add up to their
// sum rounded (the largest remainders get the units left over; the first
// of equal ones): the lent shares of a cohort add up to what it borrowed,
// where each rounded alone could give 4 lent for 3 borrowed.
func wholeShares(shares []float64) []int64 {
	out := make([]int64, len(shares))
	var sum float64
	var given int64
	for i, v := range shares {
		out[i] = int64(math.Floor(v))
		sum += v
		given += out[i]
	}
	order := make([]int, len(shares))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		return shares[order[a]]-math.Floor(shares[order[a]]) > shares[order[b]]-math.Floor(shares[order[b]])
	})
	for _, i := range order[:min(max(int64(math.Round(sum))-given, 0), int64(len(order)))] {
		out[i]++
	}
	return out
}

// Totals sums the team rows.
func Totals(rows []TeamUsage) TeamUsage {
	t := TeamUsage{Team: "Total"}
	for _, r := range rows {
		t.Allocated.add(r.Allocated)
		t.InUse.add(r.InUse)
		t.Reserved.add(r.Reserved)
		t.Borrowed.add(r.Borrowed)
		t.Lent.add(r.Lent)
		t.PendingDemand.add(r.PendingDemand)
		t.Running += r.Running
		t.Pending += r.Pending
		t.Preempted += r.Preempted
	}
	return t
}

// RootCohort is the root of cohort's tree, following parentOf ("" for a
// cohort without parent); a cycle, which Kueue refuses, ends where it
// would repeat.
func RootCohort(cohort string, parentOf func(string) string) string {
	seen := map[string]bool{}
	for !seen[cohort] {
		seen[cohort] = true
		parent := parentOf(cohort)
		if parent == "" {
			return cohort
		}
		cohort = parent
	}
	return cohort
}

// addStoppedLocalQueues names, on each row, the stopped LocalQueues that
// feed its ClusterQueue (clusterQueueOf: those its namespaceSelector admits).
func addStoppedLocalQueues(rows []TeamUsage, clusterQueueOf map[string]string, stopped map[string]kueuev1beta2.StopPolicy) {
	if len(stopped) == 0 {
		return
	}
	byQueue := map[string][]string{}
	for key, p := range stopped {
		if cq, ok := clusterQueueOf[key]; ok {
			byQueue[cq] = append(byQueue[cq], key+" (stopPolicy "+string(p)+")")
		}
	}
	for i := range rows {
		if lqs := byQueue[rows[i].ClusterQueue]; len(lqs) > 0 {
			slices.Sort(lqs)
			rows[i].StoppedLocalQueues = lqs
		}
	}
}

// servedNamespaces are, per ClusterQueue, the namespaces whose LocalQueues
// feed it (localQueues: LocalQueueKey → ClusterQueue), sorted.
func servedNamespaces(localQueues map[string]string) map[string][]string {
	out := map[string][]string{}
	for key, cq := range localQueues {
		ns, _, _ := strings.Cut(key, "/")
		if !slices.Contains(out[cq], ns) {
			out[cq] = append(out[cq], ns)
		}
	}
	for _, nss := range out {
		slices.Sort(nss)
	}
	return out
}
