// This file is the console's one reading of a Kueue Workload: who the task
// is, where it stands, what it asks for and holds per flavor, when things
// happened to it and why. The live read model (FactsOf) keeps part of it
// and the task history records it, so the pages and the reports count
// alike.

package domain

import (
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// FlavorAmount is what an admission holds on one flavor (instance type).
type FlavorAmount struct {
	Flavor string `json:"flavor"`
	Amount
	// Partitions are the MIG partitions held on the flavor, by profile
	// ("mig-1g.10gb"); nil for none. Never changed once read.
	Partitions map[string]int64 `json:"partitions,omitempty"`
}

// PodSetAmount is what one pod set asks for, all its pods together.
type PodSetAmount struct {
	Name  string `json:"name"`
	Count int32  `json:"count"`
	Amount
}

// Step is a Kueue condition that is True: since when, and why.
type Step struct {
	At              time.Time
	Reason, Message string
}

// PreemptedStep is a True Preempted condition: the reason in the Tasks
// page's words, and who caused it.
type PreemptedStep struct {
	Step
	Words     string
	Preemptor Preemptor
}

// Preemptor is the Workload that caused a preemption, as Kueue names it in
// the Preempted condition's message. Fields Kueue reported as UNKNOWN are
// empty.
type Preemptor struct {
	UID, JobUID string
	// ClusterQueue is the last element of Path, Kueue's "preemptor path"
	// (cohorts from the root, then the ClusterQueue).
	ClusterQueue, Path string
}

// WorkloadReading is everything the console reads from one Workload.
type WorkloadReading struct {
	UID, Namespace, Name string
	// OwnerKind, OwnerName and OwnerUID name the controlling owner (usually
	// a batch/v1 Job), else the first owner.
	OwnerKind, OwnerName, OwnerUID string
	// Labels are the Workload's labels in words (LabelsWord); "" for none.
	Labels string
	// Team is the namespace without the settings' prefix; empty outside
	// team namespaces.
	Team string
	// ClassRef is spec.priorityClassRef.name; empty when the Workload names
	// none (the live pages then show the lowest class).
	ClassRef string
	// PodClass: ClassRef names a Kubernetes PriorityClass (a Job's
	// priorityClassName), not one of Kueue's WorkloadPriorityClasses.
	PodClass   bool
	Priority   int32 // spec.priority; 0 (Kueue's default) when unset
	LocalQueue string
	// ClusterQueue is status.admission.clusterQueue while quota is reserved
	// (a stale admission never counts); empty otherwise.
	ClusterQueue string
	State        TaskState
	// Deactivated: spec.active is false. Queued: Kueue holds it in its
	// ClusterQueue's pending queue (pending or preempted, active, no quota
	// reserved). Reserved: QuotaReserved is True.
	Deactivated, Queued, Reserved bool
	// Untried: queued, and Kueue has said nothing about it yet (no
	// QuotaReserved condition, or "pending evaluation"): its scheduler has
	// not tried it, or skipped it for one just like it that did not fit
	// (Kueue's scheduling equivalence). NoFit: queued, and Kueue's scheduler
	// found no room for it (QuotaReserved False for quota or flavors); Kueue
	// then skips the queued Workloads just like it.
	Untried, NoFit bool
	// noFitWords say why Kueue found no room for it (NoFit), in words;
	// cannotFit: its queue, as it is defined, can never hold it (cannotFit).
	noFitWords string
	cannotFit  bool

	// PodSets and Requests are what the task asks for, as Kueue counts a
	// pending Workload (pkg/workload's TotalRequests): per pod, containers,
	// sidecars and init containers as the scheduler counts them, plus the
	// pod overhead, a limit standing in for a missing request; times the
	// pods not yet reclaimable.
	PodSets  []PodSetAmount
	Requests Amount
	// Usage is what the admission holds per flavor while quota is reserved,
	// as Kueue counts an admitted Workload: each pod set's recorded
	// resourceUsage (else its requests at the admitted count), less its
	// reclaimable pods, each resource on the flavor assigned to it (MIG
	// partitions too; one Kueue assigns no flavor is held on none). Sorted
	// by flavor; nil without a reservation.
	Usage []FlavorAmount
	// GPUs is the task's nvidia.com/gpu: its Usage while quota is reserved,
	// else its Requests. MIG slices (nvidia.com/mig-…) are not GPUs.
	GPUs int64
	// Flavors are the flavors assigned to nvidia.com/gpu, or every assigned
	// one for a task without GPUs. Sorted; empty without a reservation.
	Flavors []string
	// Partitions are the MIG partitions its pods ask for, in words
	// ("2 × mig-1g.10gb"); "" without any.
	Partitions string
	// VariantOf and VariantParentUID name the Workload whose
	// concurrent-admission Variant this is (VariantParent), and
	// VariantFlavor the one flavor it may take; "" for any other Workload.
	VariantOf, VariantParentUID, VariantFlavor string
	// Slice names the first Workload of an elastic job's chain of slices
	// (kueue.x-k8s.io/workload-slice-name: this Workload's own name for the
	// first); "" outside one. Replaced: a later slice replaced this one
	// (Finished, reason WorkloadSliceReplaced): the job goes on there.
	Slice    string
	Replaced bool

	Created time.Time
	// WaitStart is when the task last started waiting: the last transition
	// of the Requeued condition, else the creation time (Kueue's
	// workload.QueuedWaitTime).
	WaitStart time.Time
	// QueueOrder is the timestamp Kueue orders its queue by (see
	// Task.QueueOrder).
	QueueOrder time.Time
	// QuotaReservedAt and AdmittedAt are when the QuotaReserved and
	// Admitted conditions became True (zero while they are not);
	// ReleasedAt is when Admitted last became False, while it is.
	QuotaReservedAt, AdmittedAt, ReleasedAt time.Time
	FinishedAt                              time.Time // Finished condition transition, when it is True
	// PastExecution is status.accumulatedPastExecutionTimeSeconds: time run
	// before earlier evictions.
	PastExecution time.Duration

	// The True conditions the history follows; nil when not True.
	Eviction, Requeue, Finish *Step
	Preemption                *PreemptedStep

	// Reason says in plain words why the task is where it is; while it
	// waits to be requeued, the time left goes at byte countdownAt (until
	// RequeueAt). KueueMessage is the raw Kueue message(s) behind it.
	Reason, KueueMessage string
	RequeueAt            time.Time
	countdownAt          int
}

// noFitReasons are the QuotaReserved=False reasons of Kueue's scheduler
// finding no room ("Pending" is its fallback for every reason).
var noFitReasons = map[string]bool{
	"Pending": true, kueuev1beta2.WorkloadQuotaReservedReasonWaitingForQuota: true,
	kueuev1beta2.WorkloadQuotaReservedReasonNoMatchingFlavor: true, kueuev1beta2.WorkloadQuotaReservedReasonExceedsMaxQuota: true,
	kueuev1beta2.WorkloadQuotaReservedReasonTopologyPlacementFailed: true,
}

// didNotFit reports a QuotaReserved condition saying that Kueue's scheduler
// found no flavor with room for the Workload, and waits for nothing else:
// after that (NoFit), Kueue skips the queued Workloads of the same
// scheduling shape without trying them. Not: the message of an eviction
// (Kueue has not tried it since), a head waiting for the tasks it preempts,
// a Workload skipped for another one in the same cycle, an inactive queue.
func didNotFit(c, evicted *metav1.Condition) bool {
	return c.Status == metav1.ConditionFalse && noFitReasons[c.Reason] &&
		(evicted == nil || c.Message != evicted.Message) &&
		strings.Contains(c.Message, "couldn't assign flavors") && !preemptingRE.MatchString(c.Message)
}

// Kueue's marks on the Workload of a group of pods (a pod group, or the
// pods of a StatefulSet or LeaderWorkerSet): the Workload is named after
// the group, and its owners are the pods (and the object that made them).
const (
	groupWorkloadAnnotation  = "kueue.x-k8s.io/is-group-workload"
	groupOwnerKindAnnotation = "kueue.x-k8s.io/job-owner-gvk"
	groupOwnerNameAnnotation = "kueue.x-k8s.io/job-owner-name"
)

// Kueue's concurrent admission (ClusterQueue spec.concurrentAdmissionPolicy,
// feature gate ConcurrentAdmission) tries a job on each flavor at once: the
// job's Workload becomes a Parent and Kueue makes one Variant Workload per
// flavor, owned by the Parent. Variants hold the quota and wait in the
// queue; the Parent takes the admission of the one admitted. The Parent is
// the task; Variants are Kueue's attempts at it.
const variantFlavorAnnotation = "kueue.x-k8s.io/workload-allowed-resource-flavors"

// Kueue's elastic jobs (annotation kueue.x-k8s.io/elastic-job, feature
// gate ElasticJobsViaWorkloadSlices, on by default): a job that grows gets
// a new Workload, a slice, whose admission replaces that of the slice
// before; the old slice then finishes, reason WorkloadSliceReplaced. The
// slices of a job are one task, which runs from its first slice's
// admission.

const sliceReplacesAnnotation = "kueue.x-k8s.io/workload-slice-replacement-for"

// VariantParent is the Workload whose concurrent-admission Variant a
// Workload with these owners is (its owner of kind Workload in Kueue's
// group); nil for any other Workload.
func VariantParent(owners []metav1.OwnerReference) *metav1.OwnerReference {
	for i, ref := range owners {
		if ref.Kind == "Workload" && strings.HasPrefix(ref.APIVersion, kueuev1beta2.SchemeGroupVersion.Group+"/") {
			return &owners[i]
		}
	}
	return nil
}

// PodGroupKind is the owner kind shown for a plain pod group, which has no
// owner of its own: its pods are its owners, and its Workload bears the
// group's name.
const PodGroupKind = "Pod group"

// ownerOf names what people know the task as: the controlling owner
// (usually a batch/v1 Job), else, for a group of pods, the object that made
// them or the group itself, else the first owner.
func ownerOf(wl *kueuev1beta2.Workload) (kind, name, uid string) {
	if ref := metav1.GetControllerOfNoCopy(wl); ref != nil {
		return ref.Kind, ref.Name, string(ref.UID)
	}
	if wl.Annotations[groupWorkloadAnnotation] == "true" {
		if name := wl.Annotations[groupOwnerNameAnnotation]; name != "" {
			// "apps/v1, Kind=StatefulSet"
			_, kind, _ := strings.Cut(wl.Annotations[groupOwnerKindAnnotation], "Kind=")
			for _, ref := range wl.OwnerReferences {
				if ref.Kind == kind && ref.Name == name {
					return kind, name, string(ref.UID)
				}
			}
			return kind, name, ""
		}
		return PodGroupKind, wl.Name, ""
	}
	if len(wl.OwnerReferences) > 0 {
		ref := wl.OwnerReferences[0]
		return ref.Kind, ref.Name, string(ref.UID)
	}
	return "", "", ""
}

// ReadWorkload reads one Workload with the naming rules of s.
func ReadWorkload(wl *kueuev1beta2.Workload, s Settings) *WorkloadReading {
	conds := wl.Status.Conditions
	r := &WorkloadReading{
		UID:         string(wl.UID),
		Namespace:   wl.Namespace,
		Name:        wl.Name,
		LocalQueue:  string(wl.Spec.QueueName),
		Created:     wl.CreationTimestamp.Time,
		WaitStart:   wl.CreationTimestamp.Time,
		QueueOrder:  wl.CreationTimestamp.Time,
		Deactivated: wl.Spec.Active != nil && !*wl.Spec.Active,
		countdownAt: -1,
	}
	r.OwnerKind, r.OwnerName, r.OwnerUID = ownerOf(wl)
	if parent := VariantParent(wl.OwnerReferences); parent != nil {
		r.VariantOf, r.VariantParentUID = parent.Name, string(parent.UID)
		r.VariantFlavor, _, _ = strings.Cut(wl.Annotations[variantFlavorAnnotation], ",")
	}
	r.Labels = LabelsWord(wl.Labels)
	r.Slice = wl.Annotations[kueuev1beta2.WorkloadSliceNameAnnotation]
	r.Team, _ = s.TeamOfNamespace(wl.Namespace)
	if ref := wl.Spec.PriorityClassRef; ref != nil {
		r.ClassRef = ref.Name
		r.PodClass = ref.Kind == kueuev1beta2.PodPriorityClassKind
	}
	if wl.Spec.Priority != nil {
		r.Priority = *wl.Spec.Priority
	}
	if p := wl.Status.AccumulatedPastExecutionTimeSeconds; p != nil && *p > 0 {
		r.PastExecution = time.Duration(*p) * time.Second
	}

	reclaimable := map[kueuev1beta2.PodSetReference]int32{}
	for _, rp := range wl.Status.ReclaimablePods {
		reclaimable[rp.Name] = rp.Count
	}
	r.PodSets, r.Requests = podSetRequests(wl, reclaimable)
	r.Partitions = partitionsWord(wl, reclaimable)

	reserved := trueCondition(conds, kueuev1beta2.WorkloadQuotaReserved)
	r.Reserved = reserved != nil
	if a := wl.Status.Admission; a != nil && r.Reserved {
		r.ClusterQueue = string(a.ClusterQueue)
		r.QuotaReservedAt = reserved.LastTransitionTime.Time
		r.Usage = admittedUsage(wl, a, reclaimable)
		r.Flavors = admittedFlavors(a)
		for _, u := range r.Usage {
			r.GPUs += u.GPUs
		}
	} else {
		r.GPUs = r.Requests.GPUs
	}

	if c := apimeta.FindStatusCondition(conds, kueuev1beta2.WorkloadRequeued); c != nil {
		r.WaitStart = c.LastTransitionTime.Time
	}
	r.Eviction = stepOf(trueCondition(conds, kueuev1beta2.WorkloadEvicted))
	if ev := r.Eviction; ev != nil && (ev.Reason == kueuev1beta2.WorkloadEvictedByPodsReadyTimeout ||
		ev.Reason == kueuev1beta2.WorkloadEvictedByAdmissionCheck) {
		r.QueueOrder = ev.At
	}
	if c := trueCondition(conds, kueuev1beta2.WorkloadAdmitted); c != nil {
		r.AdmittedAt = c.LastTransitionTime.Time
	} else if c := apimeta.FindStatusCondition(conds, kueuev1beta2.WorkloadAdmitted); c != nil {
		r.ReleasedAt = c.LastTransitionTime.Time
	}
	r.Requeue = stepOf(trueCondition(conds, kueuev1beta2.WorkloadRequeued))
	r.Finish = stepOf(trueCondition(conds, kueuev1beta2.WorkloadFinished))
	if r.Finish != nil {
		r.FinishedAt = r.Finish.At
		r.Replaced = r.Finish.Reason == kueuev1beta2.WorkloadSliceReplaced
	}
	if c := trueCondition(conds, kueuev1beta2.WorkloadPreempted); c != nil {
		r.Preemption = &PreemptedStep{Step: *stepOf(c), Words: preemptedReason(c, s), Preemptor: ParsePreemptor(c.Message)}
	}

	switch {
	case r.Finish != nil:
		r.State = TaskFinished
	case r.Deactivated:
		r.State = TaskPending
	case r.Preemption != nil:
		r.State = TaskPreempted
	case !r.AdmittedAt.IsZero():
		r.State = TaskAdmitted
	default:
		r.State = TaskPending
	}
	r.Queued = (r.State == TaskPending || r.State == TaskPreempted) && !r.Deactivated && !r.Reserved && r.LocalQueue != ""
	if r.Queued {
		evicted := trueCondition(conds, kueuev1beta2.WorkloadEvicted)
		requeuing := wl.Status.RequeueState != nil && wl.Status.RequeueState.RequeueAt != nil
		switch c := apimeta.FindStatusCondition(conds, kueuev1beta2.WorkloadQuotaReserved); {
		case c == nil || c.Reason == kueuev1beta2.WorkloadQuotaReservedReasonPendingEvaluation:
			r.Untried = r.State == TaskPending && evicted == nil && !requeuing
		default: // one waiting out a requeue backoff is not in Kueue's queue
			if r.NoFit = didNotFit(c, evicted) && !requeuing; r.NoFit {
				r.noFitWords, r.cannotFit = quotaReasonOf(wl, c.Reason, c.Message), cannotFit(c.Message) && !smallerMayFit(wl, c.Message)
			}
		}
	}

	t := Task{State: r.State, Deactivated: r.Deactivated, Flavors: r.Flavors, ClusterQueue: r.ClusterQueue}
	r.Reason, r.KueueMessage, r.countdownAt = taskReason(wl, s, t)
	if _, resize := wl.Annotations[sliceReplacesAnnotation]; resize && r.State == TaskPending && !r.Deactivated {
		const head = "Growing a running elastic job (a new slice replaces its current one once admitted): "
		r.Reason = head + r.Reason
		if r.countdownAt >= 0 {
			r.countdownAt += len(head)
		}
	}
	if rs := wl.Status.RequeueState; rs != nil && rs.RequeueAt != nil && r.countdownAt >= 0 {
		r.RequeueAt = rs.RequeueAt.Time
	} else {
		r.countdownAt = -1
	}
	return r
}

func stepOf(c *metav1.Condition) *Step {
	if c == nil {
		return nil
	}
	return &Step{At: c.LastTransitionTime.Time, Reason: c.Reason, Message: c.Message}
}

func trueCondition(conds []metav1.Condition, typ string) *metav1.Condition {
	c := apimeta.FindStatusCondition(conds, typ)
	if c == nil || c.Status != metav1.ConditionTrue {
		return nil
	}
	return c
}

// Kueue v0.19's Preempted condition message
// (pkg/scheduler/preemption.preemptionMessage) is "Preempted to accommodate
// a workload (UID: <uid>, JobUID: <uid>) due to <reason>; preemptor path:
// </cohort/…/clusterqueue>; preemptee path: <…>". Kueue writes UNKNOWN for
// what it does not know.
var (
	preemptorUIDs = regexp.MustCompile(`\(UID: ([^,]*), JobUID: ([^)]*)\)`)
	preemptorPath = regexp.MustCompile(`preemptor path: ([^;]*)`)
)

// ParsePreemptor reads the preemptor from a Preempted condition's message.
func ParsePreemptor(msg string) Preemptor {
	known := func(s string) string {
		if s = strings.TrimSpace(s); s == "UNKNOWN" {
			return ""
		}
		return s
	}
	var p Preemptor
	if m := preemptorUIDs.FindStringSubmatch(msg); m != nil {
		p.UID, p.JobUID = known(m[1]), known(m[2])
	}
	if m := preemptorPath.FindStringSubmatch(msg); m != nil {
		p.Path = known(m[1])
	}
	if p.Path != "" {
		p.ClusterQueue = p.Path[strings.LastIndex(p.Path, "/")+1:]
	}
	return p
}

// kueueAmount is an amount of the resources Amount follows in the units
// Kueue's resources.Requests keeps them: millicores of cpu, whole units of
// the rest (bytes of memory). Sums and scaling happen in these units, as
// Kueue's do; amount converts at the end. Other resources (EFA, MIG slices,
// …) count in none of the console's figures.
type kueueAmount struct{ gpus, neuron, cpuMilli, memoryBytes int64 }

func kueueAmountOf(l corev1.ResourceList) kueueAmount {
	var a kueueAmount
	for name, q := range l {
		a.add(name, q)
	}
	return a
}

func (a *kueueAmount) add(name corev1.ResourceName, q resource.Quantity) {
	switch name {
	case ResourceGPU:
		a.gpus += q.Value()
	case ResourceNeuron:
		a.neuron += q.Value()
	case corev1.ResourceCPU:
		a.cpuMilli += q.MilliValue()
	case corev1.ResourceMemory:
		a.memoryBytes += q.Value()
	}
}

func (a kueueAmount) plus(b kueueAmount) kueueAmount {
	return kueueAmount{a.gpus + b.gpus, a.neuron + b.neuron, a.cpuMilli + b.cpuMilli, a.memoryBytes + b.memoryBytes}
}

// times is a times n, each amount floored at zero first (Kueue's
// FloorToZero and Mul).
func (a kueueAmount) times(n int64) kueueAmount {
	return kueueAmount{max(a.gpus, 0) * n, max(a.neuron, 0) * n, max(a.cpuMilli, 0) * n, max(a.memoryBytes, 0) * n}
}

// scaled is a held by count pods, for after of them (Kueue's Divide and
// Mul, in integers).
func (a kueueAmount) scaled(count, after int64) kueueAmount {
	return kueueAmount{a.gpus / count * after, a.neuron / count * after, a.cpuMilli / count * after, a.memoryBytes / count * after}
}

// followedResources are the resources kueueAmount keeps.
var followedResources = []corev1.ResourceName{ResourceGPU, ResourceNeuron, corev1.ResourceCPU, corev1.ResourceMemory}

// only is a's amount of r alone.
func (a kueueAmount) only(r corev1.ResourceName) kueueAmount {
	switch r {
	case ResourceGPU:
		return kueueAmount{gpus: a.gpus}
	case ResourceNeuron:
		return kueueAmount{neuron: a.neuron}
	case corev1.ResourceCPU:
		return kueueAmount{cpuMilli: a.cpuMilli}
	case corev1.ResourceMemory:
		return kueueAmount{memoryBytes: a.memoryBytes}
	}
	return kueueAmount{}
}

func (a kueueAmount) amount() Amount {
	return Amount{GPUs: a.gpus, Neuron: a.neuron, CPUMilli: a.cpuMilli, MemoryMiB: a.memoryBytes >> 20}
}

// podSetRequests are what each pod set asks for, and all together, as Kueue
// counts a pending Workload (totalRequestsFromPodSets): one pod's requests
// (resourcehelper.PodRequests, overhead included; limits for missing
// requests, as Kueue's webhook sets them), floored at zero, times the pods
// not reclaimable.
func podSetRequests(wl *kueuev1beta2.Workload, reclaimable map[kueuev1beta2.PodSetReference]int32) ([]PodSetAmount, Amount) {
	sets := make([]PodSetAmount, 0, len(wl.Spec.PodSets))
	var total kueueAmount
	for i := range wl.Spec.PodSets {
		ps := &wl.Spec.PodSets[i]
		count := ps.Count - min(reclaimable[ps.Name], ps.Count)
		set := onePod(&ps.Template.Spec).times(int64(count))
		total = total.plus(set)
		sets = append(sets, PodSetAmount{Name: string(ps.Name), Count: count, Amount: set.amount()})
	}
	return sets, total.amount()
}

// onePod is what one pod of spec asks for, as the scheduler counts it.
func onePod(spec *corev1.PodSpec) kueueAmount { return kueueAmountOf(onePodRequests(spec)) }

// onePodRequests are one pod's requests of every resource, as the
// scheduler counts them.
func onePodRequests(spec *corev1.PodSpec) corev1.ResourceList {
	pod := &corev1.Pod{Spec: *spec}
	pod.Spec.Containers = limitsAsRequests(spec.Containers)
	pod.Spec.InitContainers = limitsAsRequests(spec.InitContainers)
	if spec.Resources != nil {
		pod.Spec.Resources = &corev1.ResourceRequirements{Requests: withLimits(spec.Resources.Requests, spec.Resources.Limits)}
	}
	return resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
}

// limitsAsRequests is cs with a limit standing in for each missing request
// (cs itself when none is missing).
func limitsAsRequests(cs []corev1.Container) []corev1.Container {
	out := cs
	for i := range cs {
		requests := withLimits(cs[i].Resources.Requests, cs[i].Resources.Limits)
		if len(requests) == len(cs[i].Resources.Requests) {
			continue
		}
		if &out[0] == &cs[0] {
			out = slices.Clone(cs)
		}
		out[i].Resources.Requests = requests
	}
	return out
}

// withLimits is requests with a limit standing in for each missing one
// (Kueue's UseLimitsAsMissingRequestsInPod).
func withLimits(requests, limits corev1.ResourceList) corev1.ResourceList {
	var out corev1.ResourceList
	for name, limit := range limits {
		if _, ok := requests[name]; ok {
			continue
		}
		if out == nil {
			out = make(corev1.ResourceList, len(requests)+len(limits))
			for n, q := range requests {
				out[n] = q
			}
		}
		out[name] = limit
	}
	if out == nil {
		return requests
	}
	return out
}

// admittedUsage is what an admission holds per flavor, as Kueue counts an
// admitted Workload (totalRequestsFromAdmission, FlavorResourceUsage).
func admittedUsage(wl *kueuev1beta2.Workload, a *kueuev1beta2.Admission, reclaimable map[kueuev1beta2.PodSetReference]int32) []FlavorAmount {
	type flavorHeld struct {
		flavor     string
		held       kueueAmount
		partitions map[string]int64
	}
	var byFlavor []flavorHeld
	on := func(flavor kueuev1beta2.ResourceFlavorReference) *flavorHeld {
		i := slices.IndexFunc(byFlavor, func(f flavorHeld) bool { return f.flavor == string(flavor) })
		if i < 0 {
			byFlavor = append(byFlavor, flavorHeld{flavor: string(flavor)})
			i = len(byFlavor) - 1
		}
		return &byFlavor[i]
	}
	for _, psa := range a.PodSetAssignments {
		held, partitions := podSetHeld(wl, &psa, reclaimable)
		for _, r := range followedResources {
			flavor, ok := psa.Flavors[r]
			part := held.only(r)
			if !ok || part == (kueueAmount{}) {
				continue
			}
			f := on(flavor)
			f.held = f.held.plus(part)
		}
		for p, n := range partitions {
			flavor, ok := psa.Flavors[PartitionResource(p)]
			if !ok || n <= 0 {
				continue
			}
			f := on(flavor)
			if f.partitions == nil {
				f.partitions = map[string]int64{}
			}
			f.partitions[p] += n
		}
	}
	var out []FlavorAmount
	for _, f := range byFlavor {
		if a := f.held.amount(); a != (Amount{}) || f.partitions != nil {
			out = append(out, FlavorAmount{Flavor: f.flavor, Amount: a, Partitions: f.partitions})
		}
	}
	slices.SortFunc(out, func(a, b FlavorAmount) int { return strings.Compare(a.Flavor, b.Flavor) })
	return out
}

// podSetHeld is what one pod set's assignment holds, as Kueue counts it:
// its recorded resourceUsage, else its requests at the admitted count, less
// its pods done for good; and its MIG partitions, by profile, alike.
func podSetHeld(wl *kueuev1beta2.Workload, psa *kueuev1beta2.PodSetAssignment, reclaimable map[kueuev1beta2.PodSetReference]int32) (kueueAmount, map[string]int64) {
	ps := findPodSet(wl, psa.Name)
	count := int32(0)
	if ps != nil {
		count = ps.Count
	}
	if psa.Count != nil {
		count = *psa.Count
	}
	var held kueueAmount
	var partitions map[string]int64
	switch {
	case psa.ResourceUsage != nil:
		held = kueueAmountOf(psa.ResourceUsage)
		partitions = partitionsIn(psa.ResourceUsage, 1)
	case ps != nil: // no recorded usage: the requests at the admitted count
		one := onePodRequests(&ps.Template.Spec)
		held = kueueAmountOf(one).times(int64(count))
		partitions = partitionsIn(one, int64(count))
	}
	// Pods that finished for good give their quota back.
	if ps != nil {
		if after := ps.Count - min(reclaimable[ps.Name], ps.Count); after < count {
			held = held.scaled(int64(count), int64(after))
			for p, n := range partitions {
				partitions[p] = n / int64(count) * int64(after)
			}
		}
	}
	return held, partitions
}

func findPodSet(wl *kueuev1beta2.Workload, name kueuev1beta2.PodSetReference) *kueuev1beta2.PodSet {
	for i := range wl.Spec.PodSets {
		if wl.Spec.PodSets[i].Name == name {
			return &wl.Spec.PodSets[i]
		}
	}
	return nil
}

// admittedFlavors are the flavors assigned to GPUs, or all assigned flavors
// when the task uses no GPU.
func admittedFlavors(a *kueuev1beta2.Admission) []string {
	var gpu, all []string
	for _, psa := range a.PodSetAssignments {
		for r, f := range psa.Flavors {
			all = append(all, string(f))
			if r == ResourceGPU {
				gpu = append(gpu, string(f))
			}
		}
	}
	if len(gpu) == 0 {
		gpu = all
	}
	slices.Sort(gpu)
	return slices.Compact(gpu)
}

// Units is a quantity of r in the units Amount keeps: millicores of cpu,
// MiB of memory, whole devices of the rest.
func Units(r corev1.ResourceName, q resource.Quantity) int64 { return units(r, q) }

// partitionsWord says which MIG partitions a Workload's pods ask for, all
// pods together ("2 × mig-1g.10gb, 1 × mig-3g.40gb"); "" without any. A
// container's limit stands in for a missing request, as for GPUs.
func partitionsWord(wl *kueuev1beta2.Workload, reclaimable map[kueuev1beta2.PodSetReference]int32) string {
	var counts map[string]int64
	for i := range wl.Spec.PodSets {
		ps := &wl.Spec.PodSets[i]
		pods := int64(ps.Count - min(reclaimable[ps.Name], ps.Count))
		for _, c := range ps.Template.Spec.Containers {
			for r, q := range withLimits(c.Resources.Requests, c.Resources.Limits) {
				if p, ok := PartitionOf(r); ok && q.Value() > 0 {
					if counts == nil {
						counts = map[string]int64{}
					}
					counts[p] += q.Value() * pods
				}
			}
		}
	}
	var parts []string
	for _, p := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, strconv.FormatInt(counts[p], 10)+" × "+p)
	}
	return strings.Join(parts, ", ")
}

// LabelsWord writes labels as "key=value" pairs sorted by key, joined by
// "; " (a label value holds no ";"); "" for none.
func LabelsWord(labels map[string]string) string {
	pairs := make([]string, 0, len(labels))
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		pairs = append(pairs, k+"="+labels[k])
	}
	return strings.Join(pairs, "; ")
}
