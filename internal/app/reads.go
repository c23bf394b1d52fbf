package app

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/kueue"
	"github.com/openquota/console/internal/memo"
)

// clusterReads are what the pages read of the cluster, with the console's
// settings: the cache's objects (never an apiserver request), and the
// revisions and Kueue's configuration through the apply path's reads.
// Reads that many requests share are remembered a few seconds.
type clusterReads struct {
	cache    *kueue.Cache
	applier  kueue.Applier
	settings domain.Settings
	kueueCM  kueue.ConfigMapRef

	drifted     *memo.Memo[map[string]bool]
	kueueConfig *memo.Memo[kueue.SchedulerConfig]
}

func newClusterReads(cache *kueue.Cache, a kueue.Applier, s domain.Settings, kueueCM kueue.ConfigMapRef) *clusterReads {
	return &clusterReads{cache: cache, applier: a, settings: s, kueueCM: kueueCM,
		drifted:     &memo.Memo[map[string]bool]{TTL: 5 * time.Second, FailureTTL: 5 * time.Second},
		kueueConfig: &memo.Memo[kueue.SchedulerConfig]{TTL: 30 * time.Second, FailureTTL: 5 * time.Second}}
}

// Overview is the cluster's capacity by instance type and its queues.
func (r *clusterReads) Overview() (domain.Overview, error) {
	nodes, err := r.cache.Nodes.List(labels.Everything())
	if err != nil {
		return domain.Overview{}, err
	}
	queues, err := r.cache.ClusterQueues.List(labels.Everything())
	if err != nil {
		return domain.Overview{}, err
	}
	cohorts, err := r.cache.Cohorts.List(labels.Everything())
	if err != nil {
		return domain.Overview{}, err
	}
	ov := domain.BuildOverview(r.settings, nodes, queues)
	ov.Cohorts = domain.CohortTree(r.settings, cohorts, queues)
	return ov, nil
}

func (r *clusterReads) Teams() []domain.TeamState { return r.cache.Teams(r.settings) }

// Changes counts the changes of the objects the teams, the queues and the
// fleet are read from.
func (r *clusterReads) Changes() uint64 {
	return r.cache.Changes(clusterKinds...)
}

// Redefinitions counts the changes of what those objects are, not of their
// status.
func (r *clusterReads) Redefinitions() uint64 {
	return r.cache.Redefinitions(clusterKinds...)
}

// clusterKinds are the kinds the teams, the queues and the fleet are read
// from (LocalQueues: the namespaces each team serves).
var clusterKinds = []string{"ClusterQueue", "LocalQueue", "Node", "TeamRevisions", "Cohort"}

func (r *clusterReads) Team(name string) (*kueuev1beta2.ClusterQueue, domain.Team, bool) {
	return r.cache.Team(r.settings, name)
}

func (r *clusterReads) Fleet() (domain.ShapeLookup, map[string]int) { return r.cache.Fleet() }

func (r *clusterReads) Cohorts() []string { return r.cache.ConsoleCohorts(r.settings) }

// DriftedTeams compares every team's objects, which takes a while at
// hundreds of teams: the answer is shared for a few seconds (a team's own
// drift page compares it afresh).
func (r *clusterReads) DriftedTeams() map[string]bool {
	drifted, _ := r.drifted.Recent(context.Background(), "", func(context.Context) (map[string]bool, error) {
		shapes, _ := r.cache.Fleet()
		return r.cache.DriftedTeams(r.settings, shapes), nil
	})
	return drifted
}

func (r *clusterReads) Policy() domain.Policy { return r.cache.Policy(r.settings) }

func (r *clusterReads) PolicyDrift() ([]domain.Drift, error) {
	return r.cache.PolicyDrift(r.settings, r.cache.Policy(r.settings))
}

// KueueSettings reads Kueue's configuration, which changes with a Kueue
// restart: at most every 30 seconds.
func (r *clusterReads) KueueSettings(ctx context.Context) (domain.KueueSettings, error) {
	cfg, err := r.SchedulerConfig(ctx)
	return domain.KueueSettings{FairSharing: cfg.FairSharing != nil, ManagesJobsWithoutQueue: cfg.ManageJobsWithoutQueueName}, err
}

// KueueRecentUse is how Kueue counts recent use; nil when its
// configuration has no admissionFairSharing.
func (r *clusterReads) KueueRecentUse(ctx context.Context) (*domain.RecentUseConfig, error) {
	cfg, err := r.SchedulerConfig(ctx)
	return domain.RecentUseConfigOf(cfg.AdmissionFairSharing), err
}

// LocalQueueUses are the recent use of the LocalQueues feeding
// clusterQueue, least used first, from the cache.
func (r *clusterReads) LocalQueueUses(ctx context.Context, clusterQueue string) ([]domain.LocalQueueUse, *domain.RecentUseConfig, bool) {
	cfg, err := r.KueueRecentUse(ctx)
	lqs, _ := r.cache.LocalQueues.List(labels.Everything())
	return domain.LocalQueueUses(clusterQueue, lqs, cfg), cfg, err == nil
}

// SchedulerConfig is Kueue's configuration as the impact preview needs it,
// read at most every 30 seconds.
func (r *clusterReads) SchedulerConfig(ctx context.Context) (kueue.SchedulerConfig, error) {
	return r.kueueConfig.Get(ctx, "", func(ctx context.Context) (kueue.SchedulerConfig, error) {
		ctx, cancel := context.WithTimeout(ctx, directRead)
		defer cancel()
		return r.applier.SchedulerConfig(ctx, r.kueueCM)
	})
}

// WhatIf answers what Kueue would do with a job submitted now.
func (r *clusterReads) WhatIf(ctx context.Context, job domain.WhatIf) (domain.WhatIfAnswer, error) {
	cfg, cfgErr := r.SchedulerConfig(ctx) // unreadable: Kueue's defaults, and the answer says so
	shapes, _ := r.cache.Fleet()
	a, err := r.cache.WhatIf(ctx, r.settings, cfg, job, shapes)
	if err == nil && cfgErr != nil {
		a.AssumingDefaults()
	}
	return a, err
}

// directRead bounds a page's read of the apiserver (what the caches do not
// hold): a cluster that does not answer makes the page say so, not wait.
const directRead = 5 * time.Second

func (r *clusterReads) TeamRevisions(ctx context.Context, team string) ([]domain.TeamRevision, error) {
	ctx, cancel := context.WithTimeout(ctx, directRead)
	defer cancel()
	return r.applier.TeamRevisions(ctx, r.settings, team)
}

func (r *clusterReads) PolicyRevisions(ctx context.Context) ([]domain.PolicyRevision, error) {
	ctx, cancel := context.WithTimeout(ctx, directRead)
	defer cancel()
	return r.applier.PolicyRevisions(ctx, r.settings)
}
