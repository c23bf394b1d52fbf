// This file words Kueue conditions as the reasons the Tasks page shows.

package domain

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// taskReason builds the plain-words reason and the raw Kueue message(s).
// While the Workload waits to be requeued after an eviction, the time left
// goes at byte countdownAt of the reason (the clock decides it); -1
// otherwise.
func taskReason(wl *kueuev1beta2.Workload, s Settings, t Task) (reason, raw string, countdownAt int) {
	countdownAt = -1
	reason, raw = reasonWords(wl, s, t, &countdownAt)
	return reason, raw, countdownAt
}

func reasonWords(wl *kueuev1beta2.Workload, s Settings, t Task, countdownAt *int) (reason, raw string) {
	conds := wl.Status.Conditions
	quotaCond := apimeta.FindStatusCondition(conds, kueuev1beta2.WorkloadQuotaReserved)
	switch t.State {
	case TaskFinished:
		c := trueCondition(conds, kueuev1beta2.WorkloadFinished)
		return finishedReason(c), c.Message

	case TaskAdmitted:
		c := trueCondition(conds, kueuev1beta2.WorkloadAdmitted)
		reason = admittedPhrase(t) + partialWords(wl)
		if ev := trueCondition(conds, kueuev1beta2.WorkloadEvicted); ev != nil {
			return reason + "; being evicted (" + ev.Reason + ")", c.Message + "\n" + ev.Message
		}
		if pr := apimeta.FindStatusCondition(conds, kueuev1beta2.WorkloadPodsReady); pr != nil && pr.Status == metav1.ConditionFalse {
			switch pr.Reason {
			case kueuev1beta2.WorkloadWaitForStart:
				// When they began to start, not a running count: a task
				// whose pods cannot be placed says so by its age.
				reason += "; pods not all started since " + pr.LastTransitionTime.UTC().Format("Jan 2 15:04 UTC")
			case kueuev1beta2.WorkloadWaitForRecovery:
				reason += "; recovering from a failed pod"
			}
		}
		return reason, c.Message

	case TaskPreempted:
		c := trueCondition(conds, kueuev1beta2.WorkloadPreempted)
		reason, raw = preemptedReason(c, s), c.Message
		if trueCondition(conds, kueuev1beta2.WorkloadAdmitted) != nil || trueCondition(conds, kueuev1beta2.WorkloadQuotaReserved) != nil {
			return reason + "; its pods are being stopped", raw
		}
		return appendQuotaReason(reason, raw, quotaCond, c.Message)
	}

	// Pending.
	evicted := trueCondition(conds, kueuev1beta2.WorkloadEvicted)
	if t.Deactivated {
		reason = "Stopped: deactivated (spec.active is false); it will not be queued until reactivated"
		raw = ""
		if evicted != nil {
			raw = evicted.Message
			switch {
			case strings.Contains(evicted.Reason, kueuev1beta2.WorkloadRequeuingLimitExceeded):
				reason = "Stopped: evicted too many times (requeuing limit exceeded); deactivated"
			case strings.Contains(evicted.Reason, kueuev1beta2.WorkloadMaximumExecutionTimeExceeded):
				reason = "Stopped: exceeded its maximum execution time; deactivated"
			}
		}
		return reason, raw
	}
	if wl.Spec.QueueName == "" {
		return "Not submitted to a queue: the job has no kueue.x-k8s.io/queue-name label", ""
	}
	if quotaCond != nil && quotaCond.Status == metav1.ConditionTrue {
		return reservedReason(wl), quotaCond.Message
	}
	if evicted != nil {
		head := evictedReason(evicted)
		reason, raw = appendQuotaReason(head, evicted.Message, quotaCond, evicted.Message)
		*countdownAt = len(head)
		return reason, raw
	}
	if quotaCond == nil {
		return "Waiting to be evaluated by the scheduler", ""
	}
	return quotaReasonOf(wl, quotaCond.Reason, quotaCond.Message), quotaCond.Message
}

// appendQuotaReason adds what the scheduler said since an eviction: right
// after it, the QuotaReserved=False message is the eviction's own.
func appendQuotaReason(reason, raw string, quotaCond *metav1.Condition, evictionMessage string) (string, string) {
	if quotaCond == nil || quotaCond.Status != metav1.ConditionFalse || quotaCond.Message == "" || quotaCond.Message == evictionMessage {
		return reason, raw
	}
	return reason + ". " + quotaReason(quotaCond.Reason, quotaCond.Message), raw + "\n" + quotaCond.Message
}

func admittedPhrase(t Task) string {
	var b strings.Builder
	switch len(t.Flavors) {
	case 0:
		b.WriteString("Admitted")
		if t.ClusterQueue != "" {
			b.WriteString(" in ClusterQueue " + t.ClusterQueue)
		}
	case 1:
		b.WriteString("Admitted on flavor " + t.Flavors[0])
	default:
		b.WriteString("Admitted on flavors " + strings.Join(t.Flavors, ", "))
	}
	if t.Borrowing {
		b.WriteString(" (borrowing)")
	}
	return b.String()
}

// partialWords say how many pods Kueue admitted of a pod set it admitted
// with fewer than it asks for (partial admission: the job's minimum, e.g.
// kueue.x-k8s.io/job-min-parallelism, lets it start smaller); "" when every
// pod set got all its pods.
func partialWords(wl *kueuev1beta2.Workload) string {
	if wl.Status.Admission == nil {
		return ""
	}
	var parts []string
	for i := range wl.Status.Admission.PodSetAssignments {
		psa := &wl.Status.Admission.PodSetAssignments[i]
		ps := findPodSet(wl, psa.Name)
		if ps == nil || psa.Count == nil || *psa.Count >= ps.Count {
			continue
		}
		part := fmt.Sprintf("%d of %d pods", *psa.Count, ps.Count)
		if len(wl.Spec.PodSets) > 1 {
			part = string(psa.Name) + ": " + part
		}
		parts = append(parts, part)
	}
	if len(parts) == 0 {
		return ""
	}
	return " with " + strings.Join(parts, ", ") + " (partial admission: the job may start smaller)"
}

// behindReason says why Kueue has not tried a task: ahead of it in its
// queue, the task ahead does not fit, for aheadReason (what Kueue's
// scheduler said of it, not its own story: preempted or not). Kueue
// tries only the head of a StrictFIFO queue; in the others it skips the
// tasks just like one that did not fit (the same priority, pods and
// requests) until something changes in the queue's quota.
func behindReason(ahead, aheadReason string, strict bool) string {
	if strict {
		return "Waits behind " + ahead + ", first in its queue, which does not fit (a StrictFIFO queue admits in order): " + aheadReason
	}
	return aheadReason + " (Kueue skips it while " + ahead + ", ahead of it and just like it, does not fit)"
}

// cannotFit reports whether Kueue's scheduler said of a task (msg: its
// QuotaReserved=False message) that its ClusterQueue, as it is defined, can
// never hold it: on every flavor it tried, the request is beyond what the
// queue can ever have (its quota and what it may borrow), asks for a
// resource the queue does not cover, or the flavor's taints or node labels
// exclude it. Tasks finishing change none of these; a shortfall of unused
// quota, a topology placement or a preemption under way can change, so a
// message with any of those is not this.
func cannotFit(msg string) bool {
	if !strings.Contains(msg, "couldn't assign flavors") {
		return false
	}
	for _, later := range []string{"insufficient unused quota", "topology", "Pending the preemption", "no longer fits"} {
		if strings.Contains(msg, later) {
			return false
		}
	}
	for _, never := range []string{"> maximum capacity", "unavailable in ClusterQueue", "untolerated taint", "doesn't match node affinity", "does not provide resource"} {
		if strings.Contains(msg, never) {
			return true
		}
	}
	return false
}

// finishedWords say why a task finished, by the Finished condition's reason.
var finishedWords = map[string]string{
	kueuev1beta2.WorkloadFinishedReasonSucceeded:     "Finished: succeeded",
	kueuev1beta2.WorkloadFinishedReasonFailed:        "Finished: failed",
	kueuev1beta2.WorkloadFinishedReasonOwnerNotFound: "Finished: its job was deleted",
	kueuev1beta2.WorkloadFinishedReasonOutOfSync:     "Finished: no longer matches its job",
}

// conditionWords is a condition's reason in words from a table; a reason
// the table lacks is shown as it is, after what.
func conditionWords(words map[string]string, what, reason string) string {
	if w, ok := words[reason]; ok {
		return w
	}
	if reason == "" {
		return what
	}
	return what + " (" + reason + ")"
}

func finishedReason(c *metav1.Condition) string {
	return conditionWords(finishedWords, "Finished", c.Reason)
}

// preemptedReason explains a Preempted condition. Each team has its own
// ClusterQueue, so InClusterQueue means the same team; the preemptor's team
// is read from the "preemptor path" Kueue puts in the message, when present.
func preemptedReason(c *metav1.Condition, s Settings) string {
	other := "another team"
	if team, ok := s.TeamOfClusterQueueName(ParsePreemptor(c.Message).ClusterQueue); ok {
		other = "team " + team
	}
	return conditionWords(map[string]string{
		kueuev1beta2.InClusterQueueReason:                "Preempted by a higher-priority task of the same team",
		kueuev1beta2.InCohortReclamationReason:           "Preempted: " + other + " reclaimed its lent quota",
		kueuev1beta2.InCohortFairSharingReason:           "Preempted to restore fair sharing: " + other + " was below its fair share",
		kueuev1beta2.InCohortReclaimWhileBorrowingReason: "Preempted by a higher-priority task of " + other + " that is also borrowing",
	}, "Preempted", c.Reason)
}

// evictedWords say why a task was evicted, by the Evicted condition's reason.
var evictedWords = map[string]string{
	kueuev1beta2.WorkloadEvictedByPodsReadyTimeout:    "Evicted: its pods did not all become ready in time; requeued",
	kueuev1beta2.WorkloadEvictedByAdmissionCheck:      "Evicted: an admission check asked for a retry; requeued",
	kueuev1beta2.WorkloadEvictedByClusterQueueStopped: "Evicted: the team's ClusterQueue was stopped",
	kueuev1beta2.WorkloadEvictedByLocalQueueStopped:   "Evicted: the team's queue was stopped",
	kueuev1beta2.WorkloadEvictedDueToNodeFailures:     "Evicted: a node it ran on failed; requeued",
	kueuev1beta2.WorkloadEvictedByPreemption:          "Evicted by preemption; requeued",
}

func evictedReason(c *metav1.Condition) string {
	if strings.HasPrefix(c.Reason, kueuev1beta2.WorkloadDeactivated) {
		return "Evicted: deactivated"
	}
	return conditionWords(evictedWords, "Evicted", c.Reason)
}

// reservedReason explains quota reserved but not yet admitted.
func reservedReason(wl *kueuev1beta2.Workload) string {
	var pending []string
	for _, ac := range wl.Status.AdmissionChecks {
		if ac.State != kueuev1beta2.CheckStateReady {
			pending = append(pending, string(ac.Name))
		}
	}
	if len(pending) > 0 {
		return "Quota reserved; waiting for admission checks: " + strings.Join(pending, ", ")
	}
	if c := apimeta.FindStatusCondition(wl.Status.Conditions, kueuev1beta2.WorkloadAdmitted); c != nil &&
		c.Reason == kueuev1beta2.WorkloadAdmittedReasonPendingDelayedTopologyRequests {
		return "Quota reserved; waiting for a topology assignment"
	}
	return "Quota reserved; waiting to be admitted"
}

var (
	unusedQuotaRE = regexp.MustCompile(`insufficient unused quota for (\S+) in flavor ([^\s,]+), (\S+) more needed`)
	maxQuotaRE    = regexp.MustCompile(`insufficient quota for (\S+) in flavor ([^\s,]+), previously considered podsets requests \(([^)]*)\) \+ current podset request \(([^)]*)\) > maximum capacity \(([^)]*)\)`)
	preemptingRE  = regexp.MustCompile(`Pending the preemption of (\d+) workload`)
	missingRE     = regexp.MustCompile(`resource (\S+) unavailable in ClusterQueue`)
)

// schedulerMessageWords translate what Kueue's scheduler says in a
// QuotaReserved=False message, first match first.
var schedulerMessageWords = []struct{ says, means string }{
	{"is stopped", "The team's queue is stopped: no new tasks are admitted"},
	{"is inactive", "The team's queue is inactive: Kueue admits nothing there (the team's page says why)"},
	{"namespace doesn't match", "Its namespace is not allowed in the team's ClusterQueue"},
	{"no longer fits after processing another workload", "Waiting for quota: another task took the free quota first"},
	{"overlapping preemption targets", "Waiting for quota: another task is preempting the same tasks"},
	{"failed admission checks", "Rejected by an admission check"},
}

// quotaReasonWords translate a QuotaReserved=False condition's reason when
// its message says nothing the console knows.
var quotaReasonWords = map[string]string{
	kueuev1beta2.WorkloadQuotaReservedReasonWaitingForPodsReady:          "Waiting for earlier admitted tasks to start their pods",
	kueuev1beta2.WorkloadQuotaReservedReasonWaitingForPreemptedWorkloads: "Waiting for preempted tasks to release their quota",
	kueuev1beta2.WorkloadQuotaReservedReasonTopologyPlacementFailed:      "Waiting for room: no topology placement fits the task",
	kueuev1beta2.WorkloadQuotaReservedReasonWaitingForQuota:              "Waiting for quota",
}

// partiallyAdmissible reports whether Kueue may admit wl with fewer pods
// than it asks for (a pod set's minCount, partial admission), and the
// least number of pods it accepts.
func partiallyAdmissible(wl *kueuev1beta2.Workload) (least int32, ok bool) {
	for _, ps := range wl.Spec.PodSets {
		n := ps.Count
		if ps.MinCount != nil && *ps.MinCount < ps.Count {
			n, ok = *ps.MinCount, true
		}
		least += n
	}
	return least, ok
}

// smallerMayFit: Kueue said wl is too big for its queue at its full size,
// and with partial admission it tries fewer pods too.
func smallerMayFit(wl *kueuev1beta2.Workload, msg string) bool {
	_, partial := partiallyAdmissible(wl)
	return partial && maxQuotaRE.MatchString(msg)
}

// quotaReasonOf is quotaReason for wl: Kueue's "too big" speaks of its
// full size, which is not the last word for a job it may admit smaller.
func quotaReasonOf(wl *kueuev1beta2.Workload, reason, msg string) string {
	words := quotaReason(reason, msg)
	if least, _ := partiallyAdmissible(wl); smallerMayFit(wl, msg) {
		words += fmt.Sprintf(" at its full size; it accepts as few as %d pods (partial admission), so Kueue may admit it smaller", least)
	}
	return words
}

// quotaReason translates a QuotaReserved=False condition (the scheduler's
// or the workload controller's message) into plain words.
func quotaReason(reason, msg string) string {
	if msg == "" {
		return "Waiting to be evaluated by the scheduler"
	}
	if ms := unusedQuotaRE.FindAllStringSubmatch(msg, -1); ms != nil {
		out := "Waiting for quota: needs " + neededByFlavor(ms)
		if m := preemptingRE.FindStringSubmatch(msg); m != nil {
			out += "; preempting " + plural(m[1], "task") + " to make room"
		}
		return out
	}
	if m := maxQuotaRE.FindStringSubmatch(msg); m != nil {
		need := m[4]
		prev, err1 := resource.ParseQuantity(m[3])
		cur, err2 := resource.ParseQuantity(m[4])
		if err1 == nil && err2 == nil {
			prev.Add(cur)
			need = prev.String()
		}
		return fmt.Sprintf("Too big for the team's quota: needs %s %s on %s, but at most %s can ever be available to the team, borrowing included",
			need, m[1], m[2], m[5])
	}
	if m := missingRE.FindStringSubmatch(msg); m != nil {
		return "The team has no quota for " + m[1]
	}
	switch {
	case strings.HasPrefix(msg, "failed to assign flavors"):
		return "Cannot be scheduled: " + msg
	case strings.Contains(msg, "untolerated taint") || strings.Contains(msg, "doesn't match node affinity"):
		return "No flavor of the team's queue accepts it: " + excludedBy(msg)
	case reason == kueuev1beta2.WorkloadQuotaReservedReasonNoMatchingFlavor:
		return "No instance type in the team's quota matches the task's node selector, affinity or tolerations"
	case strings.Contains(msg, "LocalQueue") && strings.Contains(msg, "doesn't exist"):
		return "Its queue does not exist in this namespace"
	case strings.Contains(msg, "ClusterQueue") && strings.Contains(msg, "doesn't exist"),
		strings.Contains(msg, "ClusterQueue") && strings.Contains(msg, "not found"):
		return "The team's ClusterQueue does not exist"
	}
	for _, w := range schedulerMessageWords {
		if strings.Contains(msg, w.says) {
			return w.means
		}
	}
	if w, ok := quotaReasonWords[reason]; ok {
		return w
	}
	return "Pending: " + msg
}

var (
	taintRE    = regexp.MustCompile(`untolerated taint \{([^}]*)\} in flavor ([^\s,;]+)`)
	affinityRE = regexp.MustCompile(`flavor ([^\s,;]+) doesn't match node affinity`)
)

// excludedBy says, flavor by flavor, what keeps a task off the flavors
// Kueue's message names: a taint it does not tolerate ("spot has the taint
// spot=true:NoSchedule, which the task does not tolerate"), or node labels
// its node selector or affinity does not match.
func excludedBy(msg string) string {
	var parts []string
	for _, m := range taintRE.FindAllStringSubmatch(msg, -1) {
		taint := m[1]
		if f := strings.Fields(m[1]); len(f) >= 3 { // {key value effect timeAdded}
			taint = f[0] + "=" + f[1] + ":" + f[2]
		}
		parts = append(parts, fmt.Sprintf("%s has the taint %s, which the task does not tolerate", m[2], taint))
	}
	for _, m := range affinityRE.FindAllStringSubmatch(msg, -1) {
		parts = append(parts, m[1]+"'s node labels do not match the task's node selector or affinity")
	}
	return strings.Join(parts, "; ")
}

// neededByFlavor phrases the shortfalls, flavor by flavor (the flavors are
// alternatives Kueue tried; several pod sets may name the same one, keep the
// largest shortfall).
func neededByFlavor(ms [][]string) string {
	type need struct{ resource, amount string }
	var flavors []string
	byFlavor := map[string][]need{}
	for _, m := range ms {
		res, flavor, amount := m[1], m[2], m[3]
		if _, ok := byFlavor[flavor]; !ok {
			flavors = append(flavors, flavor)
		}
		needs := byFlavor[flavor]
		i := slices.IndexFunc(needs, func(n need) bool { return n.resource == res })
		switch {
		case i < 0:
			byFlavor[flavor] = append(needs, need{res, amount})
		case moreThan(amount, needs[i].amount):
			needs[i].amount = amount
		}
	}
	parts := make([]string, 0, len(flavors))
	for _, f := range flavors {
		var amounts []string
		for _, n := range byFlavor[f] {
			amounts = append(amounts, n.amount+" more "+n.resource)
		}
		parts = append(parts, strings.Join(amounts, " and ")+" on "+f)
	}
	return strings.Join(parts, ", or ")
}

func moreThan(a, b string) bool {
	qa, err1 := resource.ParseQuantity(a)
	qb, err2 := resource.ParseQuantity(b)
	return err1 == nil && err2 == nil && qa.Cmp(qb) > 0
}

func plural(n, noun string) string {
	if n == "1" {
		return "1 " + noun
	}
	return n + " " + noun + "s"
}
