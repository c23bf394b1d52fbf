package kueue

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/domain"
)

// ImportQueue makes a ClusterQueue the console did not create one of its
// teams: it labels the queue (a merge patch of its labels only, so its spec,
// and with it every admission, stays as it is) and records the team's first
// revision. With dryRun the apiserver, Kueue's webhooks and the admission
// policy judge the patch and nothing is written.
func (a Applier) ImportQueue(ctx context.Context, s domain.Settings, plan domain.QueueImport, dryRun bool) error {
	cq, err := a.patchLabels(ctx, plan.ClusterQueue, labelsPatch(domain.ImportLabels(plan.Team.Name)), dryRun)
	if err != nil || dryRun {
		return err
	}
	c := a.begin(ctx)
	labels := map[string]string{domain.ManagedByLabel: domain.ManagedByValue, domain.TeamLabel: plan.Team.Name, domain.RevisionsLabel: "team"}
	note := "imported ClusterQueue " + plan.ClusterQueue + " as it was"
	rev, prev, recorded, err := recordRevision(ctx, a.records(), s.State(), domain.TeamRevisionsName(s, plan.Team.Name), labels,
		func(last *domain.TeamRevision) (domain.TeamRevision, bool) {
			return domain.NextRevision(last, plan.Team, domain.RevisionFacts{By: c.by, At: c.at, Created: last == nil, Changed: true, Note: note})
		})
	if err != nil {
		return fmt.Errorf("recording the revision of team %s: %w", plan.Team.Name, err)
	}
	if recorded {
		a.emit(ctx, domain.TeamEvent(cq, rev, prev))
	}
	return nil
}

// ReleaseQueue gives an imported ClusterQueue back: the console's labels and
// its revisions go; the queue, its LocalQueues and namespaces stay as they
// are.
func (a Applier) ReleaseQueue(ctx context.Context, s domain.Settings, clusterQueue, team string, dryRun bool) error {
	// First the annotations an edit left (the allocation, who changed it),
	// while the queue is still the console's; then the labels, which is
	// all the admission policy lets a release change.
	live, err := a.Kueue.KueueV1beta2().ClusterQueues().Get(ctx, clusterQueue, metav1.GetOptions{})
	if err != nil {
		return err
	}
	notes := map[string]*string{}
	for k := range live.Annotations {
		if strings.HasPrefix(k, domain.AnnotationPrefix) {
			notes[k] = nil
		}
	}
	if len(notes) > 0 {
		if _, err := a.patchMeta(ctx, clusterQueue, "annotations", notes, dryRun); err != nil {
			return err
		}
	}
	remove := map[string]*string{}
	for k := range domain.ImportLabels(team) {
		remove[k] = nil
	}
	if _, err := a.patchLabels(ctx, clusterQueue, remove, dryRun); err != nil {
		return err
	}
	opts := metav1.DeleteOptions{}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	err = a.Kube.CoreV1().ConfigMaps(s.State()).Delete(ctx, domain.TeamRevisionsName(s, team), opts)
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// labelsPatch sets labels.
func labelsPatch(labels map[string]string) map[string]*string {
	out := make(map[string]*string, len(labels))
	for k, v := range labels {
		out[k] = &v
	}
	return out
}

// patchLabels merge-patches a ClusterQueue's labels (nil values remove
// one). A merge patch of a missing object fails: a queue deleted since the
// preview is never created again.
func (a Applier) patchLabels(ctx context.Context, name string, labels map[string]*string, dryRun bool) (*kueuev1beta2.ClusterQueue, error) {
	return a.patchMeta(ctx, name, "labels", labels, dryRun)
}

// patchMeta merge-patches the labels or annotations (field) of a
// ClusterQueue.
func (a Applier) patchMeta(ctx context.Context, name, field string, values map[string]*string, dryRun bool) (*kueuev1beta2.ClusterQueue, error) {
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{field: values}})
	if err != nil {
		return nil, err
	}
	opts := metav1.PatchOptions{FieldManager: domain.FieldManager}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	return a.Kueue.KueueV1beta2().ClusterQueues().Patch(ctx, name, types.MergePatchType, body, opts)
}

// LabelWrites are the requests of ImportQueue and ReleaseQueue the user
// must be allowed to make: a patch of the ClusterQueue (the revisions are
// the console's own record, as for every change).
func LabelWrites(clusterQueue string) []Permission {
	return []Permission{{Verb: "patch", Group: kueuev1beta2.SchemeGroupVersion.Group, Resource: "clusterqueues", Name: clusterQueue, What: "change ClusterQueues"}}
}
