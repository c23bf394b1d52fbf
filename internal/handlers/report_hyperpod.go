package handlers

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/taskhistory"
)

// Usage report CSV layouts (?layout=): the console's own (the default), and
// that of SageMaker HyperPod task governance's usage report, so that teams
// moving from HyperPod keep their spreadsheets.
const (
	layoutConsole  = ""
	layoutHyperPod = "hyperpod"
)

// HyperPod's usage report, as its documentation ("Reports details and data
// breakdown") names its parts: every report starts with the common header
// lines, then its columns and rows. The console writes its Summary report,
// an empty line, then its Detailed report, in one file.
const (
	hyperPodClusterName   = "ClusterName"
	hyperPodType          = "Type"
	hyperPodDateGenerated = "Date Generated"
	hyperPodDateRange     = "Date Range (UTC)"
	hyperPodMissing       = "Missing data periods"
	hyperPodSummaryType   = "Summary Utilization Report"
	hyperPodDetailedType  = "Detailed Utilization Report"
)

// hyperPodResource is a resource of the summary as HyperPod names it, with
// the console's figures of it.
type hyperPodResource struct {
	name string
	of   func(taskhistory.UsageRow) taskhistory.ResourceHours
}

// hyperPodResources are HyperPod's resources of the summary. The console
// counts Neuron devices (aws.amazon.com/neurondevice), not cores, and says
// so.
var hyperPodResources = []hyperPodResource{
	{"GPU", func(r taskhistory.UsageRow) taskhistory.ResourceHours { return r.GPU }},
	{"Neuron Device", func(r taskhistory.UsageRow) taskhistory.ResourceHours { return r.Neuron }},
	{"vCPU", func(r taskhistory.UsageRow) taskhistory.ResourceHours { return r.VCPU }},
}

// hyperPodSummaryResources are the summary's resources: HyperPod's, then
// the console's MIG partitions (partitionColumns), named in HyperPod's
// manner ("mig-1g.10gb Partition", "MIG GPU-Equivalent").
func hyperPodSummaryResources(profiles []string) []hyperPodResource {
	out := slices.Clone(hyperPodResources)
	for _, r := range partitionColumns(profiles) {
		name := "MIG GPU-Equivalent"
		if r.key != "" {
			name = r.key + " Partition"
		}
		out = append(out, hyperPodResource{name, r.of})
	}
	return out
}

// hyperPodSummaryColumns are the summary's columns: per day, namespace,
// team and instance type, the total hours used and their allocated (within
// the team's quota) and borrowed parts, per resource.
func hyperPodSummaryColumns(resources []hyperPodResource) []string {
	cols := []string{"Date", "Namespace", "Team", "Instance Type"}
	for _, r := range resources {
		cols = append(cols, "Total "+r.name+" Hours", "Allocated "+r.name+" Hours", "Borrowed "+r.name+" Hours")
	}
	return cols
}

// hyperPodDetailedColumns are the detailed report's columns, then the
// console's own after them (so HyperPod's keep their places): the task's
// owner kind and Workload (Task is its owner's name, as people know it),
// what Count counts, its GPU-hours, and its MIG partitions' hours.
var hyperPodDetailedColumns = []string{"Date", "Period Start", "Period End", "Namespace", "Team", "Task", "Instance", "Status",
	"Hours", "Count", "Priority Class", "Labels",
	"Owner Kind", "Workload", "Count Unit", "GPU Hours", "MIG Partitions", "MIG Partition Hours", "MIG GPU-Equivalent Hours"}

// hyperPodStatus is a task's status in HyperPod's words.
func hyperPodStatus(r taskhistory.ReportRow) string {
	switch r.Outcome {
	case taskhistory.OutcomeSucceeded:
		return "Succeeded"
	case taskhistory.OutcomeFailed:
		return "Failed"
	case taskhistory.OutcomeDeleted:
		return "Deleted"
	case taskhistory.OutcomeOther:
		return "Finished"
	case taskhistory.OutcomeVanished:
		return "Unknown"
	}
	if r.State == domain.TaskAdmitted {
		return "Running"
	}
	return "Pending"
}

// hyperPodCount is what a task holds, as HyperPod's Count: its GPUs, else
// its Neuron devices, else its vCPU; and what it counts.
func hyperPodCount(req taskhistory.Resources) (count, unit string) {
	switch {
	case req.GPUs > 0:
		return strconv.FormatInt(req.GPUs, 10), "GPU"
	case req.Neuron > 0:
		return strconv.FormatInt(req.Neuron, 10), "Neuron Device"
	}
	return domain.FormatVCPU(req.CPUMilli), "vCPU"
}

// hyperPodCSV writes the usage report of days (up to now) in HyperPod's
// layout: the summary from the console's usage summary, the detail from its
// per-task report, both of the teams the viewer sees.
func (p reportPage) hyperPodCSV(c echo.Context, days taskhistory.Window, rq taskhistory.ReportQuery, sees func(string) bool) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 30*time.Second)
	defer cancel()
	sum, err := p.summaries.of(ctx, days)
	if err != nil {
		return echo.NewHTTPError(http.StatusServiceUnavailable, p.taskHistoryNote(err))
	}
	// The summary may be shared from a little earlier (reportTTL): the
	// tasks end where it does, so that they add up to it in one file.
	if !sum.UpTo.IsZero() && sum.UpTo.Before(rq.Window.To) {
		rq.Window.To = sum.UpTo
	}
	// The tasks are read before the answer starts, so a store that fails
	// gets 503 and a sentence, not half a report.
	var tasks []taskhistory.ReportRow
	if _, _, err := p.taskHistory.TaskReport(ctx, rq, func(r taskhistory.ReportRow) error {
		if len(r.Use) > 0 { // only tasks that held compute in the range
			tasks = append(tasks, r)
		}
		return nil
	}); err != nil {
		return echo.NewHTTPError(http.StatusServiceUnavailable, p.taskHistoryNote(err))
	}

	name := days.From.Format(dateLayout) + "-to-" + days.To.AddDate(0, 0, -1).Format(dateLayout)
	s, err := startCSV(c, "hyperpod-usage-report-"+name+".csv", hyperPodClusterName, p.clusterName())
	if err != nil {
		return err
	}
	header := func(kind string) error {
		for _, line := range [][]string{
			{hyperPodType, kind},
			{hyperPodDateGenerated, time.Now().UTC().Format(dateLayout)},
			{hyperPodDateRange, days.From.Format(dateLayout) + " to " + days.To.AddDate(0, 0, -1).Format(dateLayout)},
			{hyperPodMissing, hyperPodMissingPeriods(sum.Days)},
		} {
			if err := s.Row(line...); err != nil {
				return err
			}
		}
		return nil
	}
	if err := header(hyperPodSummaryType); err != nil {
		return err
	}
	rows := visibleUsage(sum.UsageSummary, sees)
	resources := hyperPodSummaryResources(taskhistory.Profiles(rows, nil))
	if err := s.Row(hyperPodSummaryColumns(resources)...); err != nil {
		return err
	}
	namespace := p.settings.Namespace // without a read model: the team namespace
	if p.model != nil {
		namespace = namespacesOf(p.settings, p.model.Snapshot())
	}
	for _, r := range rows {
		cells := []string{r.Day.Format(dateLayout), namespace(r.Team), r.Team, r.InstanceType}
		for _, res := range resources {
			h := res.of(r)
			cells = append(cells, domain.FormatHours(h.Used), domain.FormatHours(max(h.Used-h.Borrowed, 0)), domain.FormatHours(h.Borrowed))
		}
		if err := s.Row(cells...); err != nil {
			return err
		}
	}

	if err := s.Row(); err != nil {
		return err
	}
	if err := s.Row(hyperPodClusterName, p.clusterName()); err != nil {
		return err
	}
	if err := header(hyperPodDetailedType); err != nil {
		return err
	}
	if err := s.Row(hyperPodDetailedColumns...); err != nil {
		return err
	}
	// A row per task and instance type it held in the range: its hours there
	// (in the time the history recorded, as the summary counts them), what
	// it held at most, its GPU-hours.
	for _, r := range tasks {
		n := r.Task.Named()
		for _, u := range r.Use {
			count, unit := hyperPodCount(u.Holds)
			if err := s.Row(u.From.UTC().Format(dateLayout), u.From.UTC().Format(time.RFC3339), u.To.UTC().Format(time.RFC3339),
				r.Task.Namespace, r.Task.Team, n.Plain(), u.InstanceType, hyperPodStatus(r),
				domain.FormatHours(u.Held.Hours()), count, r.Task.Class, r.Labels,
				n.OwnerKind, r.Task.Name, unit, domain.FormatHours(u.GPUHours), u.Partitions,
				domain.FormatHours(u.PartitionHours), domain.FormatHours(u.PartitionGPUHours)); err != nil {
				return err
			}
		}
	}
	return s.Close()
}

// clusterName is the cluster's name in reports.
func (p reportPage) clusterName() string {
	if p.settings.ClusterName != "" {
		return p.settings.ClusterName
	}
	return "unnamed cluster (start the console with --cluster-name)"
}

// hyperPodMissingPeriods are the periods the history has no record of, as
// HyperPod writes them ("2025-04-16 00:00:00 to 2025-04-19 00:00:00"),
// joined by "; "; "None" when the record is whole. Adjacent periods are one.
func hyperPodMissingPeriods(days []taskhistory.UsageDay) string {
	var periods []taskhistory.Period
	for _, d := range days {
		for _, m := range d.Missing {
			if n := len(periods); n > 0 && !m.From.After(periods[n-1].To) {
				periods[n-1].To = maxTime(periods[n-1].To, m.To)
				continue
			}
			periods = append(periods, m)
		}
	}
	if len(periods) == 0 {
		return "None"
	}
	const layout = "2006-01-02 15:04:05"
	out := make([]string, len(periods))
	for i, m := range periods {
		out[i] = m.From.UTC().Format(layout) + " to " + m.To.UTC().Format(layout)
	}
	return strings.Join(out, "; ")
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
