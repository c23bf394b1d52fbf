package domain

import (
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/kueuetest"
)

// What changed between two snapshots names the teams and classes whose
// figures may differ, and nothing else: a task of one team marks that
// team and its class, a quota change its team, the clock's cadence the
// clock, a new priority class everything.
func TestChangesBetweenSnapshots(t *testing.T) {
	s := DefaultSettings
	now := time.Date(2026, 11, 25, 12, 0, 5, 0, time.UTC)
	objs := kueuetest.Cluster(s, s.Cohort, 3, 12, now)
	pending := func(team, name, class string) *kueuev1beta2.Workload {
		return kueuetest.MakeWorkload(s, s.Namespace(team), name).Queue(s.LocalQueue(team)).Class(class).
			GPUs(1, 1).Created(now).Pending("Pending", "waits for quota", now).Obj()
	}
	for _, tc := range []struct {
		name   string
		change func(m *Model)
		after  time.Duration
		want   Changes
	}{
		{"nothing", func(*Model) {}, time.Second, Changes{}},
		{"a task of one team", func(m *Model) { m.SetWorkload(pending("team-001", "new", "training")) }, time.Second,
			Changes{Teams: map[string]bool{"team-001": true}, Classes: map[string]bool{"training": true}}},
		{"a task deleted", func(m *Model) { m.DeleteWorkload(s.Namespace("team-002"), "job-000002") }, time.Second,
			Changes{Teams: map[string]bool{"team-002": true}, Classes: map[string]bool{"experimentation": true}}},
		{"a quota", func(m *Model) {
			cq := objs.ClusterQueues[0].DeepCopy()
			cq.Spec.ResourceGroups[0].Flavors[0].Resources[0].NominalQuota.Set(16)
			m.SetClusterQueue(cq)
		}, time.Second, Changes{Teams: map[string]bool{"team-000": true}}},
		{"the clock's cadence", func(*Model) {}, ClockCadence, Changes{Clock: true}},
		{"a priority class", func(m *Model) {
			m.SetPolicyObjects(nil, append(objs.Classes, &kueuev1beta2.WorkloadPriorityClass{Value: 95}))
		}, time.Second, Changes{Everything: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := NewModel(s)
			m.Load(SnapshotInput{Settings: s, ClusterQueues: objs.ClusterQueues, LocalQueues: objs.LocalQueues,
				Workloads: objs.Workloads, Classes: objs.Classes})
			before := m.Snapshot(now)
			tc.change(m)
			after := m.Snapshot(now.Add(tc.after))
			tc.want.Version = after.Version
			if diff := gocmp.Diff(tc.want, ChangesBetween(before, after)); diff != "" {
				t.Errorf("changes (-want +got):\n%s", diff)
			}
			// Published after before, after keeps them: each reader gets
			// them as computed, and its own (Add changes what it got).
			if diff := gocmp.Diff(tc.want, Follow(before, after)); diff != "" {
				t.Errorf("changes followed (-want +got):\n%s", diff)
			}
			for range 2 {
				kept := ChangesBetween(before, after)
				if diff := gocmp.Diff(tc.want, kept); diff != "" {
					t.Errorf("changes kept (-want +got):\n%s", diff)
				}
				kept.Add(Changes{Teams: map[string]bool{"a reader's own": true}, Classes: map[string]bool{"a reader's own": true}})
			}
		})
	}
	if c := ChangesBetween(nil, BuildSnapshot(SnapshotInput{Settings: s}, now)); !c.Everything {
		t.Errorf("the first snapshot changes %+v, want everything", c)
	}
}

// Changes a slow reader did not take merge into one.
// Views move from any of the last snapshots to the newest: the changes
// of the publishes between are kept, and merged they are the changes
// between the two.
func TestChangesOverSeveralPublishes(t *testing.T) {
	s := DefaultSettings
	now := time.Date(2026, 11, 25, 12, 0, 5, 0, time.UTC)
	objs := kueuetest.Cluster(s, s.Cohort, 3, 12, now)
	m := NewModel(s)
	m.Load(SnapshotInput{Settings: s, ClusterQueues: objs.ClusterQueues, LocalQueues: objs.LocalQueues,
		Workloads: objs.Workloads, Classes: objs.Classes})
	published := []*Snapshot{m.Snapshot(now)}
	publish := func(change func()) {
		change()
		next := m.Snapshot(now.Add(time.Duration(len(published)) * time.Second))
		next.Version = uint64(len(published) + 1)
		Follow(published[len(published)-1], next)
		published = append(published, next)
	}
	publish(func() { m.DeleteWorkload(s.Namespace("team-002"), "job-000002") })
	publish(func() {})
	publish(func() {
		m.SetWorkload(kueuetest.MakeWorkload(s, s.Namespace("team-001"), "new").Queue(s.LocalQueue("team-001")).Class("training").
			GPUs(1, 1).Created(now).Pending("Pending", "waits for quota", now).Obj())
	})
	newest := published[len(published)-1]
	for i, from := range published[:len(published)-1] {
		if _, kept := newest.stepsFrom(from); !kept {
			t.Errorf("the changes from the snapshot published %d before are not kept", len(published)-1-i)
		}
	}
	want := Changes{Version: newest.Version, Teams: map[string]bool{"team-001": true, "team-002": true},
		Classes: map[string]bool{"training": true, "experimentation": true}}
	if diff := gocmp.Diff(want, ChangesBetween(published[0], newest)); diff != "" {
		t.Errorf("changes over three publishes (-want +got):\n%s", diff)
	}
	want = Changes{Version: newest.Version, Teams: map[string]bool{"team-001": true}, Classes: map[string]bool{"training": true}}
	if diff := gocmp.Diff(want, ChangesBetween(published[1], newest)); diff != "" {
		t.Errorf("changes over the last two publishes (-want +got):\n%s", diff)
	}
	// A snapshot the steps do not start from is compared.
	other := BuildSnapshot(SnapshotInput{Settings: s, ClusterQueues: objs.ClusterQueues, LocalQueues: objs.LocalQueues,
		Workloads: objs.Workloads, Classes: objs.Classes}, now)
	if _, kept := newest.stepsFrom(other); kept {
		t.Error("the steps start from a snapshot that was never published before")
	}
	if c := ChangesBetween(other, newest); !c.Teams["team-001"] || !c.Teams["team-002"] {
		t.Errorf("changes from another snapshot = %+v, want team-001's and team-002's", c)
	}
}

func TestChangesAdd(t *testing.T) {
	c := Changes{Version: 3, Teams: map[string]bool{"a": true}}
	c.Add(Changes{Version: 4, Clock: true, Teams: map[string]bool{"b": true}, Classes: map[string]bool{"batch": true}})
	want := Changes{Version: 4, Clock: true, Teams: map[string]bool{"a": true, "b": true}, Classes: map[string]bool{"batch": true}}
	if diff := gocmp.Diff(want, c); diff != "" {
		t.Errorf("merged (-want +got):\n%s", diff)
	}
}
