package domain

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"time"

	configv1beta2 "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueac "sigs.k8s.io/kueue/client-go/applyconfiguration/kueue/v1beta2"
	"sigs.k8s.io/yaml"
)

// PriorityClass is one task priority class of the cluster policy.
type PriorityClass struct {
	Name   string `json:"name"`
	Weight int32  `json:"weight"` // 0-100; higher runs first
	// LongWaitMinutes: a task of the class waiting longer needs attention
	// (an insight); 0 takes the policy's.
	LongWaitMinutes int `json:"longWaitMinutes,omitempty"`
}

// Policy is the cluster policy.
type Policy struct {
	Prioritization Prioritization  `json:"prioritization"`
	Classes        []PriorityClass `json:"classes"`
	IdleAllocation IdleAllocation  `json:"idleAllocation"`
	// Alerts are when the insights speak up.
	Alerts PolicyAlerts `json:"alerts,omitzero"`
}

// PolicyAlerts are the insights' thresholds an admin sets; 0 takes
// DefaultInsightThresholds'.
type PolicyAlerts struct {
	// LongWaitMinutes: a task waiting longer needs attention, unless its
	// class has a threshold of its own.
	LongWaitMinutes int `json:"longWaitMinutes,omitempty"`
	// IdleUtilizationPercent: a team holding GPUs under this hardware
	// utilization holds them idle.
	IdleUtilizationPercent int `json:"idleUtilizationPercent,omitempty"`
	// BorrowingMinutes: a team borrowing longer while a lender waits needs
	// attention.
	BorrowingMinutes int `json:"borrowingMinutes,omitempty"`
}

// Copy is p with classes of its own: a policy kept for many readers is
// handed out as copies, which a reader may change.
func (p Policy) Copy() Policy {
	p.Classes = slices.Clone(p.Classes)
	return p
}

// InsightThresholds are the policy's thresholds, the defaults where it
// sets none.
func (p Policy) InsightThresholds() InsightThresholds {
	t := DefaultInsightThresholds
	if p.Alerts.LongWaitMinutes > 0 {
		t.LongWait = time.Duration(p.Alerts.LongWaitMinutes) * time.Minute
	}
	if p.Alerts.BorrowingMinutes > 0 {
		t.SustainedBorrowing = time.Duration(p.Alerts.BorrowingMinutes) * time.Minute
	}
	if p.Alerts.IdleUtilizationPercent > 0 {
		t.IdleUtilization = float64(p.Alerts.IdleUtilizationPercent)
	}
	for _, c := range p.Classes {
		if c.LongWaitMinutes > 0 {
			if t.ClassLongWait == nil {
				t.ClassLongWait = map[string]time.Duration{}
			}
			t.ClassLongWait[c.Name] = time.Duration(c.LongWaitMinutes) * time.Minute
		}
	}
	return t
}

// WeightAnnotation keeps a class's ranking weight while the policy is
// first-come-first-serve, so switching back to ranking restores it.
const WeightAnnotation = "quota-console.openquota.dev/weight"

// CohortLabel names the cohort whose policy wrote a priority class: a
// re-apply removes only its own policy's classes, not another console's.
const CohortLabel = "quota-console.openquota.dev/cohort"

// BuildPriorityClasses writes each class as a WorkloadPriorityClass. Under
// first-come-first-serve every class gets the same value 0, so Kueue orders
// tasks by arrival alone while jobs that name a class keep working.
func BuildPriorityClasses(s Settings, p Policy) []*kueueac.WorkloadPriorityClassApplyConfiguration {
	out := make([]*kueueac.WorkloadPriorityClassApplyConfiguration, 0, len(p.Classes))
	for _, c := range p.Classes {
		value := c.Weight
		if p.Prioritization == FirstComeFirstServe {
			value = 0
		}
		out = append(out, kueueac.WorkloadPriorityClass(c.Name).
			WithLabels(map[string]string{ManagedByLabel: ManagedByValue, CohortLabel: s.Cohort}).
			WithAnnotations(map[string]string{WeightAnnotation: strconv.Itoa(int(c.Weight))}).
			WithValue(value).
			WithDescription("Task priority class managed by the quota console"))
	}
	return out
}

// PolicyAnnotation keeps the cluster policy, as the admin stated it, on the
// cohort every team joins: a Kueue object, so there is no second database.
const PolicyAnnotation = "quota-console.openquota.dev/policy"

// BuildCohort is the shared cohort, carrying the policy.
func BuildCohort(s Settings, p Policy) (*kueueac.CohortApplyConfiguration, error) {
	data, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	return kueueac.Cohort(s.Cohort).
		WithLabels(map[string]string{ManagedByLabel: ManagedByValue}).
		WithAnnotations(map[string]string{PolicyAnnotation: string(data)}), nil
}

// DefaultPolicy is what a cluster without a stored policy behaves like.
var DefaultPolicy = Policy{Prioritization: FirstComeFirstServe, IdleAllocation: IdleFirstComeFirstServe}

// ReadPolicy returns the stored policy, or DefaultPolicy with the managed
// priority classes found when none is stored yet.
func ReadPolicy(cohort *kueuev1beta2.Cohort, classes []*kueuev1beta2.WorkloadPriorityClass) Policy {
	if cohort != nil {
		var p Policy
		if err := json.Unmarshal([]byte(cohort.Annotations[PolicyAnnotation]), &p); err == nil {
			return p
		}
	}
	p := DefaultPolicy
	for _, c := range classes {
		if c.Labels[ManagedByLabel] != ManagedByValue {
			continue
		}
		w, err := strconv.Atoi(c.Annotations[WeightAnnotation])
		if err != nil {
			w = int(c.Value)
		}
		p.Classes = append(p.Classes, PriorityClass{Name: c.Name, Weight: int32(w)})
	}
	sort.Slice(p.Classes, func(i, j int) bool { return p.Classes[i].Weight > p.Classes[j].Weight })
	return p
}

// KueueSettings is what of Kueue's own configuration (the controller's
// config file, as installs keep it in a ConfigMap) the policy page warns
// about.
type KueueSettings struct {
	// FairSharing: Kueue shares idle compute by weight (fairSharing).
	FairSharing bool
	// ManagesJobsWithoutQueue: Kueue holds Jobs that name no LocalQueue
	// (manageJobsWithoutQueueName) instead of letting them run.
	ManagesJobsWithoutQueue bool
}

// ReadKueueSettings reads KueueSettings from Kueue's configuration file.
func ReadKueueSettings(configYAML string) (KueueSettings, error) {
	cfg, err := ReadKueueConfig(configYAML)
	return KueueSettings{FairSharing: cfg.FairSharing != nil, ManagesJobsWithoutQueue: cfg.ManageJobsWithoutQueueName}, err
}

// UnqueuedJobsWarning explains, when Kueue lets Jobs that name no
// LocalQueue run, that quotas then hold only those who name one; "" when
// Kueue holds them.
func UnqueuedJobsWarning(s KueueSettings) string {
	if s.ManagesJobsWithoutQueue {
		return ""
	}
	return "Kueue lets Jobs that name no LocalQueue run outside every quota (its configuration has no manageJobsWithoutQueueName: true): " +
		"a team member who leaves out the label kueue.x-k8s.io/queue-name runs pods no team's quota counts or limits. " +
		"Set manageJobsWithoutQueueName: true in Kueue's configuration (its managedJobsNamespaceSelector keeps kube-system and kueue-system out by default) and restart Kueue."
}

// ReadKueueConfig reads Kueue's own configuration file.
func ReadKueueConfig(configYAML string) (configv1beta2.Configuration, error) {
	var cfg configv1beta2.Configuration
	if err := yaml.Unmarshal([]byte(configYAML), &cfg); err != nil {
		return configv1beta2.Configuration{}, fmt.Errorf("reading Kueue's configuration: %w", err)
	}
	return cfg, nil
}

// FairSharingMismatch explains when the policy and Kueue's controller
// disagree about idle compute; "" when they agree.
func FairSharingMismatch(p Policy, kueueFairSharing bool) string {
	switch {
	case p.IdleAllocation == IdleFairShare && !kueueFairSharing:
		return "The policy asks for fair sharing of idle compute, but Kueue's controller does not have fair sharing enabled: add a fairSharing section to Kueue's configuration and restart it. Until then idle compute goes first-come-first-serve."
	case p.IdleAllocation == IdleFirstComeFirstServe && kueueFairSharing:
		return "Kueue's controller has fair sharing enabled, so idle compute is shared by team weights whatever this policy says. Remove fairSharing from Kueue's configuration for first-come-first-serve."
	}
	return ""
}

// OwnsPriorityClass reports whether a WorkloadPriorityClass was written by
// this console's policy: managed by the console, for this cohort (or
// written before classes named their cohort).
func (s Settings) OwnsPriorityClass(wpc *kueuev1beta2.WorkloadPriorityClass) bool {
	if wpc.Labels[ManagedByLabel] != ManagedByValue {
		return false
	}
	cohort, ok := wpc.Labels[CohortLabel]
	return !ok || cohort == s.Cohort
}
