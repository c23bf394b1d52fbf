// This file shows Kueue's cohort hierarchy: Cohort objects with their
// parent and their own quota, and the ClusterQueues under each.

package domain

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueac "sigs.k8s.io/kueue/client-go/applyconfiguration/kueue/v1beta2"
)

// CohortRow is one cohort of the tree, in the order the tree is read
// (each cohort, then its queues and sub-cohorts), with its figures in the
// four resources Amount follows.
type CohortRow struct {
	Name   string
	Depth  int    // 0 for a root
	Parent string // "" for a root
	// Declared: a Cohort object exists (else Kueue made it implicitly from
	// the ClusterQueues naming it). Weight is its fair-sharing weight ("" when unset).
	Declared bool
	Weight   string
	// Own is the cohort's own quota (its resourceGroups), shared by
	// everything under it.
	Own Amount
	// Subtree figures: quota of the cohort, its sub-cohorts and queues; what
	// their admitted tasks use; what the queues borrow beyond their own quota.
	Quota, InUse, Borrowed Amount
	// Queues are the ClusterQueues directly in it, by name.
	Queues []CohortQueue
}

// CohortQueue is a ClusterQueue as the cohort tree lists it.
type CohortQueue struct {
	Name, Team             string
	Quota, InUse, Borrowed Amount
	// LendingLimit and BorrowingLimit sum the queue's limits over its
	// flavors; LendingLimited and BorrowingLimited name the resources that
	// have one (a limit of 0 is a limit, an absent one is none).
	LendingLimit, BorrowingLimit     Amount
	LendingLimited, BorrowingLimited []corev1.ResourceName
	// Weight is its fair-sharing weight ("" when unset: Kueue's default).
	Weight string
}

// Headroom is what the cohort's subtree has that nobody uses.
func (r CohortRow) Headroom() Amount {
	return Amount{GPUs: max(r.Quota.GPUs-r.InUse.GPUs, 0), Neuron: max(r.Quota.Neuron-r.InUse.Neuron, 0),
		CPUMilli: max(r.Quota.CPUMilli-r.InUse.CPUMilli, 0), MemoryMiB: max(r.Quota.MemoryMiB-r.InUse.MemoryMiB, 0)}
}

// LendingLimitOf is the queue's lending limit on r, and whether it has one.
func (q CohortQueue) LendingLimitOf(r corev1.ResourceName) (int64, bool) {
	return q.LendingLimit.Of(r), slices.Contains(q.LendingLimited, r)
}

// BorrowingLimitOf is the queue's borrowing limit on r, and whether it has one.
func (q CohortQueue) BorrowingLimitOf(r corev1.ResourceName) (int64, bool) {
	return q.BorrowingLimit.Of(r), slices.Contains(q.BorrowingLimited, r)
}

// CohortTree is the cohort hierarchy of cohorts (Cohort objects) and the
// ClusterQueues naming cohorts. Queues without a cohort are left out.
// A cycle (which Kueue refuses) ends where it would repeat.
func CohortTree(s Settings, cohorts []*kueuev1beta2.Cohort, queues []*kueuev1beta2.ClusterQueue) []CohortRow {
	type node struct {
		row      CohortRow
		children []string
	}
	nodes := map[string]*node{}
	get := func(name string) *node {
		n := nodes[name]
		if n == nil {
			n = &node{row: CohortRow{Name: name}}
			nodes[name] = n
		}
		return n
	}
	for _, c := range cohorts {
		n := get(c.Name)
		n.row.Declared, n.row.Parent = true, string(c.Spec.ParentName)
		n.row.Own = nominalOf(c.Spec.ResourceGroups)
		if fs := c.Spec.FairSharing; fs != nil && fs.Weight != nil {
			n.row.Weight = fs.Weight.String()
		}
		if n.row.Parent != "" {
			get(n.row.Parent)
		}
	}
	for _, cq := range queues {
		if cq.Spec.CohortName == "" {
			continue
		}
		q := CohortQueue{Name: cq.Name, Team: s.TeamOfClusterQueue(cq), Quota: nominalOf(cq.Spec.ResourceGroups)}
		if fs := cq.Spec.FairSharing; fs != nil && fs.Weight != nil {
			q.Weight = fs.Weight.String()
		}
		for _, rg := range cq.Spec.ResourceGroups {
			for _, f := range rg.Flavors {
				for _, r := range f.Resources {
					if r.LendingLimit != nil {
						q.LendingLimit.addUnits(r.Name, units(r.Name, *r.LendingLimit))
						q.LendingLimited = appendOnce(q.LendingLimited, r.Name)
					}
					if r.BorrowingLimit != nil {
						q.BorrowingLimit.addUnits(r.Name, units(r.Name, *r.BorrowingLimit))
						q.BorrowingLimited = appendOnce(q.BorrowingLimited, r.Name)
					}
				}
			}
		}
		for _, f := range cq.Status.FlavorsUsage {
			for _, r := range f.Resources {
				q.InUse.addUnits(r.Name, units(r.Name, r.Total))
				q.Borrowed.addUnits(r.Name, units(r.Name, r.Borrowed))
			}
		}
		n := get(string(cq.Spec.CohortName))
		n.row.Queues = append(n.row.Queues, q)
	}
	var roots []string
	for name, n := range nodes {
		if p := n.row.Parent; p != "" && p != name {
			nodes[p].children = append(nodes[p].children, name)
		} else {
			roots = append(roots, name)
		}
	}
	// Every cohort in a cycle has a parent: start such a cycle at its
	// first name, so that nothing is left out.
	reached := map[string]bool{}
	var mark func(string)
	mark = func(name string) {
		if reached[name] {
			return
		}
		reached[name] = true
		for _, c := range nodes[name].children {
			mark(c)
		}
	}
	slices.Sort(roots)
	for _, r := range roots {
		mark(r)
	}
	var names []string
	for name := range nodes {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if !reached[name] {
			roots = append(roots, name)
			mark(name)
		}
	}

	var out []CohortRow
	visited := map[string]bool{}
	// walk appends a cohort and what is under it; it returns the index of
	// its row, whose subtree figures it fills in.
	var walk func(name string, depth int) int
	walk = func(name string, depth int) int {
		visited[name] = true
		n := nodes[name]
		row := n.row
		row.Depth = depth
		slices.SortFunc(row.Queues, func(a, b CohortQueue) int { return strings.Compare(a.Name, b.Name) })
		row.Quota = row.Own
		for _, q := range row.Queues {
			row.Quota.add(q.Quota)
			row.InUse.add(q.InUse)
			row.Borrowed.add(q.Borrowed)
		}
		i := len(out)
		out = append(out, row)
		slices.Sort(n.children)
		for _, c := range n.children {
			if visited[c] {
				continue
			}
			j := walk(c, depth+1)
			out[i].Quota.add(out[j].Quota)
			out[i].InUse.add(out[j].InUse)
			out[i].Borrowed.add(out[j].Borrowed)
		}
		return i
	}
	for _, r := range roots {
		if !visited[r] {
			walk(r, 0)
		}
	}
	return out
}

// nominalOf sums the nominal quota of resource groups over their flavors.
func nominalOf(groups []kueuev1beta2.ResourceGroup) Amount {
	var a Amount
	for _, rg := range groups {
		for _, f := range rg.Flavors {
			for _, r := range f.Resources {
				a.addUnits(r.Name, units(r.Name, r.NominalQuota))
			}
		}
	}
	return a
}

func appendOnce(set []corev1.ResourceName, r corev1.ResourceName) []corev1.ResourceName {
	if slices.Contains(set, r) {
		return set
	}
	return append(set, r)
}

// CohortAllocation is a cohort the console manages under its own, as an
// admin states it. Its name is the console's cohort's and a suffix
// ("shared-pool-research"), so that the admission policy can tell it is the
// console's.
type CohortAllocation struct {
	Name, Parent string
	// FairShareWeight is its weight among its siblings; nil leaves Kueue's default.
	FairShareWeight *int64
	// Quota is the cohort's own quota, shared by everything under it.
	Quota []QuotaInput
}

// CohortParentProblem says why parent cannot be the parent of name ("" when
// it can): parents maps each cohort to its parent, as the cluster has them.
// Kueue refuses cycles; the form says so first, in words.
func CohortParentProblem(name, parent string, parents map[string]string) string {
	if parent == name {
		return "A cohort cannot be its own parent."
	}
	seen := map[string]bool{}
	for p := parent; p != ""; p = parents[p] {
		if p == name {
			return fmt.Sprintf("%s cannot be under %s: %s is already under %s.", name, parent, parent, name)
		}
		if seen[p] {
			break
		}
		seen[p] = true
	}
	return ""
}

// BuildCohortObject is the Kueue Cohort that enforces c.
func BuildCohortObject(c CohortAllocation, shapes ShapeLookup) (*kueueac.CohortApplyConfiguration, error) {
	spec := kueueac.CohortSpec().WithParentName(kueuev1beta2.CohortReference(c.Parent))
	if len(c.Quota) > 0 {
		flavors, err := nominalFlavors(c.Quota, shapes, func(*kueueac.ResourceQuotaApplyConfiguration, QuotaInput, resource.Quantity, corev1.ResourceName) {})
		if err != nil {
			return nil, err
		}
		spec.WithResourceGroups(kueueac.ResourceGroup().WithCoveredResources(CoveredResources...).WithFlavors(flavors...))
	}
	if c.FairShareWeight != nil {
		spec.WithFairSharing(kueueac.FairSharing().WithWeight(*resource.NewQuantity(*c.FairShareWeight, resource.DecimalSI)))
	}
	return kueueac.Cohort(c.Name).WithLabels(map[string]string{ManagedByLabel: ManagedByValue}).WithSpec(spec), nil
}

// ReadCohort is the allocation of a console cohort as Kueue has it.
func ReadCohort(co *kueuev1beta2.Cohort, shapes ShapeLookup) CohortAllocation {
	c := CohortAllocation{Name: co.Name, Parent: string(co.Spec.ParentName)}
	if fs := co.Spec.FairSharing; fs != nil && fs.Weight != nil {
		w := fs.Weight.Value()
		c.FairShareWeight = &w
	}
	for _, rg := range co.Spec.ResourceGroups {
		for _, f := range rg.Flavors {
			shape, ok := shapes(string(f.Name))
			if !ok {
				continue
			}
			row, _ := adoptRow(QuotaInput{}, string(f.Name), shape, liveQuota(f.Resources))
			c.Quota = append(c.Quota, row)
		}
	}
	return c
}

// NoBorrowing says why a ClusterQueue may borrow nothing now.
type NoBorrowing int

const (
	CanBorrow NoBorrowing = iota
	// NotInCohort: a queue without cohort has nobody to borrow from.
	NotInCohort
	// BorrowingLimitReached: it already borrows what its limit allows.
	BorrowingLimitReached
	// NothingIdle: the rest of its cohort tree has no idle quota it may lend.
	NothingIdle
)

// BorrowableGPUs is how many more GPUs the ClusterQueue named queue may
// borrow right now (Borrowable).
func BorrowableGPUs(tree []CohortRow, queue string) (int64, NoBorrowing) {
	return Borrowable(tree, queue, ResourceGPU)
}

// Borrowable is how much more of r the ClusterQueue named queue may
// borrow right now, read from the cohort tree (CohortTree's rows), and why
// none when it is 0. It is the lesser of what its borrowing limit still
// allows and what the rest of its tree (up to the root cohort) has idle and
// may lend: each other queue's idle quota, capped by its lending limit, plus
// the cohorts' own quota, less what the tree's queues already borrow (the
// queue's own borrowing included: it draws on the same idle quota). Cohorts'
// lending limits towards their parent are not in the rows: not counted.
func Borrowable(tree []CohortRow, queue string, r corev1.ResourceName) (int64, NoBorrowing) {
	// The rows are in tree order: a root (depth 0), then everything under it.
	root, self := -1, -1
	var q CohortQueue
	for i, row := range tree {
		if row.Depth == 0 {
			root = i
		}
		for _, cq := range row.Queues {
			if cq.Name == queue {
				self, q = root, cq
			}
		}
		if self >= 0 {
			break
		}
	}
	if self < 0 {
		return 0, NotInCohort
	}
	var lendable int64
	for i := self; i < len(tree) && (i == self || tree[i].Depth > 0); i++ {
		lendable += tree[i].Own.Of(r)
		for _, other := range tree[i].Queues {
			if other.Name == queue {
				continue
			}
			idle := max(other.Quota.Of(r)-other.InUse.Of(r), 0)
			if limit, ok := other.LendingLimitOf(r); ok {
				idle = min(idle, max(limit, 0))
			}
			lendable += idle
		}
	}
	idle := max(lendable-tree[self].Borrowed.Of(r), 0)
	if limit, ok := q.BorrowingLimitOf(r); ok {
		allowed := max(limit-q.Borrowed.Of(r), 0)
		if allowed == 0 {
			return 0, BorrowingLimitReached
		}
		idle = min(idle, allowed)
	}
	if idle == 0 {
		return 0, NothingIdle
	}
	return idle, CanBorrow
}
