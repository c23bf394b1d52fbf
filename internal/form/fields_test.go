package form_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/form"
)

// A team field lives in about nine places (domain, builder, form, template,
// drift and adopt, revisions, teams table and CSV). This test changes each
// field of a team in turn and follows it through what can lose it: the form
// (edit form → save), the Kueue objects (build → read back), adopting hand
// edits (objects → allocation), and the revision diff. A field added to
// Team or QuotaInput without a case here fails the test.
func TestEveryTeamFieldSurvivesTheWritePath(t *testing.T) {
	base := domain.Team{
		Name: "ml", Description: "research", Enabled: true, FairShareWeight: 10,
		Preemption: domain.PreemptLowerPriority, Lending: domain.LendAndBorrow, BorrowLimitPercent: 50,
		Members: []domain.Member{{Kind: "User", Name: "alice"}},
		Quota:   []domain.QuotaInput{{InstanceType: "ml.p5.48xlarge", GPUs: ptr.To[int64](4)}},
	}
	type fieldEdit struct {
		field string
		set   func(*domain.Team)
		// onClusterQueue: the field is stated on the ClusterQueue, so adopting
		// a hand edit of it recovers it (the others live on the namespace and
		// the member binding, which adopt keeps from the stored allocation).
		onClusterQueue bool
	}
	quota := func(set func(*domain.QuotaInput)) func(*domain.Team) {
		return func(t *domain.Team) { set(&t.Quota[0]) }
	}
	edits := []fieldEdit{
		{"Description", func(t *domain.Team) { t.Description = "inference" }, false},
		{"Enabled", func(t *domain.Team) { t.Enabled = false }, true},
		{"Members", func(t *domain.Team) { t.Members = append(t.Members, domain.Member{Kind: "Group", Name: "ml"}) }, false},
		{"FairShareWeight", func(t *domain.Team) { t.FairShareWeight = 30 }, true},
		{"Preemption", func(t *domain.Team) { t.Preemption = domain.PreemptNever }, true},
		{"Lending", func(t *domain.Team) { t.Lending = domain.DontLend }, true},
		{"BorrowLimitPercent", func(t *domain.Team) { t.BorrowLimitPercent = 100 }, true},
		{"Quota.InstanceType", quota(func(q *domain.QuotaInput) { q.InstanceType = "ml.p4d.24xlarge" }), true},
		{"Quota.Count", quota(func(q *domain.QuotaInput) { q.GPUs, q.Count = nil, ptr.To[int64](2) }), true},
		{"Quota.GPUs", quota(func(q *domain.QuotaInput) { q.GPUs = ptr.To[int64](6) }), true},
		{"Quota.Neuron", func(t *domain.Team) {
			t.Quota = []domain.QuotaInput{{InstanceType: "ml.trn1.32xlarge", Neuron: ptr.To[int64](8)}}
		}, true},
		{"Quota.VCPU", quota(func(q *domain.QuotaInput) { q.VCPU = ptr.To[int64](100) }), true},
		{"Quota.MemoryGiB", quota(func(q *domain.QuotaInput) { q.MemoryGiB = ptr.To[int64](700) }), true},
		{"Quota.Partition", func(t *domain.Team) {
			t.Quota = []domain.QuotaInput{{InstanceType: "ml.p4de.24xlarge", Partition: "mig-1g.10gb", Partitions: ptr.To[int64](7)}}
		}, true},
		{"Quota.Partitions", func(t *domain.Team) {
			t.Quota = []domain.QuotaInput{{InstanceType: "ml.p4de.24xlarge", GPUs: ptr.To[int64](2), Partition: "mig-3g.40gb", Partitions: ptr.To[int64](4)}}
		}, true},
		{"Quota.BorrowGPUs", quota(func(q *domain.QuotaInput) { q.BorrowGPUs = ptr.To[int64](6) }), true},
		{"Quota.BorrowNeuron", func(t *domain.Team) {
			t.Quota = []domain.QuotaInput{{InstanceType: "ml.trn1.32xlarge", Neuron: ptr.To[int64](8), BorrowNeuron: ptr.To[int64](3)}}
		}, true},
		{"Quota.BorrowVCPU", quota(func(q *domain.QuotaInput) { q.BorrowVCPU = ptr.To[int64](30) }), true},
		{"Quota.BorrowMemoryGiB", quota(func(q *domain.QuotaInput) { q.BorrowMemoryGiB = ptr.To[int64](100) }), true},
		{"Quota.LendGPUs", quota(func(q *domain.QuotaInput) { q.LendGPUs = ptr.To[int64](2) }), true},
		{"Quota.LendNeuron", func(t *domain.Team) {
			t.Quota = []domain.QuotaInput{{InstanceType: "ml.trn1.32xlarge", Neuron: ptr.To[int64](8), LendNeuron: ptr.To[int64](3)}}
		}, true},
		{"Quota.LendVCPU", quota(func(q *domain.QuotaInput) { q.LendVCPU = ptr.To[int64](40) }), true},
		{"Quota.LendMemoryGiB", quota(func(q *domain.QuotaInput) { q.LendMemoryGiB = ptr.To[int64](500) }), true},
		{"Cohort", func(t *domain.Team) { t.Cohort = domain.DefaultSettings.Cohort + "-research" }, true},
		{"RecentUseOrder", func(t *domain.Team) { t.RecentUseOrder = true }, true},
	}
	covered := map[string]bool{"Name": true} // the name is the team's identity: it never changes
	for _, c := range edits {
		covered[c.field] = true
	}
	for _, f := range reflect.VisibleFields(reflect.TypeOf(domain.Team{})) {
		if f.Name != "Quota" && !covered[f.Name] {
			t.Errorf("Team.%s has no case here: follow it through the write path", f.Name)
		}
	}
	for _, f := range reflect.VisibleFields(reflect.TypeOf(domain.QuotaInput{})) {
		if !covered["Quota."+f.Name] {
			t.Errorf("QuotaInput.%s has no case here: follow it through the write path", f.Name)
		}
	}

	s := domain.DefaultSettings
	shapes := func(instanceType string) (domain.InstanceShape, bool) {
		s, ok := domain.LookupShape(instanceType)
		if instanceType == "ml.p4de.24xlarge" { // its nodes partition half their GPUs
			s.Partitions = map[string]int64{"mig-1g.10gb": 14, "mig-3g.40gb": 4}
		}
		return s, ok
	}
	for _, c := range edits {
		t.Run(c.field, func(t *testing.T) {
			want := base
			want.Members = append([]domain.Member(nil), base.Members...)
			want.Quota = append([]domain.QuotaInput(nil), base.Quota...)
			c.set(&want)

			// The edit form shows it and saves it back.
			got, errs := form.FromTeam(want).Validate(shapes)
			if errs.Any() {
				t.Fatalf("the form refuses it: %v", errs.Fields())
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("form round trip (-want +got):\n%s", diff)
			}

			// The objects carry it, and it reads back from them: the
			// revision records all of it, the ClusterQueue all but the
			// members.
			objs, err := domain.BuildTeam(s, want, shapes)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, *objs.Allocation); diff != "" {
				t.Errorf("the revision's allocation (-want +got):\n%s", diff)
			}
			cq := clusterQueue(t, objs)
			stored, ok := domain.TeamFromClusterQueue(cq)
			if !ok {
				t.Fatal("the ClusterQueue does not read back as a team")
			}
			onQueue := want
			onQueue.Members = nil
			if diff := cmp.Diff(onQueue, stored); diff != "" {
				t.Errorf("read back (-want +got):\n%s", diff)
			}

			// A hand edit that makes the objects say it is adopted.
			adopted, _ := domain.AdoptTeam(s, base, cq, shapes)
			if c.onClusterQueue {
				adoptedObjs, err := domain.BuildTeam(s, adopted, shapes)
				if err != nil {
					t.Fatal(err)
				}
				if drift, err := domain.DriftOf(adoptedObjs, domain.LiveTeamObjects{ClusterQueue: cq, LocalQueue: localQueue(t, objs), Flavors: flavors(t, objs)}); err != nil || len(drift) > 0 {
					t.Errorf("adopting the edited ClusterQueue leaves drift %v (%v)", drift, err)
				}
			} else if diff := cmp.Diff(base, adopted, cmp.FilterPath(func(p cmp.Path) bool { return p.String() == "Quota" }, cmp.Ignore())); diff != "" {
				t.Errorf("adopting changed a field the ClusterQueue does not hold (-stored +adopted):\n%s", diff)
			}

			// The revision history says what changed.
			if diff := domain.DiffTeams(base, want); len(diff) == 0 {
				t.Error("the revision diff reports no change")
			}
		})
	}
}

// decode is an apply configuration as the apiserver would store it.
func decode[T any](t *testing.T, ac any) *T {
	t.Helper()
	var out T
	data, err := json.Marshal(ac)
	if err == nil {
		err = json.Unmarshal(data, &out)
	}
	if err != nil {
		t.Fatal(err)
	}
	return &out
}

func clusterQueue(t *testing.T, objs domain.TeamObjects) *kueuev1beta2.ClusterQueue {
	return decode[kueuev1beta2.ClusterQueue](t, objs.ClusterQueue)
}

func localQueue(t *testing.T, objs domain.TeamObjects) *kueuev1beta2.LocalQueue {
	return decode[kueuev1beta2.LocalQueue](t, objs.LocalQueue)
}

func flavors(t *testing.T, objs domain.TeamObjects) map[string]*kueuev1beta2.ResourceFlavor {
	t.Helper()
	out := map[string]*kueuev1beta2.ResourceFlavor{}
	for _, ac := range objs.Flavors {
		rf := decode[kueuev1beta2.ResourceFlavor](t, ac)
		out[rf.Name] = rf
	}
	return out
}
