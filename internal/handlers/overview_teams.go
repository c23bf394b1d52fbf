package handlers

import (
	"fmt"
	"net/url"
	"strconv"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/web/templates"
)

// snapshots give the read model's current snapshot.
type snapshots interface {
	Snapshot() *domain.Snapshot
}

// borrowable is what a ClusterQueue may borrow now (domain.BorrowableGPUs).
type borrowable struct {
	gpus int64
	why  domain.NoBorrowing
}

// borrowableOf is what the ClusterQueues of the teams in visible may borrow
// now; a queue in no cohort is missing from the tree, hence from the map.
func borrowableOf(ov domain.Overview, visible scope) map[string]borrowable {
	out := map[string]borrowable{}
	for _, q := range visibleQueues(ov, visible) {
		n, why := domain.BorrowableGPUs(ov.Cohorts, q.Name)
		out[q.Name] = borrowable{n, why}
	}
	return out
}

// teamSections are a member's teams as the top of the overview shows them:
// what a member of one team needs instead of the cluster's tables.
func teamSections(snap *domain.Snapshot, visible scope, can map[string]borrowable) []templates.TeamSection {
	var out []templates.TeamSection
	for _, u := range snap.Teams {
		if visible.sees(u.Team) {
			b, known := can[u.ClusterQueue]
			out = append(out, teamSection(u, b, known))
		}
	}
	return out
}

// teamSection is one team's section; known is false when the overview's
// queues do not have its ClusterQueue yet (just made): no borrowing sentence.
func teamSection(u domain.TeamUsage, b borrowable, known bool) templates.TeamSection {
	s := templates.TeamSection{Team: u.Team, Quota: itoa(u.Allocated.GPUs), InUse: itoa(u.InUse.GPUs), Borrowed: itoa(u.Borrowed.GPUs),
		Running: strconv.Itoa(u.Running), Pending: strconv.Itoa(u.Pending + u.Preempted), PendingGPUs: itoa(u.PendingDemand.GPUs),
		UsageLink: "/usage/" + url.PathEscape(u.Team), TasksLink: tasksLink("team", u.Team)}
	if known {
		s.Borrow = borrowSentence(u, b)
	}
	return s
}

// borrowSentence says how much more the team can borrow now, or why nothing.
func borrowSentence(u domain.TeamUsage, b borrowable) string {
	switch b.why {
	case domain.CanBorrow:
		return fmt.Sprintf("You can borrow up to %s right now.", gpusWord(b.gpus, "more "))
	case domain.NotInCohort:
		return "Your team cannot borrow right now: its ClusterQueue is in no cohort, so no other team lends to it."
	case domain.BorrowingLimitReached:
		if u.Borrowed.GPUs == 0 {
			return "Your team cannot borrow right now: its borrowing limit is 0 GPUs."
		}
		return fmt.Sprintf("Your team cannot borrow right now: it already borrows %s, as much as its borrowing limit allows.", gpusWord(u.Borrowed.GPUs, ""))
	default:
		return "Your team cannot borrow right now: nothing is idle in its cohort " + u.Cohort + " that may be lent to it."
	}
}

// gpusWord is "1 more GPU", "3 more GPUs".
func gpusWord(n int64, more string) string {
	if n == 1 {
		return "1 " + more + "GPU"
	}
	return itoa(n) + " " + more + "GPUs"
}
