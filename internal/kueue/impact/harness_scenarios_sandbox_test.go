package impact_test

import (
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/sandbox"
)

// scenario is one situation and one change. Names are local to it: the
// harness prefixes every object it creates with the scenario's own prefix.
type scenario struct {
	order            int
	name, kind, what string
	teams            []team
	// cohorts are Cohort objects to create (a team's cohort needs none:
	// ClusterQueues that name a cohort make it).
	cohorts []cohortSpec
	// classes are WorkloadPriorityClasses and their values.
	classes map[string]int32
	// waves of jobs: each submitted when Kueue settled on the one before.
	waves  [][]job
	change change
	// cause is why Kueue and the preview part here when they do, as
	// found by reading both (the harness counts the disagreement all the
	// same).
	cause string
}

// Causes of disagreements found so far (docs/preview.md).
const (
	causeLocalQueueFirst = "Kueue looks again at a cohort's waiting Workloads when a Workload goes only through that " +
		"Workload's LocalQueue; the console deletes the LocalQueue first, so the waiting job stays parked until the next " +
		"event in its cohort (the preview looks at every waiting Workload again)"
	causeClassRollout = "Kueue rewrites the priorities of a class's Workloads one by one, class after class (the console " +
		"writes the highest class first), and its scheduler acts on the states in between (the preview applies every new " +
		"value at once)"
)

type team struct {
	name         string
	gpus         int64
	lend, borrow *int64 // GPU lendingLimit, borrowingLimit
	weight       string // fair-sharing weight; "" for Kueue's default (1)
	reclaim      kueue.PreemptionPolicy
	within       kueue.PreemptionPolicy
	borrowWithin kueue.BorrowWithinCohortPolicy
	threshold    *int32 // borrowWithinCohort.maxPriorityThreshold
	cohort       string // "" for the scenario's default cohort
}

type cohortSpec struct {
	name, parent string
	gpus         int64 // the cohort's own GPU quota
}

type job struct {
	team, class string
	gpus        int64
}

// change is what the scenario changes, in the sandbox and in the
// preview's copy alike.
type change struct {
	cq         map[string]func(*kueue.ClusterQueue) // by team
	parents    map[string]string                    // cohort → its new parent
	classes    map[string]int32                     // class → its new value
	deleteCQ   string                               // kubectl delete clusterqueue
	deleteTeam string                               // the console's team delete: LocalQueue, ClusterQueue, namespace
	// jobsFirst deletes the team's Jobs first and its queues once their
	// Workloads are gone, instead of the console's order.
	jobsFirst bool
}

// Team options.

func tm(name string, gpus int64, opts ...func(*team)) team {
	t := team{name: name, gpus: gpus}
	for _, o := range opts {
		o(&t)
	}
	return t
}

func lends(n int64) func(*team)   { return func(t *team) { t.lend = ptr.To(n) } }
func borrows(n int64) func(*team) { return func(t *team) { t.borrow = ptr.To(n) } }
func weight(w string) func(*team) { return func(t *team) { t.weight = w } }
func inCohort(c string) func(*team) {
	return func(t *team) { t.cohort = c }
}

// reclaimNever: Kueue's webhook then demands borrowWithinCohort Never too.
func reclaimNever(t *team) {
	t.reclaim, t.borrowWithin = kueue.PreemptionPolicyNever, kueue.BorrowWithinCohortPolicyNever
}
func noPreemption(t *team) {
	t.reclaim, t.within, t.borrowWithin = kueue.PreemptionPolicyNever, kueue.PreemptionPolicyNever, kueue.BorrowWithinCohortPolicyNever
}
func threshold(p int32) func(*team) { return func(t *team) { t.threshold = ptr.To(p) } }

// fillers are teams of 4 GPUs running one job of 4 (all their quota).
func fillers(names ...string) []team {
	var out []team
	for _, n := range names {
		out = append(out, tm(n, 4))
	}
	return out
}

func filled(classes []string, names ...string) []job {
	var out []job
	for i, n := range names {
		out = append(out, job{n, classes[i%len(classes)], 4})
	}
	return out
}

func j(team, class string, gpus ...int64) []job {
	var out []job
	for _, g := range gpus {
		out = append(out, job{team, class, g})
	}
	return out
}

func cat(parts ...[]job) []job {
	var out []job
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func teams(parts ...any) []team {
	var out []team
	for _, p := range parts {
		switch v := p.(type) {
		case team:
			out = append(out, v)
		case []team:
			out = append(out, v...)
		}
	}
	return out
}

// ClusterQueue changes.

func gpuQuota(cq *kueue.ClusterQueue) *kueue.ResourceQuota {
	for i := range cq.Spec.ResourceGroups {
		for k := range cq.Spec.ResourceGroups[i].Flavors {
			for r := range cq.Spec.ResourceGroups[i].Flavors[k].Resources {
				if q := &cq.Spec.ResourceGroups[i].Flavors[k].Resources[r]; q.Name == sandbox.ResourceGPU {
					return q
				}
			}
		}
	}
	return nil
}

func nominal(n int64) func(*kueue.ClusterQueue) {
	return func(cq *kueue.ClusterQueue) { gpuQuota(cq).NominalQuota = *resource.NewQuantity(n, resource.DecimalSI) }
}

func lendingLimit(n int64) func(*kueue.ClusterQueue) {
	return func(cq *kueue.ClusterQueue) { gpuQuota(cq).LendingLimit = resource.NewQuantity(n, resource.DecimalSI) }
}

func borrowingLimit(n int64) func(*kueue.ClusterQueue) {
	return func(cq *kueue.ClusterQueue) {
		gpuQuota(cq).BorrowingLimit = resource.NewQuantity(n, resource.DecimalSI)
	}
}

func fairWeight(w string) func(*kueue.ClusterQueue) {
	return func(cq *kueue.ClusterQueue) {
		cq.Spec.FairSharing = &kueue.FairSharing{Weight: ptr.To(resource.MustParse(w))}
	}
}

func reclaimAny(cq *kueue.ClusterQueue) {
	cq.Spec.Preemption.ReclaimWithinCohort = kueue.PreemptionPolicyAny
}

func annotate(cq *kueue.ClusterQueue) {
	if cq.Annotations == nil {
		cq.Annotations = map[string]string{}
	}
	cq.Annotations["impact-harness.openquota.dev/note"] = "nothing Kueue reads"
}

func both(fs ...func(*kueue.ClusterQueue)) func(*kueue.ClusterQueue) {
	return func(cq *kueue.ClusterQueue) {
		for _, f := range fs {
			f(cq)
		}
	}
}

func onCQ(pairs ...any) change {
	ch := change{cq: map[string]func(*kueue.ClusterQueue){}}
	for i := 0; i+1 < len(pairs); i += 2 {
		ch.cq[pairs[i].(string)] = pairs[i+1].(func(*kueue.ClusterQueue))
	}
	return ch
}

// Priority classes: ranking, and first come first served as the console
// writes it (every class 0).
var (
	ranking = map[string]int32{"low": 10, "mid": 50, "high": 100}
	fcfs    = map[string]int32{"low": 0, "mid": 0, "high": 0}
	mixed   = []string{"low", "mid", "high"}
)

func scenarios() []scenario {
	list := []scenario{
		// Quota cuts.
		{name: "cut-idle", kind: "quota cut", what: "cut a team's unused quota, nothing pending",
			teams: teams(tm("a", 8), tm("b", 8), tm("c", 8)), classes: ranking,
			waves:  [][]job{cat(j("a", "low", 4), j("b", "mid", 4), j("b", "low", 4), j("c", "high", 2, 2))},
			change: onCQ("a", nominal(4))},
		{name: "cut-to-usage", kind: "quota cut", what: "cut a team to its usage while another team waits to borrow",
			teams: teams(tm("a", 8), fillers("b", "c", "d", "e")), classes: ranking,
			waves: [][]job{cat(j("a", "mid", 4), j("a", "low", 2), filled(mixed, "b", "c", "d", "e")),
				j("e", "high", 4)},
			change: onCQ("a", nominal(6))},
		{name: "cut-lender", kind: "quota cut", what: "cut a lender below what others borrow, pending demand elsewhere",
			teams: teams(tm("a", 8), tm("b", 4), tm("c", 4), tm("d", 4)), classes: ranking,
			waves: [][]job{cat(j("b", "low", 4, 4), j("c", "mid", 4), j("c", "low", 2), j("d", "mid", 4)),
				j("d", "high", 4)},
			change: onCQ("a", nominal(2))},
		{name: "cut-borrower", kind: "quota cut", what: "cut a borrower's own quota while its lender waits",
			teams: teams(tm("a", 8), tm("b", 8), fillers("c", "d", "e", "f")), classes: ranking,
			waves: [][]job{cat(j("b", "low", 4, 4, 4), j("a", "mid", 2), filled(mixed, "c", "d", "e", "f")),
				j("a", "mid", 8)},
			change: onCQ("b", nominal(4))},
		{name: "cut-many", kind: "quota cut", what: "cut two teams of ten, one of them borrowing",
			teams: teams(tm("a", 12), tm("b", 4), fillers("c", "d", "e", "f", "g", "h", "i", "k")), classes: ranking,
			waves: [][]job{cat(j("b", "mid", 4, 4), j("a", "low", 2), filled(mixed, "c", "d", "e", "f", "g", "h", "i", "k")),
				cat(j("c", "high", 2), j("h", "low", 4))},
			change: onCQ("a", nominal(4), "b", nominal(2))},

		// Quota raises.
		{name: "raise-own", kind: "quota raise", what: "raise the quota of a team whose jobs wait",
			teams: teams(tm("a", 4), tm("b", 4), tm("c", 4)), classes: ranking,
			waves:  [][]job{cat(j("b", "mid", 4), j("c", "low", 4), j("a", "high", 4)), cat(j("a", "low", 2, 2), j("a", "mid", 4))},
			change: onCQ("a", nominal(10))},
		{name: "raise-lender", kind: "quota raise", what: "raise an idle team's quota while others wait to borrow",
			teams: teams(tm("a", 4), fillers("b", "c", "d", "e", "f")), classes: ranking,
			waves: [][]job{cat(j("a", "mid", 4), filled(mixed, "b", "c", "d", "e", "f")),
				cat(j("b", "low", 2, 2), j("d", "high", 4))},
			change: onCQ("a", nominal(10))},
		{name: "raise-no-borrow", kind: "quota raise", what: "raise a team that may not borrow",
			teams: teams(tm("a", 4, borrows(0)), tm("b", 8), fillers("c", "d", "e", "f", "g", "h")), classes: ranking,
			waves: [][]job{cat(j("a", "mid", 2, 2), j("b", "low", 2), filled(mixed, "c", "d", "e", "f", "g", "h")),
				cat(j("a", "high", 2), j("a", "low", 4))},
			change: onCQ("a", nominal(8))},
		{name: "raise-big-job", kind: "quota raise", what: "raise a team so a job larger than the cohort fits",
			teams: teams(tm("a", 8), fillers("b", "c", "d", "e", "f", "g", "h", "i", "k")), classes: ranking,
			waves: [][]job{cat(j("a", "mid", 4), filled(mixed, "b", "c", "d", "e", "f", "g", "h", "i", "k")),
				cat(j("a", "high", 16), j("e", "low", 2))},
			change: onCQ("a", nominal(24))},

		// Lending.
		{name: "lend-off-idle", kind: "lending off", what: "a lender stops lending; it has no demand of its own",
			teams: teams(tm("a", 8), tm("b", 4), tm("c", 4)), classes: ranking,
			waves:  [][]job{cat(j("b", "low", 4, 4), j("c", "mid", 4, 2))},
			change: onCQ("a", lendingLimit(0))},
		{name: "lend-off-own-demand", kind: "lending off", what: "a lender that does not reclaim stops lending; its jobs wait",
			teams: teams(tm("a", 8, reclaimNever), tm("b", 4), tm("c", 4), tm("d", 4)), classes: ranking,
			waves:  [][]job{cat(j("b", "low", 4, 4, 2), j("c", "mid", 4), j("d", "mid", 4)), j("a", "high", 4, 2)},
			change: onCQ("a", lendingLimit(0))},
		{name: "lend-limit-lowered", kind: "lending off", what: "a lender lowers its lending limit below what is borrowed",
			teams: teams(tm("a", 8, lends(6)), tm("b", 4), fillers("c", "d", "e")), classes: ranking,
			waves:  [][]job{cat(j("b", "low", 4, 4, 2), filled(mixed, "c", "d", "e")), cat(j("a", "mid", 2), j("c", "high", 2))},
			change: onCQ("a", lendingLimit(2))},
		{name: "lend-off-waiting", kind: "lending off", what: "a lender stops lending while another team waits to borrow",
			teams: teams(tm("a", 8), tm("b", 4), tm("c", 4), fillers("d", "e", "f", "g")), classes: ranking,
			waves: [][]job{cat(j("b", "mid", 4, 4), j("c", "low", 4, 2), filled(mixed, "d", "e", "f", "g")),
				cat(j("c", "high", 4), j("a", "low", 2))},
			change: onCQ("a", lendingLimit(0))},

		// Borrowing limits.
		{name: "borrow-limit-set", kind: "borrowing limit", what: "limit a borrower below what it borrows",
			teams: teams(tm("a", 8), tm("b", 4), tm("c", 4)), classes: ranking,
			waves:  [][]job{cat(j("b", "low", 4, 4, 2), j("c", "mid", 4)), j("b", "high", 2)},
			change: onCQ("b", borrowingLimit(2))},
		{name: "borrow-limit-raised", kind: "borrowing limit", what: "raise a borrowing limit that keeps jobs waiting",
			teams: teams(tm("a", 8), tm("b", 4, borrows(0)), tm("c", 4), tm("d", 4)), classes: ranking,
			waves:  [][]job{cat(j("b", "mid", 4), j("c", "low", 4), j("d", "low", 2)), cat(j("b", "high", 2, 2), j("b", "low", 4))},
			change: onCQ("b", borrowingLimit(8))},
		{name: "borrow-limit-lowered", kind: "borrowing limit", what: "lower a borrowing limit while the team waits for more",
			teams: teams(tm("a", 12), tm("b", 4, borrows(6)), tm("c", 4), fillers("d", "e")), classes: ranking,
			waves:  [][]job{cat(j("b", "mid", 4, 4, 2), j("c", "low", 4), filled(mixed, "d", "e")), cat(j("b", "high", 4), j("c", "mid", 2))},
			change: onCQ("b", borrowingLimit(1))},
		{name: "borrow-limits-many", kind: "borrowing limit", what: "set limits on three of seven teams",
			teams: teams(tm("a", 12), tm("b", 4), tm("c", 4), tm("d", 4), fillers("e", "f", "g")), classes: ranking,
			waves: [][]job{cat(j("b", "low", 4, 4), j("c", "mid", 4, 2), j("d", "high", 4, 2), filled(mixed, "e", "f", "g")),
				cat(j("d", "low", 4), j("e", "mid", 2))},
			change: onCQ("b", borrowingLimit(0), "c", borrowingLimit(1), "d", borrowingLimit(6))},

		// Team deletes.
		{name: "delete-cq-busy", kind: "team delete", what: "kubectl delete of a ClusterQueue whose jobs run (Kueue keeps it terminating)",
			teams: teams(tm("a", 8), tm("b", 4), tm("c", 4)), classes: ranking,
			waves:  [][]job{cat(j("a", "mid", 4), j("b", "low", 4, 2), j("c", "high", 4)), cat(j("a", "low", 8), j("c", "mid", 4))},
			change: change{deleteCQ: "a"}},
		{name: "delete-cq-idle", kind: "team delete", what: "kubectl delete of a lending ClusterQueue with only waiting jobs",
			teams: teams(tm("a", 4, reclaimNever), tm("b", 4), tm("c", 4), fillers("d")), classes: ranking,
			waves:  [][]job{cat(j("b", "low", 4, 4), j("c", "mid", 4), filled(mixed, "d")), cat(j("a", "high", 4), j("c", "low", 2))},
			change: change{deleteCQ: "a"}},
		{name: "delete-team-borrower", cause: causeLocalQueueFirst, kind: "team delete", what: "the console deletes a team that borrows; others wait",
			teams: teams(tm("a", 8), tm("b", 4), tm("c", 4), tm("d", 4), fillers("e")), classes: ranking,
			waves: [][]job{cat(j("b", "mid", 4, 4, 4), j("c", "low", 4), j("d", "mid", 4), filled(mixed, "e")),
				cat(j("c", "high", 4), j("d", "low", 2))},
			change: change{deleteTeam: "b"}},
		{name: "delete-team-jobs-first", kind: "team delete", what: "a team that borrows deleted Jobs first, its queues last; others wait",
			teams: teams(tm("a", 8), tm("b", 4), tm("c", 4), tm("d", 4), fillers("e")), classes: ranking,
			waves: [][]job{cat(j("b", "mid", 4, 4, 4), j("c", "low", 4), j("d", "mid", 4), filled(mixed, "e")),
				cat(j("c", "high", 4), j("d", "low", 2))},
			change: change{deleteTeam: "b", jobsFirst: true}},
		{name: "delete-team-lender", kind: "team delete", what: "the console deletes an idle team others borrow from",
			teams: teams(tm("a", 8), tm("b", 4), tm("c", 4), fillers("d", "e", "f")), classes: ranking,
			waves:  [][]job{cat(j("b", "low", 4, 4), j("c", "mid", 4, 4), filled(mixed, "d", "e", "f")), j("d", "high", 2)},
			change: change{deleteTeam: "a"}},
		{name: "delete-team-busy", kind: "team delete", what: "the console deletes a team at its quota; others wait",
			teams: teams(tm("a", 8), tm("b", 8), tm("c", 4), fillers("d", "e", "f", "g", "h")), classes: ranking,
			waves: [][]job{cat(j("a", "mid", 4, 4), j("b", "low", 4, 4), j("c", "mid", 4), filled(mixed, "d", "e", "f", "g", "h")),
				cat(j("c", "high", 4, 4), j("b", "low", 2), j("g", "mid", 2))},
			change: change{deleteTeam: "a"}},

		// Policy: first come first served ↔ ranking by class.
		{name: "fcfs-to-ranking", cause: causeClassRollout, kind: "policy switch", what: "first come first served → ranking; a high job waits behind low ones",
			teams: teams(tm("a", 8), tm("b", 8), tm("c", 4)), classes: fcfs,
			waves:  [][]job{cat(j("a", "low", 4, 4), j("b", "mid", 4, 4), j("c", "low", 4)), cat(j("a", "high", 4), j("c", "high", 2))},
			change: change{classes: ranking}},
		{name: "fcfs-to-ranking-borrow", cause: causeClassRollout, kind: "policy switch", what: "first come first served → ranking; a high job waits to borrow",
			teams: teams(tm("a", 8), tm("b", 4), tm("c", 4), fillers("d", "e")), classes: fcfs,
			waves: [][]job{cat(j("b", "low", 4, 4, 4), j("c", "mid", 4), filled(mixed, "d", "e")),
				cat(j("c", "high", 4), j("d", "high", 2))},
			change: change{classes: ranking}},
		{name: "ranking-to-fcfs", cause: causeClassRollout, kind: "policy switch", what: "ranking → first come first served",
			teams: teams(tm("a", 8), tm("b", 4), tm("c", 4), tm("d", 4)), classes: ranking,
			waves:  [][]job{cat(j("a", "high", 4, 4), j("b", "low", 4, 2), j("c", "mid", 4), j("d", "low", 2)), cat(j("a", "low", 4), j("d", "high", 4))},
			change: change{classes: fcfs}},
		{name: "ranking-swapped", cause: causeClassRollout, kind: "policy switch", what: "ranking with low and high swapped",
			teams: teams(tm("a", 8), tm("b", 8), fillers("c", "d", "e", "f")), classes: ranking,
			waves: [][]job{cat(j("a", "high", 4, 4), j("b", "mid", 4), j("b", "high", 4), filled(mixed, "c", "d", "e", "f")),
				cat(j("a", "low", 4), j("b", "low", 2), j("e", "low", 2))},
			change: change{classes: map[string]int32{"low": 100, "high": 10}}},
		{name: "class-unused", cause: causeClassRollout, kind: "policy switch", what: "change the value of a class no job uses",
			teams: teams(tm("a", 8), tm("b", 4), fillers("c", "d", "e", "f", "g", "h")), classes: ranking,
			waves: [][]job{cat(j("a", "low", 4, 4), j("b", "high", 4, 2), filled([]string{"low", "high"}, "c", "d", "e", "f", "g", "h")),
				cat(j("a", "high", 4), j("g", "low", 2))},
			change: change{classes: map[string]int32{"mid": 5}}},

		// Fair-share weights.
		{name: "weight-up-waiting", kind: "fair-share weight", what: "raise the weight of a team that waits to borrow",
			teams: teams(tm("a", 8), tm("b", 4), tm("c", 4)), classes: ranking,
			waves:  [][]job{cat(j("b", "low", 4, 4), j("a", "low", 4), j("c", "mid", 4)), j("c", "mid", 4)},
			change: onCQ("c", fairWeight("4"))},
		{name: "weight-down-borrower", kind: "fair-share weight", what: "lower the weight of a team that borrows",
			teams: teams(tm("a", 12), tm("b", 4, weight("2")), tm("c", 4), tm("d", 4)), classes: ranking,
			waves:  [][]job{cat(j("b", "low", 4, 4, 4), j("c", "mid", 4, 4), j("d", "mid", 4)), cat(j("d", "high", 4), j("c", "low", 2))},
			change: onCQ("b", fairWeight("250m"))},
		{name: "weight-zero", kind: "fair-share weight", what: "weight 0 for one of two borrowers",
			teams: teams(tm("a", 8), tm("b", 4), tm("c", 4), fillers("d", "e")), classes: ranking,
			waves:  [][]job{cat(j("b", "mid", 4, 4), j("c", "mid", 4, 4), filled(mixed, "d", "e")), cat(j("c", "low", 2), j("d", "mid", 2))},
			change: onCQ("b", fairWeight("0"))},
		{name: "weight-idle", kind: "fair-share weight", what: "weights of teams that neither borrow nor wait",
			teams: teams(tm("a", 8), fillers("b", "c", "d", "e", "f")), classes: ranking,
			waves:  [][]job{cat(j("a", "low", 4), filled(mixed, "b", "c", "d", "e", "f"))},
			change: onCQ("b", fairWeight("3"), "c", fairWeight("500m"))},

		// Cohort trees.
		{name: "cohort-under-idle", kind: "cohort moved", what: "a busy cohort moved under a cohort with idle quota",
			cohorts: []cohortSpec{{name: "x"}, {name: "y"}},
			teams:   teams(tm("a", 4, inCohort("x")), tm("b", 4, inCohort("x")), tm("c", 8, inCohort("y")), tm("d", 8, inCohort("y"))),
			classes: ranking,
			waves:   [][]job{cat(j("a", "mid", 4), j("b", "low", 4), j("c", "mid", 4), j("d", "low", 2)), cat(j("a", "high", 4), j("b", "low", 2, 2))},
			change:  change{parents: map[string]string{"x": "y"}}},
		{name: "cohort-idle-under-busy", kind: "cohort moved", what: "an idle cohort moved under a busy one",
			cohorts: []cohortSpec{{name: "x"}, {name: "y"}, {name: "z"}},
			teams: teams(tm("a", 4, inCohort("x")), tm("b", 4, inCohort("x")), tm("c", 4, inCohort("y")),
				tm("d", 8, inCohort("z")), tm("e", 4, inCohort("z")), tm("f", 4, inCohort("y"))),
			classes: ranking,
			waves: [][]job{cat(j("a", "mid", 4), j("b", "low", 4), j("c", "mid", 4), j("d", "low", 2), j("e", "mid", 2), j("f", "mid", 4)),
				cat(j("a", "high", 2), j("b", "mid", 4), j("c", "low", 2))},
			change: change{parents: map[string]string{"z": "x"}}},
		{name: "cohort-under-quota", kind: "cohort moved", what: "a cohort moved under a parent that has GPUs of its own",
			cohorts: []cohortSpec{{name: "p", gpus: 8}, {name: "x"}},
			teams:   teams(tm("a", 4, inCohort("x")), tm("b", 4, inCohort("x")), tm("c", 4, inCohort("x")), tm("d", 4, inCohort("x"))),
			classes: ranking,
			waves:   [][]job{cat(j("a", "mid", 4), j("b", "low", 2, 2), j("c", "high", 4), j("d", "mid", 4)), cat(j("a", "high", 4), j("b", "low", 4), j("d", "low", 2))},
			change:  change{parents: map[string]string{"x": "p"}}},

		// Reclaim.
		{name: "reclaim-on", kind: "reclaimWithinCohort", what: "reclaimWithinCohort Never → Any for a lender whose jobs wait",
			teams: teams(tm("a", 8, reclaimNever), tm("b", 4), tm("c", 4)), classes: ranking,
			waves:  [][]job{cat(j("b", "low", 4, 4, 2), j("c", "mid", 4)), j("a", "mid", 4, 2)},
			change: onCQ("a", reclaimAny)},
		{name: "reclaim-on-many", kind: "reclaimWithinCohort", what: "reclaimWithinCohort Never → Any, three borrowers",
			teams: teams(tm("a", 12, reclaimNever), tm("b", 4), tm("c", 4), tm("d", 4), fillers("e")), classes: ranking,
			waves: [][]job{cat(j("b", "low", 4, 4), j("c", "mid", 4, 4), j("d", "high", 4, 2), filled(mixed, "e")),
				j("a", "mid", 4, 4)},
			change: onCQ("a", reclaimAny)},
		{name: "reclaim-on-nothing-lent", kind: "reclaimWithinCohort", what: "reclaimWithinCohort Never → Any when nothing is lent",
			teams: teams(tm("a", 8, reclaimNever), fillers("b", "c", "d")), classes: ranking,
			waves:  [][]job{cat(j("a", "mid", 4, 4), filled(mixed, "b", "c", "d")), j("a", "high", 4)},
			change: onCQ("a", reclaimAny)},

		// Changes that change nothing.
		{name: "noop-annotation", kind: "no effect", what: "an annotation on two ClusterQueues",
			teams: teams(tm("a", 8), tm("b", 4), fillers("c", "d", "e")), classes: ranking,
			waves:  [][]job{cat(j("a", "low", 4), j("b", "mid", 4, 4), filled(mixed, "c", "d", "e")), j("b", "high", 4)},
			change: onCQ("a", annotate, "b", annotate)},
		{name: "noop-loose-limits", kind: "no effect", what: "borrowing limits nobody reaches, on teams of a cohort of nine",
			teams:   teams(tm("a", 8), tm("b", 4, noPreemption), tm("c", 4, threshold(50)), fillers("d", "e", "f", "g", "h", "i")),
			classes: ranking,
			waves:   [][]job{cat(j("a", "high", 4, 4), j("b", "low", 2), j("c", "mid", 4), filled(mixed, "d", "e", "f", "g", "h", "i")), j("h", "low", 4)},
			change:  onCQ("b", both(borrowingLimit(8), annotate), "d", borrowingLimit(2))},
	}
	for i := range list {
		list[i].order = i
	}
	return list
}
