package handlers

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/web/templates"
)

// snapshots give the read model's current snapshot.
type snapshots interface {
	Snapshot() *domain.Snapshot
}

// borrowableOf is what the ClusterQueues of the teams in visible may borrow
// now, per resource (domain.Borrowable); a queue in no cohort is missing
// from the tree, hence from the map.
func borrowableOf(ov domain.Overview, visible scope) map[string]map[corev1.ResourceName]domain.BorrowableNow {
	out := map[string]map[corev1.ResourceName]domain.BorrowableNow{}
	for _, q := range visibleQueues(ov, visible) {
		out[q.Name] = map[corev1.ResourceName]domain.BorrowableNow{}
		for _, res := range usageResources {
			out[q.Name][res.kube] = domain.Borrowable(ov.Cohorts, q.Name, res.kube)
		}
	}
	return out
}

// teamSections are a member's teams as the top of the overview shows them:
// what a member of one team needs instead of the cluster's tables.
func teamSections(snap *domain.Snapshot, visible scope, can map[string]map[corev1.ResourceName]domain.BorrowableNow) []templates.TeamSection {
	var out []templates.TeamSection
	for _, u := range snap.Teams {
		if visible.sees(u.Team) {
			out = append(out, teamSection(u, can[u.ClusterQueue]))
		}
	}
	return out
}

// teamSection is one team's section, in the resource its charts draw (GPUs,
// or a queue's vCPU where it has no GPUs); can is nil when the overview's
// queues do not have its ClusterQueue yet (just made): no borrowing sentence.
func teamSection(u domain.TeamUsage, can map[corev1.ResourceName]domain.BorrowableNow) templates.TeamSection {
	res := chartedResource(u)
	f := res.figures(u)
	s := templates.TeamSection{Team: u.Team, Unit: res.named(), Quota: res.format(f.allocated), InUse: res.format(f.inUse), Borrowed: res.format(f.borrowed),
		Running: strconv.Itoa(u.Running), Pending: strconv.Itoa(u.Pending + u.Preempted), PendingAsk: res.format(f.wants),
		UsageLink: "/usage/" + url.PathEscape(u.Team), TasksLink: tasksLink("team", u.Team)}
	if b, known := can[res.kube]; known {
		s.Borrow = borrowSentence(u, res, b)
	}
	return s
}

// borrowSentence says how much more of res the team can borrow now (on
// which flavors, when it has quota on several), or why nothing.
func borrowSentence(u domain.TeamUsage, res usageResource, b domain.BorrowableNow) string {
	switch b.Why {
	case domain.CanBorrow:
		where := ""
		if b.Flavors > 1 {
			var on []string
			for _, f := range b.ByFlavor {
				on = append(on, res.format(f.Amount)+" on "+f.Flavor)
			}
			where = " (" + strings.Join(on, ", ") + ")"
		}
		return fmt.Sprintf("You can borrow up to %s right now%s.", amountWords(b.Total, res, "more "), where)
	case domain.NotInCohort:
		return "Your team cannot borrow right now: its ClusterQueue is in no cohort, so no other team lends to it."
	case domain.BorrowingLimitReached:
		if borrowed := res.figures(u).borrowed; borrowed > 0 {
			return fmt.Sprintf("Your team cannot borrow right now: it already borrows %s, as much as its borrowing limit allows.", amountWords(borrowed, res, ""))
		}
		return "Your team cannot borrow right now: its borrowing limit is " + amountWords(0, res, "") + "."
	default:
		return "Your team cannot borrow right now: nothing is idle in its cohort " + u.Cohort + " that may be lent to it."
	}
}

// amountWords is an amount of res in words: "1 more GPU", "3 more GPUs",
// "2.5 more vCPU", "64 more GiB of memory".
func amountWords(n int64, res usageResource, more string) string {
	switch res.key {
	case "gpu":
		return gpusWord(n, more)
	case "memory":
		return res.format(n) + " " + more + "GiB of memory"
	case "neuron":
		if n == 1 {
			return "1 " + more + "Neuron device"
		}
	}
	return res.format(n) + " " + more + res.unit
}

// gpusWord is "1 more GPU", "3 more GPUs".
func gpusWord(n int64, more string) string {
	if n == 1 {
		return "1 " + more + "GPU"
	}
	return itoa(n) + " " + more + "GPUs"
}
