package handlers

import (
	"fmt"
	"net/url"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/web/templates"
)

// snapshots give the read model's current snapshot.
type snapshots interface {
	Snapshot() *domain.Snapshot
}

// borrowable is what a ClusterQueue may borrow now of one resource
// (domain.Borrowable), in the units domain.Amount keeps.
type borrowable struct {
	amount int64
	why    domain.NoBorrowing
}

// borrowableOf is what the ClusterQueues of the teams in visible may borrow
// now, per resource; a queue in no cohort is missing from the tree, hence
// from the map.
func borrowableOf(ov domain.Overview, visible scope) map[string]map[corev1.ResourceName]borrowable {
	out := map[string]map[corev1.ResourceName]borrowable{}
	for _, q := range visibleQueues(ov, visible) {
		out[q.Name] = map[corev1.ResourceName]borrowable{}
		for _, res := range usageResources {
			n, why := domain.Borrowable(ov.Cohorts, q.Name, res.kube)
			out[q.Name][res.kube] = borrowable{n, why}
		}
	}
	return out
}

// teamSections are a member's teams as the top of the overview shows them:
// what a member of one team needs instead of the cluster's tables.
func teamSections(snap *domain.Snapshot, visible scope, can map[string]map[corev1.ResourceName]borrowable) []templates.TeamSection {
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
func teamSection(u domain.TeamUsage, can map[corev1.ResourceName]borrowable) templates.TeamSection {
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

// borrowSentence says how much more of res the team can borrow now, or why
// nothing.
func borrowSentence(u domain.TeamUsage, res usageResource, b borrowable) string {
	switch b.why {
	case domain.CanBorrow:
		return fmt.Sprintf("You can borrow up to %s right now.", amountWords(b.amount, res, "more "))
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
