package handlers

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/web/templates"
)

// overviewPage is the cluster's page: its capacity and queues, and
// Prometheus's utilization charts.
type overviewPage struct {
	frame
	overview ClusterOverview
	trees    *cohortTrees
	// model gives the members' team sections their tasks and usage now.
	model  snapshots
	charts *chartFeeds
	pieces *pieces
	kept   *kept[overviewTables]
	// insights give the headline and the count of open insights.
	insights *insightRules
}

// visibleQueues are the ClusterQueues of the teams a viewer may see (the
// capacity is the cluster's).
func visibleQueues(ov domain.Overview, visible scope) []domain.QueueQuota {
	var shown []domain.QueueQuota
	for _, q := range ov.Queues {
		if visible.sees(q.Team) {
			shown = append(shown, q)
		}
	}
	return shown
}

// overviewTables are the overview's tables for one scope.
type overviewTables struct {
	instanceTypes []templates.InstanceRow
	total         templates.InstanceRow
	vcpu          int64
	queues        []templ.Component
	// borrowable is, for a member's scope, what each of their teams'
	// ClusterQueues may borrow now, by ClusterQueue.
	borrowable map[string]borrowable
}

func (p overviewPage) show(c echo.Context) error {
	visible, _ := p.scopeOf(c)
	if table, ok := csvTable(c); ok {
		ov, err := p.overview.Overview()
		if err != nil {
			return err
		}
		if table == "cluster-queues" {
			return queuesCSV(c, visibleQueues(ov, visible))
		}
		return instancesCSV(c, ov)
	}
	// The cluster's tables show quotas and capacity; a member's also what
	// their queues may borrow now, which changes with every admission.
	changes := p.overview.Redefinitions()
	if !visible.all {
		changes = p.overview.Changes()
	}
	tables, err := p.kept.get(visible.key(), strconv.FormatUint(changes, 10), func() (overviewTables, error) {
		ov, err := p.overview.Overview()
		if err != nil {
			return overviewTables{}, err
		}
		t := overviewTables{total: instanceRow(ov.Total), vcpu: ov.Total.VCPU}
		for _, it := range ov.InstanceTypes {
			t.instanceTypes = append(t.instanceTypes, instanceRow(it))
		}
		for _, q := range visibleQueues(ov, visible) {
			row := templates.QueueRow{Name: q.Name, Cohort: q.Cohort, Quota: quotaWords(q.Nominal), Stopped: q.Stopped, Inactive: q.Inactive}
			t.queues = append(t.queues, p.pieces.of(row, templates.QueueRowCells(row)))
		}
		if !visible.all {
			t.borrowable = borrowableOf(ov, visible)
		}
		return t, nil
	})
	if err != nil {
		return err
	}
	var teams []templates.TeamSection
	if !visible.all {
		teams = teamSections(p.model.Snapshot(), visible, tables.borrowable)
	}
	rangeName, _ := chartRange(c, time.Now())
	var head *templates.HeadlineView
	if p.insights != nil {
		found, h := p.insights.current(c.Request().Context())
		v := headlineView(h, countShown(found, visible))
		head = &v
	}
	view := templates.OverviewView{
		Headline:      head,
		Page:          templates.Page{Title: "Cluster overview", Active: "overview", Problem: p.problem()},
		Teams:         teams,
		InstanceTypes: tables.instanceTypes,
		Total:         tables.total,
		Queues:        tables.queues,
		CohortTree:    p.trees.table(visible),
		Ranges:        rangeChoices("/?", rangeName),
		CSVInstances:  csvHref(c, "instance-types"),
		CSVQueues:     csvHref(c, "cluster-queues"),
	}
	charts, err := p.charts.clusterSeries(c.Request().Context(), rangeName, float64(tables.vcpu))
	unavailable := p.chartNote(err)
	view.Charts = []templ.Component{
		p.pieces.chart(chart("gpu-util", "GPU utilization (dcgm-exporter, all GPUs)", "%", 100, unavailable, charts.GPUUtilization)),
		p.pieces.chart(chart("gpu-mem", "GPU memory in use", "%", 100, unavailable, charts.GPUMemory)),
		p.pieces.chart(chart("vcpu", "vCPU allocated to tasks (Kueue) of cluster capacity", "%", 100, unavailable, charts.VCPUAllocation)),
	}
	return render(c, http.StatusOK, templates.Overview(view))
}

func instanceRow(r domain.InstanceTypeCapacity) templates.InstanceRow {
	return templates.InstanceRow{Type: r.Type, GPUModel: r.GPUModel, Count: int64(r.Count), Ready: int64(r.Ready), NotReady: int64(r.NotReady),
		GPUs: r.GPUs, GPUMemGiB: r.GPUMemGiB, VCPU: r.VCPU, MemoryGiB: r.MemoryGiB, Neuron: r.Neuron, Partitions: domain.PartitionsWord(r.Partitions)}
}

func queuesCSV(c echo.Context, queues []domain.QueueQuota) error {
	w, err := startCSV(c, "cluster-queues.csv", "ClusterQueue", "Cohort", "Nominal GPU quota (count)", "Admission",
		"Nominal Neuron quota (count)", "Nominal vCPU quota (count)", "Nominal memory quota (GiB)", "Why Kueue admits nothing")
	if err != nil {
		return err
	}
	for _, q := range queues {
		admission := "Enabled"
		switch {
		case q.Stopped:
			admission = "Disabled"
		case q.Inactive != "":
			admission = "Inactive"
		}
		n := q.Nominal
		if err := w.Row(q.Name, q.Cohort, itoa(n.GPUs), admission, itoa(n.Neuron), domain.FormatVCPU(n.CPUMilli), domain.FormatGiB(n.MemoryMiB), q.Inactive); err != nil {
			return err
		}
	}
	return w.Close()
}

func instancesCSV(c echo.Context, ov domain.Overview) error {
	w, err := startCSV(c, "instance-types.csv", "Instance type", "GPU model", "All instances (count)", "Ready (count)",
		"Pending recovery (count)", "GPUs of all instances (count)", "GPU memory (GiB)", "vCPUs (count)", "Memory (GiB)", "Neuron devices (count)", "EFA (count)",
		"GPU partitions (MIG)")
	if err != nil {
		return err
	}
	for _, r := range append(ov.InstanceTypes, ov.Total) {
		if err := w.Row(r.Type, r.GPUModel, strconv.Itoa(r.Count), strconv.Itoa(r.Ready), strconv.Itoa(r.NotReady),
			itoa(r.GPUs), itoa(r.GPUMemGiB), itoa(r.VCPU), itoa(r.MemoryGiB), itoa(r.Neuron), itoa(r.EFA), domain.PartitionsWord(r.Partitions)); err != nil {
			return err
		}
	}
	return w.Close()
}

// cohortTreeRows are the cohort tree's rows: each cohort, then its queues,
// indented by depth.
func cohortTreeRows(tree []domain.CohortRow) []templates.CohortTreeRow {
	var out []templates.CohortTreeRow
	for _, c := range tree {
		indent := strings.Repeat("\u00a0\u00a0\u00a0", c.Depth)
		if c.Depth > 0 {
			indent += "└\u00a0"
		}
		out = append(out, templates.CohortTreeRow{Name: c.Name, Indent: indent, Parent: c.Parent, Weight: c.Weight,
			Own: itoa(c.OwnGPUs), Quota: itoa(c.QuotaGPUs), InUse: itoa(c.InUseGPUs), Borrowed: itoa(c.BorrowedGPUs),
			Headroom: itoa(c.HeadroomGPUs())})
		for _, q := range c.Queues {
			var limits []string
			if q.LendingLimited {
				limits = append(limits, "lends at most "+itoa(q.LendingLimitGPUs))
			}
			if q.BorrowingLimited {
				limits = append(limits, "borrows at most "+itoa(q.BorrowingLimitGPUs))
			}
			out = append(out, templates.CohortTreeRow{Queue: true, Name: q.Name, Link: "/usage/" + url.PathEscape(q.Team),
				Indent: strings.Repeat("\u00a0\u00a0\u00a0", c.Depth+1), Quota: itoa(q.QuotaGPUs), InUse: itoa(q.InUseGPUs),
				Borrowed: itoa(q.BorrowedGPUs), Limits: strings.Join(limits, ", "), Weight: q.Weight})
		}
	}
	return out
}

// cohortTrees keep the cohort tree's table, rendered once for every page
// that shows it. Kueue updates the queues' status with every admission, so
// the figures are taken again at most every cohortTreeCadence, not with
// each change.
type cohortTrees struct {
	overview ClusterOverview
	kept     kept[templ.Component]
}

// cohortTreeCadence is how often the cohort tree's figures are taken again.
const cohortTreeCadence = 5 * time.Second

// table is the cohort tree for a viewer of the whole cluster (the tree
// names every team's queues); nil for others, and when there is no cohort.
func (t *cohortTrees) table(visible scope) templ.Component {
	if t == nil || !visible.all {
		return nil
	}
	key := strconv.FormatInt(time.Now().Truncate(cohortTreeCadence).Unix(), 10)
	table, _ := t.kept.get("all", key, func() (templ.Component, error) {
		ov, err := t.overview.Overview()
		if err != nil || len(ov.Cohorts) == 0 {
			return nil, err
		}
		return renderNow(templates.CohortTreeTable(cohortTreeRows(ov.Cohorts)))
	})
	return table
}
