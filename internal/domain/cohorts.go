// This file shows Kueue's cohort hierarchy: Cohort objects with their
// parent and their own quota, and the ClusterQueues under each.

package domain

import (
	"fmt"
	"slices"
	"strconv"
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
	// everything under it; OwnQuotas the same per flavor and resource, with
	// its limits towards its parent.
	Own       Amount
	OwnQuotas []FlavorQuota
	// Subtree figures: quota of the cohort, its sub-cohorts and queues; what
	// their admitted tasks use; what the queues borrow beyond their own quota.
	Quota, InUse, Borrowed Amount
	// Queues are the ClusterQueues directly in it, by name.
	Queues []CohortQueue
	// free is the subtree's quota less what its queues use, per flavor and
	// resource (Headroom): one flavor's spare never covers another's use.
	free map[flavorResource]int64
}

type flavorResource struct {
	flavor   string
	resource corev1.ResourceName
}

// CohortQueue is a ClusterQueue as the cohort tree lists it.
type CohortQueue struct {
	Name, Team             string
	Quota, InUse, Borrowed Amount
	// Weight is its fair-sharing weight ("" when unset: Kueue's default).
	Weight string
	// Quotas are its quotas per flavor and resource, with its limits and
	// what it uses and borrows there.
	Quotas []FlavorQuota
}

// FlavorQuota is a ClusterQueue's or a Cohort's quota of one resource on
// one flavor, as Kueue keeps quota, in the units Amount keeps; a queue's
// also says what its admitted tasks hold there and borrow.
type FlavorQuota struct {
	Flavor   string
	Resource corev1.ResourceName
	Nominal  int64
	// LendingLimit and BorrowingLimit are nil when not set (no limit).
	LendingLimit, BorrowingLimit *int64
	InUse, Borrowed              int64
}

// Headroom is what the cohort's subtree has that nobody uses, flavor by
// flavor: GPUs free on one flavor while another is used beyond its quota
// are headroom, as a task asking for the free flavor would get them.
func (r CohortRow) Headroom() Amount {
	var a Amount
	for k, v := range r.free {
		a.addUnits(k.resource, max(v, 0))
	}
	return a
}

// LimitWords says the lending and borrowing limits on resource r, flavor by
// flavor ("a100: lends at most 2, l4: borrows at most 4"; "" when none),
// each amount as format writes it.
func LimitWords(quotas []FlavorQuota, r corev1.ResourceName, format func(int64) string) string {
	var out []string
	for _, q := range quotas {
		if q.Resource != r {
			continue
		}
		var limits []string
		if q.LendingLimit != nil {
			limits = append(limits, "lends at most "+format(*q.LendingLimit))
		}
		if q.BorrowingLimit != nil {
			limits = append(limits, "borrows at most "+format(*q.BorrowingLimit))
		}
		if len(limits) > 0 {
			out = append(out, q.Flavor+": "+strings.Join(limits, " and "))
		}
	}
	return strings.Join(out, ", ")
}

// WeightWord is a fair-sharing weight as people write it: "2", "0.75"
// (Kubernetes writes "750m").
func WeightWord(w resource.Quantity) string {
	return strconv.FormatFloat(w.AsApproximateFloat64(), 'f', -1, 64)
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
		n.row.OwnQuotas = flavorQuotasOf(c.Spec.ResourceGroups, nil)
		if fs := c.Spec.FairSharing; fs != nil && fs.Weight != nil {
			n.row.Weight = WeightWord(*fs.Weight)
		}
		if n.row.Parent != "" {
			get(n.row.Parent)
		}
	}
	for _, cq := range queues {
		if cq.Spec.CohortName == "" {
			continue
		}
		q := CohortQueue{Name: cq.Name, Team: s.TeamOfClusterQueue(cq), Quota: nominalOf(cq.Spec.ResourceGroups),
			Quotas: flavorQuotasOf(cq.Spec.ResourceGroups, cq.Status.FlavorsUsage)}
		if fs := cq.Spec.FairSharing; fs != nil && fs.Weight != nil {
			q.Weight = WeightWord(*fs.Weight)
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
		row.free = map[flavorResource]int64{}
		for _, fq := range row.OwnQuotas {
			row.free[flavorResource{fq.Flavor, fq.Resource}] += fq.Nominal
		}
		for _, q := range row.Queues {
			row.Quota.add(q.Quota)
			row.InUse.add(q.InUse)
			row.Borrowed.add(q.Borrowed)
			for _, fq := range q.Quotas {
				row.free[flavorResource{fq.Flavor, fq.Resource}] += fq.Nominal - fq.InUse
			}
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
			for k, v := range out[j].free {
				out[i].free[k] += v
			}
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

// flavorQuotasOf are resource groups' quotas per flavor and resource, with
// what usage says is held and borrowed there.
func flavorQuotasOf(groups []kueuev1beta2.ResourceGroup, usage []kueuev1beta2.FlavorUsage) []FlavorQuota {
	var out []FlavorQuota
	limit := func(r corev1.ResourceName, q *resource.Quantity) *int64 {
		if q == nil {
			return nil
		}
		return ptrTo(units(r, *q))
	}
	for _, rg := range groups {
		for _, f := range rg.Flavors {
			for _, r := range f.Resources {
				fq := FlavorQuota{Flavor: string(f.Name), Resource: r.Name, Nominal: units(r.Name, r.NominalQuota),
					LendingLimit: limit(r.Name, r.LendingLimit), BorrowingLimit: limit(r.Name, r.BorrowingLimit)}
				for _, u := range usage {
					if u.Name != f.Name {
						continue
					}
					for _, ru := range u.Resources {
						if ru.Name == r.Name {
							fq.InUse, fq.Borrowed = units(r.Name, ru.Total), units(r.Name, ru.Borrowed)
						}
					}
				}
				out = append(out, fq)
			}
		}
	}
	return out
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

// BorrowableNow is how much more of a resource a ClusterQueue may borrow
// right now, in Amount's units: in all (Total) and per flavor of its
// quota (ByFlavor, the flavors with some), and why none when Total is 0.
type BorrowableNow struct {
	Total    int64
	ByFlavor []FlavorAmountOf
	Why      NoBorrowing
	// Flavors is how many flavors the queue has quota of the resource on.
	Flavors int
}

// FlavorAmountOf is an amount of one resource on one flavor.
type FlavorAmountOf struct {
	Flavor string
	Amount int64
}

// Borrowable is how much more of r the ClusterQueue named queue may borrow
// right now, read from the cohort tree (CohortTree's rows) with Kueue's own
// rule (its cache's available(), per flavor and resource): what it may
// still admit in its cohort tree, up to its root, beyond its own idle
// quota. Each node's lending limit keeps part of its quota to its own
// subtree, each borrowing limit caps what a node takes from its parent,
// and what the tree's queues use beyond their kept quota counts against
// the quota they lent. A task takes a flavor whole, so the figures are per
// flavor; Total sums them.
func Borrowable(tree []CohortRow, queue string, r corev1.ResourceName) BorrowableNow {
	self := quotaTree(tree)[queue]
	if self == nil || self.parent == nil {
		return BorrowableNow{Why: NotInCohort}
	}
	var out BorrowableNow
	limited, flavors := 0, 0
	for _, fq := range self.quotas {
		if fq.Resource != r {
			continue
		}
		flavors++
		e := frEval{flavor: fq.Flavor, resource: r, subtree: map[*quotaNode]int64{}, usage: map[*quotaNode]int64{}}
		more := max(e.available(self)-max(fq.Nominal-fq.InUse, 0), 0)
		if more > 0 {
			out.Total += more
			out.ByFlavor = append(out.ByFlavor, FlavorAmountOf{Flavor: fq.Flavor, Amount: more})
		} else if fq.BorrowingLimit != nil && max(fq.InUse-fq.Nominal, 0) >= *fq.BorrowingLimit {
			limited++
		}
	}
	out.Flavors = flavors
	switch {
	case out.Total > 0:
		out.Why = CanBorrow
	case flavors > 0 && limited == flavors:
		out.Why = BorrowingLimitReached
	default:
		out.Why = NothingIdle
	}
	return out
}

// quotaNode is a cohort or a ClusterQueue of the tree as Kueue's cache
// keeps their quota (its resourceNode): its own quotas, its parent cohort
// and its children.
type quotaNode struct {
	queue    bool
	quotas   []FlavorQuota
	parent   *quotaNode
	children []*quotaNode
}

// quotaTree links the tree's cohorts and queues, by name (queues and
// cohorts have names of their own kinds: a queue named as a cohort wins).
// A cohort at depth 0 is a root, even where a cycle gives it a parent.
func quotaTree(tree []CohortRow) map[string]*quotaNode {
	cohorts := map[string]*quotaNode{}
	for _, row := range tree {
		cohorts[row.Name] = &quotaNode{quotas: row.OwnQuotas}
	}
	out := map[string]*quotaNode{}
	for _, row := range tree {
		n := cohorts[row.Name]
		if p := cohorts[row.Parent]; p != nil && row.Depth > 0 {
			n.parent = p
			p.children = append(p.children, n)
		}
		for _, q := range row.Queues {
			qn := &quotaNode{queue: true, quotas: q.Quotas, parent: n}
			n.children = append(n.children, qn)
			out[q.Name] = qn
		}
	}
	return out
}

// frEval reads the tree's nodes for one flavor and resource, as Kueue's
// cache does, keeping each node's subtree quota and usage once found.
type frEval struct {
	flavor         string
	resource       corev1.ResourceName
	subtree, usage map[*quotaNode]int64
}

func (e frEval) quota(n *quotaNode) FlavorQuota {
	for _, q := range n.quotas {
		if q.Flavor == e.flavor && q.Resource == e.resource {
			return q
		}
	}
	return FlavorQuota{}
}

// subtreeQuota is Kueue's SubtreeQuota: a node's nominal quota and what
// its children lend it (their subtree quota beyond what they keep).
func (e frEval) subtreeQuota(n *quotaNode) int64 {
	if v, ok := e.subtree[n]; ok {
		return v
	}
	v := e.quota(n).Nominal
	for _, c := range n.children {
		v += e.subtreeQuota(c) - e.localQuota(c)
	}
	e.subtree[n] = v
	return v
}

// localQuota is Kueue's localQuota: what a node's lending limit keeps to
// its own subtree.
func (e frEval) localQuota(n *quotaNode) int64 {
	if limit := e.quota(n).LendingLimit; limit != nil {
		return max(e.subtreeQuota(n)-*limit, 0)
	}
	return 0
}

// used is Kueue's Usage: a queue's, or what a cohort's children use
// beyond what they keep.
func (e frEval) used(n *quotaNode) int64 {
	if n.queue {
		return e.quota(n).InUse
	}
	if v, ok := e.usage[n]; ok {
		return v
	}
	var v int64
	for _, c := range n.children {
		v += max(e.used(c)-e.localQuota(c), 0)
	}
	e.usage[n] = v
	return v
}

// available is Kueue's available(): what a node may still use, of what it
// keeps and, within its borrowing limit, of its parent's.
func (e frEval) available(n *quotaNode) int64 {
	if n.parent == nil {
		return e.subtreeQuota(n) - e.used(n)
	}
	fromParent := e.available(n.parent)
	if limit := e.quota(n).BorrowingLimit; limit != nil {
		kept := e.localQuota(n)
		storedInParent := e.subtreeQuota(n) - kept
		usedInParent := max(e.used(n)-kept, 0)
		fromParent = min(storedInParent-usedInParent+*limit, fromParent)
	}
	return max(e.localQuota(n)-e.used(n), 0) + fromParent
}
