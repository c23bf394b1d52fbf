package handlers

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"
	corev1 "k8s.io/api/core/v1"

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
	// ClusterQueues may borrow now, by ClusterQueue and resource.
	// ClusterQueues may borrow now, by ClusterQueue.
	borrowable map[string]map[corev1.ResourceName]domain.BorrowableNow
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
			row := templates.QueueRow{Name: q.Name, Cohort: q.Cohort, Quota: quotaWords(q.Nominal), Stopped: q.Stopped, Stop: q.Stop, Drained: q.Drained, Inactive: q.Inactive}
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
		CohortTree:    p.trees.table(visible, ""),
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

// cohortTreeRows are the cohort tree's rows in one resource: each cohort,
// then its queues, indented by depth.
func cohortTreeRows(tree []domain.CohortRow, res usageResource) []templates.CohortTreeRow {
	var out []templates.CohortTreeRow
	of := func(a domain.Amount) string { return res.format(a.Of(res.kube)) }
	for _, c := range tree {
		indent := strings.Repeat("\u00a0\u00a0\u00a0", c.Depth)
		if c.Depth > 0 {
			indent += "└\u00a0"
		}
		out = append(out, templates.CohortTreeRow{Name: c.Name, Indent: indent, Parent: c.Parent, Weight: c.Weight,
			Own: of(c.Own), Quota: of(c.Quota), InUse: of(c.InUse), Borrowed: of(c.Borrowed), Headroom: of(c.Headroom()),
			Limits: domain.LimitWords(c.OwnQuotas, res.kube, res.format)})
		for _, q := range c.Queues {
			out = append(out, templates.CohortTreeRow{Queue: true, Name: q.Name, Link: "/usage/" + url.PathEscape(q.Team),
				Indent: strings.Repeat("\u00a0\u00a0\u00a0", c.Depth+1), Quota: of(q.Quota), InUse: of(q.InUse),
				Borrowed: of(q.Borrowed), Limits: domain.LimitWords(q.Quotas, res.kube, res.format), Weight: q.Weight})
		}
	}
	return out
}

// named is the resource with its unit where its name does not say it:
// "GPUs", "Memory (GiB)".
func (r usageResource) named() string {
	if strings.Contains(r.label, r.unit) {
		return r.label
	}
	return r.label + " (" + r.unit + ")"
}

// treeResource is the resource the cohort tree shows: the one key names
// among the four every queue may have, else GPUs, or, for a tree without
// GPU quota (as Kueue's own examples are, in vCPU and memory), the first
// resource it has quota of.
func treeResource(key string, tree []domain.CohortRow) usageResource {
	for _, r := range usageResources {
		if r.key == key {
			return r
		}
	}
	for _, r := range usageResources {
		for _, c := range tree {
			if c.Depth == 0 && c.Quota.Of(r.kube) > 0 {
				return r
			}
		}
	}
	return usageResources[0]
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

// table is the cohort tree in the resource key names ("" or a resource
// it cannot show: as treeResource picks) for a viewer of the whole cluster
// (the tree names every team's queues); nil for others, and when there is
// no cohort.
func (t *cohortTrees) table(visible scope, key string) templ.Component {
	if t == nil || !visible.all {
		return nil
	}
	at := strconv.FormatInt(time.Now().Truncate(cohortTreeCadence).Unix(), 10)
	table, _ := t.kept.get("all\x00"+key, at, func() (templ.Component, error) {
		ov, err := t.overview.Overview()
		if err != nil || len(ov.Cohorts) == 0 {
			return nil, err
		}
		res := treeResource(key, ov.Cohorts)
		return renderNow(templates.CohortTreeTable(cohortTreeRows(ov.Cohorts, res), res.named()))
	})
	return table
}
