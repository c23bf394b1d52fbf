package kueue

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueac "sigs.k8s.io/kueue/client-go/applyconfiguration/kueue/v1beta2"

	"github.com/openquota/console/internal/domain"
)

// ApplyCohort writes a cohort the console manages (server-side apply, as the
// console's field manager); with dryRun Kueue's webhooks and the admission
// policy judge it and nothing is written.
func (a Applier) ApplyCohort(ctx context.Context, co *kueueac.CohortApplyConfiguration, dryRun bool) error {
	opts := applyOptions()
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	if _, err := a.Kueue.KueueV1beta2().Cohorts().Apply(ctx, co, opts); err != nil {
		return fmt.Errorf("cohort %s: %w", *co.Name, err)
	}
	return nil
}

// DeleteCohort deletes a cohort the console manages.
func (a Applier) DeleteCohort(ctx context.Context, name string, dryRun bool) error {
	opts := metav1.DeleteOptions{}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	return ignoreMissing(a.Kueue.KueueV1beta2().Cohorts().Delete(ctx, name, opts))
}

// CohortWrites are the requests of a cohort's write.
func CohortWrites(name, verb string) []Permission {
	return []Permission{{Verb: verb, Group: kueuev1beta2.SchemeGroupVersion.Group, Resource: "cohorts", Name: name, What: "change cohorts"}}
}

// CohortParents maps every cohort the cache has to its parent.
func (c *Cache) CohortParents() map[string]string {
	all, _ := c.Cohorts.List(labels.Everything())
	out := make(map[string]string, len(all))
	for _, co := range all {
		out[co.Name] = string(co.Spec.ParentName)
	}
	return out
}

// ConsoleCohort is a cohort the console created under its own (not its
// own cohort, which the policy writes); nil when there is none.
func (c *Cache) ConsoleCohort(s domain.Settings, name string) *kueuev1beta2.Cohort {
	co, err := c.Cohorts.Get(name)
	if err != nil || name == s.Cohort || !s.ConsoleCohort(name) || !domain.ManagedByConsole(co) {
		return nil
	}
	return co
}
