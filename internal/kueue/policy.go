package kueue

import (
	"strconv"

	kueueac "sigs.k8s.io/kueue/client-go/applyconfiguration/kueue/v1beta2"
)

// Prioritization is how queued tasks are ordered.
type Prioritization string

const (
	FirstComeFirstServe Prioritization = "FirstComeFirstServe"
	TaskRanking         Prioritization = "TaskRanking"
)

// IdleAllocation is how idle compute is shared between teams.
type IdleAllocation string

const (
	IdleFirstComeFirstServe IdleAllocation = "FirstComeFirstServe"
	IdleFairShare           IdleAllocation = "FairShare"
)

// PriorityClass is one task priority class of the cluster policy.
type PriorityClass struct {
	Name   string `json:"name"`
	Weight int32  `json:"weight"` // 0-100; higher runs first
}

// Policy is the cluster policy.
type Policy struct {
	Prioritization Prioritization  `json:"prioritization"`
	Classes        []PriorityClass `json:"classes"`
	IdleAllocation IdleAllocation  `json:"idleAllocation"`
}

// WeightAnnotation keeps a class's ranking weight while the policy is
// first-come-first-serve, so switching back to ranking restores it.
const WeightAnnotation = "quota-console.openquota.dev/weight"

// BuildPriorityClasses writes each class as a WorkloadPriorityClass. Under
// first-come-first-serve every class gets the same value 0, so Kueue orders
// tasks by arrival alone while jobs that name a class keep working.
func BuildPriorityClasses(p Policy) []*kueueac.WorkloadPriorityClassApplyConfiguration {
	out := make([]*kueueac.WorkloadPriorityClassApplyConfiguration, 0, len(p.Classes))
	for _, c := range p.Classes {
		value := c.Weight
		if p.Prioritization == FirstComeFirstServe {
			value = 0
		}
		out = append(out, kueueac.WorkloadPriorityClass(c.Name).
			WithLabels(map[string]string{ManagedByLabel: ManagedByValue}).
			WithAnnotations(map[string]string{WeightAnnotation: strconv.Itoa(int(c.Weight))}).
			WithValue(value).
			WithDescription("Task priority class managed by the quota console"))
	}
	return out
}
