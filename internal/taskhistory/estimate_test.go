package taskhistory

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/kueuetest"
)

func TestWaitEstimateWords(t *testing.T) {
	day := 24 * time.Hour
	for _, tc := range []struct {
		name         string
		ahead        int
		rate         AdmissionRate
		short, basis string
	}{
		{"the issue's example", 3, AdmissionRate{Tasks: 192, Recorded: day}, "about 30 min",
			"about 30 min: 3 ahead, 8.0 admitted per hour over the last day"},
		{"next in line", 0, AdmissionRate{Tasks: 48, Recorded: day}, "about 30 min",
			"about 30 min: 0 ahead, 2.0 admitted per hour over the last day"},
		{"hours", 40, AdmissionRate{Tasks: 24, Recorded: day}, "about 41 h",
			"about 41 h: 40 ahead, 1.0 admitted per hour over the last day"},
		{"days", 99, AdmissionRate{Tasks: 12, Recorded: day}, "about 8 days",
			"about 8 days: 99 ahead, 0.50 admitted per hour over the last day"},
		{"no admissions", 2, AdmissionRate{Recorded: day}, "unknown",
			"unknown: 2 ahead, no admissions recorded over the last day"},
		{"too little record", 2, AdmissionRate{Tasks: 5, Recorded: 5 * time.Minute}, "unknown",
			"unknown: 2 ahead; the task history holds only 5 min of the last day, too little to know how fast the queue admits (it needs 15 min)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			short, basis := EstimateWait(tc.ahead, tc.rate).Words(strconv.Itoa(tc.ahead) + " ahead")
			if diff := cmp.Diff([]string{tc.short, tc.basis}, []string{short, basis}); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// A task that has waited three times its estimate, 10 minutes at least,
// says so rather than promise its queue's pace (it read "about 3 min" after
// two hours at the head of its queue).
func TestAnOverdueTaskSaysSo(t *testing.T) {
	e := EstimateWait(0, AdmissionRate{Tasks: 480, Recorded: 24 * time.Hour}) // 20 an hour: about 3 min
	for waited, want := range map[time.Duration][2]string{
		time.Minute:     {"about 3 min", "about 3 min: 0 ahead, 20 admitted per hour over the last day"},
		9 * time.Minute: {"about 3 min", "about 3 min: 0 ahead, 20 admitted per hour over the last day"},
		130 * time.Minute: {"past its estimate", "about 3 min: 0 ahead, 20 admitted per hour over the last day; " +
			"it has waited 2h 10m already: its queue admits tasks behind it that fit while it does not"},
	} {
		short, basis := e.WordsAfter("0 ahead", waited)
		if diff := cmp.Diff(want, [2]string{short, basis}); diff != "" {
			t.Errorf("waited %s (-want +got):\n%s", waited, diff)
		}
	}
	if unknown := EstimateWait(0, AdmissionRate{Recorded: 24 * time.Hour}); unknown.Overdue(10 * time.Hour) {
		t.Error("an unknown estimate is overdue")
	}
}

// A queued task's estimated wait counts the tasks its ClusterQueue admitted
// over the recorded hour, of every class (the tasks ahead are of every
// class), each task once however often it was admitted again after a
// preemption: 3 inference tasks and 1 training task admitted three times
// are 4 per hour, so the next training task waits about 15 min (the rate of
// its class counting every admission, 3 per hour, would say 20 min).
func TestQueuedTaskWaitCountsTasksOfEveryClass(t *testing.T) {
	ctx := context.Background()
	s := domain.DefaultSettings
	now := time.Now()
	ago := func(m int) time.Time { return now.Add(-time.Duration(m) * time.Minute) }
	ns := s.Namespace("nlp")

	store := openSQLite(t, filepath.Join(t.TempDir(), "history.db"))
	run, err := store.StartRun(ctx, "test", ago(60))
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Heartbeat(ctx, run, now); err != nil {
		t.Fatal(err)
	}
	wl := func(name, class string, created time.Time) *kueuetest.WorkloadWrapper {
		w := kueuetest.MakeWorkload(s, ns, name).Queue(s.LocalQueue("nlp")).GPUs(1, 1).Created(created).WithUID("uid-" + name)
		if class != "" {
			w.Class(class)
		}
		return w
	}
	var changes []Change
	life := func(versions ...*kueuetest.WorkloadWrapper) {
		var prev *kueuev1beta2.Workload
		for _, v := range versions {
			if c, ok := Diff(prev, v.Obj(), s.NamespacePrefix); ok {
				changes = append(changes, c)
			}
			prev = v.Obj()
		}
	}
	for i, at := range []int{50, 40, 30} {
		w := wl("serve-"+string(rune('a'+i)), "inference", ago(at+5))
		life(w.Clone(), w.Clone().Admitted(ago(at), "ml.p5.48xlarge"))
	}
	churn := wl("churn", "training", ago(50))
	a1 := churn.Clone().Admitted(ago(45), "ml.p5.48xlarge")
	p1 := a1.Clone().Preempted(ago(44), "InCohortFairSharing", "preempted")
	a2 := p1.Clone().Admitted(ago(35), "ml.p5.48xlarge")
	p2 := a2.Clone().Preempted(ago(34), "InCohortFairSharing", "preempted")
	a3 := p2.Clone().Admitted(ago(20), "ml.p5.48xlarge")
	life(churn, a1, p1, a2, p2, a3)
	if _, err := store.Write(ctx, Batch{Changes: changes}); err != nil {
		t.Fatal(err)
	}

	rates, err := store.AdmissionRates(ctx, LiveWindow(now.Add(-RateWindow), now))
	if err != nil {
		t.Fatal(err)
	}
	_, basis := QueuedTaskWait(0, rates, s.ClusterQueue("nlp")).Words("0 ahead")
	if want := "about 15 min: 0 ahead, 4.0 admitted per hour over the last day"; basis != want {
		t.Errorf("estimated wait of the next training task: %q, want %q", basis, want)
	}
	// The class's rate; a task of no class counts in the lowest class
	// (batch here), as it does in the statistics.
	for _, tc := range []struct {
		class string
		want  string
	}{
		{"inference", "about 20 min: 0 waiting, 3.0 admitted per hour over the last day"},
		{"training", "about 60 min: 0 waiting, 1.00 admitted per hour over the last day"},
		{"batch", "unknown"},
	} {
		if _, basis := ClassWait(0, rates, s.ClusterQueue("nlp"), tc.class, "batch").Words("0 waiting"); !strings.HasPrefix(basis, tc.want) {
			t.Errorf("class %s: %q, want %q", tc.class, basis, tc.want)
		}
	}
	classless := wl("classless", "", ago(30))
	changes = nil
	life(classless, classless.Clone().Admitted(ago(25), "ml.p5.48xlarge"))
	if _, err := store.Write(ctx, Batch{Changes: changes}); err != nil {
		t.Fatal(err)
	}
	if rates, err = store.AdmissionRates(ctx, LiveWindow(now.Add(-RateWindow), now)); err != nil {
		t.Fatal(err)
	}
	want := "about 60 min: 0 waiting, 1.00 admitted per hour over the last day"
	if _, basis := ClassWait(0, rates, s.ClusterQueue("nlp"), "batch", "batch").Words("0 waiting"); basis != want {
		t.Errorf("the lowest class, with a task of no class admitted: %q, want %q", basis, want)
	}
	if _, basis := ClassWait(0, rates, "", "batch", "batch").Words("0 waiting"); basis != want {
		t.Errorf("the lowest class in every queue: %q, want %q", basis, want)
	}
}
