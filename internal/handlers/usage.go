package handlers

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/web/templates"
)

// usageResource is a resource the usage dashboard can show.
type usageResource struct {
	key, label, unit string
	of               func(domain.Amount) int64
	format           func(int64) string
}

var usageResources = []usageResource{
	{"gpu", "GPUs", "GPUs", func(a domain.Amount) int64 { return a.GPUs }, itoa},
	{"neuron", "Neuron devices", "devices", func(a domain.Amount) int64 { return a.Neuron }, itoa},
	{"cpu", "vCPU", "vCPU", func(a domain.Amount) int64 { return a.CPUMilli }, formatMilli},
	{"memory", "Memory", "GiB", func(a domain.Amount) int64 { return a.MemoryMiB }, formatMiB},
}

func resourceOf(key string) usageResource {
	for _, r := range usageResources {
		if r.key == key {
			return r
		}
	}
	return usageResources[0]
}

func percent(part, whole int64) string {
	if whole == 0 {
		return "—"
	}
	return fmt.Sprintf("%.0f %%", float64(part)*100/float64(whole))
}

func tasksLink(params ...string) string {
	q := url.Values{}
	for i := 0; i+1 < len(params); i += 2 {
		q.Set(params[i], params[i+1])
	}
	return "/tasks?" + q.Encode()
}

// hardwareUtil asks Prometheus for each team's GPU utilization; the note says
// why there is none.
func (d Deps) hardwareUtil(ctx context.Context) (map[string]float64, string) {
	if d.Prom == nil {
		return nil, "Hardware utilization needs Prometheus: start the console with --prometheus-url."
	}
	util, err := d.Prom.TeamGPUUtilization(ctx, d.Settings.NamespacePrefix)
	if err != nil {
		d.Log.Warn("prometheus", "err", err)
		return nil, "Prometheus is unavailable, so hardware utilization is not shown; everything else comes from Kubernetes."
	}
	return util, ""
}

func usage(d Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		snap := d.Live.Snapshot()
		res := resourceOf(c.QueryParam("resource"))
		util, note := d.hardwareUtil(c.Request().Context())
		view := templates.UsageView{
			Page:     templates.Page{Title: "Team usage", Active: "usage", Problem: d.problem(), Snapshot: snap.Version},
			Unit:     res.unit,
			PromNote: note,
			CSVHref:  "/usage?format=csv&resource=" + res.key,
			AsOf:     snap.Taken.Format(time.TimeOnly),
		}
		for _, r := range usageResources {
			view.Resources = append(view.Resources, templates.ResourceChoice{Key: r.key, Label: r.label, Href: "/usage?resource=" + r.key, Current: r.key == res.key})
		}
		visible, _ := d.scopeOf(c)
		for _, u := range snap.Teams {
			if visible.sees(u.Team) {
				view.Rows = append(view.Rows, usageRowOf(u, res, util, false))
			}
		}
		view.Total = usageRowOf(domain.Totals(snap.Teams), res, util, true)
		if len(util) > 0 {
			var sum float64
			for _, v := range util {
				sum += v
			}
			view.Total.HardwareUtil = fmt.Sprintf("%.0f %% (mean of teams)", sum/float64(len(util)))
		}
		if wantsCSV(c) {
			return usageCSV(c, res, view.Rows, view.Total)
		}
		return render(c, http.StatusOK, templates.Usage(view))
	}
}

// usageRowOf formats one team's usage (or the totals) in the chosen
// resource, each figure linked to the tasks it is made of.
func usageRowOf(u domain.TeamUsage, res usageResource, util map[string]float64, total bool) templates.UsageRow {
	r := templates.UsageRow{
		Team: u.Team, Namespace: u.Namespace, Enabled: u.Enabled,
		Allocated: res.format(res.of(u.Allocated)), InUse: res.format(res.of(u.InUse)),
		Borrowed: res.format(res.of(u.Borrowed)), Lent: res.format(res.of(u.Lent)), Wants: res.format(res.of(u.PendingDemand)),
		AllocUtil: percent(res.of(u.InUse), res.of(u.Allocated)),
		Running:   u.Running, Pending: u.Pending + u.Preempted, Preempted: u.Preempted,
		HardwareUtil: "—",
	}
	team := []string{}
	if !total {
		r.Link = "/usage/" + url.PathEscape(u.Team)
		team = []string{"team", u.Team}
	}
	r.InUseLink = tasksLink(append(team, "state", "Admitted")...)
	r.RunningLink = r.InUseLink
	r.BorrowedLink = tasksLink(append(team, "state", "Admitted", "borrowing", "1")...)
	r.LentLink = tasksLink("state", "Admitted", "borrowing", "1")
	r.WantsLink = tasksLink(append(team, "state", "Queued")...)
	r.PendingLink = r.WantsLink
	if v, ok := util[u.Team]; ok && !total {
		r.HardwareUtil = fmt.Sprintf("%.0f %%", v)
	}
	return r
}

func usageCSV(c echo.Context, res usageResource, rows []templates.UsageRow, total templates.UsageRow) error {
	u := " (" + res.unit + ")"
	s, err := startCSV(c, "team-usage-"+res.key+".csv", "Team", "Namespace", "Enabled", "Allocated"+u, "In use by tasks"+u,
		"Borrowed"+u, "Lent"+u, "Pending demand"+u, "Allocation utilization (%)", "Hardware GPU utilization (%)",
		"Running tasks (count)", "Pending tasks (count)")
	if err != nil {
		return err
	}
	for _, r := range append(rows, total) {
		enabled := fmt.Sprint(r.Enabled)
		if r.Link == "" {
			enabled = "" // the totals row
		}
		if err := s.Row(r.Team, r.Namespace, enabled, r.Allocated, r.InUse, r.Borrowed, r.Lent, r.Wants,
			trimPercent(r.AllocUtil), trimPercent(r.HardwareUtil), fmt.Sprint(r.Running), fmt.Sprint(r.Pending)); err != nil {
			return err
		}
	}
	return s.Close()
}

// trimPercent turns "73 %" into "73" and "—" into "" for CSV cells.
func trimPercent(s string) string {
	var v float64
	if _, err := fmt.Sscanf(s, "%f", &v); err != nil {
		return ""
	}
	return fmt.Sprintf("%g", v)
}
