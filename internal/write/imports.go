package write

import (
	"context"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/kueue"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// ImportPlan is what importing the ClusterQueue named queue would do,
// from the cache (nothing is asked of the apiserver).
func (s Service) ImportPlan(queue string) (domain.QueueImport, Outcome) {
	cq, err := s.Cache.ClusterQueues.Get(queue)
	if err != nil {
		return domain.QueueImport{}, notFound("There is no ClusterQueue %q.", queue)
	}
	served := s.Cache.ServedNamespaces(cq)
	managed, _ := s.Cache.ClusterQueues.List(labels.SelectorFromSet(labels.Set{domain.ManagedByLabel: domain.ManagedByValue}))
	taken := func(team string) bool {
		return slices.ContainsFunc(managed, func(m *kueuev1beta2.ClusterQueue) bool { return s.Settings.TeamOfClusterQueue(m) == team })
	}
	shapes, _ := s.Cache.Fleet()
	return domain.PlanImport(s.Settings, cq, served, taken, shapes), Outcome{}
}

// QueuePreviewed is a ClusterQueue to import and the fingerprint of the
// preview the admin saw of it.
type QueuePreviewed struct{ Queue, Fingerprint string }

// ImportQueues imports ClusterQueues, each as its preview showed it: one
// that changed since is not imported. Each import is whole or nothing; the
// outcome says which were imported and, at the first that was not, why.
func (s Service) ImportQueues(ctx context.Context, who kueue.Identity, queues []QueuePreviewed) Outcome {
	if o := s.mayTry(ctx, who, kueue.ChangeClusterQueues, "the ClusterQueues to import"); o.Kind != Saved {
		return o
	}
	if len(queues) == 0 {
		return rejected("Choose at least one ClusterQueue to import.")
	}
	var done []string
	for _, q := range queues {
		plan, o := s.ImportPlan(q.Queue)
		if o.Kind == Saved {
			o = s.run(ctx, who, importPlan(s, plan, q.Fingerprint))
		}
		if o.Kind != Saved {
			if len(done) > 0 {
				o.Message = "Imported " + strings.Join(done, ", ") + "; then stopped: " + o.Message
			}
			return o
		}
		done = append(done, q.Queue+" (team "+plan.Team.Name+")")
	}
	return saved("Imported " + strings.Join(done, ", ") + ". Nothing else changed: their quota, LocalQueues, namespaces and tasks are as they were.")
}

func importPlan(s Service, p domain.QueueImport, fingerprint string) plan {
	return plan{
		what: "ClusterQueue " + p.ClusterQueue,
		validate: func() Outcome {
			if p.Problem != "" {
				return rejected(p.Problem)
			}
			return Outcome{}
		},
		writes: func(context.Context, kueue.Applier) ([]kueue.Permission, error) {
			return kueue.LabelWrites(p.ClusterQueue), nil
		},
		conflict: func(context.Context, kueue.Applier) Outcome {
			cq, err := s.Cache.ClusterQueues.Get(p.ClusterQueue)
			if err != nil || domain.QueueFingerprint(cq) != fingerprint {
				return Outcome{Kind: Conflict, Message: "ClusterQueue " + p.ClusterQueue +
					" changed since the preview was shown, so nothing was imported: review the new preview and import again."}
			}
			return Outcome{}
		},
		dryRun: func(ctx context.Context, a kueue.Applier) error { return a.ImportQueue(ctx, s.Settings, p, true) },
		apply:  func(ctx context.Context, a kueue.Applier) error { return a.ImportQueue(ctx, s.Settings, p, false) },
		shows: func() bool {
			cq, err := s.Cache.ClusterQueues.Get(p.ClusterQueue)
			return err == nil && domain.Imported(cq)
		},
		done: "ClusterQueue " + p.ClusterQueue + " is now team " + p.Team.Name + ".",
	}
}

// ReleasePlan is what releasing the imported ClusterQueue queue writes.
func (s Service) ReleasePlan(queue string) (team string, writes []domain.FieldWrite, o Outcome) {
	cq, err := s.Cache.ClusterQueues.Get(queue)
	if err != nil || !domain.Imported(cq) {
		return "", nil, notFound("There is no ClusterQueue %q imported by this console.", queue)
	}
	return cq.Labels[domain.TeamLabel], domain.PlanRelease(s.Settings, cq), Outcome{}
}

// ReleaseQueue gives an imported team's ClusterQueue back to whoever made
// it: the console's labels and revisions go, Kueue's objects stay.
func (s Service) ReleaseQueue(ctx context.Context, who kueue.Identity, queue string) Outcome {
	if o := s.mayTry(ctx, who, kueue.ChangeClusterQueues, "ClusterQueue "+queue); o.Kind != Saved {
		return o
	}
	cq, err := s.Cache.ClusterQueues.Get(queue)
	if err != nil || !domain.Imported(cq) {
		return notFound("There is no ClusterQueue %q imported by this console.", queue)
	}
	team := cq.Labels[domain.TeamLabel]
	return s.run(ctx, who, plan{
		what: "ClusterQueue " + queue,
		writes: func(context.Context, kueue.Applier) ([]kueue.Permission, error) {
			return kueue.LabelWrites(queue), nil
		},
		dryRun: func(ctx context.Context, a kueue.Applier) error {
			return a.ReleaseQueue(ctx, s.Settings, queue, team, true)
		},
		apply: func(ctx context.Context, a kueue.Applier) error {
			return a.ReleaseQueue(ctx, s.Settings, queue, team, false)
		},
		shows: func() bool {
			cq, err := s.Cache.ClusterQueues.Get(queue)
			return err == nil && !domain.ManagedByConsole(cq)
		},
		done: "ClusterQueue " + queue + " is no longer managed by the console; it stays as it is in Kueue.",
	})
}
