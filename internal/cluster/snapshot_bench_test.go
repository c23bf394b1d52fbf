package cluster_test

import (
	"testing"
	"time"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/kueuetest"
)

// BenchmarkBuildSnapshot is the console's whole aggregation at the target
// size: 200 teams, 50 000 Workloads.
func BenchmarkBuildSnapshot(b *testing.B) {
	now := time.Now()
	in := inputOf(domain.DefaultSettings, kueuetest.Cluster(domain.DefaultSettings, domain.DefaultSettings.Cohort, 200, 50_000, now))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		domain.BuildSnapshot(in, now)
	}
}

// BenchmarkStatsByTeamAndClass is the Tasks page's heaviest computation.
func BenchmarkStatsByTeamAndClass(b *testing.B) {
	now := time.Now()
	snap := domain.BuildSnapshot(inputOf(domain.DefaultSettings, kueuetest.Cluster(domain.DefaultSettings, domain.DefaultSettings.Cohort, 200, 50_000, now)), now)
	var teams []string
	for _, t := range snap.Teams {
		teams = append(teams, t.Team)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		domain.StatsByTeamAndClass(snap.Tasks, teams, snap.Classes, now.Add(-24*time.Hour), now)
	}
}

func TestSyntheticClusterSnapshot(t *testing.T) {
	now := time.Now()
	snap := domain.BuildSnapshot(inputOf(domain.DefaultSettings, kueuetest.Cluster(domain.DefaultSettings, domain.DefaultSettings.Cohort, 20, 600, now)), now)
	counts := map[domain.TaskState]int{}
	for _, task := range snap.Tasks {
		counts[task.State]++
	}
	if counts[domain.TaskAdmitted] != 200 || counts[domain.TaskPending] != 200 || counts[domain.TaskPreempted] != 100 || counts[domain.TaskFinished] != 100 {
		t.Errorf("states: %v", counts)
	}
	if len(snap.Teams) != 20 || len(snap.Classes) != 4 {
		t.Errorf("%d teams, %d classes", len(snap.Teams), len(snap.Classes))
	}
}

// inputOf is a synthetic cluster as a snapshot's input.
func inputOf(s domain.Settings, o kueuetest.Objects) domain.SnapshotInput {
	return domain.SnapshotInput{Settings: s, ClusterQueues: o.ClusterQueues, LocalQueues: o.LocalQueues, Workloads: o.Workloads, Classes: o.Classes}
}
