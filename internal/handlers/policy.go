package handlers

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/openquota/console/internal/auth"
	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/form"
	"github.com/openquota/console/internal/write"
	"github.com/openquota/console/web/templates"
)

func (d Deps) showPolicy(c echo.Context) error {
	return d.renderPolicy(c, http.StatusOK, form.FromPolicy(d.Cache.Policy(d.Settings)), write.Outcome{Message: auth.TakeFlashOf(c)})
}

func (d Deps) savePolicy(c echo.Context) error {
	values, err := c.FormParams()
	if err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, "The form could not be read.")
	}
	f := form.ParsePolicy(values)
	out := d.writes.SavePolicy(c.Request().Context(), d.identity(c), f)
	return respond(c, out, "/policy?saved=1", func(status int) error { return d.renderPolicy(c, status, f, out) })
}

// kueueFairSharing says whether Kueue's controller shares idle compute
// fairly; ok is false when the console cannot tell (then it warns about
// nothing). Kueue's configuration changes with a Kueue restart: it is read
// again at most every 30 seconds.
func (d Deps) kueueFairSharing(ctx context.Context) (enabled, ok bool) {
	enabled, err := d.fairSharing.Get(ctx, "", func(ctx context.Context) (bool, error) {
		return d.Applier.KueueFairSharing(ctx, d.KueueConfigMap)
	})
	if err != nil {
		d.Log.Debug("reading Kueue's configuration", "configmap", d.KueueConfigMap.Namespace+"/"+d.KueueConfigMap.Name, "err", err)
		return false, false
	}
	return enabled, true
}

// renderPolicy shows the policy form; out is the outcome of a save (or a
// flash message when it is Saved).
func (d Deps) renderPolicy(c echo.Context, status int, f form.Policy, out write.Outcome) error {
	view := templates.PolicyView{
		Page:   templates.Page{Title: "Cluster policy", Active: "policy", Problem: d.problem()},
		Form:   templates.PolicyFields{Prioritization: f.Prioritization, IdleAllocation: f.IdleAllocation},
		Errors: fieldErrors(out.Fields), ReadOnly: d.readOnly(c, mayEditPolicy),
	}
	if out.Kind == write.Saved {
		view.Flash = out.Message
	} else {
		view.ApplyError = out.Message
	}
	for _, r := range f.Classes {
		view.Rows = append(view.Rows, templates.ClassFields(r))
	}
	for len(view.Rows) < form.MaxPriorityClasses {
		view.Rows = append(view.Rows, templates.ClassFields{})
	}
	// Warn against what is stored (not what was typed and refused).
	if enabled, ok := d.kueueFairSharing(c.Request().Context()); ok {
		view.Mismatch = domain.FairSharingMismatch(d.Cache.Policy(d.Settings), enabled)
	}
	return render(c, status, templates.Policy(view))
}
