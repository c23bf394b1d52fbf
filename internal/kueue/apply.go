package kueue

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

// CheckTeam asks the apiserver, with Kueue's webhooks, to validate the team's
// ClusterQueue and flavors without writing anything (a dry run), so that a
// rejected allocation leaves nothing half-written.
func (a Applier) CheckTeam(ctx context.Context, objs TeamObjects) error {
	opts := applyOptions()
	opts.DryRun = []string{metav1.DryRunAll}
	for _, rf := range objs.Flavors {
		if _, err := a.Kueue.KueueV1beta2().ResourceFlavors().Apply(ctx, rf, opts); err != nil {
			return fmt.Errorf("resource flavor %s: %w", *rf.Name, err)
		}
	}
	if _, err := a.Kueue.KueueV1beta2().ClusterQueues().Apply(ctx, objs.ClusterQueue, opts); err != nil {
		return fmt.Errorf("cluster queue %s: %w", *objs.ClusterQueue.Name, err)
	}
	return nil
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
	if objs.MemberRole != nil {
		if _, err := a.Kube.RbacV1().ClusterRoles().Apply(ctx, objs.MemberRole, applyOptions()); err != nil {
			return fmt.Errorf("cluster role %s: %w", *objs.MemberRole.Name, err)
		}
	}
	if objs.Members != nil {
		if _, err := a.Kube.RbacV1().RoleBindings(*objs.Members.Namespace).Apply(ctx, objs.Members, applyOptions()); err != nil {
			return fmt.Errorf("role binding %s: %w", *objs.Members.Name, err)
		}
	}
	return nil
}

// DeleteTeam removes what the console created for a team: its LocalQueue,
// ClusterQueue and namespace (with the team's jobs and member binding).
// Shared ResourceFlavors stay. Deleting what is already gone is not an error,
// so a retry after a failure finishes the job.
func (a Applier) DeleteTeam(ctx context.Context, s Settings, team string) error {
	ignoreMissing := func(err error) error {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	background := metav1.DeletePropagationBackground
	opts := metav1.DeleteOptions{PropagationPolicy: &background}
	if err := ignoreMissing(a.Kueue.KueueV1beta2().LocalQueues(s.Namespace(team)).Delete(ctx, s.LocalQueue(team), opts)); err != nil {
		return fmt.Errorf("local queue: %w", err)
	}
	if err := ignoreMissing(a.Kueue.KueueV1beta2().ClusterQueues().Delete(ctx, s.ClusterQueue(team), opts)); err != nil {
		return fmt.Errorf("cluster queue: %w", err)
	}
	if err := ignoreMissing(a.Kube.CoreV1().Namespaces().Delete(ctx, s.Namespace(team), opts)); err != nil {
		return fmt.Errorf("namespace: %w", err)
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

// ApplyPolicy writes the priority classes, removes managed classes the policy
// no longer lists, and records the policy on the cohort. Every step is
// idempotent, so a retry after a failure converges.
func (a Applier) ApplyPolicy(ctx context.Context, s Settings, p Policy) error {
	if err := a.ApplyPriorityClasses(ctx, p); err != nil {
		return err
	}
	keep := map[string]bool{}
	for _, c := range p.Classes {
		keep[c.Name] = true
	}
	managed, err := a.Kueue.KueueV1beta2().WorkloadPriorityClasses().List(ctx, metav1.ListOptions{LabelSelector: ManagedByLabel + "=" + ManagedByValue})
	if err != nil {
		return fmt.Errorf("priority classes: %w", err)
	}
	for _, wpc := range managed.Items {
		if keep[wpc.Name] {
			continue
		}
		if err := a.Kueue.KueueV1beta2().WorkloadPriorityClasses().Delete(ctx, wpc.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("removing priority class %s: %w", wpc.Name, err)
		}
	}
	cohort, err := BuildCohort(s, p)
	if err != nil {
		return err
	}
	if _, err := a.Kueue.KueueV1beta2().Cohorts().Apply(ctx, cohort, applyOptions()); err != nil {
		return fmt.Errorf("cohort %s: %w", s.Cohort, err)
	}
	return nil
}
