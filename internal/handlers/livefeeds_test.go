package handlers

import (
	"context"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/kueuetest"
)

// queuePositions are Kueue's positions by ClusterQueue, as a test sets
// them.
type queuePositions struct {
	mu      sync.Mutex
	byQueue map[string]map[string]int
}

func (p *queuePositions) Known(_ context.Context, clusterQueue string) (map[string]int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.byQueue[clusterQueue]), true
}

func (p *queuePositions) set(clusterQueue string, positions map[string]int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.byQueue[clusterQueue] = positions
}

// Kueue's positions change in one team's queue: the views of that team's
// tasks show them again, those of other teams keep what they show.
func TestPositionsChangeOnlyTheirTeamsViews(t *testing.T) {
	s, now := domain.DefaultSettings, time.Now()
	snap := domain.BuildSnapshot(domain.SnapshotInput{Settings: s, ClusterQueues: kueuetest.Cluster(s, s.Cohort, 2, 0, now).ClusterQueues}, now)
	a, b := s.ClusterQueue("team-000"), s.ClusterQueue("team-001")
	source := &queuePositions{byQueue: map[string]map[string]int{a: {"ns/first": 0}, b: {"ns/first": 0}}}
	feed := &positionsFeed{source: source, queues: map[string]*askedPositions{}}
	ctx := context.Background()
	feed.of(ctx, a)
	feed.of(ctx, b)
	shown := feed.version()

	source.set(b, map[string]int{"ns/first": 0, "ns/second": 1})
	for _, q := range feed.queues {
		q.asked = now.Add(-positionsEvery) // due
	}
	changed := feed.refreshIfDue(ctx)
	if diff := cmp.Diff(map[string]bool{b: true}, changed); diff != "" {
		t.Errorf("queues refreshed with new positions (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]bool{b: true}, feed.changedSince(shown)); diff != "" {
		t.Errorf("queues changed since the view's version (-want +got):\n%s", diff)
	}
	if got := feed.changedSince(feed.version()); len(got) != 0 {
		t.Errorf("queues changed since now: %v", got)
	}

	c := liveChange{positions: teamsOfQueues(snap, changed)}
	for team, want := range map[string]bool{"team-000": false, "team-001": true} {
		if got := c.positionsMoved(func(t string) bool { return t == team }); got != want {
			t.Errorf("positions moved for a view of %s = %v, want %v", team, got, want)
		}
	}
}
