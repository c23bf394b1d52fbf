package domain

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/kueuetest"
)

// A cluster set up by hand, as Kueue's getting-started example does: a
// ClusterQueue named cluster-queue serving LocalQueues in namespaces without
// the team prefix. Its tasks are its team's, whatever their namespace.
func TestTasksBelongToTheirClusterQueue(t *testing.T) {
	now := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	theirs := kueuetest.MakeClusterQueue("cluster-queue").Nominal(8, nil).Usage(2, 0).WrittenBy("kubectl-client-side-apply")
	ours := testCQ("nlp").Nominal(8, nil).Labels(ManagedByLabel, ManagedByValue, TeamLabel, "nlp")
	m := NewModel(DefaultSettings)
	m.Load(SnapshotInput{
		ClusterQueues: []*kueuev1beta2.ClusterQueue{theirs.Obj(), ours.Obj()},
		LocalQueues: []*kueuev1beta2.LocalQueue{
			kueuetest.MakeLocalQueue("default", "user-queue", "cluster-queue"),
			kueuetest.MakeLocalQueue("research", "user-queue", "cluster-queue"),
			kueuetest.MakeLocalQueue(DefaultSettings.Namespace("nlp"), DefaultSettings.LocalQueue("nlp"), DefaultSettings.ClusterQueue("nlp")),
		},
		Workloads: []*kueuev1beta2.Workload{
			newWorkload("default", "running").Queue("user-queue").GPUs(2, 1).In("cluster-queue").Created(now.Add(-time.Hour)).Admitted(now.Add(-time.Minute), "ml.p5.48xlarge").Obj(),
			newWorkload("default", "waiting").Queue("user-queue").GPUs(8, 1).Created(now.Add(-time.Hour)).Pending("Pending", "", now.Add(-time.Hour)).Obj(),
			newWorkload("research", "waiting").Queue("user-queue").GPUs(8, 1).Created(now.Add(-time.Hour)).Pending("Pending", "", now.Add(-time.Hour)).Obj(),
			newWorkload(DefaultSettings.Namespace("nlp"), "train").Queue(DefaultSettings.LocalQueue("nlp")).GPUs(1, 1).Created(now.Add(-time.Hour)).Admitted(now.Add(-time.Minute), "ml.p5.48xlarge").Obj(),
			newWorkload("elsewhere", "lost").Queue("no-such-queue").GPUs(1, 1).Created(now.Add(-time.Hour)).Obj(),
		},
	})

	type taskRow struct{ Task, Team, ClusterQueue string }
	tasksOf := func(s *Snapshot) []taskRow {
		var out []taskRow
		for _, f := range s.Tasks(TaskQuery{State: ListAll, Sort: "name"}) {
			out = append(out, taskRow{f.Namespace + "/" + f.Name, f.Team, f.ClusterQueue})
		}
		slices.SortFunc(out, func(a, b taskRow) int { return strings.Compare(a.Task, b.Task) })
		return out
	}
	type teamRow struct {
		Team, Namespace, Manager string
		Running, Pending         int
	}
	teamsOf := func(s *Snapshot) []teamRow {
		var out []teamRow
		for _, r := range s.Teams {
			out = append(out, teamRow{r.Team, r.Namespace, r.Manager, r.Running, r.Pending})
		}
		return out
	}

	snap := m.Snapshot(now)
	wantTasks := []taskRow{
		{"default/running", "cluster-queue", "cluster-queue"},
		{"default/waiting", "cluster-queue", "cluster-queue"},
		{"elsewhere/lost", "", ""},
		{"hyperpod-ns-nlp/train", "nlp", "hyperpod-ns-nlp-clusterqueue"},
		{"research/waiting", "cluster-queue", "cluster-queue"},
	}
	if diff := cmp.Diff(wantTasks, tasksOf(snap)); diff != "" {
		t.Errorf("tasks (-want +got):\n%s", diff)
	}
	wantTeams := []teamRow{
		{"cluster-queue", "default, research", "kubectl-client-side-apply", 1, 2},
		{"nlp", "hyperpod-ns-nlp", "", 1, 0},
	}
	if diff := cmp.Diff(wantTeams, teamsOf(snap)); diff != "" {
		t.Errorf("team rows (-want +got):\n%s", diff)
	}

	// Adopted under the name "research-gpus": its tasks follow the queue.
	m.SetClusterQueue(theirs.Labels(ManagedByLabel, ManagedByValue, TeamLabel, "research-gpus", ImportedLabel, "true").Obj())
	snap = m.Snapshot(now)
	for i := range wantTasks {
		if wantTasks[i].ClusterQueue == "cluster-queue" {
			wantTasks[i].Team = "research-gpus"
		}
	}
	if diff := cmp.Diff(wantTasks, tasksOf(snap)); diff != "" {
		t.Errorf("tasks after the queue took a team name (-want +got):\n%s", diff)
	}
	wantTeams[0] = teamRow{"research-gpus", "default, research", "", 1, 2}
	wantTeams[0], wantTeams[1] = wantTeams[1], wantTeams[0]
	if diff := cmp.Diff(wantTeams, teamsOf(snap)); diff != "" {
		t.Errorf("team rows after the queue took a team name (-want +got):\n%s", diff)
	}
}

// A queue someone else wrote, with what the allocation form cannot
// express: saving the imported team changes the quota it edited and keeps
// the rest as it was.
func TestImportedTeamKeepsWhatTheFormCannotExpress(t *testing.T) {
	q := resource.MustParse
	live := &kueuev1beta2.ClusterQueue{
		ObjectMeta: metav1.ObjectMeta{Name: "research", Labels: ImportLabels("research")},
		Spec: kueuev1beta2.ClusterQueueSpec{
			CohortName:        "org",
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"group": "research"}},
			Preemption: &kueuev1beta2.ClusterQueuePreemption{ReclaimWithinCohort: kueuev1beta2.PreemptionPolicyLowerPriority,
				WithinClusterQueue: kueuev1beta2.PreemptionPolicyLowerPriority},
			ResourceGroups: []kueuev1beta2.ResourceGroup{
				{CoveredResources: []corev1.ResourceName{ResourceGPU, corev1.ResourceCPU, corev1.ResourceMemory},
					Flavors: []kueuev1beta2.FlavorQuotas{{Name: "ml.p5.48xlarge", Resources: []kueuev1beta2.ResourceQuota{
						{Name: ResourceGPU, NominalQuota: q("8"), LendingLimit: ptrTo(q("2"))},
						{Name: corev1.ResourceCPU, NominalQuota: q("96")},
						{Name: corev1.ResourceMemory, NominalQuota: q("1Ti")}}}}},
				{CoveredResources: []corev1.ResourceName{"example.com/licenses"},
					Flavors: []kueuev1beta2.FlavorQuotas{{Name: "default-flavor", Resources: []kueuev1beta2.ResourceQuota{
						{Name: "example.com/licenses", NominalQuota: q("10")}}}}},
			},
		},
	}
	read := PlanImport(DefaultSettings, live, nil, func(string) bool { return false }, LookupShape).Team

	if got := read.Quota[0].LendGPUs; got == nil || *got != 2 {
		t.Fatalf("the hand-set GPU lending limit reads as lend limit %v, want 2", got)
	}

	// The edit form shows the lend limit it read, and saves it back.
	edited := read
	edited.Quota = []QuotaInput{{InstanceType: "ml.p5.48xlarge", GPUs: ptrTo[int64](16), LendGPUs: ptrTo[int64](2)}}
	objs, err := BuildImportedTeam(DefaultSettings, edited, live, LookupShape)
	if err != nil {
		t.Fatal(err)
	}
	if objs.Namespace != nil || objs.LocalQueue != nil || objs.Members != nil || len(objs.Flavors) > 0 {
		t.Errorf("an imported team writes only its ClusterQueue: %+v", objs)
	}
	var got kueuev1beta2.ClusterQueueSpec
	if err := viaJSON(objs.ClusterQueue.Spec, &got); err != nil {
		t.Fatal(err)
	}
	want := live.Spec.DeepCopy()
	p5 := &want.ResourceGroups[0].Flavors[0]
	p5.Resources[0].NominalQuota = q("16")
	p5.Resources[1].NominalQuota = *resource.NewMilliQuantity(384000, resource.DecimalSI)
	p5.Resources[2].NominalQuota = *resource.NewQuantity(4096<<30, resource.BinarySI)
	want.StopPolicy = ptrTo(kueuev1beta2.None)
	if diff := cmp.Diff(*want, got, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
		t.Errorf("saved spec (-want +got):\n%s", diff)
	}

	// A row for an instance type the queue has no quota on is refused with a sentence.
	edited.Quota = append(edited.Quota, QuotaInput{InstanceType: "ml.g6.12xlarge", GPUs: ptrTo[int64](4)})
	if _, err := BuildImportedTeam(DefaultSettings, edited, live, LookupShape); err == nil || !strings.Contains(err.Error(), "ml.g6.12xlarge") {
		t.Errorf("a new instance type on an imported queue: %v", err)
	}
}

// An imported queue's total counts the quota it keeps on flavors that are
// not instance types (Kueue's default-flavor) beside its instance types'.
func TestStateTotalCountsKeptFlavors(t *testing.T) {
	cq := kueuetest.MakeClusterQueue("team-a-cq").Nominal(8, nil).
		Quota("default-flavor", corev1.ResourceCPU, "9").Quota("default-flavor", corev1.ResourceMemory, "36Gi").Obj()
	eight := int64(8)
	st := TeamState{Team: Team{Quota: []QuotaInput{{InstanceType: "ml.p5.48xlarge", GPUs: &eight}}}, ClusterQueue: cq}
	want := Quota{GPUs: 8, EFA: 32, CPUMilli: 192_000 + 9_000, MemoryMiB: 2048*1024 + 36*1024}
	if diff := cmp.Diff(want, StateTotal(st, LookupShape)); diff != "" {
		t.Errorf("total (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(TeamTotal(st.Team, LookupShape), StateTotal(TeamState{Team: st.Team}, LookupShape)); diff != "" {
		t.Errorf("a team without its queue (-TeamTotal +StateTotal):\n%s", diff)
	}
}

// An imported queue whose borrowing limits follow one percentage on one
// flavor and are unlimited on another: a quota edit carries the limit the
// percentage explains along with the quota and keeps the unlimited one; a
// new percentage then limits both, from the edited quota.
func TestImportedLimitsFollowTheirQuota(t *testing.T) {
	q := resource.MustParse
	gpus := func(nominal string, lend, borrow *resource.Quantity) []kueuev1beta2.ResourceQuota {
		return []kueuev1beta2.ResourceQuota{{Name: ResourceGPU, NominalQuota: q(nominal), LendingLimit: lend, BorrowingLimit: borrow}}
	}
	live := &kueuev1beta2.ClusterQueue{
		ObjectMeta: metav1.ObjectMeta{Name: "team-c", Labels: ImportLabels("team-c")},
		Spec: kueuev1beta2.ClusterQueueSpec{CohortName: "regular", ResourceGroups: []kueuev1beta2.ResourceGroup{{
			CoveredResources: []corev1.ResourceName{ResourceGPU},
			Flavors: []kueuev1beta2.FlavorQuotas{
				{Name: "ml.g6.12xlarge", Resources: gpus("4", ptrTo(q("2")), ptrTo(q("4")))},
				{Name: "ml.g5.2xlarge", Resources: gpus("1", nil, nil)},
			}}}},
	}
	plan := PlanImport(DefaultSettings, live, nil, func(string) bool { return false }, LookupShape)
	if plan.Team.BorrowLimitPercent != 100 || plan.Team.FairShareWeight != 1 || plan.Team.Cohort != "regular" {
		t.Errorf("imported as %d %%, weight %d, cohort %q; want 100 %%, Kueue's default weight 1, its own cohort",
			plan.Team.BorrowLimitPercent, plan.Team.FairShareWeight, plan.Team.Cohort)
	}
	for _, kept := range plan.Kept {
		if strings.Contains(kept, "500 %") || strings.Contains(kept, "cohort") || strings.Contains(kept, "EFA") {
			t.Errorf("the import preview says %q", kept)
		}
	}
	limits := func(cq kueuev1beta2.ClusterQueueSpec) map[string][2]string {
		out := map[string][2]string{}
		for _, f := range cq.ResourceGroups[0].Flavors {
			word := func(v *resource.Quantity) string {
				if v == nil {
					return "none"
				}
				return v.String()
			}
			r := f.Resources[0]
			out[string(f.Name)] = [2]string{r.NominalQuota.String(), word(r.BorrowingLimit)}
		}
		return out
	}
	save := func(team Team, live *kueuev1beta2.ClusterQueue) *kueuev1beta2.ClusterQueue {
		t.Helper()
		objs, err := BuildImportedTeam(DefaultSettings, team, live, LookupShape)
		if err != nil {
			t.Fatal(err)
		}
		saved := live.DeepCopy()
		if err := viaJSON(objs.ClusterQueue.Spec, &saved.Spec); err != nil {
			t.Fatal(err)
		}
		return saved
	}

	edited := plan.Team
	edited.Quota = slices.Clone(edited.Quota)
	for i, row := range edited.Quota {
		if row.InstanceType == "ml.g6.12xlarge" {
			edited.Quota[i].GPUs = ptrTo[int64](2)
		}
	}
	live = save(edited, live)
	if diff := cmp.Diff(map[string][2]string{"ml.g6.12xlarge": {"2", "2"}, "ml.g5.2xlarge": {"1", "none"}}, limits(live.Spec)); diff != "" {
		t.Errorf("after cutting the L4 quota to 2, nominal and borrowing limit (-want +got):\n%s", diff)
	}

	edited.BorrowLimitPercent = 150
	live = save(edited, live)
	if diff := cmp.Diff(map[string][2]string{"ml.g6.12xlarge": {"2", "3"}, "ml.g5.2xlarge": {"1", "1"}}, limits(live.Spec)); diff != "" {
		t.Errorf("after raising the borrow limit to 150 %%, nominal and borrowing limit (-want +got):\n%s", diff)
	}
}

// What the form cannot express of an imported queue is named, to be kept:
// a preemption within the queue the form reads as lower priority among it.
func TestKeptAsIsNamesWhatTheFormDoesNotWrite(t *testing.T) {
	cq := &kueuev1beta2.ClusterQueue{Spec: kueuev1beta2.ClusterQueueSpec{
		QueueingStrategy: kueuev1beta2.StrictFIFO,
		Preemption: &kueuev1beta2.ClusterQueuePreemption{WithinClusterQueue: kueuev1beta2.PreemptionPolicyLowerOrNewerEqualPriority,
			ReclaimWithinCohort: kueuev1beta2.PreemptionPolicyAny}}}
	got := strings.Join(KeptAsIs(cq), "\n")
	for _, want := range []string{"Preemption within the queue LowerOrNewerEqualPriority", "Reclaim within cohort Any", "Queueing strategy StrictFIFO"} {
		if !strings.Contains(got, want) {
			t.Errorf("kept as is %q: no %q", got, want)
		}
	}
	if plain := KeptAsIs(&kueuev1beta2.ClusterQueue{}); strings.Contains(strings.Join(plain, "\n"), "Preemption") {
		t.Errorf("a queue with Kueue's default preemption keeps %q", plain)
	}
}
