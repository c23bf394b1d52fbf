package domain

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// Fate is what Kueue does with one task after a change, as the impact
// preview computes it (Kueue's own scheduler over a copy of the cluster).
type Fate string

const (
	FateStaysAdmitted Fate = "stays admitted"
	FatePreempted     Fate = "preempted"
	FateAdmitted      Fate = "admitted"
	FateStaysPending  Fate = "stays pending"
	// FateDeleted: the change deletes the task (its namespace goes).
	FateDeleted Fate = "deleted"
)

// FateChange is one task's end with the cluster as it is (Now) and as the
// change leaves it (After), each computed the same way: what differs is the
// change's doing; what Now already changes is Kueue's own next step.
type FateChange struct {
	Task       *TaskFacts
	Now, After Fate
	// PositionNow and PositionAfter are its places in its queue while pending.
	PositionNow, PositionAfter int
	// Reason and Preemptor explain a preemption: Kueue's condition reason
	// and the task it makes room for (nil when unknown).
	Reason    string
	Preemptor *TaskFacts
	// Uncertain names what the preview cannot know (node-level fit).
	Uncertain string
}

// KueueDefaultsAssumed is said of a preview or a what-if computed without
// Kueue's configuration (unreadable): it follows Kueue's defaults, so a
// cluster with fair sharing on may be answered otherwise.
const KueueDefaultsAssumed = "Kueue's configuration could not be read, so this assumes Kueue's defaults (no fair sharing)."

// Impact is what a change would make Kueue do.
type Impact struct {
	// What is the change, in words: "team nlp's new allocation".
	What string
	// Preempted are admitted tasks the change gets preempted; Admitted
	// pending tasks it gets admitted; Moved pending tasks whose place in
	// their queue changes.
	Preempted, Admitted, Moved []ImpactTask
	// Deleted are tasks the change deletes with their team's namespace.
	Deleted []ImpactTask
	// Anyway are tasks Kueue is about to admit or preempt with or without
	// the change (its next cycle, or an eviction in flight).
	Anyway []ImpactTask
	// Uncertain are fates the preview cannot predict, with why.
	Uncertain []ImpactTask
	// Teams are the teams whose quota or usage changes, before → after.
	Teams          []TeamImpact
	GPUsPreempted  int64
	GPUHoursAtRisk float64
	GPUsAdmitted   int64
	GPUsDeleted    int64
	// Kueue is how the preview was computed, for the page's footnote.
	Kueue string
	// Notes are what the preview could not take into account.
	Notes []string
	// Writes are the fields the change sets on WritesTo, as they are now
	// and as they will be (QueueWrites): hand edits it undoes included.
	Writes   []string
	WritesTo string
}

// ImpactTask is one task in the preview, with strings ready to show.
type ImpactTask struct {
	Namespace, Name, Team, Class string
	OwnerKind, OwnerName         string // as Task's
	GPUs                         int64
	Ran                          time.Duration
	GPUHours                     float64
	Why                          string
	PositionNow, PositionAfter   int
}

// ImpactTaskOf is the task f as an impact names it: by its owner as
// people know it, its team, class and GPUs.
func ImpactTaskOf(f *TaskFacts) ImpactTask {
	return ImpactTask{Namespace: f.Namespace, Name: f.Name, OwnerKind: f.OwnerKind, OwnerName: f.OwnerName, Team: f.Team, Class: f.Class, GPUs: f.GPUs}
}

// Named is the task's name as people know it.
func (t ImpactTask) Named() TaskName {
	return TaskName{Namespace: t.Namespace, Workload: t.Name, OwnerKind: t.OwnerKind, OwnerName: t.OwnerName}
}

// TeamImpact is one team before and after the change, in the resource
// that leads its quota (LeadResource) and that resource's units (vCPU in
// millicores, memory in MiB).
type TeamImpact struct {
	Team                              string
	Resource                          corev1.ResourceName
	QuotaNow, QuotaAfter              int64
	InUseNow, InUseAfter              int64
	BorrowedNow, BorrowedAfter        int64
	LentNow, LentAfter                int64
	PendingNow, PendingAfter, Deleted bool
}

// LeadResource is the resource a team's figures are told in: GPUs when
// it has or uses any, else Neuron devices, else vCPU (a queue of Kueue's
// own examples), else memory.
func LeadResource(amounts ...Amount) corev1.ResourceName {
	for _, r := range []corev1.ResourceName{ResourceGPU, ResourceNeuron, corev1.ResourceCPU} {
		for _, a := range amounts {
			if a.Of(r) > 0 {
				return r
			}
		}
	}
	return corev1.ResourceMemory
}

// AmountWord writes n of r in r's units for people ("8 GPUs", "1.5 vCPU",
// "512 GiB of memory").
func AmountWord(r corev1.ResourceName, n int64) string {
	switch r {
	case corev1.ResourceCPU:
		return FormatVCPU(n) + " vCPU"
	case corev1.ResourceMemory:
		return FormatGiB(n) + " GiB of memory"
	case ResourceNeuron:
		return CountOf(n, "Neuron device")
	}
	return CountOf(n, "GPU")
}

// Changed reports whether any figure of the team moves.
func (t TeamImpact) Changed() bool {
	return t.QuotaNow != t.QuotaAfter || t.InUseNow != t.InUseAfter || t.BorrowedNow != t.BorrowedAfter ||
		t.LentNow != t.LentAfter || t.Deleted
}

// None reports that the change moves no task.
func (i Impact) None() bool {
	return len(i.Preempted) == 0 && len(i.Admitted) == 0 && len(i.Moved) == 0 && len(i.Deleted) == 0
}

// Summary is the preview in one sentence, as a revision records it.
func (i Impact) Summary() string {
	var parts []string
	if n := len(i.Preempted); n > 0 {
		parts = append(parts, fmt.Sprintf("%s preempted (%d GPUs, %.1f GPU-hours of work)", plural(strconv.Itoa(n), "task"), i.GPUsPreempted, i.GPUHoursAtRisk))
	}
	if n := len(i.Deleted); n > 0 {
		parts = append(parts, fmt.Sprintf("%s deleted (%d GPUs running)", plural(strconv.Itoa(n), "task"), i.GPUsDeleted))
	}
	if n := len(i.Admitted); n > 0 {
		parts = append(parts, fmt.Sprintf("%s admitted (%d GPUs)", plural(strconv.Itoa(n), "pending task"), i.GPUsAdmitted))
	}
	if n := len(i.Moved); n > 0 {
		parts = append(parts, fmt.Sprintf("%s move in their queue", plural(strconv.Itoa(n), "pending task")))
	}
	if len(parts) == 0 {
		return "No task is preempted or admitted."
	}
	return strings.Join(parts, "; ") + "."
}

// BuildImpact turns the fates into the preview: which tasks the change
// preempts and admits, and why, and each team's figures before and after.
// queuesNow and queuesAfter carry each ClusterQueue's usage in its status
// (as Kueue would report it in each case); a queue missing from
// queuesAfter is deleted by the change.
func BuildImpact(s Settings, now time.Time, what string, fates []FateChange, queuesNow, queuesAfter []*kueuev1beta2.ClusterQueue, served map[string][]string) Impact {
	im := Impact{What: what}
	teamsNow := queueRows(s, queuesNow, served, CohortForest{})
	teamsAfter := queueRows(s, queuesAfter, served, CohortForest{})
	afterOf := map[string]TeamUsage{}
	for _, r := range teamsAfter {
		afterOf[r.ClusterQueue] = r
	}
	for _, r := range teamsNow {
		a, kept := afterOf[r.ClusterQueue]
		res := LeadResource(r.Allocated, r.InUse, a.Allocated, a.InUse)
		ti := TeamImpact{Team: r.Team, Resource: res, QuotaNow: r.Allocated.Of(res), QuotaAfter: a.Allocated.Of(res), InUseNow: r.InUse.Of(res), InUseAfter: a.InUse.Of(res),
			BorrowedNow: r.Borrowed.Of(res), BorrowedAfter: a.Borrowed.Of(res), LentNow: r.Lent.Of(res), LentAfter: a.Lent.Of(res), Deleted: !kept}
		delete(afterOf, r.ClusterQueue)
		if ti.Changed() {
			im.Teams = append(im.Teams, ti)
		}
	}
	for _, a := range teamsAfter {
		if _, created := afterOf[a.ClusterQueue]; created {
			res := LeadResource(a.Allocated, a.InUse)
			im.Teams = append(im.Teams, TeamImpact{Team: a.Team, Resource: res, QuotaAfter: a.Allocated.Of(res), InUseAfter: a.InUse.Of(res),
				BorrowedAfter: a.Borrowed.Of(res), LentAfter: a.Lent.Of(res)})
		}
	}
	quotaAfter := map[string]TeamUsage{}
	for _, r := range teamsAfter {
		quotaAfter[r.ClusterQueue] = r
	}
	for _, t := range im.Teams {
		// The quota fell below what the team holds: an admission by
		// borrowing, quota unchanged, is no news.
		if !t.Deleted && t.QuotaAfter < t.QuotaNow && t.InUseAfter > t.QuotaAfter && t.InUseNow <= t.QuotaNow {
			im.Notes = append(im.Notes, fmt.Sprintf("Team %s will hold %s against a quota of %s: Kueue does not stop tasks when a quota falls, "+
				"but it now borrows %s, which other teams may reclaim when they need them.", t.Team, AmountWord(t.Resource, t.InUseAfter),
				AmountWord(t.Resource, t.QuotaAfter), AmountWord(t.Resource, t.InUseAfter-t.QuotaAfter)))
		}
	}

	for _, f := range fates {
		if f.Task == nil {
			continue
		}
		t := ImpactTaskOf(f.Task)
		t.PositionNow, t.PositionAfter = f.PositionNow, f.PositionAfter
		if f.Uncertain != "" {
			t.Why = f.Uncertain
			im.Uncertain = append(im.Uncertain, t)
			continue
		}
		switch {
		case f.After == FateDeleted:
			t.Ran = f.Task.RunAt(now)
			t.GPUHours = float64(t.GPUs) * t.Ran.Hours()
			t.Why = "Deleted with its team's namespace."
			if f.Now == FateStaysAdmitted {
				t.Why = "Stopped and deleted with its team's namespace."
				im.GPUsDeleted += t.GPUs
				im.GPUHoursAtRisk += t.GPUHours
			}
			im.Deleted = append(im.Deleted, t)
		case f.Now != FateStaysAdmitted && f.Now != FateStaysPending:
			verb := "admits"
			if f.Now == FatePreempted {
				verb = "preempts"
			}
			t.Why = "Kueue " + verb + " it in its next cycle, with or without this change."
			im.Anyway = append(im.Anyway, t)
		case f.After == FatePreempted:
			t.Ran = f.Task.RunAt(now)
			t.GPUHours = float64(t.GPUs) * t.Ran.Hours()
			t.Why = preemptionWhy(f, quotaAfter[f.Task.ClusterQueue])
			im.Preempted = append(im.Preempted, t)
			im.GPUsPreempted += t.GPUs
			im.GPUHoursAtRisk += t.GPUHours
		case f.After == FateAdmitted:
			t.Why = "Its queue has room after the change."
			im.Admitted = append(im.Admitted, t)
			im.GPUsAdmitted += t.GPUs
		case f.Now == FateStaysPending && f.After == FateStaysPending && f.PositionNow != f.PositionAfter:
			im.Moved = append(im.Moved, t)
		}
	}
	byTeamName := func(a, b ImpactTask) int {
		return cmp.Or(cmp.Compare(a.Team, b.Team), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	}
	for _, l := range [][]ImpactTask{im.Preempted, im.Admitted, im.Deleted, im.Anyway, im.Uncertain} {
		slices.SortFunc(l, byTeamName)
	}
	slices.SortFunc(im.Moved, func(a, b ImpactTask) int {
		return cmp.Or(cmp.Compare(a.Team, b.Team), cmp.Compare(a.PositionAfter, b.PositionAfter))
	})
	return im
}

// preemptionWhy says why Kueue preempts the task, from its preemption
// reason, the task it makes room for, and the team's quota after the
// change.
func preemptionWhy(f FateChange, team TeamUsage) string {
	var why []string
	res := LeadResource(team.Allocated, team.InUse)
	if used, quota := team.InUse.Of(res), team.Allocated.Of(res); team.ClusterQueue != "" && used > quota {
		why = append(why, fmt.Sprintf("Team %s would exceed its quota of %s by %s.", team.Team, AmountWord(res, quota), AmountWord(res, used-quota)))
	}
	for_ := ""
	if p := f.Preemptor; p != nil {
		held := ""
		if p.GPUs > 0 {
			held = fmt.Sprintf(", %d GPUs", p.GPUs)
		}
		for_ = fmt.Sprintf(" for %s (team %s%s)", p.Named().InWords(), p.Team, held)
	}
	word := "GPUs"
	if res != ResourceGPU {
		word = "quota"
	}
	switch f.Reason {
	case kueuev1beta2.InClusterQueueReason:
		why = append(why, "A task of higher priority in its own team needs the "+word+for_+".")
	case kueuev1beta2.InCohortReclamationReason:
		why = append(why, "A team reclaims the quota it lent"+for_+".")
	case kueuev1beta2.InCohortReclaimWhileBorrowingReason:
		why = append(why, "A team of higher priority, itself borrowing, takes back borrowed "+word+for_+".")
	case kueuev1beta2.InCohortFairSharingReason:
		why = append(why, "Fair sharing: its team holds more than its share of the cohort"+for_+".")
	default:
		why = append(why, "Kueue preempts it"+for_+".")
	}
	return strings.Join(why, " ")
}
