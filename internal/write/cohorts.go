package write

import (
	"context"
	"strings"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/form"
	"github.com/openquota/console/internal/kueue"
)

// SaveCohort creates or changes a cohort under the console's own.
func (s Service) SaveCohort(ctx context.Context, who kueue.Identity, f form.CohortForm) Outcome {
	if o := s.mayTry(ctx, who, kueue.ChangeCohorts, "cohort "+s.Settings.Cohort+"-"+f.Suffix); o.Kind != Saved {
		return o
	}
	shapes, _ := s.Cache.Fleet()
	c, errs := f.Validate(s.Settings, shapes, s.Cache.CohortParents(), s.Cache.ConsoleCohorts(s.Settings))
	if errs.Any() {
		return rejectedFields(errs)
	}
	if co, err := s.Cache.Cohorts.Get(c.Name); err == nil && !domain.ManagedByConsole(co) {
		errs.Add("suffix", "The cohort "+quote(c.Name)+" exists and is not managed by this console; choose another name.")
		return rejectedFields(errs)
	}
	obj, err := domain.BuildCohortObject(c, shapes)
	if err != nil {
		return rejected(err.Error())
	}
	return s.run(ctx, who, plan{
		what: "cohort " + c.Name,
		writes: func(context.Context, kueue.Applier) ([]kueue.Permission, error) {
			return append(kueue.CohortWrites(c.Name, "patch"), kueue.CohortWrites(c.Name, "create")...), nil
		},
		dryRun: func(ctx context.Context, a kueue.Applier) error { return a.ApplyCohort(ctx, obj, true) },
		apply:  func(ctx context.Context, a kueue.Applier) error { return a.ApplyCohort(ctx, obj, false) },
		shows: func() bool {
			co := s.Cache.ConsoleCohort(s.Settings, c.Name)
			return co != nil && string(co.Spec.ParentName) == c.Parent
		},
		done: "Cohort " + c.Name + " saved.",
	})
}

// DeleteCohort deletes an empty cohort the console created.
func (s Service) DeleteCohort(ctx context.Context, who kueue.Identity, name string) Outcome {
	if o := s.mayTry(ctx, who, kueue.DeleteCohorts, "cohort "+name); o.Kind != Saved {
		return o
	}
	if s.Cache.ConsoleCohort(s.Settings, name) == nil {
		return notFound("There is no cohort %q created by this console.", name)
	}
	var under []string
	for child, parent := range s.Cache.CohortParents() {
		if parent == name {
			under = append(under, "cohort "+child)
		}
	}
	queues, _ := s.Cache.ClusterQueues.List(labels.Everything())
	for _, cq := range queues {
		if string(cq.Spec.CohortName) == name {
			under = append(under, "ClusterQueue "+cq.Name)
		}
	}
	if len(under) > 0 {
		return rejected("Cohort " + name + " is not empty (" + strings.Join(under, ", ") + "): move those elsewhere first.")
	}
	return s.run(ctx, who, plan{
		what: "cohort " + name,
		writes: func(context.Context, kueue.Applier) ([]kueue.Permission, error) {
			return kueue.CohortWrites(name, "delete"), nil
		},
		dryRun: func(ctx context.Context, a kueue.Applier) error { return a.DeleteCohort(ctx, name, true) },
		apply:  func(ctx context.Context, a kueue.Applier) error { return a.DeleteCohort(ctx, name, false) },
		shows:  func() bool { return s.Cache.ConsoleCohort(s.Settings, name) == nil },
		done:   "Cohort " + name + " deleted.",
	})
}

// CohortForEdit is a console cohort's allocation, for its edit form.
func (s Service) CohortForEdit(name string) (domain.CohortAllocation, Outcome) {
	co := s.Cache.ConsoleCohort(s.Settings, name)
	if co == nil {
		return domain.CohortAllocation{}, notFound("There is no cohort %q created by this console.", name)
	}
	shapes, _ := s.Cache.Fleet()
	return domain.ReadCohort(co, shapes), Outcome{}
}
