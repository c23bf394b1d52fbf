package handlers_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/kueuetest"
	"github.com/openquota/console/internal/taskhistory"
	"github.com/openquota/console/internal/webtest"
)

// A task is named as its owner knows it (the Job "big", not its Workload
// job-big-869d5) on every page and in every CSV that names tasks; the
// Workload's name stays on hover and in its own CSV column; a Workload
// without an owner keeps its own name.
func TestTasksAreNamedByTheirOwners(t *testing.T) {
	f := newFixture(t, 1, 0)
	s := f.settings
	now := time.Now()
	ns := s.Namespace("team-000")
	objs := kueuetest.Cluster(s, s.Cohort, 1, 0, now)
	objs.Workloads = append(objs.Workloads,
		kueuetest.MakeWorkload(s, ns, "job-big-869d5").OwnedBy("Job", "big", true).Queue(s.LocalQueue("team-000")).GPUs(1, 1).Created(now).
			Condition(kueuev1beta2.WorkloadFinished, true, kueuev1beta2.WorkloadFinishedReasonSucceeded, "done", now).Obj(),
		kueuetest.MakeWorkload(s, ns, "solo").Queue(s.LocalQueue("team-000")).GPUs(1, 1).Created(now).
			Condition(kueuev1beta2.WorkloadFinished, true, kueuev1beta2.WorkloadFinishedReasonSucceeded, "done", now).Obj())
	f.model.publish(snapshotOf(s, objs, now))
	big := taskhistory.TaskRef{UID: "u-big", Namespace: ns, Name: "job-big-869d5", Team: "team-000", Class: "low", OwnerKind: "Job", OwnerName: "big"}
	solo := taskhistory.TaskRef{UID: "u-solo", Namespace: ns, Name: "solo", Team: "team-000", Class: "low"}
	f.cfg.TaskHistory = &taskHistory{
		report:      []taskhistory.ReportRow{{Task: big}, {Task: solo}},
		preemptions: []taskhistory.Preemption{{At: now.Add(-time.Hour), Task: solo, Preemptor: big, GPUs: 1, Reason: "InClusterQueue"}},
	}
	h := f.handler()

	type named struct{ Shown, OwnerKind, OwnerName string }
	want := map[string]named{
		ns + "/job-big-869d5": {Shown: "Job big", OwnerKind: "Job", OwnerName: "big"},
		ns + "/solo":          {Shown: "solo"},
	}
	for _, tc := range []struct{ page, table, csv string }{
		{"/tasks?state=all", "task-list", "/tasks?state=all&format=csv&table=tasks"},
		{"/reports/usage?source=history", "task-report", "/reports/usage?source=history&format=csv&table=tasks"},
	} {
		code, body := webtest.Get(t, h, tc.page)
		if code != 200 {
			t.Fatalf("GET %s = %d", tc.page, code)
		}
		got := map[string]named{}
		for key, cells := range webtest.HTMLRows(t, body, tc.table, webtest.ByAttr("data-task")) {
			got[key] = named{Shown: cells[0]}
		}
		code, csvBody := webtest.Get(t, h, tc.csv)
		header, rows := webtest.ReadCSV(t, tc.csv, code, csvBody)
		for key, r := range webtest.CSVRecords(header, rows, func(r map[string]string) string { return r["Namespace"] + "/" + r["Task"] }) {
			n := got[key]
			n.OwnerKind, n.OwnerName = r["Owner kind"], r["Owner name"]
			got[key] = n
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s and its CSV name the tasks (-want +got):\n%s", tc.page, diff)
		}
		// The Workloads' names on hover.
		webtest.MustContain(t, tc.page, body, `title="Job big — Workload `+ns+`/job-big-869d5"`, `title="Workload `+ns+`/solo"`)
	}

	// The preemptions page and CSV name the preempted task and its preemptor alike.
	code, body := webtest.Get(t, h, "/preemptions")
	if code != 200 {
		t.Fatalf("GET /preemptions = %d", code)
	}
	row := webtest.HTMLRows(t, body, "preemptions", webtest.ByAttr("data-task"))[ns+"/solo"]
	if len(row) < 6 || row[1] != "solo" || row[5] != "Job big" {
		t.Errorf("the preemption row %q does not name the task solo preempted by Job big", row)
	}
	webtest.MustContain(t, "/preemptions", body, `title="Job big — Workload `+ns+`/job-big-869d5"`)
	code, csvBody := webtest.Get(t, h, "/preemptions?format=csv")
	header, rows := webtest.ReadCSV(t, "/preemptions?format=csv", code, csvBody)
	r := webtest.CSVRecords(header, rows, func(r map[string]string) string { return r["Task"] })["solo"]
	gotCSV := map[string]string{"Owner kind": r["Owner kind"], "Owner name": r["Owner name"], "Preemptor task": r["Preemptor task"],
		"Preemptor owner kind": r["Preemptor owner kind"], "Preemptor owner name": r["Preemptor owner name"]}
	wantCSV := map[string]string{"Owner kind": "", "Owner name": "", "Preemptor task": "job-big-869d5",
		"Preemptor owner kind": "Job", "Preemptor owner name": "big"}
	if diff := cmp.Diff(wantCSV, gotCSV); diff != "" {
		t.Errorf("the preemptions CSV names the tasks (-want +got):\n%s", diff)
	}
}

// A task that names no priority class counts in the lowest class; its row
// says so, beside that class.
func TestATaskWithoutAClassSaysSo(t *testing.T) {
	f := newFixture(t, 1, 0)
	s, now := f.settings, time.Now()
	objs := kueuetest.Cluster(s, s.Cohort, 1, 0, now)
	objs.Workloads = append(objs.Workloads,
		kueuetest.MakeWorkload(s, s.Namespace("team-000"), "plain").Queue(s.LocalQueue("team-000")).GPUs(1, 1).
			Created(now.Add(-time.Minute)).Pending("Pending", "couldn't assign flavors", now.Add(-time.Minute)).Obj(),
		kueuetest.MakeWorkload(s, s.Namespace("team-000"), "ranked").Queue(s.LocalQueue("team-000")).Class("batch").GPUs(1, 1).
			Created(now.Add(-time.Minute)).Pending("Pending", "couldn't assign flavors", now.Add(-time.Minute)).Obj())
	f.model.publish(snapshotOf(s, objs, now))
	_, body := webtest.Get(t, f.handler(), "/tasks?state=all")
	rows := webtest.HTMLRows(t, body, "task-list", webtest.ByAttr("data-task"))
	plain, ranked := strings.Join(rows[s.Namespace("team-000")+"/plain"], "|"), strings.Join(rows[s.Namespace("team-000")+"/ranked"], "|")
	if !strings.Contains(plain, "batch (none named)") || strings.Contains(ranked, "none named") {
		t.Errorf("class cells: a task without class %q, one of class batch %q", plain, ranked)
	}
	// The CSV says it as the page does.
	code, csvBody := webtest.Get(t, f.handler(), "/tasks?state=all&format=csv&table=tasks")
	header, csvRows := webtest.ReadCSV(t, "/tasks CSV", code, csvBody)
	classes := map[string]string{}
	for key, r := range webtest.CSVRecords(header, csvRows, func(r map[string]string) string { return r["Task"] }) {
		classes[key] = r["Priority class"]
	}
	if diff := cmp.Diff(map[string]string{"plain": "batch (none named)", "ranked": "batch"}, classes); diff != "" {
		t.Errorf("the CSV's classes (-want +got):\n%s", diff)
	}
}
