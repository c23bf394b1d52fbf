package kueue_test

import (
	"testing"
	"time"

	"github.com/openquota/console/internal/kueue"
	"github.com/openquota/console/internal/kueue/kueuetest"
)

// BenchmarkBuildSnapshot is the console's whole aggregation at the target
// size: 200 teams, 50 000 Workloads.
func BenchmarkBuildSnapshot(b *testing.B) {
	now := time.Now()
	in := kueuetest.Cluster(kueue.DefaultSettings, 200, 50_000, now)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		kueue.BuildSnapshot(in, now)
	}
}

// BenchmarkStatsByTeamAndClass is the Tasks page's heaviest computation.
func BenchmarkStatsByTeamAndClass(b *testing.B) {
	now := time.Now()
	snap := kueue.BuildSnapshot(kueuetest.Cluster(kueue.DefaultSettings, 200, 50_000, now), now)
	var teams []string
	for _, t := range snap.Teams {
		teams = append(teams, t.Team)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		kueue.StatsByTeamAndClass(snap.Tasks, teams, snap.Classes, now.Add(-24*time.Hour), now)
	}
}

func TestSyntheticClusterSnapshot(t *testing.T) {
	now := time.Now()
	snap := kueue.BuildSnapshot(kueuetest.Cluster(kueue.DefaultSettings, 20, 600, now), now)
	counts := map[kueue.TaskState]int{}
	for _, task := range snap.Tasks {
		counts[task.State]++
	}
	if counts[kueue.TaskAdmitted] != 200 || counts[kueue.TaskPending] != 200 || counts[kueue.TaskPreempted] != 100 || counts[kueue.TaskFinished] != 100 {
		t.Errorf("states: %v", counts)
	}
	if len(snap.Teams) != 20 || len(snap.Classes) != 4 {
		t.Errorf("%d teams, %d classes", len(snap.Teams), len(snap.Classes))
	}
}
