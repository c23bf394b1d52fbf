package handlers_test

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/kueuetest"
	"github.com/openquota/console/internal/taskhistory"
	"github.com/openquota/console/internal/webtest"
)

// HyperPod's usage report as its documentation lays it out ("Reports
// details and data breakdown"): common header lines
// (webtest.HyperPodHeaderLines), then the summary's and the detailed
// report's columns. The console's own columns follow
// HyperPod's in the detailed report.
var (
	hyperPodSummaryColumns = []string{"Date", "Namespace", "Team", "Instance Type",
		"Total GPU Hours", "Allocated GPU Hours", "Borrowed GPU Hours",
		"Total Neuron Device Hours", "Allocated Neuron Device Hours", "Borrowed Neuron Device Hours",
		"Total vCPU Hours", "Allocated vCPU Hours", "Borrowed vCPU Hours"}
	hyperPodDetailedColumns = []string{"Date", "Period Start", "Period End", "Namespace", "Team", "Task", "Instance", "Status",
		"Hours", "Count", "Priority Class", "Labels"}
)

// /reports/usage?format=csv&layout=hyperpod is the usage report in the
// layout of SageMaker HyperPod task governance's: header lines, then the
// summary (total, allocated and borrowed hours per GPU, Neuron device and
// vCPU) with the figures of the console's own summary of the same window,
// then the tasks with those of its per-task report.
func TestUsageReportInHyperPodLayout(t *testing.T) {
	f := newFixture(t, 2, 0)
	f.cfg.Settings.ClusterName = "ml-cluster"
	// A queue the console did not create, fed from namespace default.
	objs := kueuetest.Cluster(f.settings, f.settings.Cohort, 2, 0, time.Now())
	objs.ClusterQueues = append(objs.ClusterQueues, kueuetest.MakeClusterQueue("cluster-queue").Nominal(4, nil).WrittenBy("kubectl").Obj())
	objs.LocalQueues = append(objs.LocalQueues, kueuetest.MakeLocalQueue("default", "user-queue", "cluster-queue"))
	f.model.publish(snapshotOf(f.settings, objs, time.Now()))
	namespaceOf := map[string]string{"team-000": f.settings.Namespace("team-000"), "team-001": f.settings.Namespace("team-001"), "cluster-queue": "default"}
	today := time.Now().UTC().Truncate(24 * time.Hour)
	d1, d2 := today.AddDate(0, 0, -2), today.AddDate(0, 0, -1)
	hours := func(alloc, used, borrowed float64) taskhistory.ResourceHours {
		return taskhistory.ResourceHours{Allocated: alloc, Used: used, Borrowed: borrowed}
	}
	gap := taskhistory.Period{From: d2.Add(3 * time.Hour), To: d2.Add(4*time.Hour + 30*time.Minute)}
	ns := f.settings.Namespace
	admitted := d1.Add(2 * time.Hour)
	f.cfg.TaskHistory = &taskHistory{
		summary: taskhistory.UsageSummary{UpTo: today, Days: []taskhistory.UsageDay{{Day: d1}, {Day: d2, Missing: []taskhistory.Period{gap}}},
			Rows: []taskhistory.UsageRow{
				{Day: d1, Team: "team-000", InstanceType: "ml.p5.48xlarge", GPU: hours(192, 150.5, 20.25), VCPU: hours(4608, 1200, 0)},
				{Day: d1, Team: "team-001", InstanceType: "ml.trn1.32xlarge", Neuron: hours(384, 100, 12), VCPU: hours(3072, 640, 80)},
				{Day: d2, Team: "team-000", InstanceType: "ml.p5.48xlarge", GPU: hours(192, 24, 0), VCPU: hours(4608, 96, 0)},
				{Day: d2, Team: "cluster-queue", InstanceType: "ml.g6.12xlarge", GPU: hours(96, 10, 0)},
			}},
		report: []taskhistory.ReportRow{
			{Task: taskhistory.TaskRef{UID: "u1", Namespace: ns("team-000"), Name: "job-big-869d5", Team: "team-000", Class: "training",
				OwnerKind: "Job", OwnerName: "big"}, Requests: taskhistory.Resources{GPUs: 8, CPUMilli: 96000},
				Use: []taskhistory.InstanceUse{{InstanceType: "ml.p5.48xlarge", From: admitted, To: admitted.Add(3 * time.Hour), Held: 3 * time.Hour, GPUHours: 24,
					Holds: taskhistory.Resources{GPUs: 8, CPUMilli: 96000}}},
				Start: admitted, End: admitted.Add(3 * time.Hour), Labels: "app=bert; stage=train", State: domain.TaskFinished, Outcome: taskhistory.OutcomeSucceeded},
			{Task: taskhistory.TaskRef{UID: "u2", Namespace: ns("team-001"), Name: "neuron-run", Team: "team-001", Class: "batch"},
				Use: []taskhistory.InstanceUse{{InstanceType: "ml.trn1.32xlarge", From: admitted, To: admitted.Add(5 * time.Hour), Held: 5 * time.Hour,
					Holds: taskhistory.Resources{Neuron: 16, CPUMilli: 64000}}},
				Requests: taskhistory.Resources{Neuron: 16, CPUMilli: 64000}, Start: admitted, State: domain.TaskAdmitted},
			// Preempted on L4s and admitted again on H100s: a row for each.
			{Task: taskhistory.TaskRef{UID: "u4", Namespace: ns("team-000"), Name: "moved", Team: "team-000", Class: "batch"},
				Requests: taskhistory.Resources{GPUs: 4, CPUMilli: 48000},
				Use: []taskhistory.InstanceUse{
					{InstanceType: "ml.g6.12xlarge", From: admitted, To: admitted.Add(40 * time.Minute), Held: 40 * time.Minute, GPUHours: 4 * 40 / 60.0,
						Holds: taskhistory.Resources{GPUs: 4, CPUMilli: 48000}},
					{InstanceType: "ml.p5.48xlarge", From: admitted.Add(time.Hour), To: admitted.Add(70 * time.Minute), Held: 10 * time.Minute, GPUHours: 4 * 10 / 60.0,
						Holds: taskhistory.Resources{GPUs: 4, CPUMilli: 96000}}},
				Start: admitted, End: admitted.Add(70 * time.Minute), State: domain.TaskFinished, Outcome: taskhistory.OutcomeSucceeded},
			{Task: taskhistory.TaskRef{UID: "u3", Namespace: ns("team-001"), Name: "never-ran", Team: "team-001"}, State: domain.TaskPending},
		},
	}
	h := f.handler()
	window := "&from=" + d1.Format("2006-01-02") + "&to=" + d2.Format("2006-01-02")

	generatedFrom := time.Now().UTC().Format("2006-01-02")
	code, body := webtest.Get(t, h, "/reports/usage?format=csv&layout=hyperpod"+window)
	generatedTo := time.Now().UTC().Format("2006-01-02")
	if code != http.StatusOK {
		t.Fatalf("the HyperPod layout: %d\n%.500s", code, body)
	}
	sections := webtest.ReadHyperPodCSV(t, body)
	if len(sections) != 2 {
		t.Fatalf("%d reports in the file, want the summary and the detailed one", len(sections))
	}
	summary, detailed := sections[0], sections[1]

	// The header lines.
	for i, s := range sections {
		if g := s.Header["Date Generated"]; g != generatedFrom && g != generatedTo {
			t.Errorf("report %d generated %q, want the day it was asked", i+1, g)
		}
		delete(s.Header, "Date Generated")
		want := map[string]string{"ClusterName": "ml-cluster", "Type": []string{"Summary Utilization Report", "Detailed Utilization Report"}[i],
			"Date Range (UTC)":     d1.Format("2006-01-02") + " to " + d2.Format("2006-01-02"),
			"Missing data periods": gap.From.Format("2006-01-02 15:04:05") + " to " + gap.To.Format("2006-01-02 15:04:05")}
		if diff := cmp.Diff(want, s.Header); diff != "" {
			t.Errorf("report %d's header lines (-want +got):\n%s", i+1, diff)
		}
	}
	// The columns: HyperPod's, in its order (the console's own follow in
	// the detailed report).
	if diff := cmp.Diff(hyperPodSummaryColumns, summary.Columns); diff != "" {
		t.Errorf("the summary's columns (-HyperPod's +got):\n%s", diff)
	}
	if n := len(hyperPodDetailedColumns); len(detailed.Columns) < n || !cmp.Equal(hyperPodDetailedColumns, detailed.Columns[:n]) {
		t.Errorf("the detailed report's columns %q, want HyperPod's %q first", detailed.Columns, hyperPodDetailedColumns)
	}

	// The summary's figures are the console's own summary's: total is what
	// tasks used, borrowed what they held beyond the quota, allocated the rest.
	code, own := webtest.Get(t, h, "/reports/usage?source=history&format=csv&table=summary"+window)
	header, rows := webtest.ReadCSV(t, "the console's summary", code, own)
	num := func(s string) float64 {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("not a number: %q", s)
		}
		return v
	}
	var want []map[string]string
	for _, r := range webtest.CSVRecords(header, rows, func(r map[string]string) string { return r["Day (UTC)"] + r["Team"] + r["Instance type"] }) {
		row := map[string]string{"Date": r["Day (UTC)"], "Namespace": namespaceOf[r["Team"]], "Team": r["Team"], "Instance Type": r["Instance type"]}
		for res, unit := range map[string]string{"GPU": "GPU-hours", "Neuron Device": "Neuron-device-hours", "vCPU": "vCPU-hours"} {
			used, borrowed := r[unit+" used (h)"], r[unit+" borrowed (h)"]
			row["Total "+res+" Hours"], row["Borrowed "+res+" Hours"] = used, borrowed
			row["Allocated "+res+" Hours"] = strconv.FormatFloat(num(used)-num(borrowed), 'f', 2, 64)
		}
		want = append(want, row)
	}
	sortRows := func(rows []map[string]string) {
		key := func(r map[string]string) string { return r["Date"] + r["Team"] + r["Instance Type"] }
		slices.SortFunc(rows, func(a, b map[string]string) int { return strings.Compare(key(a), key(b)) })
	}
	sortRows(want)
	sortRows(summary.Rows)
	if len(want) == 0 {
		t.Fatal("the console's summary has no rows to compare with")
	}
	if diff := cmp.Diff(want, summary.Rows); diff != "" {
		t.Errorf("the summary's figures (-the console's summary +HyperPod layout):\n%s", diff)
	}

	// The detailed report: a row per task that held compute and instance
	// type it held, with the figures of the console's per-task report, named
	// as their owners know them.
	code, tasksCSV := webtest.Get(t, h, "/reports/usage?source=history&format=csv&table=tasks"+window)
	header, rows = webtest.ReadCSV(t, "the console's per-task report", code, tasksCSV)
	key := func(namespace, task, instance string) string { return namespace + "/" + task + " on " + instance }
	wantTasks := map[string]map[string]string{}
	for _, r := range webtest.CSVRecords(header, rows, func(r map[string]string) string { return key(r["Namespace"], r["Task"], r["Instance type"]) }) {
		if r["Instance type"] == "" {
			continue // it held nothing in the range
		}
		if r["Owner name"] == "" {
			r["Owner name"] = r["Task"] // a Workload without an owner keeps its own name
		}
		wantTasks[key(r["Namespace"], r["Task"], r["Instance type"])] = map[string]string{"Namespace": r["Namespace"], "Team": r["Team"],
			"Task": r["Owner name"], "Owner Kind": r["Owner kind"], "Instance": r["Instance type"],
			"Priority Class": r["Priority class"], "Hours": r["Held (h)"], "GPU Hours": r["GPU-hours (h)"]}
	}
	gotTasks := map[string]map[string]string{}
	for _, r := range detailed.Rows {
		gotTasks[key(r["Namespace"], r["Workload"], r["Instance"])] = map[string]string{"Namespace": r["Namespace"],
			"Team": r["Team"], "Task": r["Task"], "Owner Kind": r["Owner Kind"], "Instance": r["Instance"],
			"Priority Class": r["Priority Class"], "Hours": r["Hours"], "GPU Hours": r["GPU Hours"]}
	}
	if len(wantTasks) != 4 {
		t.Fatalf("the per-task report has %d rows of tasks that held compute, want 4: %v", len(wantTasks), wantTasks)
	}
	if diff := cmp.Diff(wantTasks, gotTasks); diff != "" {
		t.Errorf("the detailed report's tasks (-the console's per-task report +HyperPod layout):\n%s", diff)
	}
	// Each row's period, hours and count are of its instance type, from the fixture.
	for _, r := range detailed.Rows {
		for _, in := range f.cfg.TaskHistory.(*taskHistory).report {
			for _, u := range in.Use {
				if in.Task.Name != r["Workload"] || u.InstanceType != r["Instance"] {
					continue
				}
				if r["Period Start"] != u.From.UTC().Format(time.RFC3339) || r["Period End"] != u.To.UTC().Format(time.RFC3339) {
					t.Errorf("%s on %s: from %s to %s, want %s to %s", in.Task.Name, u.InstanceType, r["Period Start"], r["Period End"], u.From, u.To)
				}
				if r["Hours"] != domain.FormatHours(u.Held.Hours()) {
					t.Errorf("%s on %s: %s hours, want the %s it held", in.Task.Name, u.InstanceType, r["Hours"], u.Held)
				}
				if r["Labels"] != in.Labels {
					t.Errorf("%s: labels %q, want %q", in.Task.Name, r["Labels"], in.Labels)
				}
				if want := max(u.Holds.GPUs, u.Holds.Neuron); r["Count"] != strconv.FormatInt(want, 10) {
					t.Errorf("%s on %s: count %s, want its %d accelerators", in.Task.Name, u.InstanceType, r["Count"], want)
				}
			}
		}
	}
	if s := detailed.Rows[0]["Status"] + "," + detailed.Rows[1]["Status"]; s != "Succeeded,Running" {
		t.Errorf("statuses %s, want the finished task Succeeded and the open one Running", s)
	}

	// The report page offers the layout next to the console's own CSV.
	code, page := webtest.Get(t, h, "/reports/usage?source=history"+window)
	if code != http.StatusOK {
		t.Fatalf("the report page: %d", code)
	}
	webtest.MustContain(t, "the report page", page, `id="export-hyperpod"`, "layout=hyperpod", `id="export-summary"`)
	if code, _ := webtest.Get(t, h, "/reports/usage?format=csv&layout=excel"+window); code != http.StatusBadRequest {
		t.Errorf("an unknown layout answers %d, want 400", code)
	}
}

// The HyperPod file's summary may be shared from a little earlier than
// the request: its tasks end where the summary does, so that in one file
// a team's tasks add up to its hours.
func TestHyperPodTasksEndWithTheSummary(t *testing.T) {
	f := newFixture(t, 1, 0)
	today := time.Now().UTC().Truncate(24 * time.Hour)
	upTo := time.Now().Add(-20 * time.Second)
	th := &taskHistory{summary: taskhistory.UsageSummary{UpTo: upTo, Days: []taskhistory.UsageDay{{Day: today}}}}
	f.cfg.TaskHistory = th
	day := today.Format("2006-01-02")
	if code, body := webtest.Get(t, f.handler(), "/reports/usage?format=csv&layout=hyperpod&source=history&from="+day+"&to="+day); code != http.StatusOK {
		t.Fatalf("the HyperPod file: %d\n%s", code, body)
	}
	if got := th.reportQuery.Window.To; !got.Equal(upTo) {
		t.Errorf("the tasks were read up to %v, want the summary's %v", got, upTo)
	}
}
