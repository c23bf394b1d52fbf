package main

import (
	"context"
	"fmt"
	"log"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/sandbox"
)

// runLabel marks the Jobs a run submits (its value is the run's id), so
// that the run, or the next one, deletes them.
const runLabel = "waitcheck.openquota.dev/run"

// loader keeps tasks waiting in every demo team's ClusterQueue: every
// `every`, a team whose ClusterQueue has fewer than minWaiting tasks
// waiting gets one demo-like Job (one of the team's shapes, a random class,
// one to six minutes of run time), up to max Jobs in all.
type loader struct {
	c          *cluster
	runID      string
	every      time.Duration
	minWaiting int
	max        int

	created, failed int
}

func (l *loader) run(ctx context.Context) {
	if l.minWaiting == 0 || l.max == 0 {
		return
	}
	t := time.NewTicker(l.every)
	defer t.Stop()
	for {
		l.topUp(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (l *loader) topUp(ctx context.Context) {
	for _, team := range sandbox.DemoTeams() {
		if l.created >= l.max || ctx.Err() != nil {
			return
		}
		cq := domain.DefaultSettings.ClusterQueue(team.Name)
		sum, err := l.c.kq.VisibilityV1beta2().ClusterQueues().GetPendingWorkloadsSummary(ctx, cq, metav1.GetOptions{})
		if err != nil {
			if ctx.Err() == nil {
				log.Printf("extra jobs: pending workloads of %s: %v", cq, err)
			}
			continue
		}
		if len(sum.Items) >= l.minWaiting {
			continue
		}
		job := sandbox.DemoJob(team.Name)
		if job == nil {
			continue
		}
		delete(job.Labels, "demo") // the demo's own trickle counts only its Jobs
		job.Labels[runLabel] = l.runID
		if _, err := l.c.kube.BatchV1().Jobs(job.Namespace).Create(ctx, job, metav1.CreateOptions{}); err != nil {
			if ctx.Err() == nil {
				l.failed++
				log.Printf("extra jobs: %v", err)
			}
			continue
		}
		l.created++
	}
}

// deleteExtraJobs deletes the Jobs of run runID (of any run when empty) in
// the demo teams' namespaces, with their pods and Workloads.
func (c *cluster) deleteExtraJobs(ctx context.Context, runID string) (int, error) {
	selector := runLabel
	if runID != "" {
		selector = runLabel + "=" + runID
	}
	n := 0
	for _, team := range sandbox.DemoTeams() {
		ns := domain.DefaultSettings.Namespace(team.Name)
		jobs := c.kube.BatchV1().Jobs(ns)
		list, err := jobs.List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return n, fmt.Errorf("listing extra Jobs in %s: %w", ns, err)
		}
		if len(list.Items) == 0 {
			continue
		}
		if err := jobs.DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)},
			metav1.ListOptions{LabelSelector: selector}); err != nil {
			return n, fmt.Errorf("deleting extra Jobs in %s: %w", ns, err)
		}
		n += len(list.Items)
	}
	return n, nil
}
