package taskhistory

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/kueuetest"
)

// The usage summary counts the partitions of each MIG profile as a
// resource of its own, by the rules of GPUs: allocated is the nominal
// quota, used what admitted tasks held, borrowed the use beyond the quota,
// lent the team's share of its cohort's borrowing. A task's GPUs and vCPU
// count as before, and words the history cannot read count nothing.
func TestUsageSummaryCountsPartitions(t *testing.T) {
	now := time.Now().UTC()
	day := time.UnixMilli(dayOf(now.UnixMilli())).UTC().Add(-3 * 24 * time.Hour)
	h := func(hours float64) time.Time { return day.Add(time.Duration(hours * float64(time.Hour))) }
	const p4d = "ml.p4d.24xlarge"
	mig1g, mig3g := domain.PartitionResource("mig-1g.10gb"), domain.PartitionResource("mig-3g.40gb")
	names := domain.Settings{NamespacePrefix: teamPrefix}
	queue := func(team string) *kueuetest.ClusterQueueWrapper {
		return kueuetest.MakeClusterQueue(names.ClusterQueue(team)).Labels(domain.TeamLabel, team).Cohort("shared-pool")
	}
	// ran is the life of a task admitted on p4d at from and finished at to.
	ran := func(w *wl, from, to float64) []stateAt {
		life := []stateAt{{wl: w.snap()}}
		life = append(life, stateAt{wl: w.admit(h(from), p4d).snap()})
		return append(life, stateAt{wl: w.finish(h(to), "Succeeded").snap()})
	}
	cases := []struct {
		name   string
		queues []*kueuev1beta2.ClusterQueue
		lives  [][]stateAt
		// damage is SQL run after the record is written: what a damaged
		// or hand-edited record may hold.
		damage []string
		want   []UsageRow
	}{
		{
			name:   "a team's quota of 7 partitions, its task holding 2 for 3 h",
			queues: []*kueuev1beta2.ClusterQueue{queue("a").Quota(p4d, mig1g, "7").Obj()},
			lives:  [][]stateAt{ran(newWL("a", "small", h(0)).migPods(2, "mig-1g.10gb", 1), 1, 4)},
			want: []UsageRow{{Day: day, Team: "a", InstanceType: p4d,
				Partitions: map[string]ResourceHours{"mig-1g.10gb": {Allocated: 7 * 24, Used: 2 * 3}}}},
		},
		{
			name: "use beyond the quota is borrowed, and lent by the team with idle quota",
			queues: []*kueuev1beta2.ClusterQueue{
				queue("a").Quota(p4d, mig3g, "2").Obj(),
				queue("b").Quota(p4d, mig3g, "4").Obj(),
			},
			lives: [][]stateAt{ran(newWL("a", "big", h(0)).migPods(2, "mig-3g.40gb", 2), 2, 5)},
			want: []UsageRow{
				{Day: day, Team: "a", InstanceType: p4d,
					Partitions: map[string]ResourceHours{"mig-3g.40gb": {Allocated: 2 * 24, Used: 4 * 3, Borrowed: 2 * 3}}},
				{Day: day, Team: "b", InstanceType: p4d,
					Partitions: map[string]ResourceHours{"mig-3g.40gb": {Allocated: 4 * 24, Lent: 2 * 3}}},
			},
		},
		{
			name: "a task's GPUs, vCPU and partitions on one flavor each count",
			queues: []*kueuev1beta2.ClusterQueue{queue("a").Quota(p4d, domain.ResourceGPU, "8").Quota(p4d, corev1.ResourceCPU, "16").
				Quota(p4d, mig1g, "7").Obj()},
			lives: [][]stateAt{ran(newWL("a", "mixed", h(0)).pods(1, 2).migPods(2, "mig-1g.10gb", 1), 0, 3)},
			want: []UsageRow{{Day: day, Team: "a", InstanceType: p4d,
				GPU:        ResourceHours{Allocated: 8 * 24, Used: 2 * 3},
				VCPU:       ResourceHours{Allocated: 16 * 24, Used: 4 * 3},
				Partitions: map[string]ResourceHours{"mig-1g.10gb": {Allocated: 7 * 24, Used: 2 * 3}}}},
		},
		{
			name:   "words the history cannot read count nothing",
			queues: []*kueuev1beta2.ClusterQueue{queue("a").Quota(p4d, mig1g, "7").Obj()},
			lives:  [][]stateAt{ran(newWL("a", "odd", h(0)).migPods(1, "mig-1g.10gb", 1), 1, 4)},
			damage: []string{
				`UPDATE admissions SET partitions = 'x × mig-1g.10gb, -3 × mig-1g.10gb, 2 × mig-9g.1gb, 1 × gpu, junk'`,
				`INSERT INTO quotas (cluster_queue, flavor, resource, from_ms, team, cohort, nominal)
					VALUES ('hyperpod-ns-a-clusterqueue', 'ml.p4d.24xlarge', 'nvidia.com/mig-bogus', 0, 'a', '', 5)`,
			},
			want: []UsageRow{{Day: day, Team: "a", InstanceType: p4d,
				Partitions: map[string]ResourceHours{"mig-1g.10gb": {Allocated: 7 * 24}}}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			forEachStore(t, now, func(t *testing.T, s *Store) {
				ctx := context.Background()
				var queues []QueueState
				for _, cq := range tc.queues {
					queues = append(queues, QueueOf(cq, teamPrefix, day))
				}
				if _, err := s.Write(ctx, Batch{Queues: queues}); err != nil {
					t.Fatal(err)
				}
				record(t, s, tc.lives...)
				for _, sql := range tc.damage {
					if _, err := s.db.ExecContext(ctx, sql); err != nil {
						t.Fatal(err)
					}
				}
				covered(t, s, day, h(24))
				sum, err := s.UsageSummary(ctx, Window{From: day, To: h(24)})
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tc.want, sum.Rows, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
					t.Errorf("rows (-want +got):\n%s", diff)
				}
			})
		})
	}
}

// A row's partition-hours are worth whole-GPU-hours by their profiles'
// compute slices (of a GPU's 7), all profiles together.
func TestPartitionGPUHours(t *testing.T) {
	cases := []struct {
		name       string
		partitions map[string]ResourceHours
		want       ResourceHours
	}{
		{"none", nil, ResourceHours{}},
		{"seven 1g partitions are a GPU", map[string]ResourceHours{"mig-1g.10gb": {Allocated: 7, Used: 14, Borrowed: 7, Lent: 21}},
			ResourceHours{Allocated: 1, Used: 2, Borrowed: 1, Lent: 3}},
		{"profiles add up", map[string]ResourceHours{"mig-1g.10gb": {Used: 7}, "mig-3g.40gb": {Used: 7}, "mig-7g.80gb": {Used: 1}},
			ResourceHours{Used: 1 + 3 + 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := UsageRow{Partitions: tc.partitions}.PartitionGPUHours()
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
				t.Errorf("GPU-hours equivalent (-want +got):\n%s", diff)
			}
		})
	}
}

// The profiles of a summary are those of the rows of the teams asked for.
func TestProfiles(t *testing.T) {
	rows := []UsageRow{{Team: "a", Partitions: map[string]ResourceHours{"mig-3g.40gb": {}}}, {Team: "a"},
		{Team: "b", Partitions: map[string]ResourceHours{"mig-1g.10gb": {}, "mig-3g.40gb": {}}}}
	cases := []struct {
		name string
		sees func(string) bool
		want []string
	}{
		{"every team", nil, []string{"mig-1g.10gb", "mig-3g.40gb"}},
		{"one team", func(team string) bool { return team == "a" }, []string{"mig-3g.40gb"}},
		{"no team", func(string) bool { return false }, []string{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Profiles(rows, tc.sees), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("profiles (-want +got):\n%s", diff)
			}
		})
	}
}
