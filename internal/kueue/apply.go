package kueue

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	kueueclient "sigs.k8s.io/kueue/client-go/clientset/versioned"
)

// Applier is the one path by which the console writes to the cluster:
// server-side apply with the console's field manager. Applying the same
// objects again after any failure converges on the same result.
type Applier struct {
	Kube  kubernetes.Interface
	Kueue kueueclient.Interface
}

func applyOptions() metav1.ApplyOptions {
	// Force: the console owns the fields it manages; a hand edit of them is
	// drift that the next save corrects.
	return metav1.ApplyOptions{FieldManager: FieldManager, Force: true}
}

// ApplyTeam writes a team's objects in dependency order.
func (a Applier) ApplyTeam(ctx context.Context, objs TeamObjects) error {
	if _, err := a.Kube.CoreV1().Namespaces().Apply(ctx, objs.Namespace, applyOptions()); err != nil {
		return fmt.Errorf("namespace %s: %w", *objs.Namespace.Name, err)
	}
	for _, rf := range objs.Flavors {
		if _, err := a.Kueue.KueueV1beta2().ResourceFlavors().Apply(ctx, rf, applyOptions()); err != nil {
			return fmt.Errorf("resource flavor %s: %w", *rf.Name, err)
		}
	}
	if _, err := a.Kueue.KueueV1beta2().ClusterQueues().Apply(ctx, objs.ClusterQueue, applyOptions()); err != nil {
		return fmt.Errorf("cluster queue %s: %w", *objs.ClusterQueue.Name, err)
	}
	if _, err := a.Kueue.KueueV1beta2().LocalQueues(*objs.LocalQueue.Namespace).Apply(ctx, objs.LocalQueue, applyOptions()); err != nil {
		return fmt.Errorf("local queue %s: %w", *objs.LocalQueue.Name, err)
	}
	return nil
}

// ApplyPriorityClasses writes the policy's WorkloadPriorityClasses.
func (a Applier) ApplyPriorityClasses(ctx context.Context, p Policy) error {
	for _, wpc := range BuildPriorityClasses(p) {
		if _, err := a.Kueue.KueueV1beta2().WorkloadPriorityClasses().Apply(ctx, wpc, applyOptions()); err != nil {
			return fmt.Errorf("priority class %s: %w", *wpc.Name, err)
		}
	}
	return nil
}
