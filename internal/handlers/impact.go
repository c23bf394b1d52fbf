package handlers

import (
	"context"
	"fmt"
	"net/url"
	"slices"

	"github.com/labstack/echo/v4"
	corev1 "k8s.io/api/core/v1"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/kueue"
	"github.com/openquota/console/internal/write"
	"github.com/openquota/console/web/templates"
)

// A write form posts step=preview first: the page answers with what Kueue
// will do (the impact preview) and the form's values, to apply (step=apply)
// or to take back to the form (step=edit). A post without a step (a
// script) applies at once, as before.
const (
	stepPreview = "preview"
	stepEdit    = "edit"
)

// step is the step a post asks for. A preview names other teams' tasks, so
// only who may make the change gets one (noPreview, the reason they get
// none, is ""); anyone else's post goes to the write path, which refuses it
// in the cluster's words.
func step(values url.Values, noPreview string) string {
	if s := values.Get("step"); s == stepEdit || (s == stepPreview && noPreview == "") {
		return s
	}
	return ""
}

// movedShown bounds the pending tasks listed as moving in their queue;
// uncertainShown those listed as uncertain (a preview Kueue's cycles cut
// short names every head it had not tried yet: thousands at 200 teams).
const (
	movedShown     = 20
	uncertainShown = 50
)

// firstOf is the first n of ts, and how many are left out.
func firstOf(ts []domain.ImpactTask, n int) ([]domain.ImpactTask, int) {
	if len(ts) <= n {
		return ts, 0
	}
	return ts[:n], len(ts) - n
}

// withPreviewNote is the request's context carrying the preview the admin
// accepted, which the change's revision records.
func withPreviewNote(c echo.Context, values url.Values) context.Context {
	ctx := c.Request().Context()
	if note := write.PreviewNote(values.Get("previewed")); note != "" {
		ctx = kueue.WithNote(ctx, note)
	}
	return ctx
}

// carried are a form's values for its confirmation, but the step, the
// accepted preview and the CSRF token, which the confirmation sets anew.
func carried(values url.Values) []templates.Hidden {
	var out []templates.Hidden
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if k == "step" || k == "previewed" || k == "_csrf" {
			continue
		}
		for _, v := range values[k] {
			out = append(out, templates.Hidden{Name: k, Value: v})
		}
	}
	return out
}

// impactFigure is n of r in the unit impactUnit names.
func impactFigure(r corev1.ResourceName, n int64) string {
	switch r {
	case corev1.ResourceCPU:
		return domain.FormatVCPU(n)
	case corev1.ResourceMemory:
		return domain.FormatGiB(n)
	}
	return fmt.Sprint(n)
}

// impactUnit names the unit of a team's figures in a preview.
func impactUnit(r corev1.ResourceName) string {
	if r == corev1.ResourceMemory {
		return "memory (GiB)"
	}
	return domain.ResourceWord(r)
}

// impactView is a preview as pages show it; out says why there is none.
func impactView(im domain.Impact, out write.Outcome) templates.ImpactView {
	if out.Kind != write.Saved {
		return templates.ImpactView{Problem: out.Message + " You can still apply the change."}
	}
	v := templates.ImpactView{Summary: im.Summary(), Notes: im.Notes, Writes: im.Writes, WritesTo: im.WritesTo, Basis: im.Kueue}
	tasks := func(ts []domain.ImpactTask) []templates.ImpactTaskRow {
		rows := make([]templates.ImpactTaskRow, 0, len(ts))
		for _, t := range ts {
			rows = append(rows, templates.ImpactTaskRow{Team: t.Team, Task: taskLabel(t.Named()), Class: t.Class,
				GPUs: fmt.Sprint(t.GPUs), Ran: duration(t.Ran, 1), GPUHours: fmt.Sprintf("%.1f", t.GPUHours), Why: t.Why,
				Position: fmt.Sprintf("%d → %d", t.PositionNow, t.PositionAfter)})
		}
		return rows
	}
	v.Preempted, v.Deleted, v.Admitted = tasks(im.Preempted), tasks(im.Deleted), tasks(im.Admitted)
	v.Anyway = tasks(im.Anyway)
	moved, movedMore := firstOf(im.Moved, movedShown)
	uncertain, uncertainMore := firstOf(im.Uncertain, uncertainShown)
	v.Moved, v.MovedMore = tasks(moved), movedMore
	v.Uncertain, v.UncertainMore = tasks(uncertain), uncertainMore
	for _, t := range im.Teams {
		arrow := func(now, after int64) string {
			if now == after {
				return impactFigure(t.Resource, now)
			}
			return impactFigure(t.Resource, now) + " → " + impactFigure(t.Resource, after)
		}
		row := templates.ImpactTeamRow{Team: t.Team, Resource: impactUnit(t.Resource), Quota: arrow(t.QuotaNow, t.QuotaAfter), InUse: arrow(t.InUseNow, t.InUseAfter),
			Borrowed: arrow(t.BorrowedNow, t.BorrowedAfter), Lent: arrow(t.LentNow, t.LentAfter)}
		if t.Deleted {
			row.Team += " (deleted)"
		}
		v.Teams = append(v.Teams, row)
	}
	return v
}
