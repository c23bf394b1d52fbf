package handlers_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openquota/console/internal/metrics"
	"github.com/openquota/console/internal/taskhistory"
	"github.com/openquota/console/internal/webtest"
)

// The usage report offers each MIG profile of the history's summary as a
// resource of its own, in partition-hours, and its CSVs add each profile's
// partition-hours and their whole-GPU equivalent after the columns they
// had. team-000 had a quota of 7 mig-1g.10gb partitions for the last 3
// hours of the day, its task holding 2 of them throughout: 21 allocated, 6
// used. team-001's tasks held 14 mig-3g.40gb partition-hours, 7 of them
// beyond its quota of 2 for 24 hours.
func TestUsageReportCountsPartitionHours(t *testing.T) {
	f := newFixture(t, 2, 0)
	day := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -1)
	const p4d, p5 = "ml.p4d.24xlarge", "ml.p5.48xlarge"
	f.cfg.TaskHistory = &taskHistory{summary: taskhistory.UsageSummary{UpTo: day.AddDate(0, 0, 1), Days: []taskhistory.UsageDay{{Day: day}},
		Rows: []taskhistory.UsageRow{
			{Day: day, Team: "team-000", InstanceType: p4d,
				Partitions: map[string]taskhistory.ResourceHours{"mig-1g.10gb": {Allocated: 21, Used: 6}}},
			{Day: day, Team: "team-000", InstanceType: p5, GPU: taskhistory.ResourceHours{Allocated: 192, Used: 24}},
			{Day: day, Team: "team-001", InstanceType: p4d, VCPU: taskhistory.ResourceHours{Allocated: 96, Used: 8},
				Partitions: map[string]taskhistory.ResourceHours{"mig-3g.40gb": {Allocated: 48, Used: 14, Borrowed: 7}}},
		}}}
	h := f.handler()
	window := "&from=" + day.Format("2006-01-02") + "&to=" + day.Format("2006-01-02")
	d := day.Format("2006-01-02")

	// The page: a tab per profile, its rows in partition-hours.
	tables := []struct {
		resource string
		want     map[string][]string
		mentions []string
	}{
		{"gpu", map[string][]string{"team-000": {d, "team-000", p5, "192.00", "24.00", "0.00", "0.00"}},
			[]string{`href="/reports/usage?from=` + d + `&amp;resource=mig-1g.10gb&amp;source=history&amp;to=` + d + `">mig-1g.10gb partitions<`,
				`&amp;resource=mig-3g.40gb&amp;source=history&amp;to=` + d + `">mig-3g.40gb partitions<`, "GPU-hours allocated"}},
		{"mig-1g.10gb", map[string][]string{"team-000": {d, "team-000", p4d, "21.00", "6.00", "0.00", "0.00"}},
			[]string{"partition-hours allocated", "partition-hours lent", "a partition-hour is 1/7 of a whole-GPU-hour"}},
		{"mig-3g.40gb", map[string][]string{"team-001": {d, "team-001", p4d, "48.00", "14.00", "7.00", "0.00"}},
			[]string{"partition-hours borrowed", "a partition-hour is 3/7 of a whole-GPU-hour"}},
	}
	for _, tc := range tables {
		path := "/reports/usage?source=history" + window + "&resource=" + tc.resource
		code, body := webtest.Get(t, h, path)
		if code != http.StatusOK {
			t.Fatalf("%s: %d", path, code)
		}
		if diff := cmp.Diff(tc.want, webtest.HTMLRows(t, body, "history-usage", webtest.ByAttr("data-team"))); diff != "" {
			t.Errorf("%s: rows (-want +got):\n%s", tc.resource, diff)
		}
		webtest.MustContain(t, path, body, tc.mentions...)
	}

	// The summary CSV: its columns as before, then each profile's
	// partition-hours, then all of them in whole-GPU-hours.
	code, body := webtest.Get(t, h, "/reports/usage?source=history&format=csv&table=summary"+window)
	header, rows := webtest.ReadCSV(t, "the summary CSV", code, body)
	var before []string
	for _, unit := range []string{"GPU-hours", "Neuron-device-hours", "vCPU-hours"} {
		for _, what := range []string{"allocated", "used", "borrowed", "lent"} {
			before = append(before, unit+" "+what+" (h)")
		}
	}
	before = append(append([]string{"Day (UTC)", "Team", "Instance type"}, before...), "Day fully recorded", "Figures up to (UTC)")
	var added []string
	for _, name := range []string{"mig-1g.10gb partition-hours", "mig-3g.40gb partition-hours", "Partition GPU-equivalent hours"} {
		for _, what := range []string{"allocated", "used", "borrowed", "lent"} {
			added = append(added, name+" "+what+" (h)")
		}
	}
	if diff := cmp.Diff(append(before, added...), header); diff != "" {
		t.Errorf("the summary CSV's columns (-want +got):\n%s", diff)
	}
	got := webtest.CSVRecords(header, rows, func(r map[string]string) string { return r["Team"] + " " + r["Instance type"] })
	want := map[string]map[string]string{
		"team-000 " + p4d: {"mig-1g.10gb partition-hours allocated (h)": "21.00", "mig-1g.10gb partition-hours used (h)": "6.00",
			"mig-3g.40gb partition-hours allocated (h)": "0.00",
			// 21 and 6 partition-hours of a profile of 1 slice in 7.
			"Partition GPU-equivalent hours allocated (h)": "3.00", "Partition GPU-equivalent hours used (h)": "0.86",
			"GPU-hours allocated (h)": "0.00"},
		"team-001 " + p4d: {"mig-3g.40gb partition-hours used (h)": "14.00", "mig-3g.40gb partition-hours borrowed (h)": "7.00",
			// 48, 14 and 7 partition-hours of a profile of 3 slices in 7.
			"Partition GPU-equivalent hours allocated (h)": "20.57", "Partition GPU-equivalent hours used (h)": "6.00",
			"Partition GPU-equivalent hours borrowed (h)": "3.00", "vCPU-hours used (h)": "8.00"},
		"team-000 " + p5: {"GPU-hours used (h)": "24.00", "mig-1g.10gb partition-hours used (h)": "0.00",
			"Partition GPU-equivalent hours used (h)": "0.00"},
	}
	for key, cells := range want {
		for column, value := range cells {
			if got[key][column] != value {
				t.Errorf("summary CSV, %s, %q: %q, want %q", key, column, got[key][column], value)
			}
		}
	}

	// The HyperPod layout's summary: HyperPod's columns, then the same
	// partition-hours and their whole-GPU equivalent, total, allocated
	// (within the quota) and borrowed, as HyperPod counts its own.
	code, body = webtest.Get(t, h, "/reports/usage?format=csv&layout=hyperpod"+window)
	if code != http.StatusOK {
		t.Fatalf("the HyperPod layout: %d", code)
	}
	summary := webtest.ReadHyperPodCSV(t, body)[0]
	hyperPodAdded := []string{
		"Total mig-1g.10gb Partition Hours", "Allocated mig-1g.10gb Partition Hours", "Borrowed mig-1g.10gb Partition Hours",
		"Total mig-3g.40gb Partition Hours", "Allocated mig-3g.40gb Partition Hours", "Borrowed mig-3g.40gb Partition Hours",
		"Total MIG GPU-Equivalent Hours", "Allocated MIG GPU-Equivalent Hours", "Borrowed MIG GPU-Equivalent Hours"}
	if diff := cmp.Diff(append(append([]string{}, hyperPodSummaryColumns...), hyperPodAdded...), summary.Columns); diff != "" {
		t.Errorf("the HyperPod summary's columns (-want +got):\n%s", diff)
	}
	hyperPodGot := map[string]map[string]string{}
	for _, r := range summary.Rows {
		cells := map[string]string{}
		for _, c := range hyperPodAdded {
			cells[c] = r[c]
		}
		hyperPodGot[r["Team"]+" "+r["Instance Type"]] = cells
	}
	zero := func(over map[string]string) map[string]string {
		out := map[string]string{}
		for _, c := range hyperPodAdded {
			out[c] = "0.00"
		}
		for c, v := range over {
			out[c] = v
		}
		return out
	}
	hyperPodWant := map[string]map[string]string{
		"team-000 " + p4d: zero(map[string]string{"Total mig-1g.10gb Partition Hours": "6.00", "Allocated mig-1g.10gb Partition Hours": "6.00",
			"Total MIG GPU-Equivalent Hours": "0.86", "Allocated MIG GPU-Equivalent Hours": "0.86"}),
		"team-001 " + p4d: zero(map[string]string{"Total mig-3g.40gb Partition Hours": "14.00", "Allocated mig-3g.40gb Partition Hours": "7.00",
			"Borrowed mig-3g.40gb Partition Hours": "7.00",
			"Total MIG GPU-Equivalent Hours":       "6.00", "Allocated MIG GPU-Equivalent Hours": "3.00", "Borrowed MIG GPU-Equivalent Hours": "3.00"}),
		"team-000 " + p5: zero(nil),
	}
	if diff := cmp.Diff(hyperPodWant, hyperPodGot); diff != "" {
		t.Errorf("the HyperPod summary's partition-hours (-want +got):\n%s", diff)
	}
}

// The report from Prometheus says which periods it has no sample for
// (Prometheus or Kueue down), whose GPU-hours count as zero, as the
// report from the task history says which it has no record of.
func TestPrometheusUsageReportSaysWhereItHasNoSample(t *testing.T) {
	f := newFixture(t, 2, 0)
	day := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	f.cfg.Prometheus = prometheus{report: metrics.Report{
		Rows: []metrics.UsageRow{{Day: day, Team: "team-000", GPUHoursAllocated: 100}},
		Gaps: []metrics.Gap{{From: day.Add(time.Hour + 25*time.Minute), To: day.Add(time.Hour + 55*time.Minute)},
			{From: day.Add(23 * time.Hour), To: day.Add(26 * time.Hour)}},
	}}
	code, body := webtest.Get(t, f.handler(), "/reports/usage?source=prometheus&from=2026-11-27&to=2026-11-28")
	if code != http.StatusOK {
		t.Fatalf("the report: %d", code)
	}
	webtest.MustContain(t, "the report's gaps", body,
		`data-prometheus="gap">2026-11-27: no record 01:25–01:55, 23:00–24:00 UTC (1h 30m in all); that day&#39;s figures leave it out.`,
		`data-prometheus="gap">2026-11-28: no record 00:00–02:00 UTC; that day&#39;s figures leave it out.`)
}
