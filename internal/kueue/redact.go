package kueue

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/domain"
)

// RedactMembers removes the members that earlier versions of the console
// wrote into the allocation annotation of the ClusterQueues it manages,
// where whoever may read ClusterQueues read them (the members are in the
// teams' revisions). Nothing else changes: each patch names the queue's
// resourceVersion, so a queue changed meanwhile is left for the next start.
func (a Applier) RedactMembers(ctx context.Context, cqs []*kueuev1beta2.ClusterQueue) (redacted int, err error) {
	for _, cq := range cqs {
		annotation, ok := domain.AnnotationWithoutMembers(cq)
		if !ok {
			continue
		}
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
			"resourceVersion": cq.ResourceVersion,
			"annotations":     map[string]string{domain.AllocationAnnotation: annotation},
		}})
		if err != nil {
			return redacted, err
		}
		_, err = a.Kueue.KueueV1beta2().ClusterQueues().Patch(ctx, cq.Name, types.MergePatchType, patch,
			metav1.PatchOptions{FieldManager: domain.FieldManager})
		switch {
		case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
		case err != nil:
			return redacted, fmt.Errorf("removing the members from the allocation annotation of ClusterQueue %s: %w", cq.Name, err)
		default:
			redacted++
		}
	}
	return redacted, nil
}
