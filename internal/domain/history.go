package domain

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
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

type intentKey struct{}

// intent is why an apply happens, beyond "the admin saved a form".
type intent struct {
	rollbackTo int
	note       string
}

func intentFrom(ctx context.Context) intent {
	in, _ := ctx.Value(intentKey{}).(intent)
	return in
}

// WithRollback marks the changes applied with ctx as a rollback to an earlier
// revision: the revision they record has action rollback.
func WithRollback(ctx context.Context, revision int) context.Context {
	in := intentFrom(ctx)
	in.rollbackTo = revision
	return context.WithValue(ctx, intentKey{}, in)
}

// WithNote attaches a note (e.g. "adopted hand edits") to the revision that
// the changes applied with ctx record.
func WithNote(ctx context.Context, note string) context.Context {
	in := intentFrom(ctx)
	in.note = note
	return context.WithValue(ctx, intentKey{}, in)
}

// TeamHistory returns a team's recorded revisions, newest first; none when
// nothing was recorded yet.
func (a Applier) TeamHistory(ctx context.Context, s Settings, team string) ([]TeamRevision, error) {
	return readHistory[Team](ctx, a.records(), s.State(), TeamHistoryName(s, team))
}

// PolicyHistory returns the policy's recorded revisions, newest first.
func (a Applier) PolicyHistory(ctx context.Context, s Settings) ([]PolicyRevision, error) {
	return readHistory[Policy](ctx, a.records(), s.State(), PolicyHistoryName(s))
}

// FindRevision returns the revision numbered n.
func FindRevision[T any](revs []Revision[T], n int) (Revision[T], bool) {
	for _, r := range revs {
		if r.Revision == n {
			return r, true
		}
	}
	return Revision[T]{}, false
}

func readHistory[T any](ctx context.Context, kube kubernetes.Interface, ns, name string) ([]Revision[T], error) {
	cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	revs := decodeRevisions[T](cm.Data)
	for i, j := 0, len(revs)-1; i < j; i, j = i+1, j-1 {
		revs[i], revs[j] = revs[j], revs[i]
	}
	return revs, nil
}

func revisionKey(n int) string { return fmt.Sprintf("%s%06d", revisionKeyPrefix, n) }

// decodeRevisions reads a history ConfigMap's data, oldest first. Entries
// that do not decode (edited by hand) are skipped.
func decodeRevisions[T any](data map[string]string) []Revision[T] {
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

// encodeRevisions writes revisions (oldest first) as ConfigMap data, keeping
// the newest HistoryLimit that fit in maxHistoryBytes (always the newest one).
func encodeRevisions[T any](revs []Revision[T]) (map[string]string, error) {
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

// revisionFacts are what an apply run knows when it decides on a revision.
type revisionFacts struct {
	by      string
	at      time.Time
	changed bool // the run changed an object in the cluster
	created bool // the run created the team (or the policy)
	intent  intent
}

// nextRevision decides whether an apply run records a revision after last,
// and which. It records when the allocation differs from the last revision,
// when the run changed objects in the cluster (a re-apply over hand edits),
// and for a rollback unless it repeats the last one (a retry); an unchanged
// re-apply records nothing.
func nextRevision[T any](last *Revision[T], alloc T, f revisionFacts) (Revision[T], bool) {
	rev := Revision[T]{Revision: 1, At: f.at, By: f.by, Action: ActionUpdate, Note: f.intent.note, Allocation: alloc}
	if last != nil {
		rev.Revision = last.Revision + 1
	}
	record := last == nil || f.changed || !sameJSON(last.Allocation, alloc)
	switch {
	case f.intent.rollbackTo > 0:
		rev.Action, rev.RolledBackTo = ActionRollback, f.intent.rollbackTo
		record = record || last.Action != ActionRollback || last.RolledBackTo != f.intent.rollbackTo
	case f.created:
		rev.Action = ActionCreate
	}
	return rev, record
}

func sameJSON(a, b any) bool {
	x, errX := json.Marshal(a)
	y, errY := json.Marshal(b)
	return errX == nil && errY == nil && string(x) == string(y)
}

// recordRevision adds the revision decide returns (if any) to a history
// ConfigMap, creating it if needed, with optimistic concurrency: two writers
// at once both get their revision, numbered one after the other.
func recordRevision[T any](ctx context.Context, kube kubernetes.Interface, ns, name string, labels map[string]string,
	decide func(last *Revision[T]) (Revision[T], bool),
) (rev Revision[T], prev *Revision[T], recorded bool, err error) {
	cms := kube.CoreV1().ConfigMaps(ns)
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		recorded, prev = false, nil
		cm, err := cms.Get(ctx, name, metav1.GetOptions{})
		create := apierrors.IsNotFound(err)
		if err != nil && !create {
			return err
		}
		if create {
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels}}
		}
		revs := decodeRevisions[T](cm.Data)
		if len(revs) > 0 {
			last := revs[len(revs)-1]
			prev = &last
		}
		var ok bool
		if rev, ok = decide(prev); !ok {
			return nil
		}
		if cm.Data, err = encodeRevisions(append(revs, rev)); err != nil {
			return err
		}
		if create {
			_, err = cms.Create(ctx, cm, metav1.CreateOptions{FieldManager: FieldManager})
			if apierrors.IsNotFound(err) {
				// The console's namespace is missing (a local run against a
				// fresh cluster; installs create it): make it, once.
				if err := createStateNamespace(ctx, kube, ns); err != nil {
					return err
				}
				_, err = cms.Create(ctx, cm, metav1.CreateOptions{FieldManager: FieldManager})
			}
			if apierrors.IsAlreadyExists(err) {
				// Another writer created it first: read theirs and add ours.
				return apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, name, err)
			}
		} else {
			_, err = cms.Update(ctx, cm, metav1.UpdateOptions{FieldManager: FieldManager})
		}
		recorded = err == nil
		return err
	})
	return rev, prev, recorded, err
}

// recordTeam records the revision of a team apply run and announces it.
func (a Applier) recordTeam(ctx context.Context, c *change, objs TeamObjects, cq written[*kueuev1beta2.ClusterQueue]) error {
	if objs.ClusterQueue.ObjectMetaApplyConfiguration == nil {
		return nil
	}
	var team Team
	if err := json.Unmarshal([]byte(objs.ClusterQueue.Annotations[AllocationAnnotation]), &team); err != nil {
		return nil // not built from an allocation: nothing to record
	}
	if name := objs.ClusterQueue.Labels[TeamLabel]; name != "" {
		team.Name = name
	}
	// A ClusterQueue the audited path created (it names its creator) with no
	// revision yet is a create whose revision a failure kept from being recorded.
	byConsole := cq.existed() && cq.before.Annotations[CreatedByAnnotation] != "" && cq.before.Annotations[CreatedByAnnotation] != UnknownCreator
	facts := revisionFacts{by: c.by, at: c.at, changed: c.changed, intent: intentFrom(ctx)}
	labels := map[string]string{ManagedByLabel: ManagedByValue, TeamLabel: team.Name, HistoryLabel: "team"}
	rev, prev, recorded, err := recordRevision(ctx, a.records(), objs.History.Namespace, objs.History.Name, labels,
		func(last *TeamRevision) (TeamRevision, bool) {
			f := facts
			f.created = !cq.existed() || (last == nil && byConsole)
			return nextRevision(last, team, f)
		})
	if err != nil {
		return fmt.Errorf("recording the revision of team %s: %w", team.Name, err)
	}
	if recorded {
		a.emit(ctx, TeamEvent(cq.after, rev, prev))
	}
	return nil
}

// recordPolicy records the revision of a policy apply run and announces it.
func (a Applier) recordPolicy(ctx context.Context, c *change, s Settings, p Policy, cohort written[*kueuev1beta2.Cohort]) error {
	hadPolicy := cohort.existed() && cohort.before.Annotations[PolicyAnnotation] != ""
	facts := revisionFacts{by: c.by, at: c.at, changed: c.changed, intent: intentFrom(ctx)}
	labels := map[string]string{ManagedByLabel: ManagedByValue, HistoryLabel: "policy"}
	rev, prev, recorded, err := recordRevision(ctx, a.records(), s.State(), PolicyHistoryName(s), labels,
		func(last *PolicyRevision) (PolicyRevision, bool) {
			f := facts
			f.created = last == nil && !hadPolicy
			return nextRevision(last, p, f)
		})
	if err != nil {
		return fmt.Errorf("recording the revision of the policy: %w", err)
	}
	if recorded {
		a.emit(ctx, PolicyEvent(cohort.after, rev, prev))
	}
	return nil
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
