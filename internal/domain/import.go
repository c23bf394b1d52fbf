// This file plans the import of a ClusterQueue the console did not create
// (kubectl, a GitOps tool, Kueue's examples) and its release: which team
// it becomes, what the allocation form cannot express of it, and exactly
// which fields the console writes. Importing writes the console's labels
// and records a revision; it never changes the queue's spec, its name, its
// LocalQueues or their namespaces, so Kueue re-admits nothing and every
// pending task keeps its place.

package domain

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueac "sigs.k8s.io/kueue/client-go/applyconfiguration/kueue/v1beta2"
)

// FieldWrite is one field a change writes, as the preview shows it.
type FieldWrite struct {
	Object, Field, Before, After string
}

func (w FieldWrite) String() string {
	return fmt.Sprintf("%s %s: %s → %s", w.Object, w.Field, w.Before, w.After)
}

// QueueImport is what importing a ClusterQueue would do.
type QueueImport struct {
	ClusterQueue string
	// Team is the allocation the queue gives, as the console records it in
	// the team's first revision (the edit form's starting point).
	Team       Team
	Namespaces []string // the namespaces whose LocalQueues feed it
	Cohort     string
	// Kept says what the allocation form cannot express of the queue; the
	// console keeps it as it is.
	Kept []string
	// Writes are exactly the fields importing writes.
	Writes []FieldWrite
	// Reconciler names a GitOps tool that keeps the queue as its
	// repository says ("" when none): it will undo the console's changes.
	Reconciler string
	// Problem says why the queue cannot be imported ("" when it can).
	Problem string
	// Fingerprint identifies the queue's state the preview was made from:
	// an import goes ahead only while it is unchanged.
	Fingerprint string
}

// ImportedLabel marks a ClusterQueue the console imported: it keeps its own
// name, namespaces and the fields the form cannot express.
const ImportedLabel = "quota-console.openquota.dev/imported"

// ImportLabels are the labels importing puts on a ClusterQueue.
func ImportLabels(team string) map[string]string {
	return map[string]string{ManagedByLabel: ManagedByValue, TeamLabel: team, ImportedLabel: "true"}
}

// PlanImport plans the import of cq. served are the namespaces whose
// LocalQueues feed it; taken reports whether a team of that name exists
// already.
func PlanImport(s Settings, cq *kueuev1beta2.ClusterQueue, served []string, taken func(team string) bool, shapes ShapeLookup) QueueImport {
	name := s.TeamOfClusterQueue(cq)
	team, notes := AdoptTeam(s, Team{Name: name, Lending: LendAndBorrow, BorrowLimitPercent: 100}, cq, shapes)
	p := QueueImport{ClusterQueue: cq.Name, Team: team, Namespaces: served, Cohort: string(cq.Spec.CohortName),
		Kept: append(KeptAsIs(cq), notes...), Reconciler: ReconciledBy(cq), Fingerprint: QueueFingerprint(cq)}
	switch {
	case ManagedByConsole(cq):
		p.Problem = fmt.Sprintf("ClusterQueue %s is already managed by the console.", cq.Name)
	case cq.DeletionTimestamp != nil:
		p.Problem = fmt.Sprintf("ClusterQueue %s is being deleted.", cq.Name)
	case taken(name):
		p.Problem = fmt.Sprintf("A team named %s exists already; import would give two queues one name.", name)
	}
	labels := ImportLabels(name)
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		before, had := cq.Labels[k]
		if had && before == labels[k] {
			continue
		}
		p.Writes = append(p.Writes, FieldWrite{Object: "ClusterQueue " + cq.Name, Field: "metadata.labels[" + k + "]",
			Before: quoteOrNone(before), After: quoteOrNone(labels[k])})
	}
	p.Writes = append(p.Writes, FieldWrite{Object: "ConfigMap " + s.State() + "/" + TeamRevisionsName(s, name),
		Field: "revision 1", Before: "none", After: "the allocation above, imported"})
	return p
}

// PlanRelease is what releasing an imported queue writes: the console's
// labels go, and with them its revisions; Kueue's objects stay as they are.
func PlanRelease(s Settings, cq *kueuev1beta2.ClusterQueue) []FieldWrite {
	var out []FieldWrite
	team := cq.Labels[TeamLabel]
	for _, k := range slices.Sorted(maps.Keys(ImportLabels(team))) {
		if v, ok := cq.Labels[k]; ok {
			out = append(out, FieldWrite{Object: "ClusterQueue " + cq.Name, Field: "metadata.labels[" + k + "]", Before: quoteOrNone(v), After: "none"})
		}
	}
	return append(out, FieldWrite{Object: "ConfigMap " + s.State() + "/" + TeamRevisionsName(s, team),
		Field: "revisions", Before: "kept", After: "deleted"})
}

// Imported reports whether cq is a queue the console imported.
func Imported(cq *kueuev1beta2.ClusterQueue) bool {
	return ManagedByConsole(cq) && cq.Labels[ImportedLabel] == "true"
}

// KeptQuota is, in words, the quota of cq on flavors that are not instance
// types the console knows ("default-flavor: 9 vCPU, 36Gi memory"): the
// allocation form does not show them, and an imported queue keeps them as
// they are.
func KeptQuota(cq *kueuev1beta2.ClusterQueue, shapes ShapeLookup) []string {
	quotas := flavorQuotas(cq.Spec.ResourceGroups)
	var out []string
	for _, f := range quotas.order {
		if _, known := shapes(f); known {
			continue
		}
		var parts []string
		for _, r := range quotas.byFlavor[f] {
			parts = append(parts, QuantityWord(r.Name, r.NominalQuota)+" "+ResourceWord(r.Name))
		}
		out = append(out, f+": "+strings.Join(parts, ", "))
	}
	return out
}

// KeptAsIs names what the allocation form cannot express of cq, which a
// save keeps as it is.
func KeptAsIs(cq *kueuev1beta2.ClusterQueue) []string {
	spec := cq.Spec
	var out []string
	if n := len(spec.ResourceGroups); n > 1 {
		out = append(out, fmt.Sprintf("%d resource groups (the form writes one): kept as they are.", n))
	}
	if r, flavor, ok := firstLimit(spec.ResourceGroups); ok {
		out = append(out, fmt.Sprintf("Borrowing and lending limits per resource (the first: %s on %s): kept as they are.", ResourceWord(r), flavor))
	}
	if sel := selectorWord(spec.NamespaceSelector); sel != "" {
		out = append(out, "Namespace selector "+sel+": kept as it is.")
	}
	if p := spec.Preemption; p != nil {
		if p.WithinClusterQueue == kueuev1beta2.PreemptionPolicyLowerOrNewerEqualPriority {
			out = append(out, "Preemption within the queue "+string(p.WithinClusterQueue)+" (the form shows it as lower priority): kept as it is until the preemption setting is changed.")
		}
		if p.ReclaimWithinCohort != "" && p.ReclaimWithinCohort != kueuev1beta2.PreemptionPolicyNever {
			out = append(out, "Reclaim within cohort "+string(p.ReclaimWithinCohort)+": kept as it is.")
		}
		if p.BorrowWithinCohort != nil && p.BorrowWithinCohort.Policy != kueuev1beta2.BorrowWithinCohortPolicyNever {
			out = append(out, "Borrow within cohort "+string(p.BorrowWithinCohort.Policy)+": kept as it is.")
		}
	}
	if spec.QueueingStrategy != "" && spec.QueueingStrategy != kueuev1beta2.BestEffortFIFO {
		out = append(out, "Queueing strategy "+string(spec.QueueingStrategy)+": kept as it is.")
	}
	if a := spec.AdmissionChecksStrategy; a != nil && len(a.AdmissionChecks) > 0 {
		out = append(out, "Admission checks: kept as they are.")
	}
	if w := fungibilityWord(spec.FlavorFungibility); w != "" {
		out = append(out, "Flavor fungibility ("+w+"): kept as it is.")
	}
	return out
}

// fungibilityWord says the flavor fungibility settings that are not Kueue's
// defaults (its webhook writes the defaults into every queue); "" when none.
func fungibilityWord(f *kueuev1beta2.FlavorFungibility) string {
	if f == nil {
		return ""
	}
	var out []string
	if f.WhenCanBorrow != "" && f.WhenCanBorrow != kueuev1beta2.MayStopSearch {
		out = append(out, "when it can borrow: "+string(f.WhenCanBorrow))
	}
	if f.WhenCanPreempt != "" && f.WhenCanPreempt != kueuev1beta2.TryNextFlavor {
		out = append(out, "when it can preempt: "+string(f.WhenCanPreempt))
	}
	if f.Preference != nil && *f.Preference != kueuev1beta2.BorrowingOverPreemption {
		out = append(out, "preference: "+string(*f.Preference))
	}
	return strings.Join(out, ", ")
}

// QueueFingerprint identifies what of cq an import reads: its spec and
// labels (not its status, which Kueue updates all the time).
func QueueFingerprint(cq *kueuev1beta2.ClusterQueue) string {
	b, _ := json.Marshal(struct {
		Spec   kueuev1beta2.ClusterQueueSpec
		Labels map[string]string
	}{cq.Spec, cq.Labels})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// firstLimit is the first resource with a borrowing or lending limit.
func firstLimit(groups []kueuev1beta2.ResourceGroup) (corev1.ResourceName, kueuev1beta2.ResourceFlavorReference, bool) {
	for _, rg := range groups {
		for _, f := range rg.Flavors {
			for _, r := range f.Resources {
				if r.BorrowingLimit != nil || r.LendingLimit != nil {
					return r.Name, f.Name, true
				}
			}
		}
	}
	return "", "", false
}

// BuildImportedTeam is the objects that enforce t on an imported queue
// (live, as it is now): its ClusterQueue as it is, with what the allocation
// form changed and nothing else. Only the quota of the instance types the
// queue already has can change (its resource groups are kept as they are);
// lending limits, preemption, the order of pending tasks and the
// fair-share weight are written only
// when the form changed them from what the queue had, so the per-resource
// settings the form cannot express stay. No namespace, LocalQueue, flavor
// or member binding is written: the queue keeps its own.
func BuildImportedTeam(s Settings, t Team, live *kueuev1beta2.ClusterQueue, shapes ShapeLookup) (TeamObjects, error) {
	was, _ := AdoptTeam(s, Team{Name: t.Name, Lending: LendAndBorrow, BorrowLimitPercent: 100}, live, shapes)
	spec := live.Spec.DeepCopy()
	rows := map[string]QuotaInput{}
	for _, row := range t.Quota {
		rows[row.InstanceType] = row
	}
	wasRows := map[string]QuotaInput{}
	for _, row := range was.Quota {
		wasRows[row.InstanceType] = row
	}
	found := map[string]bool{}
	// What governs every limit: a new sharing strategy or borrow
	// percentage rewrites them all.
	governingChanged := t.Lending != was.Lending || t.BorrowLimitPercent != was.BorrowLimitPercent
	for g := range spec.ResourceGroups {
		for f := range spec.ResourceGroups[g].Flavors {
			fq := &spec.ResourceGroups[g].Flavors[f]
			row, ok := rows[string(fq.Name)]
			if !ok {
				continue
			}
			shape, known := shapes(row.InstanceType)
			if !known {
				return TeamObjects{}, fmt.Errorf("unknown instance type %q", row.InstanceType)
			}
			found[row.InstanceType] = true
			q := DeriveQuota(row, shape)
			for r := range fq.Resources {
				rq := &fq.Resources[r]
				if !slices.Contains(CoveredResources, rq.Name) {
					continue
				}
				wasRow := wasRows[row.InstanceType]
				wasBorrow, wasLend := was.limits(wasRow, rq.NominalQuota, rq.Name)
				rq.NominalQuota = q.quantity(rq.Name)
				borrow, lend := t.limits(row, rq.NominalQuota, rq.Name)
				// A limit the allocation explains (the percentage of its
				// nominal quota, or the row's absolute limit) follows the
				// allocation, new nominal quota included; one set by hand
				// beyond it (unlimited borrowing beside limited) stays until
				// what governs it changes.
				if governingChanged || sameLimit(rq.BorrowingLimit, wasBorrow) || absoluteChanged(row.absoluteBorrow, wasRow.absoluteBorrow, rq.Name) {
					rq.BorrowingLimit = borrow
				}
				if governingChanged || sameLimit(rq.LendingLimit, wasLend) || absoluteChanged(row.absoluteLend, wasRow.absoluteLend, rq.Name) {
					rq.LendingLimit = lend
				}
			}
		}
	}
	for _, row := range t.Quota {
		if !found[row.InstanceType] {
			return TeamObjects{}, fmt.Errorf("ClusterQueue %s has no quota on %s: an imported queue keeps its resource groups, so add the instance type there first", live.Name, row.InstanceType)
		}
	}
	switch {
	case t.Enabled:
		spec.StopPolicy = ptrTo(kueuev1beta2.None)
	case spec.StopPolicy == nil || *spec.StopPolicy == kueuev1beta2.None:
		spec.StopPolicy = ptrTo(kueuev1beta2.Hold)
	}
	if t.FairShareWeight != was.FairShareWeight {
		spec.FairSharing = &kueuev1beta2.FairSharing{Weight: resource.NewQuantity(t.FairShareWeight, resource.DecimalSI)}
	}
	spec.CohortName = kueuev1beta2.CohortReference(t.Cohort)
	if t.RecentUseOrder != was.RecentUseOrder {
		// Stated, not left out: the field may be another manager's, which
		// leaving it out of an apply would keep.
		spec.AdmissionScope = &kueuev1beta2.AdmissionScope{AdmissionMode: kueuev1beta2.NoAdmissionFairSharing}
		if t.RecentUseOrder {
			spec.AdmissionScope.AdmissionMode = kueuev1beta2.UsageBasedAdmissionFairSharing
		}
	}
	if t.Preemption != was.Preemption {
		if spec.Preemption == nil {
			spec.Preemption = &kueuev1beta2.ClusterQueuePreemption{}
		}
		spec.Preemption.WithinClusterQueue = kueuev1beta2.PreemptionPolicyNever
		if t.Preemption == PreemptLowerPriority {
			spec.Preemption.WithinClusterQueue = kueuev1beta2.PreemptionPolicyLowerPriority
		}
	}

	annotations, err := allocationAnnotation(t)
	if err != nil {
		return TeamObjects{}, err
	}
	var acSpec kueueac.ClusterQueueSpecApplyConfiguration
	if err := viaJSON(spec, &acSpec); err != nil {
		return TeamObjects{}, err
	}
	cq := kueueac.ClusterQueue(live.Name).
		WithLabels(ImportLabels(t.Name)).
		WithAnnotations(annotations).
		WithSpec(&acSpec)
	return TeamObjects{ClusterQueue: cq, Revisions: types.NamespacedName{Namespace: s.State(), Name: TeamRevisionsName(s, t.Name)}, Allocation: &t}, nil
}

func ptrTo[T any](v T) *T { return &v }

// sameLimit reports whether two limits are the same: both none, or equal.
func sameLimit(a, b *resource.Quantity) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Cmp(*b) == 0
}

// absoluteChanged reports whether a row's absolute limit of r differs from
// the one it had.
func absoluteChanged(now, before func(corev1.ResourceName) **int64, r corev1.ResourceName) bool {
	a, b := now(r), before(r)
	if a == nil || b == nil {
		return false
	}
	if *a == nil || *b == nil {
		return *a != *b
	}
	return **a != **b
}
