package handlers

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/openquota/console/internal/auth"
	"github.com/openquota/console/internal/cluster"
	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/web/templates"
)

// fleet is the instance shapes (catalog merged with live nodes) and how many
// instances of each type the cluster has.
func (d Deps) fleet() (domain.ShapeLookup, map[string]int, error) {
	nodes, err := d.Cache.Nodes.List(labels.Everything())
	if err != nil {
		return nil, nil, err
	}
	shapes, available := domain.LiveShapes(nodes)
	return shapes, available, nil
}

func teams(d Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		stored, err := cluster.ListTeams(d.Cache.ClusterQueues)
		if err != nil {
			return err
		}
		shapes, available, err := d.fleet()
		if err != nil {
			return err
		}
		view := templates.TeamsView{
			Page: templates.Page{Title: "Team allocations", Active: "teams", Problem: problem(d.Cache)},
		}
		view.Flash = auth.TakeFlashOf(c)
		var all []domain.Team
		drifted := d.driftedTeams()
		visible, _ := d.scopeOf(c)
		for _, st := range stored {
			if st.ClusterQueue.Name != d.Settings.ClusterQueue(st.Name) {
				continue // a team of a console with another namespace prefix
			}
			all = append(all, st.Team) // the per-type totals are the cluster's
			if !visible.sees(st.Name) {
				continue
			}
			row := templates.TeamRow{
				Name: st.Name, Namespace: d.Settings.Namespace(st.Name), ClusterQueue: st.ClusterQueue.Name,
				Enabled: !domain.Stopped(st.ClusterQueue), FairShareWeight: st.FairShareWeight,
				Lending: lendingLabel(st.Team), Preemption: string(st.Preemption), Drifted: drifted[st.Name],
			}
			var cpu, mem int64
			for _, q := range st.Quota {
				if shape, ok := shapes(q.InstanceType); ok {
					dq := domain.DeriveQuota(q, shape)
					row.GPUs += dq.GPUs
					row.Neuron += dq.Neuron
					cpu += dq.CPUMilli
					mem += dq.MemoryMiB
				}
			}
			row.VCPU, row.MemoryGiB = formatMilli(cpu), formatMiB(mem)
			view.Teams = append(view.Teams, row)
		}
		view.Allocation = domain.AllocationByType(all, shapes, available)
		if wantsCSV(c) {
			return teamsCSV(c, view)
		}
		return render(c, http.StatusOK, templates.Teams(view))
	}
}

func lendingLabel(t domain.Team) string {
	switch t.Lending {
	case domain.LendAndBorrow:
		return "Lend and borrow (" + itoa(t.BorrowLimitPercent) + " %)"
	case domain.Lend:
		return "Lend only"
	case domain.DontLend:
		return "Don't lend"
	}
	return string(t.Lending)
}

func teamsCSV(c echo.Context, v templates.TeamsView) error {
	if c.QueryParam("table") == "by-type" {
		s, err := startCSV(c, "quota-by-instance-type.csv", "Instance type", "Instances (count)", "GPUs allocated (count)",
			"GPUs capacity (count)", "vCPU allocated (count)", "vCPU capacity (count)", "Memory allocated (GiB)", "Memory capacity (GiB)", "Above capacity")
		if err != nil {
			return err
		}
		for _, a := range v.Allocation {
			if err := s.Row(a.Type, strconv.Itoa(a.Instances), itoa(a.GPUs), itoa(a.CapacityGPUs), formatMilli(a.CPUMilli),
				formatMilli(a.CapacityCPUMilli), formatMiB(a.MemoryMiB), formatMiB(a.CapacityMemoryMiB), strconv.FormatBool(a.OverCapacity)); err != nil {
				return err
			}
		}
		return s.Close()
	}
	s, err := startCSV(c, "team-allocations.csv", "Team", "Namespace", "Enabled", "GPUs (count)", "Neuron devices (count)",
		"vCPU (count)", "Memory (GiB)", "Fair-share weight", "Lending", "Preemption")
	if err != nil {
		return err
	}
	for _, t := range v.Teams {
		if err := s.Row(t.Name, t.Namespace, strconv.FormatBool(t.Enabled), itoa(t.GPUs), itoa(t.Neuron), t.VCPU, t.MemoryGiB,
			itoa(t.FairShareWeight), t.Lending, t.Preemption); err != nil {
			return err
		}
	}
	return s.Close()
}
