package kueue_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/kueue"
	"github.com/openquota/console/internal/kueuetest"
)

// sizes are the cluster sizes the read model benchmarks run at: one event
// must cost the same at each.
var sizes = []int{10_000, 50_000, 200_000}

// loaded is a model of a synthetic cluster of 200 teams and n Workloads,
// with a snapshot taken, and a Workload to change.
func loaded(n int, now time.Time) (*domain.Model, *kueuev1beta2.Workload) {
	o := kueuetest.Cluster(domain.DefaultSettings, domain.DefaultSettings.Cohort, 200, n, now)
	m := domain.NewModel(domain.DefaultSettings)
	m.Load(inputOf(domain.DefaultSettings, o))
	m.Snapshot(now)
	return m, o.Workloads[2] // a pending one
}

// BenchmarkOneEvent is the read model taking in one Workload change (Kueue
// updating a pending Workload's status) and publishing the next snapshot,
// at 10 000, 50 000 and 200 000 Workloads.
func BenchmarkOneEvent(b *testing.B) {
	for _, n := range sizes {
		b.Run(fmt.Sprintf("workloads=%d", n), func(b *testing.B) {
			now := time.Now()
			m, wl := loaded(n, now)
			versions := [2]*kueuev1beta2.Workload{wl.DeepCopy(), wl.DeepCopy()}
			versions[1].Status.Conditions[0].Message = "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor ml.p5.48xlarge, 3 more needed"
			versions[1].Status.Conditions[0].LastTransitionTime = metav1.NewTime(now)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				m.SetWorkload(versions[i%2])
				m.Snapshot(now)
			}
		})
	}
}

// BenchmarkClassTableAfterAnEvent is the Tasks page's class table (and its
// CSV) right after a change: the event, the snapshot, the statistics.
func BenchmarkClassTableAfterAnEvent(b *testing.B) {
	for _, n := range sizes {
		b.Run(fmt.Sprintf("workloads=%d", n), func(b *testing.B) {
			now := time.Now()
			m, wl := loaded(n, now)
			versions := [2]*kueuev1beta2.Workload{wl.DeepCopy(), wl.DeepCopy()}
			versions[1].Status.Conditions[0].Message = "changed"
			snap := m.Snapshot(now)
			teams := snap.TeamNames()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				m.SetWorkload(versions[i%2])
				snap := m.Snapshot(now)
				snap.StatsByClass(domain.Selection{}, snap.Classes, 24*time.Hour, now)
				snap.StatsByTeamAndClass(domain.Selection{}, teams, snap.Classes, 24*time.Hour, now)
			}
		})
	}
}

// BenchmarkBuildSnapshot is a from-scratch build at 200 teams and 50 000
// Workloads (the console does it once, at start).
func BenchmarkBuildSnapshot(b *testing.B) {
	now := time.Now()
	in := inputOf(domain.DefaultSettings, kueuetest.Cluster(domain.DefaultSettings, domain.DefaultSettings.Cohort, 200, 50_000, now))
	b.ReportAllocs()
	for b.Loop() {
		domain.BuildSnapshot(in, now)
	}
}

// BenchmarkFullTaskList is the first page of the whole task list in its
// default order, once per snapshot (pages and live updates of the view share it).
func BenchmarkFullTaskList(b *testing.B) {
	now := time.Now()
	m, wl := loaded(50_000, now)
	b.ReportAllocs()
	for b.Loop() {
		m.SetWorkload(wl)
		snap := m.Snapshot(now)
		for _, f := range snap.Tasks(domain.TaskQuery{})[:50] {
			snap.Task(f)
		}
	}
}

// BenchmarkFirstTaskPage is the live Tasks view's first page as it shows
// it on every change: merged from the queues' first tasks, the rest counted.
func BenchmarkFirstTaskPage(b *testing.B) {
	now := time.Now()
	m, wl := loaded(50_000, now)
	b.ReportAllocs()
	for b.Loop() {
		m.SetWorkload(wl)
		snap := m.Snapshot(now)
		page, _ := snap.TasksPage(domain.TaskQuery{}, 0, 50)
		for _, f := range page {
			snap.Task(f)
		}
	}
}

// TestMemoryPerWorkload reports what the console keeps per Workload: what the
// informer cache holds (kueue.WorkloadTask) and the read model. It is a
// measurement, with a bound that catches a return of whole objects.
func TestMemoryPerWorkload(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 50 000 Workloads")
	}
	const n = 50_000
	now := time.Now()
	o := kueuetest.Cluster(domain.DefaultSettings, domain.DefaultSettings.Cohort, 200, n, now)
	before := heap()
	kept := make([]*kueue.WorkloadTask, 0, n)
	m := domain.NewModel(domain.DefaultSettings)
	m.Load(domain.SnapshotInput{Settings: domain.DefaultSettings, ClusterQueues: o.ClusterQueues, LocalQueues: o.LocalQueues, Classes: o.Classes})
	placement := m.Placement() // the cache's Workloads come after the queues
	for _, wl := range o.Workloads {
		task := domain.FactsOf(wl, domain.DefaultSettings, "")
		placement.Place(task)
		w := &kueue.WorkloadTask{Namespace: task.Namespace, Name: task.Name, UID: wl.UID, ResourceVersion: "123456", Task: task}
		kept = append(kept, w)
		m.SetTask(w.Task)
	}
	snap := m.Snapshot(now)
	perWorkload := float64(heap()-before) / n
	runtime.KeepAlive(kept)
	runtime.KeepAlive(o)
	t.Logf("%.0f bytes per Workload (cache and read model, %d tasks)", perWorkload, snap.Size)
	if perWorkload > 1000 { // 700 bytes measured; 1 369 with a copy of each task
		t.Errorf("%.0f bytes per Workload: the cache or the read model keeps more than what the pages show, or a task twice", perWorkload)
	}
}

func heap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

func TestSyntheticClusterSnapshot(t *testing.T) {
	now := time.Now()
	snap := domain.BuildSnapshot(inputOf(domain.DefaultSettings, kueuetest.Cluster(domain.DefaultSettings, domain.DefaultSettings.Cohort, 20, 600, now)), now)
	counts := map[domain.TaskState]int{}
	for _, f := range snap.Tasks(domain.TaskQuery{State: domain.ListAll}) {
		counts[f.State]++
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
