package domain

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// queueWith is a managed ClusterQueue of team whose allocation annotation
// is t (raw, when t is a string).
func queueWith(team string, t any) *kueuev1beta2.ClusterQueue {
	raw, ok := t.(string)
	if !ok {
		b, _ := json.Marshal(t)
		raw = string(b)
	}
	return &kueuev1beta2.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "hp-" + team + "-clusterqueue",
		Labels:      map[string]string{ManagedByLabel: ManagedByValue, TeamLabel: team},
		Annotations: map[string]string{AllocationAnnotation: raw}}}
}

func TestTrustedTeam(t *testing.T) {
	alice, mallory := Member{Kind: "User", Name: "alice"}, Member{Kind: "User", Name: "mallory"}
	saved := Team{Name: "nlp", Enabled: true, FairShareWeight: 1, Members: []Member{alice}, Quota: []QuotaInput{{InstanceType: "ml.p5.48xlarge", GPUs: ptr.To[int64](8)}}}
	planted := saved
	planted.Members = []Member{alice, mallory}
	planted.FairShareWeight = 50
	revision := &TeamRevision{Revision: 3, Allocation: saved}
	unmanaged := queueWith("nlp", saved)
	unmanaged.Labels = nil
	legacy := planted
	legacy.Members = nil

	for _, tc := range []struct {
		name        string
		cq          *kueuev1beta2.ClusterQueue
		latest      *TeamRevision
		want        Team
		saved, ok   bool
		wantDiffers []Drift
	}{
		{name: "the revision, whatever the annotation says", cq: queueWith("nlp", planted), latest: revision, want: saved, saved: true, ok: true,
			wantDiffers: []Drift{
				{Object: "ClusterQueue hp-nlp-clusterqueue", Field: "members in the allocation annotation", Want: "none: members are kept in the team's saved revisions only", Got: "user alice, user mallory"},
				{Object: "ClusterQueue hp-nlp-clusterqueue", Field: "the rest of the allocation annotation", Want: "as saved", Got: "fair-share weight 1 → 50"},
			}},
		{name: "the revision when the annotation does not decode", cq: queueWith("nlp", "{"), latest: revision, want: saved, saved: true, ok: true,
			wantDiffers: []Drift{{Object: "ClusterQueue hp-nlp-clusterqueue", Field: "the allocation annotation", Want: "the last saved revision", Got: "unreadable"}}},
		{name: "the same: no drift", cq: queueWith("nlp", saved), latest: revision, want: saved, saved: true, ok: true},
		{name: "no revision: the annotation without members", cq: queueWith("nlp", planted), want: legacy, ok: true,
			wantDiffers: []Drift{{Object: "ClusterQueue hp-nlp-clusterqueue", Field: "members in the allocation annotation",
				Want: "none: the team has no saved revision, so no member on the ClusterQueue is trusted", Got: "user alice, user mallory"}}},
		{name: "another team's revision counts as none", cq: queueWith("nlp", planted), latest: &TeamRevision{Revision: 1, Allocation: Team{Name: "cv"}},
			want: legacy, ok: true,
			wantDiffers: []Drift{{Object: "ClusterQueue hp-nlp-clusterqueue", Field: "members in the allocation annotation",
				Want: "none: the team has no saved revision, so no member on the ClusterQueue is trusted", Got: "user alice, user mallory"}}},
		{name: "no revision and no readable annotation", cq: queueWith("nlp", "not json")},
		{name: "not managed", cq: unmanaged, latest: revision},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, saved, ok := TrustedTeam(tc.cq, tc.latest)
			if ok != tc.ok || saved != tc.saved {
				t.Fatalf("ok %v saved %v, want %v %v", ok, saved, tc.ok, tc.saved)
			}
			if !ok {
				return
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("trusted allocation (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantDiffers, AllocationDrift(tc.cq, got, saved)); diff != "" {
				t.Errorf("allocation drift (-want +got):\n%s", diff)
			}
			rep := DriftReport{Team: got, Saved: saved, Live: LiveTeamObjects{ClusterQueue: tc.cq}}
			membersDiffer := len(tc.wantDiffers) > 0 && tc.wantDiffers[0].Field == "members in the allocation annotation"
			if rep.MembersDrifted() != membersDiffer {
				t.Errorf("MembersDrifted() = %v, want %v", rep.MembersDrifted(), membersDiffer)
			}
		})
	}
}

func TestLatestRevisionData(t *testing.T) {
	for _, tc := range []struct {
		name string
		data map[string]string
		want map[string]string
	}{
		{"the newest of several", map[string]string{"rev-000001": "a", "rev-000012": "c", "rev-000002": "b"}, map[string]string{"rev-000012": "c"}},
		{"past a million revisions", map[string]string{"rev-999999": "a", "rev-1000000": "b"}, map[string]string{"rev-1000000": "b"}},
		{"other keys only", map[string]string{"note": "x"}, nil},
		{"empty", nil, nil},
	} {
		if diff := cmp.Diff(tc.want, LatestRevisionData(tc.data)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
	data, err := EncodeRevisions([]TeamRevision{{Revision: 1, Allocation: Team{Name: "a"}}, {Revision: 2, Allocation: Team{Name: "b"}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := LatestRevision[Team](LatestRevisionData(data)); got == nil || got.Revision != 2 || got.Allocation.Name != "b" {
		t.Errorf("the latest of an encoded history: %+v", got)
	}
}

func TestAnnotationWithoutMembers(t *testing.T) {
	withMembers := `{"name":"nlp","enabled":true,"members":[{"kind":"User","name":"alice"}],"fairShareWeight":3,"futureField":{"kept":1}}`
	unmanaged := queueWith("nlp", withMembers)
	unmanaged.Labels = nil
	for _, tc := range []struct {
		name string
		cq   *kueuev1beta2.ClusterQueue
		want string
		ok   bool
	}{
		{"members removed, every other field kept as it is", queueWith("nlp", withMembers),
			`{"enabled":true,"fairShareWeight":3,"futureField":{"kept":1},"name":"nlp"}`, true},
		{"no members: nothing to do", queueWith("nlp", `{"name":"nlp","enabled":true}`), "", false},
		{"not the console's", unmanaged, "", false},
		{"not readable", queueWith("nlp", "{"), "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := AnnotationWithoutMembers(tc.cq)
			if ok != tc.ok || got != tc.want {
				t.Errorf("got %q %v, want %q %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}
