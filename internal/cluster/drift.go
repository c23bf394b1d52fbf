package cluster

import (
	"github.com/openquota/console/internal/domain"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// TeamDrift compares a stored team with its live objects in the cache (no
// apiserver request). The error is NotFound when the console does not manage
// such a team.
func TeamDrift(s domain.Settings, c *Cache, team string, shapes domain.ShapeLookup) (domain.DriftReport, error) {
	cq, err := c.ClusterQueues.Get(s.ClusterQueue(team))
	if err != nil {
		return domain.DriftReport{}, err
	}
	stored, ok := domain.TeamFromClusterQueue(cq)
	if !ok {
		return domain.DriftReport{}, apierrors.NewNotFound(kueuev1beta2.Resource("clusterqueues"), cq.Name)
	}
	objs, err := domain.BuildTeam(s, stored, shapes)
	if err != nil {
		return domain.DriftReport{}, err
	}
	live := domain.TeamLive{ClusterQueue: cq, Flavors: map[string]*kueuev1beta2.ResourceFlavor{}}
	if lq, err := c.LocalQueues.LocalQueues(s.Namespace(team)).Get(s.LocalQueue(team)); err == nil {
		live.LocalQueue = lq
	} else if !apierrors.IsNotFound(err) {
		return domain.DriftReport{}, err
	}
	for _, rf := range objs.Flavors {
		if got, err := c.ResourceFlavors.Get(*rf.Name); err == nil {
			live.Flavors[*rf.Name] = got
		} else if !apierrors.IsNotFound(err) {
			return domain.DriftReport{}, err
		}
	}
	diffs, err := domain.DriftOf(objs, live)
	if err != nil {
		return domain.DriftReport{}, err
	}
	return domain.DriftReport{Team: stored, Live: live, Differences: diffs}, nil
}

// DriftedTeams names the managed teams whose objects were changed by hand,
// for a "drifted" badge on the teams list.
func DriftedTeams(s domain.Settings, c *Cache, shapes domain.ShapeLookup) (map[string]bool, error) {
	teams, err := ListTeams(c.ClusterQueues)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, t := range teams {
		if t.ClusterQueue.Name != s.ClusterQueue(t.Name) {
			continue // another console's team (other namespace prefix)
		}
		r, err := TeamDrift(s, c, t.Name, shapes)
		if err != nil {
			continue // e.g. an instance type no longer known: the team page says so
		}
		if r.Drifted() {
			out[t.Name] = true
		}
	}
	return out, nil
}

// PolicyDrift compares the stored policy with the live priority classes in the cache.
func PolicyDrift(p domain.Policy, c *Cache) ([]domain.Drift, error) {
	live, err := c.WorkloadPriorityClasses.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	return domain.PolicyDriftOf(p, live)
}
