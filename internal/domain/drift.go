package domain

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// Drift is one difference between what a stored allocation builds and what
// the cluster has: a hand edit (kubectl) of a field the console manages, which
// re-applying the allocation would set back.
type Drift struct {
	Object string // "ClusterQueue a-clusterqueue", "LocalQueue ns/a-localqueue", …
	Field  string // in words: "GPUs quota on ml.p5.48xlarge"
	Want   string // what the allocation builds; "" when it builds nothing there
	Got    string // what the cluster has; "" when it is missing
}

func (d Drift) String() string {
	switch {
	case d.Got == "":
		return fmt.Sprintf("%s: %s is missing in the cluster (the allocation says %s)", d.Object, d.Field, d.Want)
	case d.Want == "":
		return fmt.Sprintf("%s: %s is %s in the cluster, which the allocation does not have", d.Object, d.Field, d.Got)
	}
	return fmt.Sprintf("%s: %s is %s in the cluster, the allocation says %s", d.Object, d.Field, d.Got, d.Want)
}

// LiveTeamObjects is a team's objects as the cluster has them; nil (or absent from
// Flavors) when missing.
type LiveTeamObjects struct {
	ClusterQueue *kueuev1beta2.ClusterQueue
	LocalQueue   *kueuev1beta2.LocalQueue
	Flavors      map[string]*kueuev1beta2.ResourceFlavor
}

// DriftOf compares what an allocation builds (BuildTeam) with the live
// objects, field by field, over the fields the console manages: the
// ClusterQueue's spec, the LocalQueue's ClusterQueue and each flavor's node
// labels. Fields Kueue defaults when they are left out compare as their
// default; fields the console does not set (admission checks, taints …) are
// not drift.
func DriftOf(want TeamObjects, live LiveTeamObjects) ([]Drift, error) {
	var out []Drift
	var cq kueuev1beta2.ClusterQueue
	if err := viaJSON(want.ClusterQueue, &cq); err != nil {
		return nil, err
	}
	object := "ClusterQueue " + cq.Name
	if live.ClusterQueue == nil {
		out = append(out, Drift{Object: object, Field: "the ClusterQueue", Want: "present"})
	} else {
		out = append(out, clusterQueueDrift(object, cq.Spec, live.ClusterQueue.Spec)...)
	}

	if want.LocalQueue != nil {
		var lq kueuev1beta2.LocalQueue
		if err := viaJSON(want.LocalQueue, &lq); err != nil {
			return nil, err
		}
		object := "LocalQueue " + lq.Namespace + "/" + lq.Name
		switch {
		case live.LocalQueue == nil:
			out = append(out, Drift{Object: object, Field: "the LocalQueue", Want: "present"})
		case live.LocalQueue.Spec.ClusterQueue != lq.Spec.ClusterQueue:
			out = append(out, Drift{Object: object, Field: "the ClusterQueue it feeds",
				Want: string(lq.Spec.ClusterQueue), Got: orNone(string(live.LocalQueue.Spec.ClusterQueue))})
		}
	}

	for _, ac := range want.Flavors {
		var rf kueuev1beta2.ResourceFlavor
		if err := viaJSON(ac, &rf); err != nil {
			return nil, err
		}
		object := "ResourceFlavor " + rf.Name
		got, ok := live.Flavors[rf.Name]
		if !ok || got == nil {
			out = append(out, Drift{Object: object, Field: "the ResourceFlavor", Want: "present"})
			continue
		}
		for _, k := range sortedKeys(rf.Spec.NodeLabels) {
			if v, ok := got.Spec.NodeLabels[k]; !ok || v != rf.Spec.NodeLabels[k] {
				out = append(out, Drift{Object: object, Field: "node label " + k, Want: rf.Spec.NodeLabels[k], Got: v})
			}
		}
	}
	return out, nil
}

func clusterQueueDrift(object string, want, got kueuev1beta2.ClusterQueueSpec) []Drift {
	var out []Drift
	add := func(field, w, g string) {
		if w != g {
			out = append(out, Drift{Object: object, Field: field, Want: w, Got: g})
		}
	}
	// Quantities compare by value: "36" and "36000m" are the same quota.
	addQ := func(field string, r corev1.ResourceName, w, g *resource.Quantity, none string) {
		if w == nil && g == nil || w != nil && g != nil && w.Cmp(*g) == 0 {
			return
		}
		out = append(out, Drift{Object: object, Field: field, Want: limitWord(r, w, none), Got: limitWord(r, g, none)})
	}
	add("status", stopWord(want.StopPolicy), stopWord(got.StopPolicy))
	add("cohort", orNone(string(want.CohortName)), orNone(string(got.CohortName)))
	add("namespace selector", selectorWord(want.NamespaceSelector), selectorWord(got.NamespaceSelector))
	add("queueing strategy", defaulted(string(want.QueueingStrategy), string(kueuev1beta2.BestEffortFIFO)),
		defaulted(string(got.QueueingStrategy), string(kueuev1beta2.BestEffortFIFO)))
	one := resource.MustParse("1") // Kueue's default weight
	addQ("fair-share weight", "", weightOf(want.FairSharing, &one), weightOf(got.FairSharing, &one), "")

	add("order of pending tasks (admissionScope)", orderWord(OrdersByRecentUse(want.AdmissionScope)), orderWord(OrdersByRecentUse(got.AdmissionScope)))
	wp, gp := preemptionOf(want.Preemption), preemptionOf(got.Preemption)
	add("preemption within the team (withinClusterQueue)", wp.within, gp.within)
	add("reclaiming lent quota (reclaimWithinCohort)", wp.reclaim, gp.reclaim)
	add("preemption while borrowing (borrowWithinCohort)", wp.borrow, gp.borrow)
	if want.FlavorFungibility != nil {
		wf, gf := *want.FlavorFungibility, kueuev1beta2.FlavorFungibility{}
		if got.FlavorFungibility != nil {
			gf = *got.FlavorFungibility
		}
		add("flavor fungibility when it can borrow", string(wf.WhenCanBorrow), orNone(string(gf.WhenCanBorrow)))
		add("flavor fungibility when it can preempt", string(wf.WhenCanPreempt), orNone(string(gf.WhenCanPreempt)))
	}
	add("covered resources", coveredWord(want.ResourceGroups), coveredWord(got.ResourceGroups))

	wq, gq := flavorQuotas(want.ResourceGroups), flavorQuotas(got.ResourceGroups)
	for _, f := range wq.order {
		g, ok := gq.byFlavor[f]
		if !ok {
			out = append(out, Drift{Object: object, Field: "quota on " + f, Want: quotaSummary(wq.byFlavor[f])})
			continue
		}
		for _, w := range wq.byFlavor[f] {
			name := ResourceWord(w.Name)
			r, ok := findResource(g, w.Name)
			if !ok {
				out = append(out, Drift{Object: object, Field: name + " quota on " + f, Want: QuantityWord(w.Name, w.NominalQuota)})
				continue
			}
			addQ(name+" quota on "+f, w.Name, &w.NominalQuota, &r.NominalQuota, "")
			addQ(name+" borrowing limit on "+f, w.Name, w.BorrowingLimit, r.BorrowingLimit, "unlimited")
			addQ(name+" lending limit on "+f, w.Name, w.LendingLimit, r.LendingLimit, "no limit")
		}
		for _, r := range g {
			if _, ok := findResource(wq.byFlavor[f], r.Name); !ok {
				out = append(out, Drift{Object: object, Field: ResourceWord(r.Name) + " quota on " + f, Got: QuantityWord(r.Name, r.NominalQuota)})
			}
		}
	}
	for _, f := range gq.order {
		if _, ok := wq.byFlavor[f]; !ok {
			out = append(out, Drift{Object: object, Field: "quota on " + f, Got: quotaSummary(gq.byFlavor[f])})
		}
	}
	return out
}

type quotasByFlavor struct {
	order    []string
	byFlavor map[string][]kueuev1beta2.ResourceQuota
}

func flavorQuotas(groups []kueuev1beta2.ResourceGroup) quotasByFlavor {
	q := quotasByFlavor{byFlavor: map[string][]kueuev1beta2.ResourceQuota{}}
	for _, g := range groups {
		for _, f := range g.Flavors {
			name := string(f.Name)
			if _, ok := q.byFlavor[name]; !ok {
				q.order = append(q.order, name)
			}
			q.byFlavor[name] = append(q.byFlavor[name], f.Resources...)
		}
	}
	return q
}

func findResource(rs []kueuev1beta2.ResourceQuota, name corev1.ResourceName) (kueuev1beta2.ResourceQuota, bool) {
	for _, r := range rs {
		if r.Name == name {
			return r, true
		}
	}
	return kueuev1beta2.ResourceQuota{}, false
}

func quotaSummary(rs []kueuev1beta2.ResourceQuota) string {
	var parts []string
	for _, r := range rs {
		if !r.NominalQuota.IsZero() {
			parts = append(parts, QuantityWord(r.Name, r.NominalQuota)+" "+ResourceWord(r.Name))
		}
	}
	if len(parts) == 0 {
		return "zero quota"
	}
	return strings.Join(parts, ", ")
}

type preemptionWords struct{ within, reclaim, borrow string }

// preemptionOf reads a ClusterQueue's preemption with Kueue's defaults.
func preemptionOf(p *kueuev1beta2.ClusterQueuePreemption) preemptionWords {
	never := string(kueuev1beta2.PreemptionPolicyNever)
	w := preemptionWords{within: never, reclaim: never, borrow: never}
	if p == nil {
		return w
	}
	w.within = defaulted(string(p.WithinClusterQueue), never)
	w.reclaim = defaulted(string(p.ReclaimWithinCohort), never)
	if p.BorrowWithinCohort != nil {
		w.borrow = defaulted(string(p.BorrowWithinCohort.Policy), never)
	}
	return w
}

func stopWord(p *kueuev1beta2.StopPolicy) string {
	s := kueuev1beta2.None
	if p != nil && *p != "" {
		s = *p
	}
	if s == kueuev1beta2.None {
		return "Enabled (stopPolicy None)"
	}
	return fmt.Sprintf("Disabled (stopPolicy %s)", s)
}

func weightOf(f *kueuev1beta2.FairSharing, def *resource.Quantity) *resource.Quantity {
	if f == nil || f.Weight == nil {
		return def
	}
	return f.Weight
}

func selectorWord(s *metav1.LabelSelector) string {
	if s == nil {
		return "none (no namespace)"
	}
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		return "invalid"
	}
	if sel.Empty() {
		return "every namespace"
	}
	return sel.String()
}

func coveredWord(groups []kueuev1beta2.ResourceGroup) string {
	var names []string
	for _, g := range groups {
		for _, r := range g.CoveredResources {
			names = append(names, string(r))
		}
	}
	return orNone(strings.Join(names, ", "))
}

// ResourceWord names a resource for people.
func ResourceWord(r corev1.ResourceName) string {
	switch r {
	case ResourceGPU:
		return "GPUs"
	case ResourceNeuron:
		return "Neuron devices"
	case corev1.ResourceCPU:
		return "vCPU"
	case corev1.ResourceMemory:
		return "memory"
	case ResourceEFA:
		return "EFA"
	}
	if p, ok := PartitionOf(r); ok {
		return p + " partitions"
	}
	return string(r)
}

// QuantityWord writes a quantity of a resource for people: memory in GiB,
// vCPU as a decimal number, the rest as Kubernetes writes it.
func QuantityWord(r corev1.ResourceName, q resource.Quantity) string {
	switch r {
	case corev1.ResourceMemory:
		if q.Value()%(1<<30) == 0 {
			return fmt.Sprintf("%d GiB", q.Value()>>30)
		}
		return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.2f", float64(q.Value())/(1<<30)), "0"), ".") + " GiB"
	case corev1.ResourceCPU:
		if m := q.MilliValue(); m%1000 != 0 {
			return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.3f", float64(m)/1000), "0"), ".")
		}
	}
	return q.String()
}

func limitWord(r corev1.ResourceName, q *resource.Quantity, none string) string {
	if q == nil {
		return none
	}
	return QuantityWord(r, *q)
}

func defaulted(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// viaJSON decodes an apply configuration into the API type, as the apiserver
// would see it.
func viaJSON(in, out any) error {
	data, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, out)
}

// AllocationDrift compares the allocation annotation of a team's
// ClusterQueue with the allocation the console acts on (TrustedTeam; saved:
// from a saved revision). Anyone who may patch ClusterQueues can write the
// annotation, so a difference is shown, never acted on: members get a row
// of their own, the rest of the allocation one row.
func AllocationDrift(cq *kueuev1beta2.ClusterQueue, trusted Team, saved bool) []Drift {
	object := "ClusterQueue " + cq.Name
	field := "the allocation annotation"
	onQueue, ok := TeamFromClusterQueue(cq)
	if !ok {
		return []Drift{{Object: object, Field: field, Want: "the last saved revision", Got: "unreadable"}}
	}
	var out []Drift
	if PlantedMembers(onQueue, trusted, saved) {
		want := "none: members are kept in the team's saved revisions only"
		if !saved {
			want = "none: the team has no saved revision, so no member on the ClusterQueue is trusted"
		}
		out = append(out, Drift{Object: object, Field: "members in " + field, Want: want, Got: membersWord(onQueue.Members)})
	}
	onQueue.Members, trusted.Members = nil, nil
	if changes := DiffTeams(trusted, onQueue); len(changes) > 0 {
		out = append(out, Drift{Object: object, Field: "the rest of " + field, Want: "as saved", Got: strings.Join(changes, "; ")})
	}
	return out
}

// PlantedMembers reports whether the allocation annotation of a team's
// ClusterQueue (onQueue) names members the console did not write there.
// The console writes none (allocationAnnotation); earlier versions wrote
// the saved revision's, which are no hand edit (RedactMembers removes them).
func PlantedMembers(onQueue, trusted Team, saved bool) bool {
	return len(onQueue.Members) > 0 && !(saved && SameMembers(onQueue.Members, trusted.Members))
}

// SameMembers reports whether two member lists name the same users and
// groups, in any order.
func SameMembers(a, b []Member) bool {
	return len(diffMembers(a, b)) == 0
}

func membersWord(ms []Member) string {
	if len(ms) == 0 {
		return "none"
	}
	words := make([]string, len(ms))
	for i, m := range ms {
		words[i] = memberWord(m)
	}
	return strings.Join(words, ", ")
}

// DriftReport is a team's drift: the allocation the console acts on
// (TrustedTeam; Saved: from a saved revision) and how the live objects
// differ from what it builds.
type DriftReport struct {
	Team        Team
	Saved       bool
	Live        LiveTeamObjects
	Differences []Drift
}

// MembersDrifted reports whether the members on the ClusterQueue differ
// from those the console acts on.
func (r DriftReport) MembersDrifted() bool {
	if r.Live.ClusterQueue == nil {
		return false
	}
	onQueue, ok := TeamFromClusterQueue(r.Live.ClusterQueue)
	return ok && PlantedMembers(onQueue, r.Team, r.Saved)
}

// Drifted reports whether someone changed the team's objects by hand.
func (r DriftReport) Drifted() bool { return len(r.Differences) > 0 }

// maxAdoptedBorrowPercent is the highest borrow limit an allocation takes (the form's limit).
const maxAdoptedBorrowPercent = 500

// AdoptTeam derives an allocation from a hand-edited ClusterQueue, starting
// from the stored one (members and description are not on the ClusterQueue):
// the stop policy gives Enabled, the fair-sharing weight the weight, the
// preemption within the queue the preemption, the borrowing and lending
// limits the lending choice and a borrow limit percentage (when one
// percentage explains them all), and each flavor's nominal quotas a quota row
// with explicit GPUs (or Neuron devices), vCPU and memory, except where the
// stored row still derives exactly the live quota. notes say what could not
// be adopted exactly; what an allocation cannot express at all (e.g. another
// cohort) is left to DriftOf, which shows what applying the adopted
// allocation still sets back.
func AdoptTeam(s Settings, stored Team, cq *kueuev1beta2.ClusterQueue, shapes ShapeLookup) (Team, []string) {
	t := stored
	var notes []string
	switch c := string(cq.Spec.CohortName); {
	case !ManagedByConsole(cq) || Imported(cq):
		// An imported queue's cohort is where the queue is, literally
		// ("" is no cohort): the console moves it only when asked.
		t.Cohort = c
	case c == s.CohortOf(stored):
	case s.ConsoleCohort(c):
		t.Cohort = c
		if c == s.Cohort {
			t.Cohort = ""
		}
	default:
		notes = append(notes, fmt.Sprintf("The cohort %s is not one of the console's: not adopted.", orNone(c)))
	}
	t.Quota = nil
	spec := cq.Spec

	stop := kueuev1beta2.None
	if spec.StopPolicy != nil && *spec.StopPolicy != "" {
		stop = *spec.StopPolicy
	}
	t.Enabled = stop == kueuev1beta2.None
	if stop == kueuev1beta2.HoldAndDrain {
		notes = append(notes, "The ClusterQueue was set to HoldAndDrain (running tasks evicted); a disabled team uses Hold (running tasks finish).")
	}

	// A queue that sets no weight has Kueue's default, 1.
	t.FairShareWeight = 1
	if spec.FairSharing != nil && spec.FairSharing.Weight != nil {
		milli := spec.FairSharing.Weight.MilliValue()
		w := int64(math.Round(float64(milli) / 1000))
		if milli%1000 != 0 {
			notes = append(notes, fmt.Sprintf("Fair-share weight %s rounded to %d.", spec.FairSharing.Weight.String(), w))
		}
		if w > 100 {
			notes = append(notes, fmt.Sprintf("Fair-share weight %d is above 100, the most an allocation takes: adopted as 100.", w))
			w = 100
		}
		t.FairShareWeight = w
	}

	t.RecentUseOrder = OrdersByRecentUse(spec.AdmissionScope)

	within := kueuev1beta2.PreemptionPolicyNever
	if spec.Preemption != nil && spec.Preemption.WithinClusterQueue != "" {
		within = spec.Preemption.WithinClusterQueue
	}
	switch within {
	case kueuev1beta2.PreemptionPolicyLowerPriority:
		t.Preemption = PreemptLowerPriority
	case kueuev1beta2.PreemptionPolicyLowerOrNewerEqualPriority:
		t.Preemption = PreemptLowerPriority
		notes = append(notes, "Preemption LowerOrNewerEqualPriority adopted as lower priority.")
	default:
		t.Preemption = PreemptNever
	}

	quotas := flavorQuotas(spec.ResourceGroups)
	var all []kueuev1beta2.ResourceQuota
	for _, f := range quotas.order {
		all = append(all, quotas.byFlavor[f]...)
	}
	if len(all) > 0 {
		var lnotes []string
		t.Lending, t.BorrowLimitPercent, lnotes = adoptLending(all, stored.BorrowLimitPercent)
		notes = append(notes, lnotes...)
	}

	storedRows := map[string]QuotaInput{}
	for _, q := range stored.Quota {
		storedRows[q.InstanceType] = q
	}
	for _, f := range quotas.order {
		shape, ok := shapes(f)
		if !ok {
			notes = append(notes, fmt.Sprintf("The quota on %s is not adopted: the console does not know that instance type.", f))
			continue
		}
		live := liveQuota(quotas.byFlavor[f])
		row, rowNotes := adoptRow(storedRows[f], f, shape, live)
		notes = append(notes, rowNotes...)
		if t.Lending == LendAndBorrow {
			var absolute bool
			var limitNotes []string
			row, absolute, limitNotes = adoptBorrowLimits(t, row, storedRows[f], shape, quotas.byFlavor[f])
			if absolute {
				if notes = slices.DeleteFunc(notes, func(n string) bool { return strings.HasPrefix(n, notOnePercentage) }); len(notes) == 0 {
					notes = nil
				}
			}
			notes = append(notes, limitNotes...)
		} else {
			row.BorrowGPUs, row.BorrowNeuron, row.BorrowVCPU, row.BorrowMemoryGiB = nil, nil, nil, nil
		}
		var lendNotes []string
		row, lendNotes = adoptLendLimits(t, row, quotas.byFlavor[f])
		notes = append(notes, lendNotes...)
		t.Quota = append(t.Quota, row)
	}
	return t, notes
}

// adoptBorrowLimits gives row an absolute borrow limit for each resource
// whose live borrowing limit was set by hand: neither the team's percentage
// of the live nominal quota explains it, nor that of the stored one (a
// nominal quota edited by hand leaves its limit behind: the percentage
// still holds). A stored absolute limit the queue still has stays.
// absolute reports whether the row has any.
func adoptBorrowLimits(t Team, row, stored QuotaInput, shape InstanceShape, live []kueuev1beta2.ResourceQuota) (_ QuotaInput, absolute bool, notes []string) {
	row.BorrowGPUs, row.BorrowNeuron, row.BorrowVCPU, row.BorrowMemoryGiB = nil, nil, nil, nil
	storedQuota := DeriveQuota(stored, shape)
	for _, rq := range live {
		if rq.BorrowingLimit == nil {
			continue
		}
		byHand := rq.BorrowingLimit.Cmp(percentOf(rq.NominalQuota, t.BorrowLimitPercent, rq.Name)) != 0 &&
			rq.BorrowingLimit.Cmp(percentOf(storedQuota.quantity(rq.Name), t.BorrowLimitPercent, rq.Name)) != 0
		field := row.absoluteBorrow(rq.Name)
		if field == nil {
			if byHand {
				notes = append(notes, fmt.Sprintf("The %s borrowing limit on %s set by hand is not kept: it follows the borrow percentage.", ResourceWord(rq.Name), row.InstanceType))
			}
			continue
		}
		if had := *stored.absoluteBorrow(rq.Name); had != nil && rq.BorrowingLimit.Cmp(unitsQuantity(rq.Name, *had)) == 0 {
			*field, absolute = ptrTo(*had), true
			continue
		}
		if byHand {
			n := formUnits(rq.Name, *rq.BorrowingLimit)
			*field, absolute = &n, true
		}
	}
	return row, absolute, notes
}

// adoptLendLimits gives row an absolute lend limit for each resource with
// a live lending limit, when the team lends: the console writes one only
// for an absolute lend limit, so any is the admin's. Those the form cannot
// express (EFA) are noted and dropped.
func adoptLendLimits(t Team, row QuotaInput, live []kueuev1beta2.ResourceQuota) (QuotaInput, []string) {
	row.LendGPUs, row.LendNeuron, row.LendVCPU, row.LendMemoryGiB = nil, nil, nil, nil
	if t.Lending == DontLend {
		return row, nil
	}
	var notes []string
	for _, rq := range live {
		if rq.LendingLimit == nil {
			continue
		}
		field := row.absoluteLend(rq.Name)
		if field == nil {
			notes = append(notes, fmt.Sprintf("The %s lending limit on %s set by hand is not kept: the team lends all its idle %s.", ResourceWord(rq.Name), row.InstanceType, ResourceWord(rq.Name)))
			continue
		}
		// Down, so that it stays within the nominal quota, as Kueue requires.
		n := formUnitsDown(rq.Name, *rq.LendingLimit)
		if q := unitsQuantity(rq.Name, n); q.Cmp(*rq.LendingLimit) != 0 {
			notes = append(notes, fmt.Sprintf("The %s lending limit on %s (%s) rounded down to %d.", ResourceWord(rq.Name), row.InstanceType, QuantityWord(rq.Name, *rq.LendingLimit), n))
		}
		*field = &n
	}
	return row, notes
}

// formUnitsDown is q in the units the form takes for r, rounded down.
func formUnitsDown(r corev1.ResourceName, q resource.Quantity) int64 {
	switch r {
	case corev1.ResourceCPU:
		return q.MilliValue() / 1000
	case corev1.ResourceMemory:
		return q.Value() >> 30
	}
	return q.Value()
}

// formUnits is q in the units the form takes for r (rounded).
func formUnits(r corev1.ResourceName, q resource.Quantity) int64 {
	switch r {
	case corev1.ResourceCPU:
		return int64(math.Round(float64(q.MilliValue()) / 1000))
	case corev1.ResourceMemory:
		return int64(math.Round(float64(q.Value()) / (1 << 30)))
	}
	return q.Value()
}

func liveQuota(rs []kueuev1beta2.ResourceQuota) Quota {
	var q Quota
	for _, r := range rs {
		switch r.Name {
		case ResourceGPU:
			q.GPUs = r.NominalQuota.Value()
		case ResourceNeuron:
			q.Neuron = r.NominalQuota.Value()
		case ResourceEFA:
			q.EFA = r.NominalQuota.Value()
		case corev1.ResourceCPU:
			q.CPUMilli = r.NominalQuota.MilliValue()
		case corev1.ResourceMemory:
			q.MemoryMiB = r.NominalQuota.Value() >> 20
		default:
			// One profile a row: the first with a quota.
			if p, ok := PartitionOf(r.Name); ok && q.Partition == "" && r.NominalQuota.Value() > 0 {
				q.Partition, q.Partitions = p, r.NominalQuota.Value()
			}
		}
	}
	return q
}

func sameDerived(a, b Quota) bool {
	return a.GPUs == b.GPUs && a.Neuron == b.Neuron && a.CPUMilli == b.CPUMilli && a.MemoryMiB == b.MemoryMiB &&
		a.Partition == b.Partition && a.Partitions == b.Partitions
}

// adoptRow is the quota row that derives a live quota: the stored row when it
// still does, else GPUs (or Neuron devices) with vCPU and memory given where
// the derived ones differ.
func adoptRow(stored QuotaInput, instanceType string, shape InstanceShape, live Quota) (QuotaInput, []string) {
	var notes []string
	if stored.InstanceType == instanceType && sameDerived(DeriveQuota(stored, shape), live) {
		return stored, nil
	}
	row := QuotaInput{InstanceType: instanceType}
	if live.Partition != "" {
		partitions := live.Partitions
		row.Partition, row.Partitions = live.Partition, &partitions
	}
	gpus, neuron := live.GPUs, live.Neuron
	switch {
	case shape.GPUs > 0:
		row.GPUs = &gpus
	case shape.Neuron > 0:
		row.Neuron = &neuron
	}
	if row.GPUs == nil && row.Neuron == nil || DeriveQuota(row, shape).CPUMilli != live.CPUMilli {
		vcpu := int64(math.Round(float64(live.CPUMilli) / 1000))
		if live.CPUMilli%1000 != 0 {
			notes = append(notes, fmt.Sprintf("vCPU quota %s on %s rounded to %d.",
				resource.NewMilliQuantity(live.CPUMilli, resource.DecimalSI).String(), instanceType, vcpu))
		}
		row.VCPU = &vcpu
	}
	if DeriveQuota(row, shape).MemoryMiB != live.MemoryMiB {
		gib := int64(math.Round(float64(live.MemoryMiB) / 1024))
		if live.MemoryMiB%1024 != 0 {
			notes = append(notes, fmt.Sprintf("Memory quota on %s rounded to %d GiB.", instanceType, gib))
		}
		row.MemoryGiB = &gib
	}
	// A queue without EFA quota (Kueue's own examples) has nothing to say.
	if derived := DeriveQuota(row, shape); live.EFA != 0 && derived.EFA != live.EFA {
		notes = append(notes, fmt.Sprintf("EFA quota on %s follows the GPUs (%d), not the %d set by hand.", instanceType, derived.EFA, live.EFA))
	}
	return row, notes
}

// notOnePercentage starts the note of limits no single percentage explains.
const notOnePercentage = "Borrowing limits do not all follow one percentage"

// adoptLending reads the lending choice and borrow limit percentage from the
// limits of every [flavor, resource].
func adoptLending(all []kueuev1beta2.ResourceQuota, storedPercent int64) (Lending, int64, []string) {
	isZero := func(q *resource.Quantity) bool { return q != nil && q.IsZero() }
	allLendZero, allBorrowZero := true, true
	for _, r := range all {
		allLendZero = allLendZero && isZero(r.LendingLimit)
		allBorrowZero = allBorrowZero && isZero(r.BorrowingLimit)
	}
	// Other lending limits are absolute lend limits (adoptLendLimits).
	switch {
	case allLendZero && allBorrowZero:
		return DontLend, storedPercent, nil
	case allBorrowZero:
		return Lend, storedPercent, nil
	}
	var notes []string
	// The percentages p that explain a limit b of a nominal n are those with
	// floor(n*p/100) == b: from ceil(100b/n) to ceil(100(b+1)/n)-1.
	lo, hi := int64(1), int64(maxAdoptedBorrowPercent)
	// When no single percentage fits (typically a nominal quota edited while
	// its borrowing limit stayed), the stored percentage if it still explains
	// some limits, else the GPUs' (or Neuron devices', or the first resource's).
	var ref *[2]int64
	refIsDevice, unlimited, storedFits := false, false, false
	for _, r := range all {
		if r.BorrowingLimit == nil {
			unlimited = true
			continue
		}
		n, b := scaled(r.Name, r.NominalQuota), scaled(r.Name, *r.BorrowingLimit)
		if n == 0 {
			continue
		}
		rlo, rhi := ceilDiv(100*b, n), ceilDiv(100*(b+1), n)-1
		isDevice := r.Name == ResourceGPU || r.Name == ResourceNeuron
		if ref == nil || isDevice && !refIsDevice {
			ref, refIsDevice = &[2]int64{rlo, rhi}, isDevice
		}
		storedFits = storedFits || rlo <= storedPercent && storedPercent <= rhi
		lo, hi = max(lo, rlo), min(hi, rhi)
	}
	if unlimited {
		if ref == nil {
			notes = append(notes, fmt.Sprintf("Unlimited borrowing is shown as the highest borrow limit, %d %%, and kept unlimited until the borrow percentage is changed.", maxAdoptedBorrowPercent))
			return LendAndBorrow, maxAdoptedBorrowPercent, notes
		}
		notes = append(notes, "Unlimited borrowing on some flavors or resources is kept unlimited until the borrow percentage is changed; the percentage is read from the limits that are set.")
	}
	switch {
	case ref == nil:
		return LendAndBorrow, storedPercent, notes
	case lo <= hi && lo <= storedPercent && storedPercent <= hi:
		return LendAndBorrow, storedPercent, notes
	case lo <= hi:
		return LendAndBorrow, lo, notes
	case storedFits && storedPercent >= 1:
		notes = append(notes, fmt.Sprintf(notOnePercentage+": the allocation keeps its %d %% for all.", storedPercent))
		return LendAndBorrow, storedPercent, notes
	}
	p := min(max(ref[0], 1), maxAdoptedBorrowPercent)
	notes = append(notes, fmt.Sprintf("Borrowing limits do not all follow one percentage: adopted %d %% (from the GPUs, or the first resource) for all.", p))
	return LendAndBorrow, p, notes
}

// scaled is a quantity in the unit percentOf works in.
func scaled(r corev1.ResourceName, q resource.Quantity) int64 {
	if r == corev1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

func ceilDiv(a, b int64) int64 {
	if a <= 0 {
		return 0
	}
	return (a + b - 1) / b
}

// PolicyDriftOf compares the priority classes a policy builds with the live
// WorkloadPriorityClasses: missing classes, hand-edited values and
// descriptions, and managed classes the policy no longer lists (a re-apply
// removes them).
func PolicyDriftOf(s Settings, p Policy, live []*kueuev1beta2.WorkloadPriorityClass) ([]Drift, error) {
	byName := map[string]*kueuev1beta2.WorkloadPriorityClass{}
	for _, c := range live {
		byName[c.Name] = c
	}
	var out []Drift
	wanted := map[string]bool{}
	for _, ac := range BuildPriorityClasses(s, p) {
		var want kueuev1beta2.WorkloadPriorityClass
		if err := viaJSON(ac, &want); err != nil {
			return nil, err
		}
		wanted[want.Name] = true
		object := "WorkloadPriorityClass " + want.Name
		got, ok := byName[want.Name]
		if !ok {
			out = append(out, Drift{Object: object, Field: "the priority class", Want: "present"})
			continue
		}
		if got.Value != want.Value {
			out = append(out, Drift{Object: object, Field: "value", Want: fmt.Sprint(want.Value), Got: fmt.Sprint(got.Value)})
		}
		if got.Description != want.Description {
			out = append(out, Drift{Object: object, Field: "description", Want: want.Description, Got: orNone(got.Description)})
		}
	}
	for _, c := range live {
		if !wanted[c.Name] && s.OwnsPriorityClass(c) {
			out = append(out, Drift{Object: "WorkloadPriorityClass " + c.Name, Field: "the priority class", Got: fmt.Sprintf("present (value %d)", c.Value)})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Object < out[j].Object })
	return out, nil
}
