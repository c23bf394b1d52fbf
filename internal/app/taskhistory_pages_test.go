package app_test

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/html"
	authzv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/deploy/rbac"
	"github.com/openquota/console/internal/app"
	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/handlers"
	"github.com/openquota/console/internal/taskhistory"
	"github.com/openquota/console/internal/testenv"
	"github.com/openquota/console/internal/webtest"
)

// The pages built on the task history, through the HTTP handlers, against
// the sandbox: the app records as it does in production (hooks on its
// cache, Recorder.Run under its own Lease) to a real store, SQLite in a
// temporary file and a fresh database on the sandbox's PostgreSQL, and the
// same case runs on both.

// taskHistoryStore is where one subtest's task history lives.
type taskHistoryStore struct{ cfg taskhistory.Config }

// open opens the store (again, for a restart); it is closed when the test
// ends.
func (hs taskHistoryStore) open(t *testing.T) *taskhistory.Store {
	t.Helper()
	st, err := taskhistory.Open(context.Background(), hs.cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// forEachTaskHistoryStore runs fn, in parallel, on a SQLite file and on a
// fresh PostgreSQL database of the sandbox (dropped when the test ends).
func forEachTaskHistoryStore(t *testing.T, fn func(t *testing.T, hs taskHistoryStore)) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		fn(t, taskHistoryStore{cfg: taskhistory.Config{Driver: taskhistory.DriverSQLite, Path: filepath.Join(t.TempDir(), "history.db")}})
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		fn(t, taskHistoryStore{cfg: taskhistory.Config{Driver: taskhistory.DriverPostgres, DSN: testenv.FreshPostgres(t)}})
	})
}

// taskHistoryConsole is a console on the sandbox whose pages read a task
// history; close stops it (its recorder's run ended in the store).
type taskHistoryConsole struct {
	console
	close func()
}

// taskHistorySettings are a console's own prefix and cohort (admin-scope.yaml
// lets admins write hyperpod-ns- namespaces only).
func taskHistorySettings() domain.Settings {
	id := rand.String(5)
	return domain.Settings{NamespacePrefix: "hyperpod-ns-" + id + "-", Cohort: "cohort-" + id}
}

// startTaskHistoryConsole starts a console with settings s whose pages read
// history (nil: none). With record, the app records to it as cmd/console's
// does: fed by the cache's hooks, backfilled from the apiserver, while it
// holds a Lease of its own, until close (or the test's end).
func startTaskHistoryConsole(t *testing.T, s domain.Settings, history handlers.TaskHistory, record *taskhistory.Store, pages func(*handlers.Config)) *taskHistoryConsole {
	t.Helper()
	th := app.TaskHistoryConfig{Driver: app.TaskHistoryOff}
	if record != nil {
		th = app.TaskHistoryConfig{Store: record, Lease: "test-" + rand.String(8), Identity: "app-test-" + rand.String(5)}
	}
	c := startConsole(t, setup{settings: s, taskHistory: th, pages: func(p *handlers.Config) {
		p.TaskHistory = history
		if pages != nil {
			pages(p)
		}
	}})
	if record != nil {
		t.Cleanup(func() {
			_ = c.kube.CoordinationV1().Leases(s.State()).Delete(context.Background(), th.Lease, metav1.DeleteOptions{})
		})
		if err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			rec := c.app.TaskHistory.Recorder()
			return rec != nil && rec.Stats().Backfills >= 1, nil
		}); err != nil {
			t.Fatal("the recorder's backfill never ended")
		}
	}
	var once sync.Once
	hc := &taskHistoryConsole{console: c, close: func() {
		once.Do(func() {
			c.stop()
			_ = c.app.Close() // the run is ended in the store
		})
	}}
	t.Cleanup(hc.close)
	return hc
}

// storeTaskHistory is the task history of an open store.
func storeTaskHistory(st *taskhistory.Store) handlers.TaskHistory { return app.NewTaskHistory(st, nil) }

// taskJob submits a suspended Job to the team's queue: pods pods of gpus
// GPUs and one vCPU each, of class ("" for none); runFor > 0 makes its pods
// complete after that long.
func (c console) taskJob(t *testing.T, team, name, class string, pods int32, gpus int64, runFor time.Duration) *batchv1.Job {
	t.Helper()
	return testenv.Submit(t, c.kube, testenv.Job{Namespace: c.settings.Namespace(team), LocalQueue: c.settings.LocalQueue(team),
		Name: name, Class: class, Pods: pods, GPUs: gpus, RunFor: runFor})
}

// workloadOf waits for the Job's Workload to meet cond and returns it.
func (c console) workloadOf(t *testing.T, j *batchv1.Job, what string, cond func(*kueuev1beta2.Workload) bool) *kueuev1beta2.Workload {
	t.Helper()
	return testenv.WorkloadOf(t, c.kueue, j, what, cond)
}

// csvTable reads a CSV answer: its header and rows.
func csvTable(t *testing.T, c console, path string) (header []string, rows [][]string) {
	t.Helper()
	code, body := c.get(t, path)
	return webtest.ReadCSV(t, path, code, body)
}

// csvRecords are a CSV answer's rows as maps by column, keyed by key.
func csvRecords(t *testing.T, c console, path string, key func(map[string]string) string) map[string]map[string]string {
	t.Helper()
	header, rows := csvTable(t, c, path)
	return webtest.CSVRecords(header, rows, key)
}

// bareWorkload queues a Workload of its own (no Job) of pods pods, each
// with gpus GPUs and cpu vCPUs: Kueue admits it on quota alone, and it
// runs until finishWorkload.
func (c console) bareWorkload(t *testing.T, team, name string, pods int32, gpus, cpu int64) {
	t.Helper()
	res := corev1.ResourceList{domain.ResourceGPU: *resource.NewQuantity(gpus, resource.DecimalSI),
		corev1.ResourceCPU: *resource.NewQuantity(cpu, resource.DecimalSI), corev1.ResourceMemory: resource.MustParse("1Gi")}
	wl := &kueuev1beta2.Workload{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.settings.Namespace(team)},
		Spec: kueuev1beta2.WorkloadSpec{
			QueueName: kueuev1beta2.LocalQueueName(c.settings.LocalQueue(team)),
			PodSets: []kueuev1beta2.PodSet{{Name: "main", Count: pods, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "main", Image: "trainer", Resources: corev1.ResourceRequirements{Requests: res}}},
			}}}},
		},
	}
	if _, err := c.kueue.KueueV1beta2().Workloads(wl.Namespace).Create(context.Background(), wl, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating Workload %s: %v", name, err)
	}
}

// workload waits for a Workload to meet cond and returns it.
func (c console) workload(t *testing.T, team, name, what string, cond func(*kueuev1beta2.Workload) bool) *kueuev1beta2.Workload {
	t.Helper()
	var found *kueuev1beta2.Workload
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		w, err := c.kueue.KueueV1beta2().Workloads(c.settings.Namespace(team)).Get(ctx, name, metav1.GetOptions{})
		if err != nil || !cond(w) {
			return false, nil
		}
		found = w
		return true, nil
	})
	if err != nil {
		t.Fatalf("Workload %s never %s", name, what)
	}
	return found
}

// finishWorkload ends a Workload with reason (Succeeded, Failed), as its
// Job's controller would.
func (c console) finishWorkload(t *testing.T, team, name, reason string) *kueuev1beta2.Workload {
	t.Helper()
	wls := c.kueue.KueueV1beta2().Workloads(c.settings.Namespace(team))
	var done *kueuev1beta2.Workload
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := wls.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		apimeta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{Type: kueuev1beta2.WorkloadFinished,
			Status: metav1.ConditionTrue, Reason: reason, Message: "finished by the test"})
		done, err = wls.UpdateStatus(context.Background(), cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("finishing Workload %s: %v", name, err)
	}
	return done
}

// since is when a condition last turned true (zero: it is not true).
func since(w *kueuev1beta2.Workload, typ string) time.Time {
	if c := apimeta.FindStatusCondition(w.Status.Conditions, typ); c != nil && c.Status == metav1.ConditionTrue {
		return c.LastTransitionTime.Time
	}
	return time.Time{}
}

// gpusOf is what a Workload asks for in GPUs (and vCPUs): every pod set's
// count times its pods' requests.
func gpusOf(w *kueuev1beta2.Workload) (gpus, cpu int64) {
	for _, ps := range w.Spec.PodSets {
		for _, ctr := range ps.Template.Spec.Containers {
			g := ctr.Resources.Requests[domain.ResourceGPU]
			c := ctr.Resources.Requests[corev1.ResourceCPU]
			gpus += int64(ps.Count) * g.Value()
			cpu += int64(ps.Count) * c.Value()
		}
	}
	return gpus, cpu
}

// overlap is how long [a, b) and [c, d) overlap (negative: not at all).
func overlap(a, b, c, d time.Time) time.Duration {
	if c.After(a) {
		a = c
	}
	if d.Before(b) {
		b = d
	}
	return b.Sub(a)
}

func hours(v float64) string { return fmt.Sprintf("%.2f", v) }

// converge polls get until done accepts what it returns (the informers,
// the recorder's batches and the pages' 5 s caches catch up within
// seconds; the limit is generous), and returns the last value.
func converge[T any](t *testing.T, what string, get func() T, done func(T) bool) T {
	t.Helper()
	var v T
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		v = get()
		return done(v), nil
	})
	if err != nil {
		t.Logf("%s: gave up waiting", what)
	}
	return v
}

// createTeam makes a team through the console's form and waits until its
// pages know it.
func createTeam(t *testing.T, c console, form url.Values) {
	t.Helper()
	team := form.Get("name")
	if code, _, body := c.post(t, "/teams", form); code != http.StatusSeeOther {
		t.Fatalf("create %s: %d\n%.500s", team, code, body)
	}
	c.eventually(t, "/usage/"+team, "Team "+team)
}

// taskStatsFigures are what the Tasks page shows for one team and class
// over a window: the class table's row (team filter) and the team × class
// table's row (no filter), on the page and in their CSVs.
type taskStatsFigures struct {
	ClassCSV, BreakdownCSV   []string
	ClassPage, BreakdownPage []string
	Note                     bool // the page says the history is unavailable
}

func statsFigures(t *testing.T, c console, window, team, class string) taskStatsFigures {
	t.Helper()
	var f taskStatsFigures
	filtered := "/tasks?window=" + window + "&team=" + url.QueryEscape(team)
	_, rows := csvTable(t, c, filtered+"&format=csv&table=classes")
	for _, r := range rows {
		if r[0] == class {
			f.ClassCSV = r
		}
	}
	_, rows = csvTable(t, c, "/tasks?window="+window+"&format=csv&table=breakdown")
	for _, r := range rows {
		if r[0] == team && r[1] == class {
			f.BreakdownCSV = r
		}
	}
	code, body := c.get(t, filtered)
	if code != http.StatusOK {
		t.Fatalf("GET %s = %d", filtered, code)
	}
	f.ClassPage = webtest.HTMLRows(t, body, "class-stats", webtest.ByAttr("data-class"))[class]
	f.Note = strings.Contains(body, "The task history is unavailable")
	code, body = c.get(t, "/tasks?window="+window)
	if code != http.StatusOK {
		t.Fatalf("GET /tasks = %d", code)
	}
	f.BreakdownPage = webtest.HTMLRows(t, body, "team-class-stats", func(n *html.Node) string {
		if webtest.Attr(n, "data-team") == team {
			return webtest.Attr(n, "data-class")
		}
		return ""
	})[class]
	return f
}

func secondsOf(d time.Duration) string { return fmt.Sprint(int64(d.Round(time.Second) / time.Second)) }

// A task finishes, and the Tasks page's 7-day statistics for its team count
// it. Its Job and Workload are deleted and the console restarts (new cache,
// recorder and handlers over the same store): the statistics are the same,
// on the page and in the CSVs. Without the history they are gone, so they
// come from it.
func TestTasksStatisticsOutliveDeletedJobs(t *testing.T) {
	waitsOnTheCluster(t)
	forEachTaskHistoryStore(t, func(t *testing.T, hs taskHistoryStore) {
		s := taskHistorySettings()
		team, class := "stats-"+rand.String(4), "hist-"+rand.String(5)
		st := hs.open(t)
		hc := startTaskHistoryConsole(t, s, storeTaskHistory(st), st, nil)
		t.Cleanup(func() { cleanupTeams(hc.console) })
		testenv.PriorityClass(t, hc.kueue, class, 77)
		createTeam(t, hc.console, webtest.TeamForm(team, "8"))

		j := hc.taskJob(t, team, "quick", class, 1, 2, 2*time.Second)
		wl := hc.workloadOf(t, j, "finished", testenv.CondTrue(kueuev1beta2.WorkloadFinished))
		admitted, finished := since(wl, kueuev1beta2.WorkloadAdmitted), since(wl, kueuev1beta2.WorkloadFinished)
		waitFrom := wl.CreationTimestamp.Time
		if r := since(wl, kueuev1beta2.WorkloadRequeued); !r.IsZero() {
			waitFrom = r
		}
		if admitted.IsZero() || finished.IsZero() {
			t.Fatalf("the finished Workload has no admission: %+v", wl.Status.Conditions)
		}
		// One finished task: none running, pending or preempted; its run
		// and wait are the average, the longest and the average longest.
		run, wait := secondsOf(finished.Sub(admitted)), secondsOf(admitted.Sub(waitFrom))
		wantRow := []string{class, "0", "0", "0", run, wait, run, wait, run, wait}

		figures := func(c console) taskStatsFigures { return statsFigures(t, c, "7d", team, class) }
		// The page's kept statistics take the history's figures of a
		// finished task on the clock's cadence (domain.ClockCadence) at
		// the latest; the CSVs when asked.
		before := converge(t, "the finished task in the 7-day statistics", func() taskStatsFigures { return figures(hc.console) },
			func(f taskStatsFigures) bool {
				return cmp.Equal(f.ClassCSV, wantRow) && len(f.ClassPage) == 11 && f.ClassPage[4] != "—" &&
					len(f.BreakdownPage) == 11 && f.BreakdownPage[5] != "—" && len(f.BreakdownCSV) > 0
			})
		if diff := cmp.Diff(wantRow, before.ClassCSV); diff != "" {
			t.Fatalf("class CSV row of the finished task (-from the Workload +page):\n%s", diff)
		}
		if diff := cmp.Diff(append([]string{team}, wantRow...), before.BreakdownCSV); diff != "" {
			t.Errorf("team × class CSV row (-from the Workload +page):\n%s", diff)
		}
		if before.Note || len(before.ClassPage) != 11 || len(before.BreakdownPage) != 11 || before.ClassPage[4] == "—" ||
			!cmp.Equal(before.ClassPage[:10], before.BreakdownPage[1:]) {
			t.Errorf("the page's rows do not show the finished task: class %q, team × class %q", before.ClassPage, before.BreakdownPage)
		}

		// The Job goes, its Workload with it; the live pages forget the task.
		if err := hc.kube.BatchV1().Jobs(j.Namespace).Delete(context.Background(), j.Name,
			metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}); err != nil {
			t.Fatal(err)
		}
		tasksCSV := "/tasks?state=all&format=csv&table=tasks&team=" + team
		rows := converge(t, "the Workload gone from the live task list", func() map[string]map[string]string {
			return csvRecords(t, hc.console, tasksCSV, func(r map[string]string) string { return r["Namespace"] + "/" + r["Task"] })
		}, func(rows map[string]map[string]string) bool { return len(rows) == 0 })
		if len(rows) != 0 {
			t.Fatalf("the live task list still has %v", rows)
		}
		if _, err := hc.kueue.KueueV1beta2().Workloads(wl.Namespace).Get(context.Background(), wl.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("Workload %s: %v, want it gone", wl.Name, err)
		}

		// The console restarts on the same store.
		hc.close()
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		st2 := hs.open(t)
		restarted := startTaskHistoryConsole(t, s, storeTaskHistory(st2), st2, nil)
		after := converge(t, "the same statistics after the restart", func() taskStatsFigures { return figures(restarted.console) },
			func(f taskStatsFigures) bool { return cmp.Equal(before, f) })
		if diff := cmp.Diff(before, after); diff != "" {
			t.Errorf("7-day statistics after the Job was deleted and the console restarted (-before +after):\n%s", diff)
		}

		// The same console without the history: the task is gone from the
		// figures, which therefore came from the history.
		liveOnly := figures(restarted.with(func(d *handlers.Config) { d.TaskHistory = nil }))
		if !liveOnly.Note {
			t.Errorf("the Tasks page without history does not say so")
		}
		if want := []string{class, "0", "0", "0", "", "", "", "", "", ""}; !cmp.Equal(liveOnly.ClassCSV, want) {
			t.Errorf("without history the class row is %q, want %q (no finished task)", liveOnly.ClassCSV, want)
		}
		if liveOnly.BreakdownPage != nil {
			t.Errorf("without history the team × class table still has the team's row %q", liveOnly.BreakdownPage)
		}
	})
}

// waitAllowed waits until user may list Workloads in namespace (the
// console's binding of a team's members has reached the authorizer; the
// console would remember a "no" for half a minute).
func waitAllowed(t *testing.T, kube kubernetes.Interface, user, namespace string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		res, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
			User: user, ResourceAttributes: &authzv1.ResourceAttributes{Namespace: namespace, Verb: "list", Group: "kueue.x-k8s.io", Resource: "workloads"}}}, metav1.CreateOptions{})
		return err == nil && res.Status.Allowed, nil
	})
	if err != nil {
		t.Fatalf("%s never got to list Workloads in %s", user, namespace)
	}
}

// A team borrowing in its cohort is preempted when the lender reclaims its
// quota. /preemptions and its CSV show the preempted task with its team and
// class, the preemptor task with its team and class, and the GPU-hours the
// preempted run lost (its GPUs × admission to preemption, from the
// Workload). The preempted team's usage page counts it under the
// preempting team. A member of the preempted team sees it; a member of
// another team does not.
func TestPreemptionHistoryPage(t *testing.T) {
	waitsOnTheCluster(t)
	forEachTaskHistoryStore(t, func(t *testing.T, hs taskHistoryStore) {
		s := taskHistorySettings()
		proxy := proxyAuth()
		st := hs.open(t)
		hc := startTaskHistoryConsole(t, s, storeTaskHistory(st), st, func(d *handlers.Config) { d.Auth = proxy })
		t.Cleanup(func() { cleanupTeams(hc.console) })

		id := rand.String(4)
		victim, taker, other := "borrower-"+id, "lender-"+id, "other-"+id
		low, high := "low-"+rand.String(5), "high-"+rand.String(5)
		testenv.PriorityClass(t, hc.kueue, low, 10)
		testenv.PriorityClass(t, hc.kueue, high, 1000)
		victimMember, otherMember := "member-"+rand.String(5), "member-"+rand.String(5)
		admin := hc.as(t, bindUser(t, hc.kube, "admin", rbac.AdminRole), "platform")
		admin.Get("/teams/new")
		for _, tm := range []struct{ name, gpus, borrow, member string }{
			{victim, "8", "100", victimMember}, {taker, "8", "50", ""}, {other, "1", "50", otherMember},
		} {
			f := webtest.TeamForm(tm.name, tm.gpus)
			f.Set("borrowLimit", tm.borrow)
			f.Set("users", tm.member)
			f.Set("groups", "")
			if code, _, body := admin.Post("/teams", f); code != http.StatusSeeOther {
				t.Fatalf("create %s: %d\n%.500s", tm.name, code, body)
			}
		}

		// The borrower runs 16 GPUs on 8 of its own: 8 borrowed from the lender.
		victimJob := hc.taskJob(t, victim, "big", low, 2, 8, 0)
		admittedWL := hc.workloadOf(t, victimJob, "admitted", testenv.CondTrue(kueuev1beta2.WorkloadAdmitted))
		admittedAt := since(admittedWL, kueuev1beta2.WorkloadAdmitted)
		time.Sleep(3 * time.Second) // some work to lose
		urgentJob := hc.taskJob(t, taker, "urgent", high, 1, 8, 0)
		preempted := hc.workloadOf(t, victimJob, "preempted", testenv.CondTrue(kueuev1beta2.WorkloadPreempted))
		urgent := hc.workloadOf(t, urgentJob, "admitted", testenv.CondTrue(kueuev1beta2.WorkloadAdmitted))
		cond := apimeta.FindStatusCondition(preempted.Status.Conditions, kueuev1beta2.WorkloadPreempted)
		victimGPUs, _ := gpusOf(preempted)
		lost := hours(float64(victimGPUs) * cond.LastTransitionTime.Sub(admittedAt).Hours())

		want := map[string]string{
			"When (UTC)": cond.LastTransitionTime.UTC().Format(time.RFC3339), "Namespace": preempted.Namespace, "Task": preempted.Name,
			"Owner kind": "Job", "Owner name": victimJob.Name, "Preemptor owner kind": "Job", "Preemptor owner name": urgentJob.Name,
			"Team": victim, "Priority class": low, "GPUs (count)": fmt.Sprint(victimGPUs),
			"Preemptor namespace": urgent.Namespace, "Preemptor task": urgent.Name, "Preemptor UID": string(urgent.UID),
			"Preemptor team": taker, "Preemptor class": high, "Kueue reason": cond.Reason, "GPU-hours lost (h)": lost,
			"Kueue message": cond.Message,
		}
		victimKey := preempted.Namespace + "/" + preempted.Name
		preemptionsCSV := func(b *browser, query string) map[string]map[string]string {
			code, body := b.Get("/preemptions?format=csv" + query)
			if code != http.StatusOK {
				t.Fatalf("GET /preemptions CSV%s = %d\n%.500s", query, code, body)
			}
			records, err := csv.NewReader(strings.NewReader(body)).ReadAll()
			if err != nil {
				t.Fatal(err)
			}
			out := map[string]map[string]string{}
			for _, r := range records[1:] {
				m := map[string]string{}
				for i, h := range records[0] {
					m[h] = r[i]
				}
				out[m["Namespace"]+"/"+m["Task"]] = m
			}
			return out
		}
		got := converge(t, "the preemption in the CSV", func() map[string]string { return preemptionsCSV(admin, "")[victimKey] },
			func(r map[string]string) bool { return r != nil && r["Preemptor team"] != "" })
		if got == nil {
			t.Fatalf("the preemption of %s never showed in the CSV", victimKey)
		}
		reasonWords := got["Reason"]
		if reasonWords == "" {
			t.Errorf("the preemption has no reason in words: %v", got)
		}
		delete(got, "Reason")
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("the preemption in the CSV (-from the Workloads +CSV):\n%s", diff)
		}

		// The page, with its filters, as the admin.
		_, page := admin.Get("/preemptions")
		row := webtest.HTMLRows(t, page, "preemptions", webtest.ByAttr("data-task"))[victimKey]
		// Tasks are named by their Jobs (the Workloads' names on hover).
		wantRow := []string{recordedMinute(cond.LastTransitionTime.Time), "Job " + victimJob.Name, victim, low, fmt.Sprint(victimGPUs),
			"Job " + urgentJob.Name, taker, high, reasonWords, lost}
		if diff := cmp.Diff(wantRow, row); diff != "" {
			t.Errorf("the preemption on /preemptions (-want +page):\n%s", diff)
		}
		for _, tc := range []struct {
			query string
			shown bool
		}{
			{"window=1h", true}, {"window=90d", true}, {"team=" + victim, true}, {"team=" + taker, false},
			{"class=" + low, true}, {"class=" + high, false}, {"team=" + victim + "&class=" + low + "&window=24h", true},
		} {
			_, page := admin.Get("/preemptions?" + tc.query)
			_, onPage := webtest.HTMLRows(t, page, "preemptions", webtest.ByAttr("data-task"))[victimKey]
			_, inCSV := preemptionsCSV(admin, "&"+tc.query)[victimKey]
			if onPage != tc.shown || inCSV != tc.shown {
				t.Errorf("/preemptions?%s: on the page %v, in the CSV %v; want %v", tc.query, onPage, inCSV, tc.shown)
			}
		}

		// The preempted team's usage page counts it by the preempting team
		// (a first visit shows the count as coming, and has it once the
		// history answered).
		usage := filled(t, admin, "/usage/"+victim, "team-preemptions")
		if diff := cmp.Diff(map[string][]string{taker: {taker, "1", lost}}, webtest.HTMLRows(t, usage, "preempted-by", webtest.ByAttr("data-team"))); diff != "" {
			t.Errorf("preempted-by table of %s (-want +page):\n%s", victim, diff)
		}
		webtest.MustContain(t, "usage page of "+victim, usage, "preempted once, losing "+lost+" GPU-hours")
		usage = filled(t, admin, "/usage/"+taker, "team-preemptions")
		webtest.MustContain(t, "usage page of "+taker, usage, "were not preempted in the last 7 days")

		// Members see their own teams' preemptions only.
		waitAllowed(t, hc.kube, victimMember, s.Namespace(victim))
		waitAllowed(t, hc.kube, otherMember, s.Namespace(other))
		for _, tc := range []struct {
			who   string
			user  string
			sees  bool
			usage int
		}{
			{"a member of the preempted team", victimMember, true, http.StatusOK},
			{"a member of another team", otherMember, false, http.StatusForbidden},
		} {
			b := hc.as(t, tc.user)
			for _, query := range []string{"", "?team=" + victim, "?window=30d"} {
				code, page := b.Get("/preemptions" + query)
				if code != http.StatusOK {
					t.Errorf("%s: GET /preemptions%s = %d", tc.who, query, code)
				}
				_, onPage := webtest.HTMLRows(t, page, "preemptions", webtest.ByAttr("data-task"))[victimKey]
				csvQuery := "&" + strings.TrimPrefix(query, "?")
				_, inCSV := preemptionsCSV(b, csvQuery)[victimKey]
				if onPage != tc.sees || inCSV != tc.sees {
					t.Errorf("%s: /preemptions%s shows the preemption on the page %v, in the CSV %v; want %v", tc.who, query, onPage, inCSV, tc.sees)
				}
				if !tc.sees {
					webtest.MustNotContain(t, tc.who+"'s /preemptions"+query, page, preempted.Name, urgent.Name)
				}
			}
			if code, _ := b.Get("/usage/" + victim); code != tc.usage {
				t.Errorf("%s: GET /usage/%s = %d, want %d", tc.who, victim, code, tc.usage)
			}
		}
	})
}

// recordedMinute is how the pages show a recorded time.
func recordedMinute(at time.Time) string { return at.UTC().Format("2006-01-02 15:04 UTC") }

// Without a task history (none, a store that does not answer, a store
// closed while the console runs), every page built on it answers: HTML
// pages 200 and say the history is unavailable; the Tasks page's CSVs
// fall back to the live figures; the CSVs that only the history can fill
// answer 503 with the same words rather than an empty table.
func TestTaskHistoryPagesWhenTheStoreCloses(t *testing.T) {
	waitsOnTheCluster(t)
	s := taskHistorySettings()
	base := startTaskHistoryConsole(t, s, nil, nil, nil)
	t.Cleanup(func() { cleanupTeams(base.console) })
	team := "nohist-" + rand.String(4)
	createTeam(t, base.console, webtest.TeamForm(team, "2"))

	type page struct {
		path string
		code int
		note bool // the page says the history is unavailable
	}
	// What every page answers with a history that cannot be read.
	unavailable := []page{
		{"/tasks", http.StatusOK, true},
		{"/tasks?window=30d", http.StatusOK, true},
		{"/tasks?window=90d&team=" + team, http.StatusOK, true},
		{"/tasks?window=30d&format=csv&table=classes", http.StatusOK, false},
		{"/tasks?window=30d&format=csv&table=breakdown", http.StatusOK, false},
		{"/tasks?format=csv&table=tasks&state=all", http.StatusOK, false},
		{"/preemptions", http.StatusOK, true},
		{"/preemptions?window=90d&team=" + team, http.StatusOK, true},
		{"/preemptions?format=csv", http.StatusServiceUnavailable, true},
		{"/reports/usage?source=history", http.StatusOK, true},
		{"/reports/usage?source=history&resource=vcpu&team=" + team, http.StatusOK, true},
		{"/reports/usage?source=history&format=csv&table=summary", http.StatusServiceUnavailable, true},
		{"/reports/usage?source=history&format=csv&table=tasks", http.StatusServiceUnavailable, true},
		{"/usage/" + team, http.StatusOK, true},
	}
	// answers are how the pages differ from what they should answer.
	answers := func(t *testing.T, c console, pages []page) []string {
		var wrong []string
		for _, p := range pages {
			code, body := c.get(t, p.path)
			if code != p.code {
				wrong = append(wrong, fmt.Sprintf("GET %s = %d, want %d\n%.300s", p.path, code, p.code, body))
			}
			if note := strings.Contains(body, "The task history is unavailable"); note != p.note {
				wrong = append(wrong, fmt.Sprintf("GET %s: says the history is unavailable: %v, want %v", p.path, note, p.note))
			}
		}
		return wrong
	}
	check := func(t *testing.T, c console, pages []page) {
		t.Helper()
		for _, w := range answers(t, c, pages) {
			t.Error(w)
		}
	}

	t.Run("none", func(t *testing.T) {
		// The usage page has no history section at all then.
		pages := append([]page(nil), unavailable[:len(unavailable)-1]...)
		pages = append(pages, page{"/usage/" + team, http.StatusOK, false})
		check(t, base.with(func(d *handlers.Config) { d.TaskHistory = nil }), pages)
	})
	t.Run("unreachable", func(t *testing.T) {
		down := app.NewTaskHistory(nil, errors.New("the task history store is unreachable: dial tcp 127.0.0.1:1: connect: connection refused"))
		c := base.with(func(d *handlers.Config) { d.TaskHistory = down })
		check(t, c, unavailable)
		_, body := c.get(t, "/tasks")
		webtest.MustContain(t, "Tasks page", body, "The task history is unavailable right now.", "The figures cover only the tasks that still exist in the cluster.")
		webtest.MustNotContain(t, "Tasks page", body, "connection refused") // logged, not shown
	})
	forEachTaskHistoryStore(t, func(t *testing.T, hs taskHistoryStore) {
		st := hs.open(t)
		c := base.with(func(d *handlers.Config) { d.TaskHistory = storeTaskHistory(st) })
		// While it answers: no note, and the CSVs are tables.
		var answering []page
		for _, p := range unavailable {
			answering = append(answering, page{p.path, http.StatusOK, false})
		}
		check(t, c, answering)
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		// The Tasks page shares its history figures for 5 s, and renders
		// once per snapshot: until then it shows what it read while the
		// store answered.
		wrong := converge(t, "the pages noticing the closed store", func() []string { return answers(t, c, unavailable) },
			func(wrong []string) bool { return len(wrong) == 0 })
		for _, w := range wrong {
			t.Error(w)
		}
	})
}

// Usage reports from the history: the summary per team, instance type and
// day, and the per-task report, on the page and in the CSVs, equal what the
// test computes from the Workloads it ran: GPUs (and vCPUs) × admission to
// finish.
func TestUsageReportPages(t *testing.T) {
	waitsOnTheCluster(t)
	forEachTaskHistoryStore(t, func(t *testing.T, hs taskHistoryStore) {
		s := taskHistorySettings()
		st := hs.open(t)
		recording := time.Now()
		hc := startTaskHistoryConsole(t, s, storeTaskHistory(st), st, nil)
		t.Cleanup(func() { cleanupTeams(hc.console) })
		team, class := "report-"+rand.String(4), "rep-"+rand.String(5)
		testenv.PriorityClass(t, hc.kueue, class, 50)
		createTeam(t, hc.console, webtest.TeamForm(team, "384"))

		// Two tasks of their own Workloads (Kueue admits them on quota; the
		// test finishes them), one Job that KWOK runs to completion.
		hc.bareWorkload(t, team, "wide", 32, 8, 24)
		hc.bareWorkload(t, team, "narrow", 8, 8, 4)
		job := hc.taskJob(t, team, "small", class, 1, 2, 2*time.Second)
		wide := hc.workload(t, team, "wide", "admitted", testenv.CondTrue(kueuev1beta2.WorkloadAdmitted))
		hc.workload(t, team, "narrow", "admitted", testenv.CondTrue(kueuev1beta2.WorkloadAdmitted))
		time.Sleep(3 * time.Second) // some use to count
		hc.finishWorkload(t, team, "narrow", kueuev1beta2.WorkloadFinishedReasonFailed)
		time.Sleep(3 * time.Second)
		hc.finishWorkload(t, team, "wide", kueuev1beta2.WorkloadFinishedReasonSucceeded)
		small := hc.workloadOf(t, job, "finished", testenv.CondTrue(kueuev1beta2.WorkloadFinished))
		var tasks []*kueuev1beta2.Workload
		for _, name := range []string{"wide", "narrow"} {
			tasks = append(tasks, hc.workload(t, team, name, "finished", testenv.CondTrue(kueuev1beta2.WorkloadFinished)))
		}
		tasks = append(tasks, small)

		// The expected figures, from the Workloads.
		type use struct{ gpuH, cpuH float64 }
		const day = 24 * time.Hour
		first := wide.CreationTimestamp.UTC().Truncate(day)
		today := time.Now().UTC().Truncate(day)
		perDay := map[string]*use{}
		for d := first; !d.After(today); d = d.Add(day) {
			perDay[d.Format("2006-01-02")] = &use{}
		}
		wantTasks := map[string]map[string]string{}
		shownAs := map[string]string{}
		for _, w := range tasks {
			gpus, cpu := gpusOf(w)
			start, end := since(w, kueuev1beta2.WorkloadAdmitted), since(w, kueuev1beta2.WorkloadFinished)
			outcome := map[string]string{kueuev1beta2.WorkloadFinishedReasonSucceeded: "succeeded", kueuev1beta2.WorkloadFinishedReasonFailed: "failed"}[apimeta.FindStatusCondition(w.Status.Conditions, kueuev1beta2.WorkloadFinished).Reason]
			// The Job's task is named by its Job; a bare Workload keeps its name.
			var owner metav1.OwnerReference
			shownAs[w.Namespace+"/"+w.Name] = w.Name
			if ref := metav1.GetControllerOf(w); ref != nil {
				owner = *ref
				shownAs[w.Namespace+"/"+w.Name] = owner.Kind + " " + owner.Name
			}
			wantTasks[w.Namespace+"/"+w.Name] = map[string]string{"Namespace": w.Namespace, "Task": w.Name, "Team": team,
				"Owner kind": owner.Kind, "Owner name": owner.Name,
				"Priority class": map[bool]string{true: class, false: ""}[w.Name == small.Name], "Instance type": "ml.p5.48xlarge",
				"Start (UTC)": start.UTC().Format(time.RFC3339), "End (UTC)": end.UTC().Format(time.RFC3339), "Held (h)": hours(end.Sub(start).Hours()),
				"GPU-hours (h)": hours(float64(gpus) * end.Sub(start).Hours()), "Borrowed": "false", "Times preempted": "0", "Outcome": outcome,
				// No MIG partitions asked for.
				"GPU partitions (MIG)": "", "Partition-hours (h)": "0.00", "Partition GPU-equivalent hours (h)": "0.00"}
			for key, u := range perDay {
				d, _ := time.Parse("2006-01-02", key)
				if held := overlap(start, end, d, d.Add(day)); held > 0 {
					u.gpuH += float64(gpus) * held.Hours()
					u.cpuH += float64(cpu) * held.Hours()
				}
			}
		}
		cq := hc.clusterQueue(t, team)
		nominal := map[corev1.ResourceName]float64{}
		for _, r := range cq.Spec.ResourceGroups[0].Flavors[0].Resources {
			nominal[r.Name] = float64(r.NominalQuota.Value())
		}
		from, to := first.Format("2006-01-02"), today.Format("2006-01-02")
		report := "/reports/usage?source=history&from=" + from + "&to=" + to + "&team=" + team

		// The per-task report.
		taskCSV := converge(t, "the finished tasks in the per-task report", func() map[string]map[string]string {
			return csvRecords(t, hc.console, report+"&format=csv&table=tasks", func(r map[string]string) string { return r["Namespace"] + "/" + r["Task"] })
		}, func(got map[string]map[string]string) bool { return cmp.Equal(wantTasks, got) })
		if diff := cmp.Diff(wantTasks, taskCSV); diff != "" {
			t.Errorf("per-task report CSV (-from the Workloads +CSV):\n%s", diff)
		}
		code, body := hc.get(t, report)
		if code != http.StatusOK {
			t.Fatalf("GET %s = %d", report, code)
		}
		pageTasks := webtest.HTMLRows(t, body, "task-report", webtest.ByAttr("data-task"))
		for key, w := range wantTasks {
			row := pageTasks[key]
			if len(row) != 10 || row[0] != shownAs[key] || row[1] != team || row[6] != w["GPU-hours (h)"] || row[9] != w["Outcome"] {
				t.Errorf("per-task report row %s on the page: %q; want GPU-hours %s, outcome %s", key, row, w["GPU-hours (h)"], w["Outcome"])
			}
		}
		if len(pageTasks) != len(wantTasks) {
			t.Errorf("the per-task report lists %d tasks, want %d: %v", len(pageTasks), len(wantTasks), pageTasks)
		}

		// The summary: used from the Workloads; nothing borrowed or lent (one
		// team in its cohort, within its quota). Allocated is the quota from
		// the queue's creation (the recorder ran before it) to when the page
		// was asked, which the test knows to within the request.
		allocated := func(res corev1.ResourceName, d, asked, answered time.Time) (low, high float64) {
			made := cq.CreationTimestamp.Time
			// The store counts in whole milliseconds.
			return nominal[res] * max(0, overlap(made, asked.Add(-time.Millisecond), d, d.Add(day)).Hours()),
				nominal[res] * max(0, overlap(made, answered.Add(time.Millisecond), d, d.Add(day)).Hours())
		}
		checkAllocated := func(where string, res corev1.ResourceName, d time.Time, got string, asked, answered time.Time) {
			t.Helper()
			low, high := allocated(res, d, asked, answered)
			var v float64
			if _, err := fmt.Sscan(got, &v); err != nil || v < low-0.005 || v > high+0.005 {
				t.Errorf("%s: %s allocated %q, want %.4f to %.4f (the quota since the queue was made)", where, res, got, low, high)
			}
		}
		allocatedCols := map[corev1.ResourceName]string{domain.ResourceGPU: "GPU-hours allocated (h)", corev1.ResourceCPU: "vCPU-hours allocated (h)"}
		summary := csvRecords(t, hc.console, report+"&format=csv&table=summary", func(r map[string]string) string { return r["Day (UTC)"] })
		want := map[string]map[string]string{}
		for key, u := range perDay {
			d, _ := time.Parse("2006-01-02", key)
			row := map[string]string{"Day (UTC)": key, "Team": team, "Instance type": "ml.p5.48xlarge",
				"GPU-hours used (h)": hours(u.gpuH), "GPU-hours borrowed (h)": "0.00", "GPU-hours lent (h)": "0.00",
				"Neuron-device-hours allocated (h)": "0.00", "Neuron-device-hours used (h)": "0.00",
				"Neuron-device-hours borrowed (h)": "0.00", "Neuron-device-hours lent (h)": "0.00",
				"vCPU-hours used (h)": hours(u.cpuH), "vCPU-hours borrowed (h)": "0.00", "vCPU-hours lent (h)": "0.00",
				// The store was made for this test: only a day that began
				// after its recorder did is recorded whole.
				"Day fully recorded": fmt.Sprint(!d.Before(recording)),
			}
			// The CSV shares the page's summary, which may be from a moment
			// before: each row says up to when its figures run.
			upTo, err := time.Parse(time.RFC3339Nano, summary[key]["Figures up to (UTC)"])
			if err != nil {
				t.Errorf("summary CSV, %s: figures up to %q: %v", key, summary[key]["Figures up to (UTC)"], err)
			}
			row["Figures up to (UTC)"] = summary[key]["Figures up to (UTC)"]
			for res, col := range allocatedCols {
				checkAllocated("summary CSV, "+key, res, d, summary[key][col], upTo, upTo)
				row[col] = summary[key][col]
			}
			want[key] = row
		}
		if diff := cmp.Diff(want, summary); diff != "" {
			t.Errorf("usage summary CSV (-from the Workloads +CSV):\n%s", diff)
		}

		// The same window in HyperPod's layout: the summary's hours, and
		// each task's GPU-hours, count, status, name and labels, from the
		// Workloads.
		code, body = hc.get(t, report+"&format=csv&layout=hyperpod")
		if code != http.StatusOK {
			t.Fatalf("the HyperPod layout: %d\n%.500s", code, body)
		}
		reports := webtest.ReadHyperPodCSV(t, body)
		if len(reports) != 2 {
			t.Fatalf("%d reports in the HyperPod layout, want the summary and the detailed one", len(reports))
		}
		gotHP, wantHP := map[string]map[string]string{}, map[string]map[string]string{}
		for _, r := range reports[0].Rows {
			gotHP[r["Date"]] = map[string]string{"Team": r["Team"], "Namespace": r["Namespace"], "Instance Type": r["Instance Type"],
				"Total GPU Hours": r["Total GPU Hours"], "Allocated GPU Hours": r["Allocated GPU Hours"], "Borrowed GPU Hours": r["Borrowed GPU Hours"],
				"Total vCPU Hours": r["Total vCPU Hours"], "Borrowed vCPU Hours": r["Borrowed vCPU Hours"]}
		}
		for key, u := range perDay {
			// Nothing borrowed: all the team used was within its quota.
			wantHP[key] = map[string]string{"Team": team, "Namespace": s.Namespace(team), "Instance Type": "ml.p5.48xlarge",
				"Total GPU Hours": hours(u.gpuH), "Allocated GPU Hours": hours(u.gpuH), "Borrowed GPU Hours": "0.00",
				"Total vCPU Hours": hours(u.cpuH), "Borrowed vCPU Hours": "0.00"}
		}
		if diff := cmp.Diff(wantHP, gotHP); diff != "" {
			t.Errorf("HyperPod layout summary (-from the Workloads +CSV):\n%s", diff)
		}
		gotHP, wantHP = map[string]map[string]string{}, map[string]map[string]string{}
		for _, r := range reports[1].Rows {
			gotHP[r["Namespace"]+"/"+r["Workload"]] = map[string]string{"Task": r["Task"], "Owner Kind": r["Owner Kind"], "Status": r["Status"],
				"Count": r["Count"], "GPU Hours": r["GPU Hours"], "Period Start": r["Period Start"], "Period End": r["Period End"], "Labels": r["Labels"]}
		}
		for _, w := range tasks {
			key := w.Namespace + "/" + w.Name
			gpus, _ := gpusOf(w)
			wt := wantTasks[key]
			name := w.Name // a bare Workload keeps its name; a Job's task is its Job's
			if wt["Owner name"] != "" {
				name = wt["Owner name"]
			}
			wantHP[key] = map[string]string{"Task": name, "Owner Kind": wt["Owner kind"],
				"Status": map[string]string{"succeeded": "Succeeded", "failed": "Failed"}[wt["Outcome"]], "Count": fmt.Sprint(gpus),
				"GPU Hours": wt["GPU-hours (h)"], "Period Start": wt["Start (UTC)"], "Period End": wt["End (UTC)"], "Labels": domain.LabelsWord(w.Labels)}
		}
		if diff := cmp.Diff(wantHP, gotHP); diff != "" {
			t.Errorf("HyperPod layout tasks (-from the Workloads +CSV):\n%s", diff)
		}

		// The summary on the page, per resource.
		for _, tc := range []struct {
			resource, unit string
			res            corev1.ResourceName
		}{{"gpu", "GPU-hours", domain.ResourceGPU}, {"vcpu", "vCPU-hours", corev1.ResourceCPU}} {
			code, body := hc.get(t, report+"&resource="+tc.resource)
			if code != http.StatusOK {
				t.Fatalf("GET %s&resource=%s = %d", report, tc.resource, code)
			}
			// The page's summary may be shared from a moment before: it
			// says up to when its figures run.
			doc, err := html.Parse(strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			upTo := webtest.FindNode(doc, func(n *html.Node) bool { return webtest.Attr(n, "id") == "summary-up-to" })
			if upTo == nil {
				t.Fatalf("the %s summary does not say up to when its figures run", tc.unit)
			}
			asked, err := time.Parse(time.RFC3339Nano, webtest.Attr(upTo, "data-at"))
			if err != nil {
				t.Fatalf("summary-up-to data-at: %v", err)
			}
			answered := asked
			rows := webtest.HTMLRows(t, body, "history-usage", func(n *html.Node) string {
				if webtest.Attr(n, "data-team") == "" {
					return "" // the header
				}
				return webtest.Attr(n, "data-team") + "|" + webtest.Attr(n, "data-day")
			})
			if len(rows) != len(want) {
				t.Errorf("%s summary on the page has %d rows, want %d: %v", tc.unit, len(rows), len(want), rows)
			}
			for key, w := range want {
				got := rows[team+"|"+key]
				d, _ := time.Parse("2006-01-02", key)
				wantRow := []string{key, team, "ml.p5.48xlarge", "allocated", w[tc.unit+" used (h)"], w[tc.unit+" borrowed (h)"], w[tc.unit+" lent (h)"]}
				if w["Day fully recorded"] == "false" {
					wantRow[0] = key + " incomplete"
				}
				if len(got) == len(wantRow) {
					checkAllocated(tc.unit+" summary on the page, "+key, tc.res, d, got[3], asked, answered)
					got[3] = "allocated"
				}
				if diff := cmp.Diff(wantRow, got); diff != "" {
					t.Errorf("%s summary row of %s on the page (-from the Workloads +page):\n%s", tc.unit, key, diff)
				}
			}
		}
	})
}

// filled is a page once its part id no longer waits for its source (the
// page's script asks again the same way).
func filled(t *testing.T, b *webtest.Browser, path, id string) string {
	t.Helper()
	var body string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		code, page := b.Get(path)
		if code != http.StatusOK {
			t.Fatalf("GET %s = %d", path, code)
		}
		if body = page; !strings.Contains(page, `id="`+id+`" data-filling`) {
			return page
		}
	}
	t.Fatalf("%s never filled in its part %s", path, id)
	return body
}
