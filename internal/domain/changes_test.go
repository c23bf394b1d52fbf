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
		})
	}
	if c := ChangesBetween(nil, BuildSnapshot(SnapshotInput{Settings: s}, now)); !c.Everything {
		t.Errorf("the first snapshot changes %+v, want everything", c)
	}
}

// Changes a slow reader did not take merge into one.
func TestChangesAdd(t *testing.T) {
	c := Changes{Version: 3, Teams: map[string]bool{"a": true}}
	c.Add(Changes{Version: 4, Clock: true, Teams: map[string]bool{"b": true}, Classes: map[string]bool{"batch": true}})
	want := Changes{Version: 4, Clock: true, Teams: map[string]bool{"a": true, "b": true}, Classes: map[string]bool{"batch": true}}
	if diff := gocmp.Diff(want, c); diff != "" {
		t.Errorf("merged (-want +got):\n%s", diff)
	}
}
