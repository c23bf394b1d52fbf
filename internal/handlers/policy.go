package handlers

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/openquota/console/internal/auth"
	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/form"
	"github.com/openquota/console/web/templates"
)

func showPolicy(d Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		p, err := d.storedPolicy()
		if err != nil {
			return err
		}
		return d.renderPolicy(c, http.StatusOK, form.FromPolicy(p), form.Errors{}, "", auth.TakeFlashOf(c))
	}
}

func savePolicy(d Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		values, err := c.FormParams()
		if err != nil {
			return echo.NewHTTPError(http.StatusBadRequest, "The form could not be read.")
		}
		f := form.ParsePolicy(values)
		p, errs := f.Validate()
		if errs.Any() {
			return d.renderPolicy(c, http.StatusUnprocessableEntity, f, errs, "", "")
		}
		applier, ctx, err := d.writer(c)
		if err != nil {
			return err
		}
		if err := applier.ApplyPolicy(ctx, d.Settings, p); err != nil {
			if msg, ok := d.forbidden(c, err, "the cluster policy"); ok {
				d.Log.Info("policy change forbidden", "user", auth.From(c).Name, "err", err)
				return d.renderPolicy(c, http.StatusForbidden, f, errs, msg, "")
			}
			d.Log.Error("applying policy", "err", err)
			return d.renderPolicy(c, http.StatusBadGateway, f, errs, explainWriteError(err), "")
		}
		d.Log.Info("policy saved", "prioritization", p.Prioritization, "classes", len(p.Classes), "idle", p.IdleAllocation, "user", auth.From(c).Name)
		auth.SetFlashOf(c, "Policy saved.")
		return c.Redirect(http.StatusSeeOther, "/policy?saved=1")
	}
}

func (d Deps) storedPolicy() (domain.Policy, error) {
	classes, err := d.Cache.WorkloadPriorityClasses.List(labels.Everything())
	if err != nil {
		return domain.Policy{}, err
	}
	cohort, err := d.Cache.Cohorts.Get(d.Settings.Cohort)
	if err != nil {
		cohort = nil
	}
	return domain.ReadPolicy(cohort, classes), nil
}

// kueueFairSharing reads Kueue's configuration from its ConfigMap; ok is
// false when the console cannot read it (then it warns about nothing).
func (d Deps) kueueFairSharing(ctx context.Context) (enabled, ok bool) {
	ns, name := d.KueueConfigMap.Namespace, d.KueueConfigMap.Name
	if name == "" {
		return false, false
	}
	cm, err := d.Applier.Kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		d.Log.Debug("reading Kueue's configuration", "configmap", ns+"/"+name, "err", err)
		return false, false
	}
	enabled, err = domain.KueueFairSharing(cm.Data[d.KueueConfigMap.Key])
	if err != nil {
		d.Log.Warn("parsing Kueue's configuration", "err", err)
		return false, false
	}
	return enabled, true
}

func (d Deps) renderPolicy(c echo.Context, status int, f form.Policy, errs form.Errors, applyErr, flash string) error {
	view := templates.PolicyView{
		Page: templates.Page{Title: "Cluster policy", Active: "policy", Problem: problem(d.Cache)},
		Form: f, Errors: errs, ApplyError: applyErr, Flash: flash,
		ReadOnly: d.readOnly(c, mayEditPolicy),
	}
	view.Rows = append(view.Rows, f.Classes...)
	for len(view.Rows) < form.MaxPriorityClasses {
		view.Rows = append(view.Rows, form.ClassRow{})
	}
	// Warn against what is stored (not what was typed and refused).
	if stored, err := d.storedPolicy(); err == nil {
		if enabled, ok := d.kueueFairSharing(c.Request().Context()); ok {
			view.Mismatch = domain.FairSharingMismatch(stored, enabled)
		}
	}
	return render(c, status, templates.Policy(view))
}
