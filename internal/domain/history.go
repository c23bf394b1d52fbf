package domain

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Revision history. Every change of a team or of the cluster policy through
// the Applier is recorded as a revision in a ConfigMap, in the cluster, so it
// survives console restarts and every console replica sees it. The
// ConfigMaps live in the console's own namespace (Settings.State), which
// only the console writes: a team's members, who may edit their own
// namespace, cannot plant or change revisions that an admin would then roll
// back to. The console records them with its own identity (Applier.Records)
// after the user's change went through, so "by" and "at" are the console's
// word.
//
//   - a team's history is the ConfigMap <clusterqueue-name>-history; deleting
//     the team deletes it;
//   - the policy's history is the ConfigMap <cohort>-policy-history.
//
// Each data key rev-000123 holds one revision as JSON. Only the newest
// HistoryLimit revisions are kept (fewer if they would not fit in a ConfigMap).
const (
	HistoryLimit = 50
	// HistoryLabel marks history ConfigMaps: "team" or "policy".
	HistoryLabel = "quota-console.openquota.dev/history"

	historySuffix       = "-history"
	policyHistorySuffix = "-policy-history"
	revisionKeyPrefix   = "rev-"
	// ConfigMaps hold at most 1 MiB; keep room for metadata.
	maxHistoryBytes = 900 << 10
)

// TeamHistoryName is the ConfigMap holding a team's revisions, in Settings.State().
func TeamHistoryName(s Settings, team string) string { return s.ClusterQueue(team) + historySuffix }

// PolicyHistoryName is the ConfigMap holding the policy's revisions, in Settings.State().
func PolicyHistoryName(s Settings) string { return s.Cohort + policyHistorySuffix }

// Action is what a revision did.
type Action string

const (
	ActionCreate   Action = "create"
	ActionUpdate   Action = "update"
	ActionRollback Action = "rollback"
)

// Revision is one recorded state of an allocation (a Team or the Policy):
// what it became, who made it so and when.
type Revision[T any] struct {
	Revision int       `json:"revision"`
	At       time.Time `json:"at"`
	By       string    `json:"by"`
	Action   Action    `json:"action"`
	// RolledBackTo is the revision a rollback restored.
	RolledBackTo int    `json:"rolledBackTo,omitempty"`
	Note         string `json:"note,omitempty"`
	Allocation   T      `json:"allocation"`
}

type (
	TeamRevision   = Revision[Team]
	PolicyRevision = Revision[Policy]
)

// FindRevision returns the revision numbered n.
func FindRevision[T any](revs []Revision[T], n int) (Revision[T], bool) {
	for _, r := range revs {
		if r.Revision == n {
			return r, true
		}
	}
	return Revision[T]{}, false
}

func revisionKey(n int) string { return fmt.Sprintf("%s%06d", revisionKeyPrefix, n) }

// DecodeRevisions reads a history ConfigMap's data, oldest first. Entries
// that do not decode (edited by hand) are skipped.
func DecodeRevisions[T any](data map[string]string) []Revision[T] {
	var out []Revision[T]
	for k, v := range data {
		if !strings.HasPrefix(k, revisionKeyPrefix) {
			continue
		}
		var r Revision[T]
		if err := json.Unmarshal([]byte(v), &r); err != nil || r.Revision <= 0 {
			continue
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Revision < out[j].Revision })
	return out
}

// EncodeRevisions writes revisions (oldest first) as ConfigMap data, keeping
// the newest HistoryLimit that fit in maxHistoryBytes (always the newest one).
func EncodeRevisions[T any](revs []Revision[T]) (map[string]string, error) {
	if len(revs) > HistoryLimit {
		revs = revs[len(revs)-HistoryLimit:]
	}
	encoded := make([]string, len(revs))
	size := 0
	for i, r := range revs {
		b, err := json.Marshal(r)
		if err != nil {
			return nil, err
		}
		encoded[i] = string(b)
		size += len(b) + len(revisionKey(r.Revision))
	}
	first := 0
	for size > maxHistoryBytes && first < len(revs)-1 {
		size -= len(encoded[first]) + len(revisionKey(revs[first].Revision))
		first++
	}
	data := make(map[string]string, len(revs)-first)
	for i := first; i < len(revs); i++ {
		data[revisionKey(revs[i].Revision)] = encoded[i]
	}
	return data, nil
}

// RevisionFacts are what an apply run knows when it decides on a revision.
type RevisionFacts struct {
	By      string
	At      time.Time
	Changed bool // the run changed an object in the cluster
	Created bool // the run created the team (or the policy)
	// RollbackTo is the revision a rollback restores (0 for other changes);
	// Note says why the change was made, beyond "the admin saved a form".
	RollbackTo int
	Note       string
}

// NextRevision decides whether an apply run records a revision after last,
// and which. It records when the allocation differs from the last revision,
// when the run changed objects in the cluster (a re-apply over hand edits),
// and for a rollback unless it repeats the last one (a retry); an unchanged
// re-apply records nothing.
func NextRevision[T any](last *Revision[T], alloc T, f RevisionFacts) (Revision[T], bool) {
	rev := Revision[T]{Revision: 1, At: f.At, By: f.By, Action: ActionUpdate, Note: f.Note, Allocation: alloc}
	if last != nil {
		rev.Revision = last.Revision + 1
	}
	record := last == nil || f.Changed || !SameAllocation(last.Allocation, alloc)
	switch {
	case f.RollbackTo > 0:
		rev.Action, rev.RolledBackTo = ActionRollback, f.RollbackTo
		record = record || last.Action != ActionRollback || last.RolledBackTo != f.RollbackTo
	case f.Created:
		rev.Action = ActionCreate
	}
	return rev, record
}

// SameAllocation reports whether two allocations (Teams, Policies) are the
// same as the console stores them: their JSON, in which the order of quota
// rows counts (Kueue tries flavors in order).
func SameAllocation[T any](a, b T) bool {
	x, errX := json.Marshal(a)
	y, errY := json.Marshal(b)
	return errX == nil && errY == nil && string(x) == string(y)
}

// DiffTeams lists, in words, what changed from one allocation to the next:
// e.g. "quota ml.p5.48xlarge GPUs 4 → 6", "borrow limit 50 % → 100 %",
// "Enabled → Disabled". Nothing when they are the same.
func DiffTeams(before, after Team) []string {
	var out []string
	if before.Enabled != after.Enabled {
		out = append(out, enabledWord(before.Enabled)+" → "+enabledWord(after.Enabled))
	}
	if before.Description != after.Description {
		out = append(out, fmt.Sprintf("description %s → %s", quoteOrNone(before.Description), quoteOrNone(after.Description)))
	}
	if before.FairShareWeight != after.FairShareWeight {
		out = append(out, fmt.Sprintf("fair-share weight %d → %d", before.FairShareWeight, after.FairShareWeight))
	}
	if before.Preemption != after.Preemption {
		out = append(out, fmt.Sprintf("preemption %s → %s", preemptionWord(before.Preemption), preemptionWord(after.Preemption)))
	}
	if before.Lending != after.Lending {
		out = append(out, fmt.Sprintf("lending %s → %s", LendingWord(before.Lending), LendingWord(after.Lending)))
	}
	if before.BorrowLimitPercent != after.BorrowLimitPercent && (before.Lending == LendAndBorrow || after.Lending == LendAndBorrow) {
		out = append(out, fmt.Sprintf("borrow limit %d %% → %d %%", before.BorrowLimitPercent, after.BorrowLimitPercent))
	}
	out = append(out, diffQuota(before.Quota, after.Quota)...)
	out = append(out, diffMembers(before.Members, after.Members)...)
	return out
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
		fields := []struct {
			name string
			b, a *int64
		}{
			{"instances", b.Count, q.Count}, {"GPUs", b.GPUs, q.GPUs}, {"Neuron devices", b.Neuron, q.Neuron},
			{"vCPU", b.VCPU, q.VCPU}, {"memory GiB", b.MemoryGiB, q.MemoryGiB},
		}
		for _, f := range fields {
			if !sameInt(f.b, f.a) {
				out = append(out, fmt.Sprintf("quota %s %s %s → %s", q.InstanceType, f.name, intOr(f.b, "derived"), intOr(f.a, "derived")))
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
			out = append(out, "member added: "+memberWord(m))
		}
	}
	for _, m := range before {
		if !has(after, m) {
			out = append(out, "member removed: "+memberWord(m))
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
	for _, q := range t.Quota {
		out = append(out, fmt.Sprintf("quota %s: %s", q.InstanceType, DescribeQuotaInput(q)))
	}
	if len(t.Members) > 0 {
		names := make([]string, len(t.Members))
		for i, m := range t.Members {
			names[i] = memberWord(m)
		}
		out = append(out, "members: "+strings.Join(names, ", "))
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
	old := map[string]int32{}
	for _, c := range before.Classes {
		old[c.Name] = c.Weight
	}
	seen := map[string]bool{}
	for _, c := range after.Classes {
		seen[c.Name] = true
		w, ok := old[c.Name]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("priority class %s added (weight %d)", c.Name, c.Weight))
		case w != c.Weight:
			out = append(out, fmt.Sprintf("priority class %s weight %d → %d", c.Name, w, c.Weight))
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
	for _, c := range p.Classes {
		out = append(out, fmt.Sprintf("priority class %s (weight %d)", c.Name, c.Weight))
	}
	return out
}

func enabledWord(enabled bool) string {
	if enabled {
		return "Enabled"
	}
	return "Disabled"
}

func preemptionWord(p Preemption) string {
	switch p {
	case PreemptLowerPriority:
		return "lower priority"
	case PreemptNever:
		return "never"
	}
	return string(p)
}

// LendingWord names a lending choice as the form does.
func LendingWord(l Lending) string {
	switch l {
	case LendAndBorrow:
		return "lend and borrow"
	case Lend:
		return "lend only"
	case DontLend:
		return "don't lend"
	}
	return string(l)
}

func prioritizationWord(p Prioritization) string {
	switch p {
	case FirstComeFirstServe:
		return "first come, first served"
	case TaskRanking:
		return "task ranking"
	}
	return string(p)
}

func idleWord(i IdleAllocation) string {
	switch i {
	case IdleFirstComeFirstServe:
		return "first come, first served"
	case IdleFairShare:
		return "fair share"
	}
	return string(i)
}

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
