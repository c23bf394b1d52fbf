package handlers

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/openquota/console/internal/auth"
	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/form"
	"github.com/openquota/console/internal/kueue"
	"github.com/openquota/console/internal/write"
	"github.com/openquota/console/web/templates"
)

// cohortPages show Kueue's cohort tree and create, change and delete the
// cohorts the console makes under its own.
type cohortPages struct {
	frame
	overview ClusterOverview
	teams    Teams
	writes   cohortWrites
}

type cohortWrites interface {
	SaveCohort(ctx context.Context, who kueue.Identity, f form.CohortForm) write.Outcome
	PreviewCohort(ctx context.Context, f form.CohortForm) (domain.Impact, write.Outcome)
	DeleteCohort(ctx context.Context, who kueue.Identity, name string) write.Outcome
	CohortForEdit(name string) (domain.CohortAllocation, write.Outcome)
}

func (p cohortPages) list(c echo.Context) error {
	if _, ok := csvTable(c); ok {
		ov, err := p.overview.Overview()
		if err != nil {
			return err
		}
		return cohortsCSV(c, ov.Cohorts)
	}
	f := form.CohortForm{Parent: p.settings.Cohort}
	return p.render(c, http.StatusOK, f, false, write.Outcome{})
}

func (p cohortPages) edit(c echo.Context) error {
	co, out := p.writes.CohortForEdit(c.Param("cohort"))
	if out.Kind == write.NotFound {
		return echo.NewHTTPError(http.StatusNotFound, out.Message)
	}
	return p.render(c, http.StatusOK, form.FromCohort(p.settings, co), true, write.Outcome{})
}

func (p cohortPages) save(c echo.Context) error {
	values, err := c.FormParams()
	if err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, "The form could not be read.")
	}
	f := form.ParseCohort(values)
	editing := p.teams != nil && slices.Contains(p.teams.Cohorts(), p.settings.Cohort+"-"+f.Suffix)
	switch step(values, p.previewDenied(c, mayEditTeams)) {
	case stepEdit:
		return p.render(c, http.StatusOK, f, editing, write.Outcome{})
	case stepPreview:
		im, out := p.writes.PreviewCohort(c.Request().Context(), f)
		if out.Kind == write.Rejected {
			return p.render(c, out.Status(), f, editing, out)
		}
		return render(c, http.StatusOK, templates.Confirm(templates.ConfirmView{
			Page:   templates.Page{Title: "Cohort " + p.settings.Cohort + "-" + f.Suffix + ": what Kueue will do", Active: "cohorts", Problem: p.problem()},
			Impact: impactView(im, out), Action: "/cohorts", Hidden: carried(values), Apply: "Apply the cohort",
			ReadOnly: p.readOnly(c, mayEditTeams),
		}))
	}
	out := p.writes.SaveCohort(c.Request().Context(), p.identity(c), f)
	return respond(c, out, "/cohorts", func(status int) error { return p.render(c, status, f, editing, out) })
}

func (p cohortPages) remove(c echo.Context) error {
	out := p.writes.DeleteCohort(c.Request().Context(), p.identity(c), c.Param("cohort"))
	return respond(c, out, "/cohorts", func(status int) error {
		return p.render(c, status, form.CohortForm{Parent: p.settings.Cohort}, false, out)
	})
}

func (p cohortPages) render(c echo.Context, status int, f form.CohortForm, editing bool, out write.Outcome) error {
	ov, err := p.overview.Overview()
	if err != nil {
		return err
	}
	consoles := p.teams.Cohorts()
	res := treeResource(c.QueryParam("resource"), ov.Cohorts)
	view := templates.CohortsView{
		Page:     templates.Page{Title: "Cohorts", Active: "teams", Problem: p.problem()},
		Tree:     cohortTreeRows(ov.Cohorts, res),
		Unit:     res.named(),
		CSV:      "/cohorts?format=csv",
		Form:     templates.CohortFields(f),
		Errors:   fieldErrors(out.Fields),
		Editing:  editing,
		Prefix:   p.settings.Cohort + "-",
		Flash:    auth.TakeFlashOf(c),
		ReadOnly: p.readOnly(c, mayEditTeams),
	}
	if !out.Fields.Any() {
		view.ApplyError = out.Message
	}
	for _, r := range usageResources {
		view.Resources = append(view.Resources, templates.ResourceChoice{Key: r.key, Label: r.label, Href: "/cohorts?resource=" + url.QueryEscape(r.key), Current: r.key == res.key})
	}
	self := p.settings.Cohort + "-" + f.Suffix
	for _, name := range consoles {
		if name != p.settings.Cohort {
			view.Editable = append(view.Editable, name)
		}
		if !editing || name != self {
			view.Parents = append(view.Parents, templates.CohortOption{Name: name, Label: name})
		}
	}
	shapes, available := p.teams.Fleet()
	for _, t := range domain.KnownTypes(available) {
		shape, _ := shapes(t)
		view.InstanceTypes = append(view.InstanceTypes, templates.InstanceOption{Type: t, Label: optionLabel(shape, available[t])})
	}
	return render(c, status, templates.Cohorts(view))
}

// cohortsCSV is the cohort tree as the page shows it, in every resource:
// a row per cohort (its figures cover everything under it), then a row per
// ClusterQueue directly in it. Limits are per flavor, in words: a sum over
// flavors would be no limit Kueue applies.
func cohortsCSV(c echo.Context, tree []domain.CohortRow) error {
	header := []string{"Kind", "Name", "Parent cohort", "Depth", "Team", "Fair-share weight"}
	for _, r := range usageResources {
		u := " (" + r.unit + ")"
		header = append(header, r.label+": own quota"+u, r.label+": quota"+u, r.label+": in use"+u, r.label+": borrowed"+u,
			r.label+": headroom"+u, r.label+": limits per flavor")
	}
	w, err := startCSV(c, "cohorts.csv", header...)
	if err != nil {
		return err
	}
	for _, co := range tree {
		row := []string{"Cohort", co.Name, co.Parent, strconv.Itoa(co.Depth), "", co.Weight}
		headroom := co.Headroom()
		for _, r := range usageResources {
			row = append(row, r.format(co.Own.Of(r.kube)), r.format(co.Quota.Of(r.kube)), r.format(co.InUse.Of(r.kube)),
				r.format(co.Borrowed.Of(r.kube)), r.format(headroom.Of(r.kube)), domain.LimitWords(co.OwnQuotas, r.kube, r.format))
		}
		if err := w.Row(row...); err != nil {
			return err
		}
		for _, q := range co.Queues {
			row := []string{"ClusterQueue", q.Name, co.Name, strconv.Itoa(co.Depth + 1), q.Team, q.Weight}
			for _, r := range usageResources {
				row = append(row, "", r.format(q.Quota.Of(r.kube)), r.format(q.InUse.Of(r.kube)), r.format(q.Borrowed.Of(r.kube)), "",
					domain.LimitWords(q.Quotas, r.kube, r.format))
			}
			if err := w.Row(row...); err != nil {
				return err
			}
		}
	}
	return w.Close()
}
