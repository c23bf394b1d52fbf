package handlers

import (
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"github.com/openquota/console/internal/auth"
	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/web/templates"
)

// teamPages are the team allocations: the list, the form, and deletion.
type teamPages struct {
	frame
	teams  Teams
	model  ReadModel // the tasks a deletion stops
	writes teamWrites
	// bindings are an imported team's members.
	bindings TeamBindings
	// kueueConfig says whether Kueue orders by recent use, for the form.
	kueueConfig kueueRecentUse
	pieces      *pieces
	kept        *kept[teamsTables]
}

// teamsTables are the allocation page's tables for one scope.
type teamsTables struct {
	teams      []templ.Component
	allocation []templates.TypeAllocationRow
}

func (p teamPages) list(c echo.Context) error {
	visible, _ := p.scopeOf(c)
	if table, ok := csvTable(c); ok {
		shown, byType, shapes := p.allocations(visible)
		if table == "by-type" {
			return byTypeCSV(c, byType)
		}
		return teamsCSV(c, namespacesOf(p.settings, p.model.Snapshot()), shown, shapes)
	}
	view := templates.TeamsView{
		Page:      templates.Page{Title: "Team allocations", Active: "teams", Problem: p.problem()},
		Flash:     auth.TakeFlashOf(c),
		CSVTeams:  csvHref(c, ""),
		CSVByType: csvHref(c, "by-type"),
	}
	drifted := p.teams.DriftedTeams()
	key := strconv.FormatUint(p.teams.Redefinitions(), 10) + "\x00" + strings.Join(slices.Sorted(maps.Keys(drifted)), ",")
	tables, _ := p.kept.get(visible.key(), key, func() (teamsTables, error) {
		namespaces := namespacesOf(p.settings, p.model.Snapshot())
		shown, byType, shapes := p.allocations(visible)
		var t teamsTables
		for _, st := range shown {
			total := domain.StateTotal(st, shapes)
			row := templates.TeamRow{
				Name: st.Name, Namespace: namespaces(st.Name), ClusterQueue: st.ClusterQueue.Name,
				Enabled: !domain.Stopped(st.ClusterQueue), FairShareWeight: st.FairShareWeight,
				Lending: lendingLabel(st.Team), Preemption: string(st.Preemption), Drifted: drifted[st.Name], Imported: domain.Imported(st.ClusterQueue),
				GPUs: total.GPUs, Neuron: total.Neuron, VCPU: domain.FormatVCPU(total.CPUMilli), MemoryGiB: domain.FormatGiB(total.MemoryMiB),
			}
			t.teams = append(t.teams, p.pieces.of(row, templates.TeamRowCells(row)))
		}
		for _, a := range byType {
			t.allocation = append(t.allocation, templates.TypeAllocationRow{
				Type: a.Type, Instances: strconv.Itoa(a.Instances),
				GPUs: itoa(a.Allocated.GPUs), GPUCapacity: itoa(a.Capacity.GPUs),
				VCPU: domain.FormatVCPU(a.Allocated.CPUMilli), VCPUCapacity: domain.FormatVCPU(a.Capacity.CPUMilli),
				MemoryGiB: domain.FormatGiB(a.Allocated.MemoryMiB), MemoryGiBCapacity: domain.FormatGiB(a.Capacity.MemoryMiB),
				OverCapacity: a.OverCapacity(),
			})
		}
		return t, nil
	})
	view.Teams, view.Allocation = tables.teams, tables.allocation
	view.Queues = externalQueues(p.model.Snapshot().Teams, visible)
	for _, q := range view.Queues {
		if q.Cohort != "" && !q.Imported && !slices.Contains(view.ImportCohorts, q.Cohort) {
			view.ImportCohorts = append(view.ImportCohorts, q.Cohort)
		}
	}
	slices.Sort(view.ImportCohorts)
	return render(c, http.StatusOK, templates.Teams(view))
}

// externalQueues are the ClusterQueues the console did not create, imported
// or not, that the viewer may see.
func externalQueues(rows []domain.TeamUsage, visible scope) []templates.ExternalQueueRow {
	var out []templates.ExternalQueueRow
	for _, r := range rows {
		if (r.Manager == "" && !r.Imported) || !visible.sees(r.Team) {
			continue
		}
		managedBy := r.Manager
		if r.Imported {
			managedBy = "the console (imported)"
		}
		out = append(out, templates.ExternalQueueRow{Team: r.Team, ClusterQueue: r.ClusterQueue, Namespaces: r.Namespace,
			Cohort: r.Cohort, ManagedBy: managedBy, Reconciler: r.Reconciler, Quota: quotaWords(r.Allocated),
			Running: r.Running, Pending: r.Pending + r.Preempted, Imported: r.Imported, Import: importURL(r.ClusterQueue)})
	}
	return out
}

// allocations are the teams a viewer may see, the cluster's allocation
// per instance type (of every team), and the instance shapes.
func (p teamPages) allocations(visible scope) ([]domain.TeamState, []domain.TypeAllocation, domain.ShapeLookup) {
	shapes, available := p.teams.Fleet()
	var all []domain.Team
	var shown []domain.TeamState
	for _, st := range p.teams.Teams() {
		all = append(all, st.Team)
		if visible.sees(st.Name) {
			shown = append(shown, st)
		}
	}
	return shown, domain.AllocationByType(all, shapes, available), shapes
}

func lendingLabel(t domain.Team) string {
	lends := ""
	if abs := t.AbsoluteLendWords(); abs != "" {
		lends = "lends at most " + abs
	}
	switch t.Lending {
	case domain.LendAndBorrow:
		label := "Lend and borrow (" + itoa(t.BorrowLimitPercent) + " %"
		if abs := t.AbsoluteBorrowWords(); abs != "" {
			label += "; at most " + abs
		}
		if lends != "" {
			label += "; " + lends
		}
		return label + ")"
	case domain.Lend:
		if lends != "" {
			return "Lend only (" + lends + ")"
		}
		return "Lend only"
	case domain.DontLend:
		return "Don't lend"
	}
	return string(t.Lending)
}

// namespacesOf names each team's namespaces as the pages show them: those
// of its queue's LocalQueues (an imported queue keeps its own), else the
// team namespace.
func namespacesOf(s domain.Settings, snap *domain.Snapshot) func(team string) string {
	byTeam := make(map[string]string, len(snap.Teams))
	for _, r := range snap.Teams {
		byTeam[r.Team] = r.Namespace
	}
	return func(team string) string {
		if ns := byTeam[team]; ns != "" {
			return ns
		}
		return s.Namespace(team)
	}
}

func teamsCSV(c echo.Context, namespaces func(team string) string, teams []domain.TeamState, shapes domain.ShapeLookup) error {
	w, err := startCSV(c, "team-allocations.csv", "Team", "Namespace", "Enabled", "GPUs (count)", "Neuron devices (count)",
		"vCPU (count)", "Memory (GiB)", "Fair-share weight", "Lending", "Preemption")
	if err != nil {
		return err
	}
	for _, st := range teams {
		total := domain.StateTotal(st, shapes)
		if err := w.Row(st.Name, namespaces(st.Name), strconv.FormatBool(!domain.Stopped(st.ClusterQueue)), itoa(total.GPUs), itoa(total.Neuron),
			domain.FormatVCPU(total.CPUMilli), domain.FormatGiB(total.MemoryMiB), itoa(st.FairShareWeight), lendingLabel(st.Team), string(st.Preemption)); err != nil {
			return err
		}
	}
	return w.Close()
}

func byTypeCSV(c echo.Context, byType []domain.TypeAllocation) error {
	w, err := startCSV(c, "quota-by-instance-type.csv", "Instance type", "Ready instances (count)", "GPUs allocated (count)",
		"GPUs capacity of ready instances (count)", "vCPU allocated (count)", "vCPU capacity of ready instances (count)", "Memory allocated (GiB)",
		"Memory capacity of ready instances (GiB)", "Above capacity")
	if err != nil {
		return err
	}
	for _, a := range byType {
		if err := w.Row(a.Type, strconv.Itoa(a.Instances), itoa(a.Allocated.GPUs), itoa(a.Capacity.GPUs), domain.FormatVCPU(a.Allocated.CPUMilli),
			domain.FormatVCPU(a.Capacity.CPUMilli), domain.FormatGiB(a.Allocated.MemoryMiB), domain.FormatGiB(a.Capacity.MemoryMiB),
			strconv.FormatBool(a.OverCapacity())); err != nil {
			return err
		}
	}
	return w.Close()
}
