// This file states allocations and their changes in words, for revision
// histories, Events and conflicts.

package domain

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// DiffTeams lists, in words, what changed from one allocation to the next:
// e.g. "quota ml.p5.48xlarge GPUs 4 → 6", "borrow limit 50 % → 100 %",
// "Enabled → Disabled". Nothing when they are the same.
func DiffTeams(before, after Team) []string {
	var out []string
	if before.Enabled != after.Enabled {
		out = append(out, enabledWord(before.Enabled)+" → "+enabledWord(after.Enabled))
	}
	for _, text := range TeamTexts {
		if b, a := *text.Of(&before), *text.Of(&after); b != a {
			out = append(out, fmt.Sprintf("%s %s → %s", text.Words, quoteOrNone(b), quoteOrNone(a)))
		}
	}
	if before.FairShareWeight != after.FairShareWeight {
		out = append(out, fmt.Sprintf("fair-share weight %d → %d", before.FairShareWeight, after.FairShareWeight))
	}
	if before.Preemption != after.Preemption {
		out = append(out, fmt.Sprintf("preemption %s → %s", preemptionWord(before.Preemption), preemptionWord(after.Preemption)))
	}
	if before.RecentUseOrder != after.RecentUseOrder {
		out = append(out, fmt.Sprintf("order of pending tasks %s → %s", orderWord(before.RecentUseOrder), orderWord(after.RecentUseOrder)))
	}
	if before.Lending != after.Lending {
		out = append(out, fmt.Sprintf("lending %s → %s", LendingWord(before.Lending), LendingWord(after.Lending)))
	}
	if before.BorrowLimitPercent != after.BorrowLimitPercent && (before.Lending == LendAndBorrow || after.Lending == LendAndBorrow) {
		out = append(out, fmt.Sprintf("borrow limit %d %% → %d %%", before.BorrowLimitPercent, after.BorrowLimitPercent))
	}
	if before.Cohort != after.Cohort {
		out = append(out, fmt.Sprintf("cohort %s → %s", cohortWord(before.Cohort), cohortWord(after.Cohort)))
	}
	out = append(out, diffQuota(before.Quota, after.Quota)...)
	out = append(out, diffMembers(before.Members, after.Members)...)
	return out
}

// cohortWord names a team's cohort; "" is the console's own.
func cohortWord(c string) string {
	if c == "" {
		return "the console's cohort"
	}
	return c
}

// numberChange is one number of a quota row, before and after.
type numberChange struct {
	name          string
	before, after *int64
}

func diffQuota(before, after []QuotaInput) []string {
	var out []string
	old := map[string]QuotaInput{}
	for _, q := range before {
		old[q.InstanceType] = q
	}
	seen := map[string]bool{}
	for _, q := range after {
		seen[q.InstanceType] = true
		b, ok := old[q.InstanceType]
		if !ok {
			out = append(out, fmt.Sprintf("quota %s added: %s", q.InstanceType, DescribeQuotaInput(q)))
			continue
		}
		if b.Partition != q.Partition {
			out = append(out, fmt.Sprintf("quota %s partition profile %s → %s", q.InstanceType, orNone(b.Partition), orNone(q.Partition)))
		}
		// Each group of the row's numbers: what it is, and what an empty
		// value means.
		for _, g := range []struct {
			what, empty string
			fields      []numberChange
		}{
			{"quota", "derived", []numberChange{{"instances", b.Count, q.Count}, {"GPUs", b.GPUs, q.GPUs},
				{"Neuron devices", b.Neuron, q.Neuron}, {"vCPU", b.VCPU, q.VCPU}, {"memory GiB", b.MemoryGiB, q.MemoryGiB},
				{"partitions", b.Partitions, q.Partitions}}},
			{"borrow limit", "the percentage", []numberChange{{"GPUs", b.BorrowGPUs, q.BorrowGPUs}, {"Neuron devices", b.BorrowNeuron, q.BorrowNeuron},
				{"vCPU", b.BorrowVCPU, q.BorrowVCPU}, {"memory GiB", b.BorrowMemoryGiB, q.BorrowMemoryGiB}}},
			{"lend limit", "all", []numberChange{{"GPUs", b.LendGPUs, q.LendGPUs}, {"Neuron devices", b.LendNeuron, q.LendNeuron},
				{"vCPU", b.LendVCPU, q.LendVCPU}, {"memory GiB", b.LendMemoryGiB, q.LendMemoryGiB}}},
		} {
			for _, f := range g.fields {
				if !sameInt(f.before, f.after) {
					out = append(out, fmt.Sprintf("%s %s %s %s → %s", g.what, q.InstanceType, f.name, intOr(f.before, g.empty), intOr(f.after, g.empty)))
				}
			}
		}
	}
	for _, q := range before {
		if !seen[q.InstanceType] {
			out = append(out, fmt.Sprintf("quota %s removed (was %s)", q.InstanceType, DescribeQuotaInput(q)))
		}
	}
	return out
}

// NamesMembers reports whether a change DiffTeams or DescribeTeam wrote
// names members.
func NamesMembers(change string) bool {
	return strings.HasPrefix(change, memberAdded) || strings.HasPrefix(change, memberRemoved) || strings.HasPrefix(change, membersAre)
}

const (
	memberAdded   = "member added: "
	memberRemoved = "member removed: "
	membersAre    = "members: "
)

func diffMembers(before, after []Member) []string {
	var out []string
	has := func(ms []Member, m Member) bool {
		for _, x := range ms {
			if x == m {
				return true
			}
		}
		return false
	}
	for _, m := range after {
		if !has(before, m) {
			out = append(out, memberAdded+memberWord(m))
		}
	}
	for _, m := range before {
		if !has(after, m) {
			out = append(out, memberRemoved+memberWord(m))
		}
	}
	return out
}

// DescribeTeam states an allocation in the words DiffTeams uses, for a
// revision with nothing before it.
func DescribeTeam(t Team) []string {
	out := []string{enabledWord(t.Enabled), fmt.Sprintf("fair-share weight %d", t.FairShareWeight),
		"preemption " + preemptionWord(t.Preemption), "lending " + LendingWord(t.Lending)}
	if t.Lending == LendAndBorrow {
		out = append(out, fmt.Sprintf("borrow limit %d %%", t.BorrowLimitPercent))
	}
	if t.Cohort != "" {
		out = append(out, "cohort "+t.Cohort)
	}
	if t.RecentUseOrder {
		out = append(out, "order of pending tasks "+orderWord(true))
	}
	for _, q := range t.Quota {
		out = append(out, fmt.Sprintf("quota %s: %s", q.InstanceType, DescribeQuotaInput(q)))
	}
	if len(t.Members) > 0 {
		names := make([]string, len(t.Members))
		for i, m := range t.Members {
			names[i] = memberWord(m)
		}
		out = append(out, membersAre+strings.Join(names, ", "))
	}
	return out
}

// DescribeQuotaInput states a quota row as typed: "4 GPUs, 48 vCPU".
func DescribeQuotaInput(q QuotaInput) string {
	var parts []string
	add := func(p *int64, unit string) {
		if p != nil {
			parts = append(parts, strconv.FormatInt(*p, 10)+" "+unit)
		}
	}
	add(q.Count, "instances")
	add(q.GPUs, "GPUs")
	add(q.Neuron, "Neuron devices")
	add(q.VCPU, "vCPU")
	add(q.MemoryGiB, "GiB memory")
	if q.Partition != "" {
		add(q.Partitions, q.Partition+" partitions")
	}
	add(q.BorrowGPUs, "GPUs borrowable")
	add(q.BorrowNeuron, "Neuron devices borrowable")
	add(q.BorrowVCPU, "vCPU borrowable")
	add(q.BorrowMemoryGiB, "GiB memory borrowable")
	add(q.LendGPUs, "GPUs lendable")
	add(q.LendNeuron, "Neuron devices lendable")
	add(q.LendVCPU, "vCPU lendable")
	add(q.LendMemoryGiB, "GiB memory lendable")
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}

// DiffPolicies lists, in words, what changed from one policy to the next.
func DiffPolicies(before, after Policy) []string {
	var out []string
	if before.Prioritization != after.Prioritization {
		out = append(out, fmt.Sprintf("prioritization %s → %s", prioritizationWord(before.Prioritization), prioritizationWord(after.Prioritization)))
	}
	if before.IdleAllocation != after.IdleAllocation {
		out = append(out, fmt.Sprintf("idle compute %s → %s", idleWord(before.IdleAllocation), idleWord(after.IdleAllocation)))
	}
	if before.Alerts.LongWaitMinutes != after.Alerts.LongWaitMinutes {
		out = append(out, fmt.Sprintf("long wait alert %s → %s", minutesWord(before.Alerts.LongWaitMinutes, DefaultInsightThresholds.LongWait),
			minutesWord(after.Alerts.LongWaitMinutes, DefaultInsightThresholds.LongWait)))
	}
	if before.Alerts.BorrowingMinutes != after.Alerts.BorrowingMinutes {
		out = append(out, fmt.Sprintf("sustained borrowing alert %s → %s", minutesWord(before.Alerts.BorrowingMinutes, DefaultInsightThresholds.SustainedBorrowing),
			minutesWord(after.Alerts.BorrowingMinutes, DefaultInsightThresholds.SustainedBorrowing)))
	}
	if before.Alerts.IdleUtilizationPercent != after.Alerts.IdleUtilizationPercent {
		out = append(out, fmt.Sprintf("idle GPU alert under %s → %s", percentWord(before.Alerts.IdleUtilizationPercent),
			percentWord(after.Alerts.IdleUtilizationPercent)))
	}
	old := map[string]PriorityClass{}
	for _, c := range before.Classes {
		old[c.Name] = c
	}
	seen := map[string]bool{}
	for _, c := range after.Classes {
		seen[c.Name] = true
		b, ok := old[c.Name]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("priority class %s added (weight %d)", c.Name, c.Weight))
		case b.Weight != c.Weight:
			out = append(out, fmt.Sprintf("priority class %s weight %d → %d", c.Name, b.Weight, c.Weight))
		}
		if ok && b.LongWaitMinutes != c.LongWaitMinutes || !ok && c.LongWaitMinutes != 0 {
			out = append(out, fmt.Sprintf("priority class %s long wait alert %s → %s", c.Name, minutesWord(b.LongWaitMinutes, 0), minutesWord(c.LongWaitMinutes, 0)))
		}
	}
	for _, c := range before.Classes {
		if !seen[c.Name] {
			out = append(out, fmt.Sprintf("priority class %s removed (was weight %d)", c.Name, c.Weight))
		}
	}
	return out
}

// DescribePolicy states a policy in the words DiffPolicies uses.
func DescribePolicy(p Policy) []string {
	out := []string{"prioritization " + prioritizationWord(p.Prioritization), "idle compute " + idleWord(p.IdleAllocation)}
	if p.Alerts != (PolicyAlerts{}) {
		out = append(out, "long wait alert "+minutesWord(p.Alerts.LongWaitMinutes, DefaultInsightThresholds.LongWait),
			"idle GPU alert under "+percentWord(p.Alerts.IdleUtilizationPercent),
			"sustained borrowing alert "+minutesWord(p.Alerts.BorrowingMinutes, DefaultInsightThresholds.SustainedBorrowing))
	}
	for _, c := range p.Classes {
		word := fmt.Sprintf("priority class %s (weight %d)", c.Name, c.Weight)
		if c.LongWaitMinutes > 0 {
			word = fmt.Sprintf("priority class %s (weight %d, long wait alert %s)", c.Name, c.Weight, minutesWord(c.LongWaitMinutes, 0))
		}
		out = append(out, word)
	}
	return out
}

// minutesWord is a threshold in minutes as the policy page says it; 0 is
// the default (def), or the policy's for a class (def 0).
func minutesWord(minutes int, def time.Duration) string {
	switch {
	case minutes > 0:
		return FormatDuration(time.Duration(minutes) * time.Minute)
	case def > 0:
		return "default (" + FormatDuration(def) + ")"
	}
	return "the policy's"
}

// percentWord is the idle-utilization threshold; 0 is the default.
func percentWord(percent int) string {
	if percent > 0 {
		return fmt.Sprintf("%d %%", percent)
	}
	return fmt.Sprintf("default (%.0f %%)", DefaultInsightThresholds.IdleUtilization)
}

func enabledWord(enabled bool) string {
	if enabled {
		return "Enabled"
	}
	return "Disabled"
}

// choiceWords name the choices of an allocation and of the policy as the
// forms do.
var choiceWords = map[string]string{
	string(PreemptLowerPriority): "lower priority",
	string(PreemptNever):         "never",
	string(LendAndBorrow):        "lend and borrow",
	string(Lend):                 "lend only",
	string(DontLend):             "don't lend",
	"prioritization/" + string(FirstComeFirstServe): "first come, first served",
	"prioritization/" + string(TaskRanking):         "task ranking",
	"idle/" + string(IdleFirstComeFirstServe):       "first come, first served",
	"idle/" + string(IdleFairShare):                 "fair share",
}

func word(key, fallback string) string {
	if w, ok := choiceWords[key]; ok {
		return w
	}
	return fallback
}

func preemptionWord(p Preemption) string { return word(string(p), string(p)) }

// LendingWord names a lending choice as the form does.
func LendingWord(l Lending) string { return word(string(l), string(l)) }

func prioritizationWord(p Prioritization) string { return word("prioritization/"+string(p), string(p)) }

func idleWord(i IdleAllocation) string { return word("idle/"+string(i), string(i)) }

func memberWord(m Member) string { return strings.ToLower(m.Kind) + " " + m.Name }

func quoteOrNone(s string) string {
	if s == "" {
		return "(none)"
	}
	if r := []rune(s); len(r) > 60 {
		s = string(r[:60]) + "…"
	}
	return strconv.Quote(s)
}

func sameInt(a, b *int64) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

func intOr(p *int64, none string) string {
	if p == nil {
		return none
	}
	return strconv.FormatInt(*p, 10)
}

// orderWord names how a team's queue orders its pending tasks.
func orderWord(recentUse bool) string {
	if recentUse {
		return "by each LocalQueue's recent use"
	}
	return "by priority, then arrival"
}
