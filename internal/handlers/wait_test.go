package handlers_test

import (
	"context"
	"encoding/csv"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueuefake "sigs.k8s.io/kueue/client-go/clientset/versioned/fake"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/handlers"
	"github.com/openquota/console/internal/kueue"
	"github.com/openquota/console/internal/kueuetest"
	"github.com/openquota/console/internal/metrics"
	"github.com/openquota/console/internal/taskhistory"
)

// A queued task's estimated wait counts the tasks its ClusterQueue admitted
// over the recorded hour, of every class (the tasks ahead are of every
// class), each task once however often it was admitted again after a
// preemption: 3 inference tasks and 1 training task admitted three times
// are 4 per hour, so the next training task waits about 15 min (the rate of
// its class counting every admission, 3 per hour, would say 20 min).
func TestEstimatedWaitCountsTasksOfEveryClass(t *testing.T) {
	ctx := context.Background()
	s := domain.DefaultSettings
	now := time.Now()
	ago := func(m int) time.Time { return now.Add(-time.Duration(m) * time.Minute) }
	ns := s.Namespace("nlp")

	store, err := taskhistory.Open(ctx, taskhistory.Config{Driver: taskhistory.DriverSQLite, Path: filepath.Join(t.TempDir(), "history.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	run, err := store.StartRun(ctx, "test", ago(60))
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Heartbeat(ctx, run, now); err != nil {
		t.Fatal(err)
	}
	wl := func(name, class string, created time.Time) *kueuetest.WorkloadWrapper {
		w := kueuetest.MakeWorkload(s, ns, name).Queue(s.LocalQueue("nlp")).Class(class).GPUs(1, 1).Created(created)
		w.UID = types.UID("uid-" + name)
		return w
	}
	var changes []taskhistory.Change
	life := func(versions ...*kueuetest.WorkloadWrapper) {
		var prev *kueuev1beta2.Workload
		for _, v := range versions {
			if c, ok := taskhistory.Diff(prev, v.Obj(), s.NamespacePrefix); ok {
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
	if _, err := store.Write(ctx, taskhistory.Batch{Changes: changes}); err != nil {
		t.Fatal(err)
	}

	objs := kueuetest.Objects{
		ClusterQueues: []*kueuev1beta2.ClusterQueue{kueuetest.MakeClusterQueue(s.ClusterQueue("nlp")).Cohort(s.Cohort).Nominal(8, nil).Obj()},
		LocalQueues: []*kueuev1beta2.LocalQueue{{ObjectMeta: metav1.ObjectMeta{Name: s.LocalQueue("nlp"), Namespace: ns},
			Spec: kueuev1beta2.LocalQueueSpec{ClusterQueue: kueuev1beta2.ClusterQueueReference(s.ClusterQueue("nlp"))}}},
		Workloads: []*kueuev1beta2.Workload{wl("next", "training", ago(10)).Pending("Pending", "waits for quota", ago(10)).Obj()},
	}
	for i, c := range []string{"inference", "training"} {
		objs.Classes = append(objs.Classes, &kueuev1beta2.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: c}, Value: int32(90 - 30*i)})
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cache := kueue.NewCache(k8sfake.NewClientset(), kueuefake.NewSimpleClientset(), s, log)
	live := kueue.NewLive(cache, s, log)
	live.Publish(domain.BuildSnapshot(inputOf(s, objs), now))
	h := atLoopback(handlers.New(handlers.Deps{Cache: cache, Live: live, Settings: s, Metrics: metrics.NewConsole(), Log: log,
		History: func() (*taskhistory.Store, error) { return store, nil }}))

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/tasks?format=csv&state=Queued", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("tasks CSV: %d %s", rec.Code, rec.Body)
	}
	rows, err := csv.NewReader(strings.NewReader(rec.Body.String())).ReadAll()
	if err != nil || len(rows) != 2 {
		t.Fatalf("tasks CSV: %v\n%s", err, rec.Body)
	}
	want := "about 15 min: 0 ahead, 4.0 admitted per hour over the last day"
	if got := rows[1][len(rows[1])-1]; rows[1][1] != "next" || got != want {
		t.Errorf("estimated wait of %s: %q, want %q", rows[1][1], got, want)
	}
}
