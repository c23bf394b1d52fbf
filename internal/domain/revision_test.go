package domain

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"
)

func baseTeam() Team {
	return Team{Name: "research", Enabled: true, FairShareWeight: 10, Preemption: PreemptLowerPriority,
		Lending: LendAndBorrow, BorrowLimitPercent: 50,
		Members: []Member{{Kind: "User", Name: "alice"}, {Kind: "Group", Name: "ml"}},
		Quota:   []QuotaInput{{InstanceType: "ml.p5.48xlarge", GPUs: ptr.To[int64](4)}}}
}

func TestDiffTeams(t *testing.T) {
	cases := []struct {
		name   string
		change func(*Team)
		want   []string
	}{
		{"same allocation", func(*Team) {}, nil},
		{"GPUs", func(t *Team) { t.Quota[0].GPUs = ptr.To[int64](6) }, []string{"quota ml.p5.48xlarge GPUs 4 → 6"}},
		{"borrow limit", func(t *Team) { t.BorrowLimitPercent = 100 }, []string{"borrow limit 50 % → 100 %"}},
		{"disabled", func(t *Team) { t.Enabled = false }, []string{"Enabled → Disabled"}},
		{"lend limits set and one cleared", func(t *Team) { t.Quota[0].LendGPUs, t.Quota[0].LendVCPU = ptr.To[int64](2), ptr.To[int64](40) },
			[]string{"lend limit ml.p5.48xlarge GPUs all → 2", "lend limit ml.p5.48xlarge vCPU all → 40"}},
		{"row added with a lend limit", func(t *Team) {
			t.Quota = append(t.Quota, QuotaInput{InstanceType: "ml.g5.2xlarge", Count: ptr.To[int64](2), LendGPUs: ptr.To[int64](1)})
		}, []string{"quota ml.g5.2xlarge added: 2 instances, 1 GPUs lendable"}},
		{"vCPU given where it was derived", func(t *Team) { t.Quota[0].VCPU = ptr.To[int64](48) },
			[]string{"quota ml.p5.48xlarge vCPU derived → 48"}},
		{"row added and removed", func(t *Team) {
			t.Quota = []QuotaInput{{InstanceType: "ml.g5.2xlarge", Count: ptr.To[int64](2)}}
		}, []string{"quota ml.g5.2xlarge added: 2 instances", "quota ml.p5.48xlarge removed (was 4 GPUs)"}},
		{"lending without borrowing hides the borrow limit", func(t *Team) { t.Lending, t.BorrowLimitPercent = DontLend, 0 },
			[]string{"lending lend and borrow → don't lend", "borrow limit 50 % → 0 %"}},
		{"weight, preemption, description", func(t *Team) {
			t.FairShareWeight, t.Preemption, t.Description = 20, PreemptNever, "LLM pretraining"
		}, []string{`description (none) → "LLM pretraining"`, "fair-share weight 10 → 20", "preemption lower priority → never"}},
		{"members", func(t *Team) { t.Members = []Member{{Kind: "User", Name: "alice"}, {Kind: "User", Name: "bob"}} },
			[]string{"member added: user bob", "member removed: group ml"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before, after := baseTeam(), baseTeam()
			tc.change(&after)
			if diff := cmp.Diff(tc.want, DiffTeams(before, after)); diff != "" {
				t.Errorf("DiffTeams (-want +got):\n%s", diff)
			}
		})
	}
	// Between two non-borrowing allocations the borrow limit does not matter.
	a, b := baseTeam(), baseTeam()
	a.Lending, b.Lending, b.BorrowLimitPercent = Lend, Lend, 80
	if got := DiffTeams(a, b); len(got) != 0 {
		t.Errorf("borrow limit of a lend-only team reported: %v", got)
	}
}

func TestDiffPolicies(t *testing.T) {
	base := Policy{Prioritization: TaskRanking, IdleAllocation: IdleFairShare,
		Classes: []PriorityClass{{Name: "high", Weight: 80}, {Name: "low", Weight: 20}}}
	cases := []struct {
		name   string
		change func(*Policy)
		want   []string
	}{
		{"same", func(*Policy) {}, nil},
		{"prioritization", func(p *Policy) { p.Prioritization = FirstComeFirstServe },
			[]string{"prioritization task ranking → first come, first served"}},
		{"idle", func(p *Policy) { p.IdleAllocation = IdleFirstComeFirstServe },
			[]string{"idle compute fair share → first come, first served"}},
		{"classes", func(p *Policy) {
			p.Classes = []PriorityClass{{Name: "high", Weight: 90}, {Name: "urgent", Weight: 100}}
		},
			[]string{"priority class high weight 80 → 90", "priority class urgent added (weight 100)", "priority class low removed (was weight 20)"}},
		{"alerts", func(p *Policy) {
			p.Alerts = PolicyAlerts{LongWaitMinutes: 30, IdleUtilizationPercent: 20}
			p.Classes[1].LongWaitMinutes = 480
		},
			[]string{"long wait alert default (1h 00m) → 30m 00s", "idle GPU alert under default (10 %) → 20 %", "priority class low long wait alert the policy's → 8h 00m"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			after := base
			after.Classes = append([]PriorityClass(nil), base.Classes...)
			tc.change(&after)
			if diff := cmp.Diff(tc.want, DiffPolicies(base, after)); diff != "" {
				t.Errorf("DiffPolicies (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNextRevision(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	t1, t2 := baseTeam(), baseTeam()
	t2.FairShareWeight = 30
	last := &TeamRevision{Revision: 7, Action: ActionUpdate, Allocation: t1}
	lastRollback := &TeamRevision{Revision: 8, Action: ActionRollback, RolledBackTo: 3, Allocation: t1}
	type want struct {
		record       bool
		revision     int
		action       Action
		rolledBackTo int
	}
	cases := []struct {
		name  string
		last  *TeamRevision
		alloc Team
		facts RevisionFacts
		want  want
	}{
		{"first apply creates", nil, t1, RevisionFacts{Created: true, Changed: true}, want{true, 1, ActionCreate, 0}},
		{"first record of an existing team", nil, t1, RevisionFacts{}, want{true, 1, ActionUpdate, 0}},
		{"unchanged re-apply records nothing", last, t1, RevisionFacts{}, want{false, 8, ActionUpdate, 0}},
		{"new allocation", last, t2, RevisionFacts{Changed: true}, want{true, 8, ActionUpdate, 0}},
		{"retry after the objects were written", last, t2, RevisionFacts{}, want{true, 8, ActionUpdate, 0}},
		{"re-apply over hand edits", last, t1, RevisionFacts{Changed: true, Note: "re-applied"}, want{true, 8, ActionUpdate, 0}},
		{"rollback", last, t1, RevisionFacts{RollbackTo: 3}, want{true, 8, ActionRollback, 3}},
		{"retried rollback is not recorded twice", lastRollback, t1, RevisionFacts{RollbackTo: 3}, want{false, 9, ActionRollback, 3}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.facts
			f.By, f.At = "alice", at
			rev, record := NextRevision(tc.last, tc.alloc, f)
			got := want{record, rev.Revision, rev.Action, rev.RolledBackTo}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("NextRevision (-want +got):\n%s", diff)
			}
			if rev.By != "alice" || !rev.At.Equal(at) {
				t.Errorf("revision by %q at %v", rev.By, rev.At)
			}
		})
	}
}

func TestEncodeRevisionsKeepsTheNewest(t *testing.T) {
	var revs []TeamRevision
	for i := 1; i <= 57; i++ {
		team := baseTeam()
		team.FairShareWeight = int64(i)
		revs = append(revs, TeamRevision{Revision: i, Action: ActionUpdate, Allocation: team})
	}
	data, err := EncodeRevisions(revs)
	if err != nil {
		t.Fatal(err)
	}
	back := DecodeRevisions[Team](data)
	if len(back) != RevisionLimit || back[0].Revision != 8 || back[len(back)-1].Revision != 57 {
		t.Fatalf("kept %d revisions, %d to %d; want 50, 8 to 57", len(back), back[0].Revision, back[len(back)-1].Revision)
	}
	if _, ok := data["rev-000057"]; !ok {
		t.Errorf("keys are not rev-NNNNNN: %v", keys(data))
	}
	if diff := cmp.Diff(revs[56], back[49]); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}

	// Revisions too big for one ConfigMap: the oldest go, the newest stays.
	huge := baseTeam()
	huge.Description = strings.Repeat("x", 100<<10)
	var big []TeamRevision
	for i := 1; i <= 20; i++ {
		big = append(big, TeamRevision{Revision: i, Allocation: huge})
	}
	data, err = EncodeRevisions(big)
	if err != nil {
		t.Fatal(err)
	}
	size := 0
	for k, v := range data {
		size += len(k) + len(v)
	}
	back = DecodeRevisions[Team](data)
	if size > maxRevisionsBytes || back[len(back)-1].Revision != 20 || len(back) >= 20 {
		t.Errorf("%d revisions in %d bytes, newest %d", len(back), size, back[len(back)-1].Revision)
	}

	// Entries edited by hand into something unreadable are skipped.
	data["rev-000099"] = "{not json"
	data["notes"] = "kept by someone"
	if got := DecodeRevisions[Team](data); len(got) != len(back) {
		t.Errorf("decoded %d revisions, want %d", len(got), len(back))
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestTeamEventMessage(t *testing.T) {
	before, after := baseTeam(), baseTeam()
	after.Quota[0].GPUs = ptr.To[int64](6)
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cases := []struct {
		rev        TeamRevision
		prev       *TeamRevision
		reason     string
		msgPrefix  string
		msgContent string
	}{
		{TeamRevision{Revision: 1, At: at, By: "alice", Action: ActionCreate, Allocation: before}, nil,
			ReasonTeamCreated, "alice created team research (revision 1): ", "quota ml.p5.48xlarge: 4 GPUs"},
		{TeamRevision{Revision: 2, At: at, By: "bob", Action: ActionUpdate, Allocation: after}, &TeamRevision{Revision: 1, Allocation: before},
			ReasonTeamUpdated, "bob updated team research (revision 2): ", "quota ml.p5.48xlarge GPUs 4 → 6"},
		{TeamRevision{Revision: 3, At: at, By: "carol", Action: ActionRollback, RolledBackTo: 1, Allocation: before}, &TeamRevision{Revision: 2, Allocation: after},
			ReasonTeamRolledBack, "carol rolled team research back to revision 1 (now revision 3)", "GPUs 6 → 4"},
	}
	for _, tc := range cases {
		t.Run(tc.reason, func(t *testing.T) {
			ev := TeamEvent(nil, tc.rev, tc.prev)
			if ev.Reason != tc.reason || ev.Namespace != EventNamespace || ev.InvolvedObject.Kind != "ClusterQueue" {
				t.Errorf("event %s in %s on %s", ev.Reason, ev.Namespace, ev.InvolvedObject.Kind)
			}
			if !strings.HasPrefix(ev.Message, tc.msgPrefix) || !strings.Contains(ev.Message, tc.msgContent) {
				t.Errorf("message %q, want %q … %q", ev.Message, tc.msgPrefix, tc.msgContent)
			}
		})
	}
	long := TeamRevision{Revision: 1, At: at, By: "alice", Action: ActionCreate, Allocation: before}
	for i := range 100 {
		long.Allocation.Members = append(long.Allocation.Members, Member{Kind: "User", Name: fmt.Sprintf("user-with-a-long-name-%d", i)})
	}
	if n := len([]rune(TeamEvent(nil, long, nil).Message)); n > maxEventMessage {
		t.Errorf("message of %d characters", n)
	}
}

// A conflict lists the other admin's change; a reorder of instance types is
// a change too (Kueue tries flavors in order).
func TestConflictDetectsReorder(t *testing.T) {
	was := Team{Name: "ml", Enabled: true, Quota: []QuotaInput{{InstanceType: "ml.p5.48xlarge", GPUs: ptr.To[int64](4)},
		{InstanceType: "ml.g5.2xlarge", Count: ptr.To[int64](2)}}}
	swapped := was
	swapped.Quota = []QuotaInput{was.Quota[1], was.Quota[0]}
	if SameAllocation(was, swapped) {
		t.Error("flavor order is part of the allocation (Kueue tries flavors in order)")
	}
	if !SameAllocation(was, was) {
		t.Error("an allocation differs from itself")
	}
}

func TestNoRevisionSaysWhy(t *testing.T) {
	revs := []TeamRevision{{Revision: 52}, {Revision: 53}, {Revision: 54}}
	for n, want := range map[int]string{
		99: "There is no revision 99: the newest is 54.",
		0:  "There is no revision 0: the newest is 54.",
		3:  "There is no revision 3: only the last 50 revisions are kept.",
	} {
		if got := NoRevision(revs, n); got != want {
			t.Errorf("revision %d: %q, want %q", n, got, want)
		}
	}
}
