package kueue

import (
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/domain"
)

// TeamDrift compares the allocation the console acts on for a team (its
// latest saved revision) with its live objects in the cache, and with the
// allocation annotation of its ClusterQueue (no apiserver request). ok is
// false when the console manages no such team.
func (c *Cache) TeamDrift(s domain.Settings, team string, shapes domain.ShapeLookup) (rep domain.DriftReport, ok bool, err error) {
	cq, stored, saved, ok := c.SavedTeam(s, team)
	if !ok {
		return domain.DriftReport{}, false, nil
	}
	if domain.Imported(cq) {
		// An imported queue keeps what the form cannot express, so its
		// objects are not compared with built ones: what the allocation
		// says of it (quota, limits, weight, ...) is, as the queue reads.
		rep := domain.DriftReport{Team: stored, Saved: saved, Live: domain.LiveTeamObjects{ClusterQueue: cq}}
		read, _ := domain.AdoptTeam(s, stored, cq, shapes)
		if changes := domain.DiffTeams(stored, read); len(changes) > 0 {
			rep.Differences = []domain.Drift{{Object: "ClusterQueue " + cq.Name, Field: "the allocation it reads as",
				Want: "as saved", Got: strings.Join(changes, "; ")}}
		}
		return rep, true, nil
	}
	objs, err := domain.BuildTeam(s, stored, shapes)
	if err != nil {
		return domain.DriftReport{}, true, err
	}
	live := domain.LiveTeamObjects{ClusterQueue: cq, Flavors: map[string]*kueuev1beta2.ResourceFlavor{}}
	if lq, err := c.LocalQueues.LocalQueues(s.Namespace(team)).Get(s.LocalQueue(team)); err == nil {
		live.LocalQueue = lq
	} else if !apierrors.IsNotFound(err) {
		return domain.DriftReport{}, true, err
	}
	for _, rf := range objs.Flavors {
		if got, err := c.ResourceFlavors.Get(*rf.Name); err == nil {
			live.Flavors[*rf.Name] = got
		} else if !apierrors.IsNotFound(err) {
			return domain.DriftReport{}, true, err
		}
	}
	diffs, err := domain.DriftOf(objs, live)
	if err != nil {
		return domain.DriftReport{}, true, err
	}
	diffs = append(diffs, domain.AllocationDrift(cq, stored, saved)...)
	return domain.DriftReport{Team: stored, Saved: saved, Live: live, Differences: diffs}, true, nil
}

// DriftedTeams names the managed teams whose objects were changed by hand,
// for a "drifted" badge on the teams list.
func (c *Cache) DriftedTeams(s domain.Settings, shapes domain.ShapeLookup) map[string]bool {
	out := map[string]bool{}
	for _, t := range c.Teams(s) {
		r, ok, err := c.TeamDrift(s, t.Name, shapes)
		if !ok || err != nil {
			continue // e.g. an instance type no longer known: the team page says so
		}
		if r.Drifted() {
			out[t.Name] = true
		}
	}
	return out
}

// PolicyDrift compares a policy with the live priority classes in the cache.
func (c *Cache) PolicyDrift(s domain.Settings, p domain.Policy) ([]domain.Drift, error) {
	live, err := c.WorkloadPriorityClasses.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	return domain.PolicyDriftOf(s, p, live)
}
