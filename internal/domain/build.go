// This file builds the Kueue objects that enforce an allocation.

package domain

import (
	"encoding/json"
	"fmt"
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueac "sigs.k8s.io/kueue/client-go/applyconfiguration/kueue/v1beta2"
)

// CoveredResources are the resources every team's ClusterQueue covers, in
// this order, each flavor listing all five (0 where unused).
var CoveredResources = []corev1.ResourceName{ResourceGPU, ResourceNeuron, corev1.ResourceCPU, corev1.ResourceMemory, ResourceEFA}

func (q Quota) quantity(r corev1.ResourceName) resource.Quantity {
	switch r {
	case ResourceGPU:
		return *resource.NewQuantity(q.GPUs, resource.DecimalSI)
	case ResourceNeuron:
		return *resource.NewQuantity(q.Neuron, resource.DecimalSI)
	case ResourceEFA:
		return *resource.NewQuantity(q.EFA, resource.DecimalSI)
	case corev1.ResourceCPU:
		return *resource.NewMilliQuantity(q.CPUMilli, resource.DecimalSI)
	case corev1.ResourceMemory:
		return *resource.NewQuantity(q.MemoryMiB<<20, resource.BinarySI)
	}
	if q.Partition != "" && r == PartitionResource(q.Partition) {
		return *resource.NewQuantity(q.Partitions, resource.DecimalSI)
	}
	return *resource.NewQuantity(0, resource.DecimalSI)
}

// coveredBy are the resources a team's quota rows cover: the console's own,
// then the MIG profiles any row gives, sorted. Kueue wants every flavor of a
// resource group to list each of them.
func coveredBy(rows []QuotaInput) []corev1.ResourceName {
	out := slices.Clone(CoveredResources)
	var partitions []corev1.ResourceName
	for _, row := range rows {
		if row.Partition != "" {
			if r := PartitionResource(row.Partition); !slices.Contains(partitions, r) {
				partitions = append(partitions, r)
			}
		}
	}
	slices.Sort(partitions)
	return append(out, partitions...)
}

// percentOf is p % of a quantity, rounded down; whole-device resources stay whole.
func percentOf(q resource.Quantity, percent int64, r corev1.ResourceName) resource.Quantity {
	switch r {
	case corev1.ResourceCPU:
		return *resource.NewMilliQuantity(scale(q.MilliValue(), percent), resource.DecimalSI)
	case corev1.ResourceMemory:
		return *resource.NewQuantity(scale(q.Value(), percent), resource.BinarySI)
	}
	return *resource.NewQuantity(scale(q.Value(), percent), resource.DecimalSI)
}

// scale is v × percent / 100 rounded down, without overflowing for large
// memory quotas in bytes (v × percent itself may not fit in an int64).
func scale(v, percent int64) int64 {
	return v/100*percent + v%100*percent/100
}

// TeamObjects are what the console writes for one team, in apply order: a
// LocalQueue is never applied before its ClusterQueue.
type TeamObjects struct {
	Namespace    *corev1ac.NamespaceApplyConfiguration
	Flavors      []*kueueac.ResourceFlavorApplyConfiguration
	ClusterQueue *kueueac.ClusterQueueApplyConfiguration
	LocalQueue   *kueueac.LocalQueueApplyConfiguration
	Members      *rbacv1ac.RoleBindingApplyConfiguration
	// Revisions is where the team's revisions are recorded, and Allocation
	// what they record: the allocation the objects enforce, members
	// included (nil: objects not built from an allocation).
	Revisions  types.NamespacedName
	Allocation *Team
}

// allocationAnnotation is what a team's ClusterQueue keeps of its
// allocation: all of it but the members. Whoever may read ClusterQueues
// (the console's viewers, Kueue's own roles) reads it, while who belongs to
// a team is for those who may read its RoleBindings; the members are kept
// in the team's revisions.
func allocationAnnotation(t Team) (map[string]string, error) {
	t.Members = nil
	typed, err := json.Marshal(t)
	if err != nil {
		return nil, err
	}
	return map[string]string{AllocationAnnotation: string(typed)}, nil
}

// ShapeLookup resolves an instance type to its shape (catalog merged with live nodes).
type ShapeLookup func(instanceType string) (InstanceShape, bool)

// BuildTeam turns a validated Team into the Kueue objects that enforce it.
func BuildTeam(s Settings, t Team, shapes ShapeLookup) (TeamObjects, error) {
	ns := s.Namespace(t.Name)
	labels := map[string]string{ManagedByLabel: ManagedByValue, TeamLabel: t.Name}
	annotations, err := allocationAnnotation(t)
	if err != nil {
		return TeamObjects{}, err
	}

	flavors, err := nominalFlavors(t.Quota, shapes, func(rq *kueueac.ResourceQuotaApplyConfiguration, row QuotaInput, nominal resource.Quantity, r corev1.ResourceName) {
		borrowing, lending := t.limits(row, nominal, r)
		if borrowing != nil {
			rq.WithBorrowingLimit(*borrowing)
		}
		if lending != nil {
			rq.WithLendingLimit(*lending)
		}
	})
	if err != nil {
		return TeamObjects{}, err
	}
	var rfs []*kueueac.ResourceFlavorApplyConfiguration
	for _, row := range t.Quota {
		rfs = append(rfs, FlavorFor(row.InstanceType))
	}

	preemption := kueueac.ClusterQueuePreemption().WithReclaimWithinCohort(kueuev1beta2.PreemptionPolicyAny)
	if t.Preemption == PreemptLowerPriority {
		preemption.WithWithinClusterQueue(kueuev1beta2.PreemptionPolicyLowerPriority).
			WithBorrowWithinCohort(kueueac.BorrowWithinCohort().WithPolicy(kueuev1beta2.BorrowWithinCohortPolicyLowerPriority))
	} else {
		preemption.WithWithinClusterQueue(kueuev1beta2.PreemptionPolicyNever).
			WithBorrowWithinCohort(kueueac.BorrowWithinCohort().WithPolicy(kueuev1beta2.BorrowWithinCohortPolicyNever))
	}
	stop := kueuev1beta2.None
	if !t.Enabled {
		// Hold: running tasks finish, nothing new is admitted.
		stop = kueuev1beta2.Hold
	}
	cq := kueueac.ClusterQueue(s.ClusterQueue(t.Name)).
		WithLabels(labels).
		WithAnnotations(annotations).
		WithSpec(kueueac.ClusterQueueSpec().
			WithCohortName(kueuev1beta2.CohortReference(s.CohortOf(t))).
			WithNamespaceSelector(metav1ac.LabelSelector().WithMatchLabels(map[string]string{"kubernetes.io/metadata.name": ns})).
			WithQueueingStrategy(kueuev1beta2.BestEffortFIFO).
			WithFlavorFungibility(kueueac.FlavorFungibility().
				WithWhenCanBorrow(kueuev1beta2.TryNextFlavor).
				WithWhenCanPreempt(kueuev1beta2.TryNextFlavor)).
			WithPreemption(preemption).
			WithFairSharing(kueueac.FairSharing().WithWeight(*resource.NewQuantity(t.FairShareWeight, resource.DecimalSI))).
			WithStopPolicy(stop).
			WithAdmissionScope(admissionScopeAC(t.RecentUseOrder)).
			WithResourceGroups(kueueac.ResourceGroup().
				WithCoveredResources(coveredBy(t.Quota)...).
				WithFlavors(flavors...)))

	nsAnnotations := map[string]string{}
	for _, text := range TeamTexts {
		if v := *text.Of(&t); v != "" {
			nsAnnotations[text.Annotation] = v
		}
	}
	return TeamObjects{
		Namespace: corev1ac.Namespace(ns).WithLabels(labels).WithLabels(map[string]string{PodSecurityEnforceLabel: s.TeamPodSecurity()}).
			WithAnnotations(nsAnnotations),
		Flavors:      rfs,
		ClusterQueue: cq,
		Members:      MemberBinding(s, t),
		Revisions:    types.NamespacedName{Namespace: s.State(), Name: TeamRevisionsName(s, t.Name)},
		Allocation:   &t,
		LocalQueue: kueueac.LocalQueue(s.LocalQueue(t.Name), ns).
			WithLabels(labels).
			WithSpec(kueueac.LocalQueueSpec().WithClusterQueue(kueuev1beta2.ClusterQueueReference(s.ClusterQueue(t.Name)))),
	}, nil
}

// nominalFlavors are the flavors of quota rows: each instance type's
// resources with their derived nominal quota; limits sets a resource's
// lending and borrowing limits.
func nominalFlavors(rows []QuotaInput, shapes ShapeLookup, limits func(*kueueac.ResourceQuotaApplyConfiguration, QuotaInput, resource.Quantity, corev1.ResourceName)) ([]*kueueac.FlavorQuotasApplyConfiguration, error) {
	flavors := make([]*kueueac.FlavorQuotasApplyConfiguration, 0, len(rows))
	for _, row := range rows {
		shape, ok := shapes(row.InstanceType)
		if !ok {
			return nil, fmt.Errorf("unknown instance type %q", row.InstanceType)
		}
		q := DeriveQuota(row, shape)
		fq := kueueac.FlavorQuotas().WithName(kueuev1beta2.ResourceFlavorReference(row.InstanceType))
		for _, r := range coveredBy(rows) {
			nominal := q.quantity(r)
			rq := kueueac.ResourceQuota().WithName(r).WithNominalQuota(nominal)
			limits(rq, row, nominal, r)
			fq.WithResources(rq)
		}
		flavors = append(flavors, fq)
	}
	return flavors, nil
}

// FlavorFor is the ResourceFlavor of an instance type: named after it and
// selecting its nodes by the instance-type label.
func FlavorFor(instanceType string) *kueueac.ResourceFlavorApplyConfiguration {
	return kueueac.ResourceFlavor(instanceType).
		WithLabels(map[string]string{ManagedByLabel: ManagedByValue}).
		WithSpec(kueueac.ResourceFlavorSpec().WithNodeLabels(map[string]string{InstanceTypeLabel: instanceType}))
}

// SystemNamePrefix starts the users and groups Kubernetes itself
// authenticates (system:unauthenticated, system:serviceaccounts,
// system:serviceaccount:<ns>:<name>, its components): never team members.
const SystemNamePrefix = "system:"

// OwnsFlavor reports whether the console manages a ResourceFlavor. One it does
// not (an install's own, shared with other tenants) is used as it is, never
// written.
func OwnsFlavor(rf *kueuev1beta2.ResourceFlavor) bool {
	return rf.Labels[ManagedByLabel] == ManagedByValue
}

// TeamMemberRole is the ClusterRole the console binds team members to in
// their namespace (submit and watch jobs, read their Workloads). The
// console's install provides it (deploy/rbac/member.yaml); the console never
// writes it.
const TeamMemberRole = "quota-console-team-member"

// MemberBinding binds the team's users and groups to TeamMemberRole in the
// team namespace. It is written even when empty, so removing the last member
// removes their access.
func MemberBinding(s Settings, t Team) *rbacv1ac.RoleBindingApplyConfiguration {
	rb := rbacv1ac.RoleBinding(TeamMemberRole, s.Namespace(t.Name)).
		WithLabels(map[string]string{ManagedByLabel: ManagedByValue, TeamLabel: t.Name}).
		WithRoleRef(rbacv1ac.RoleRef().WithAPIGroup(rbacv1.GroupName).WithKind("ClusterRole").WithName(TeamMemberRole))
	for _, m := range t.Members {
		kind := rbacv1.UserKind
		if m.Kind == "Group" {
			kind = rbacv1.GroupKind
		}
		rb.WithSubjects(rbacv1ac.Subject().WithKind(kind).WithAPIGroup(rbacv1.GroupName).WithName(m.Name))
	}
	return rb
}

// admissionScopeAC is AdmissionScopeOf as an apply configuration; nil
// leaves the field out.
func admissionScopeAC(recentUseOrder bool) *kueueac.AdmissionScopeApplyConfiguration {
	if scope := AdmissionScopeOf(recentUseOrder); scope != nil {
		return kueueac.AdmissionScope().WithAdmissionMode(scope.AdmissionMode)
	}
	return nil
}
