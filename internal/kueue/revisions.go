package kueue

import (
	"context"
	"fmt"

	"github.com/openquota/console/internal/domain"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
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

// TeamRevisions returns a team's recorded revisions, newest first; none when
// nothing was recorded yet.
func (a Applier) TeamRevisions(ctx context.Context, s domain.Settings, team string) ([]domain.TeamRevision, error) {
	return readRevisions[domain.Team](ctx, a.records(), s.State(), domain.TeamRevisionsName(s, team))
}

// TrustedTeam reads a team's ClusterQueue and its revisions from the
// apiserver, not the cache, and returns the queue with the allocation the
// console acts on (domain.TrustedTeam): the version a conflict check
// compares with.
func (a Applier) TrustedTeam(ctx context.Context, s domain.Settings, team string) (*kueuev1beta2.ClusterQueue, domain.Team, error) {
	cq, err := a.Kueue.KueueV1beta2().ClusterQueues().Get(ctx, s.ClusterQueue(team), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		// An imported queue keeps its own name.
		list, lerr := a.Kueue.KueueV1beta2().ClusterQueues().List(ctx, metav1.ListOptions{
			LabelSelector: labels.SelectorFromSet(domain.ImportLabels(team)).String()})
		switch {
		case lerr != nil:
			return nil, domain.Team{}, lerr
		case len(list.Items) != 1:
			return nil, domain.Team{}, ErrNotManaged
		}
		cq, err = &list.Items[0], nil
	}
	if err != nil {
		return nil, domain.Team{}, err
	}
	revs, err := a.TeamRevisions(ctx, s, team)
	if err != nil {
		return nil, domain.Team{}, err
	}
	var latest *domain.TeamRevision
	if len(revs) > 0 {
		latest = &revs[0]
	}
	trusted, _, ok := domain.TrustedTeam(cq, latest)
	if !ok || trusted.Name != team {
		return nil, domain.Team{}, ErrNotManaged
	}
	return cq, trusted, nil
}

// PolicyRevisions returns the policy's recorded revisions, newest first.
func (a Applier) PolicyRevisions(ctx context.Context, s domain.Settings) ([]domain.PolicyRevision, error) {
	return readRevisions[domain.Policy](ctx, a.records(), s.State(), domain.PolicyRevisionsName(s))
}

func readRevisions[T any](ctx context.Context, kube kubernetes.Interface, ns, name string) ([]domain.Revision[T], error) {
	cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	revs := domain.DecodeRevisions[T](cm.Data)
	for i, j := 0, len(revs)-1; i < j; i, j = i+1, j-1 {
		revs[i], revs[j] = revs[j], revs[i]
	}
	return revs, nil
}

// recordRevision adds the revision decide returns (if any) to a revisions
// ConfigMap, creating it if needed, with optimistic concurrency: two writers
// at once both get their revision, numbered one after the other.
func recordRevision[T any](ctx context.Context, kube kubernetes.Interface, ns, name string, labels map[string]string,
	decide func(last *domain.Revision[T]) (domain.Revision[T], bool),
) (rev domain.Revision[T], prev *domain.Revision[T], recorded bool, err error) {
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
		revs := domain.DecodeRevisions[T](cm.Data)
		if len(revs) > 0 {
			last := revs[len(revs)-1]
			prev = &last
		}
		var ok bool
		if rev, ok = decide(prev); !ok {
			return nil
		}
		if cm.Data, err = domain.EncodeRevisions(append(revs, rev)); err != nil {
			return err
		}
		if create {
			_, err = cms.Create(ctx, cm, metav1.CreateOptions{FieldManager: domain.FieldManager})
			if apierrors.IsNotFound(err) {
				// The console's namespace is missing (a local run against a
				// fresh cluster; installs create it): make it, once.
				if err := createStateNamespace(ctx, kube, ns); err != nil {
					return err
				}
				_, err = cms.Create(ctx, cm, metav1.CreateOptions{FieldManager: domain.FieldManager})
			}
			if apierrors.IsAlreadyExists(err) {
				// Another writer created it first: read theirs and add ours.
				return apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, name, err)
			}
		} else {
			_, err = cms.Update(ctx, cm, metav1.UpdateOptions{FieldManager: domain.FieldManager})
		}
		recorded = err == nil
		return err
	})
	return rev, prev, recorded, err
}

// recordTeam records the revision of a team apply run and announces it.
func (a Applier) recordTeam(ctx context.Context, c *applyRun, objs domain.TeamObjects, cq written[*kueuev1beta2.ClusterQueue]) error {
	if objs.Allocation == nil {
		return nil // not built from an allocation: nothing to record
	}
	team := *objs.Allocation
	// A ClusterQueue the audited path created (it names its creator) with no
	// revision yet is a create whose revision a failure kept from being recorded.
	byConsole := cq.existed() && cq.before.Annotations[CreatedByAnnotation] != "" && cq.before.Annotations[CreatedByAnnotation] != UnknownCreator
	facts := c.facts(ctx)
	labels := map[string]string{domain.ManagedByLabel: domain.ManagedByValue, domain.TeamLabel: team.Name, domain.RevisionsLabel: "team"}
	rev, prev, recorded, err := recordRevision(ctx, a.records(), objs.Revisions.Namespace, objs.Revisions.Name, labels,
		func(last *domain.TeamRevision) (domain.TeamRevision, bool) {
			f := facts
			f.Created = !cq.existed() || (last == nil && byConsole)
			return domain.NextRevision(last, team, f)
		})
	if err != nil {
		return fmt.Errorf("recording the revision of team %s: %w", team.Name, err)
	}
	if recorded {
		a.emit(ctx, domain.TeamEvent(cq.after, rev, prev))
	}
	return nil
}

// recordPolicy records the revision of a policy apply run and announces it.
func (a Applier) recordPolicy(ctx context.Context, c *applyRun, s domain.Settings, p domain.Policy, cohort written[*kueuev1beta2.Cohort]) error {
	hadPolicy := cohort.existed() && cohort.before.Annotations[domain.PolicyAnnotation] != ""
	facts := c.facts(ctx)
	labels := map[string]string{domain.ManagedByLabel: domain.ManagedByValue, domain.RevisionsLabel: "policy"}
	rev, prev, recorded, err := recordRevision(ctx, a.records(), s.State(), domain.PolicyRevisionsName(s), labels,
		func(last *domain.PolicyRevision) (domain.PolicyRevision, bool) {
			f := facts
			f.Created = last == nil && !hadPolicy
			return domain.NextRevision(last, p, f)
		})
	if err != nil {
		return fmt.Errorf("recording the revision of the policy: %w", err)
	}
	if recorded {
		a.emit(ctx, domain.PolicyEvent(cohort.after, rev, prev))
	}
	return nil
}

// facts are what an apply run tells the revision it records.
func (c *applyRun) facts(ctx context.Context) domain.RevisionFacts {
	in := intentFrom(ctx)
	return domain.RevisionFacts{By: c.by, At: c.at, Changed: c.changed, RollbackTo: in.rollbackTo, Note: in.note}
}
