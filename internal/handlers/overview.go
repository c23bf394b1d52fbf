package handlers

import (
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/metrics"
	"github.com/openquota/console/web/templates"
)

func overview(d Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		nodes, err := d.Cache.Nodes.List(labels.Everything())
		if err != nil {
			return err
		}
		queues, err := d.Cache.ClusterQueues.List(labels.Everything())
		if err != nil {
			return err
		}
		ov := domain.BuildOverview(nodes, queues)
		if visible, _ := d.scopeOf(c); !visible.all {
			mine := ov.Queues[:0]
			for _, q := range ov.Queues {
				if cq, err := d.Cache.ClusterQueues.Get(q.Name); err == nil && visible.sees(d.Settings.TeamOfClusterQueue(cq)) {
					mine = append(mine, q)
				}
			}
			ov.Queues = mine
		}
		if wantsCSV(c) {
			return overviewCSV(c, ov)
		}
		rangeName, r := chartRange(c, time.Now())
		view := templates.OverviewView{
			Page:     templates.Page{Title: "Cluster overview", Active: "overview", Problem: d.problem()},
			Overview: ov,
			Ranges:   rangeChoices("/?", rangeName),
		}
		var charts metrics.Charts
		if d.Prom != nil {
			charts, err = d.Prom.ClusterUtilization(c.Request().Context(), r, float64(ov.Total.VCPU))
		}
		unavailable := d.promNote(err)
		view.Charts = []templates.ChartModel{
			chart("gpu-util", "GPU utilization (dcgm-exporter, all GPUs)", "%", 100, unavailable, charts.GPUUtilization),
			chart("gpu-mem", "GPU memory in use", "%", 100, unavailable, charts.GPUMemory),
			chart("vcpu", "vCPU allocated to tasks (Kueue) of cluster capacity", "%", 100, unavailable, charts.VCPUAllocation),
		}
		return render(c, http.StatusOK, templates.Overview(view))
	}
}

func overviewCSV(c echo.Context, ov domain.Overview) error {
	if c.QueryParam("table") == "cluster-queues" {
		s, err := startCSV(c, "cluster-queues.csv", "ClusterQueue", "Cohort", "Nominal GPU quota (count)", "Admission")
		if err != nil {
			return err
		}
		for _, q := range ov.Queues {
			admission := "Enabled"
			if q.Stopped {
				admission = "Disabled"
			}
			if err := s.Row(q.Name, q.Cohort, itoa(q.NominalGPUs), admission); err != nil {
				return err
			}
		}
		return s.Close()
	}
	s, err := startCSV(c, "instance-types.csv", "Instance type", "GPU model", "Instances (count)", "Ready (count)",
		"Pending recovery (count)", "GPUs (count)", "GPU memory (GiB)", "vCPUs (count)", "Memory (GiB)", "Neuron devices (count)", "EFA (count)")
	if err != nil {
		return err
	}
	for _, r := range append(ov.InstanceTypes, ov.Total) {
		if err := s.Row(r.Type, r.GPUModel, strconv.Itoa(r.Count), strconv.Itoa(r.Ready), strconv.Itoa(r.NotReady),
			itoa(r.GPUs), itoa(r.GPUMemGiB), itoa(r.VCPU), itoa(r.MemoryGiB), itoa(r.Neuron), itoa(r.EFA)); err != nil {
			return err
		}
	}
	return s.Close()
}
