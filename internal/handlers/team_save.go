package handlers

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/openquota/console/internal/handlers/form"
	"github.com/openquota/console/internal/kueue"
	"github.com/openquota/console/web/templates"
)

func newTeam(d Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		return d.renderTeamForm(c, http.StatusOK, form.NewTeam(), form.Errors{}, false, "")
	}
}

func editTeam(d Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		team, err := d.storedTeam(c.Param("team"))
		if err != nil {
			return err
		}
		return d.renderTeamForm(c, http.StatusOK, form.FromTeam(team), form.Errors{}, true, "")
	}
}

func createTeam(d Deps) echo.HandlerFunc {
	return func(c echo.Context) error { return d.saveTeam(c, false) }
}

func updateTeam(d Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		if _, err := d.storedTeam(c.Param("team")); err != nil {
			return err
		}
		return d.saveTeam(c, true)
	}
}

// storedTeam reads a console-managed team from the cache, or answers 404.
func (d Deps) storedTeam(name string) (kueue.Team, error) {
	cq, err := d.Cache.ClusterQueues.Get(d.Settings.ClusterQueue(name))
	if err == nil {
		if team, ok := kueue.TeamFromClusterQueue(cq); ok {
			return team, nil
		}
	}
	return kueue.Team{}, echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("There is no team %q managed by this console.", name))
}

// saveTeam is parse → validate → build → dry run → apply → wait until the
// cache shows the change → redirect. Any refusal re-renders the form with the
// values as typed and nothing written.
func (d Deps) saveTeam(c echo.Context, editing bool) error {
	values, err := c.FormParams()
	if err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, "The form could not be read.")
	}
	f := form.ParseTeam(values)
	if editing {
		f.Name = c.Param("team") // immutable: the path names the team
	}
	shapes, _, err := d.fleet()
	if err != nil {
		return err
	}
	team, errs := f.Validate(shapes)
	if !editing && errs.Get("name") == "" {
		if _, err := d.Cache.ClusterQueues.Get(d.Settings.ClusterQueue(f.Name)); err == nil {
			errs.Add("name", fmt.Sprintf("A team named %q already exists.", f.Name))
		} else if !apierrors.IsNotFound(err) {
			return err
		}
	}
	if errs.Any() {
		return d.renderTeamForm(c, http.StatusUnprocessableEntity, f, errs, editing, "")
	}
	objs, err := kueue.BuildTeam(d.Settings, team, shapes)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	if err := d.Applier.CheckTeam(ctx, objs); err != nil {
		d.Log.Warn("team rejected by the cluster", "team", team.Name, "err", err)
		return d.renderTeamForm(c, http.StatusUnprocessableEntity, f, errs, editing, explainWriteError(err))
	}
	if err := d.Applier.ApplyTeam(ctx, objs); err != nil {
		d.Log.Error("applying team", "team", team.Name, "err", err)
		return d.renderTeamForm(c, http.StatusBadGateway, f, errs, editing, explainWriteError(err))
	}
	d.Log.Info("team saved", "team", team.Name, "editing", editing)
	d.waitForTeam(ctx, team)
	return c.Redirect(http.StatusSeeOther, "/teams?saved="+url.QueryEscape(team.Name))
}

// waitForTeam lets the informer catch up (usually milliseconds) so the page
// after the redirect shows the change; it gives up quietly after 3 s.
func (d Deps) waitForTeam(ctx context.Context, want kueue.Team) {
	_ = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 3*time.Second, true, func(context.Context) (bool, error) {
		cq, err := d.Cache.ClusterQueues.Get(d.Settings.ClusterQueue(want.Name))
		if err != nil {
			return false, nil
		}
		got, ok := kueue.TeamFromClusterQueue(cq)
		return ok && reflect.DeepEqual(got, want), nil
	})
}

func (d Deps) renderTeamForm(c echo.Context, status int, f form.Team, errs form.Errors, editing bool, applyErr string) error {
	shapes, available, err := d.fleet()
	if err != nil {
		return err
	}
	view := templates.TeamFormView{
		Page:            templates.Page{Title: "Create team allocation", Active: "teams", Problem: problem(d.Cache)},
		Form:            f,
		Errors:          errs,
		Editing:         editing,
		Action:          "/teams",
		NamespacePrefix: d.Settings.NamespacePrefix,
		ApplyError:      applyErr,
		MaxRows:         form.MaxQuotaRows,
	}
	if editing {
		view.Title = "Edit team " + f.Name
		view.Action = "/teams/" + f.Name
	}
	for _, t := range kueue.KnownTypes(available) {
		shape, _ := shapes(t)
		view.InstanceTypes = append(view.InstanceTypes, templates.InstanceOption{Type: t, Label: optionLabel(shape, available[t])})
	}
	rows := f.Quota
	if len(rows) == 0 {
		rows = []form.QuotaRow{{}}
	}
	for i, r := range rows {
		derived, warning := describeQuota(r.Lenient(), shapes, available)
		view.Rows = append(view.Rows, templates.QuotaRowView{Index: i, Row: r, Derived: derived, Warning: warning})
	}
	return render(c, status, templates.TeamForm(view))
}

func optionLabel(s kueue.InstanceShape, available int) string {
	var parts []string
	switch {
	case s.GPUs > 0:
		parts = append(parts, fmt.Sprintf("%d GPUs", s.GPUs))
	case s.Neuron > 0:
		parts = append(parts, fmt.Sprintf("%d Neuron", s.Neuron))
	}
	parts = append(parts, fmt.Sprintf("%d vCPU", s.VCPU), fmt.Sprintf("%d GiB", s.MemoryGiB))
	return fmt.Sprintf("%s — %s (%d available)", s.Type, strings.Join(parts, ", "), available)
}

// describeQuota is the live preview of a row: what the console will write,
// and a warning when it exceeds what the cluster has (allowed, flagged).
func describeQuota(in kueue.QuotaInput, shapes kueue.ShapeLookup, available map[string]int) (derived, warning string) {
	shape, ok := shapes(in.InstanceType)
	if !ok || (in.Count == nil && in.GPUs == nil && in.Neuron == nil && in.VCPU == nil) {
		return "", ""
	}
	q := kueue.DeriveQuota(in, shape)
	var parts []string
	if q.GPUs > 0 {
		parts = append(parts, fmt.Sprintf("%d GPUs", q.GPUs))
	}
	if q.Neuron > 0 {
		parts = append(parts, fmt.Sprintf("%d Neuron", q.Neuron))
	}
	parts = append(parts, formatMilli(q.CPUMilli)+" vCPU", formatMiB(q.MemoryMiB)+" GiB")
	if q.EFA > 0 {
		parts = append(parts, fmt.Sprintf("%d EFA", q.EFA))
	}
	n := int64(available[in.InstanceType])
	if q.GPUs > n*shape.GPUs || q.Neuron > n*shape.Neuron || q.CPUMilli > n*shape.VCPU*1000 {
		warning = fmt.Sprintf("Above the %d instances the cluster has (planned capacity).", n)
	}
	return strings.Join(parts, " · "), warning
}

// derivedQuota is the JSON the form's script shows as the admin types.
type derivedQuota struct {
	Derived   string `json:"derived"`
	Warning   string `json:"warning"`
	VCPU      string `json:"vcpu"`
	MemoryGiB string `json:"memoryGiB"`
}

func deriveQuota(d Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		row := form.QuotaRow{
			InstanceType: c.QueryParam("instanceType"), Count: c.QueryParam("count"), GPUs: c.QueryParam("gpus"),
			Neuron: c.QueryParam("neuron"), VCPU: c.QueryParam("vcpu"), MemoryGiB: c.QueryParam("memoryGiB"),
		}
		shapes, available, err := d.fleet()
		if err != nil {
			return err
		}
		in := row.Lenient()
		out := derivedQuota{}
		out.Derived, out.Warning = describeQuota(in, shapes, available)
		if shape, ok := shapes(in.InstanceType); ok && out.Derived != "" {
			q := kueue.DeriveQuota(in, shape)
			out.VCPU, out.MemoryGiB = formatMilli(q.CPUMilli), formatMiB(q.MemoryMiB)
		}
		return c.JSON(http.StatusOK, out)
	}
}
