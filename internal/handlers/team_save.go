package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/auth"
	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/form"
	"github.com/openquota/console/web/templates"
)

func newTeam(d Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		return d.renderTeamForm(c, http.StatusOK, teamFormState{form: form.NewTeam()})
	}
}

func editTeam(d Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		cq, team, err := d.storedClusterQueue(c.Param("team"))
		if err != nil {
			return err
		}
		allocation, err := allocationJSON(team)
		if err != nil {
			return err
		}
		return d.renderTeamForm(c, http.StatusOK, teamFormState{
			form: form.FromTeam(team), editing: true, resourceVersion: cq.ResourceVersion, allocation: allocation,
		})
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
func (d Deps) storedTeam(name string) (domain.Team, error) {
	_, team, err := d.storedClusterQueue(name)
	return team, err
}

// storedClusterQueue is storedTeam with the team's ClusterQueue.
func (d Deps) storedClusterQueue(name string) (*kueuev1beta2.ClusterQueue, domain.Team, error) {
	cq, err := d.Cache.ClusterQueues.Get(d.Settings.ClusterQueue(name))
	if err == nil {
		if team, ok := domain.TeamFromClusterQueue(cq); ok {
			return cq, team, nil
		}
	}
	return nil, domain.Team{}, echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("There is no team %q managed by this console.", name))
}

// teamFormState is the team form as it is shown again.
type teamFormState struct {
	form     form.Team
	errs     form.Errors
	editing  bool
	applyErr string
	// The ClusterQueue's resourceVersion and allocation (JSON) the edit form
	// was loaded with; after a conflict, the current ones.
	resourceVersion, allocation string
	conflict                    []string
}

// maxConflictRetries bounds how often a save retries when only Kueue's own
// status updates moved the ClusterQueue's resourceVersion under it.
const maxConflictRetries = 3

// saveTeam is parse → validate → build → (edit: has anyone else changed the
// allocation since the form was loaded?) → dry run → apply as the signed-in
// user → wait until the cache shows the change → redirect. Any refusal
// re-renders the form with the values as typed and nothing written.
func (d Deps) saveTeam(c echo.Context, editing bool) error {
	values, err := c.FormParams()
	if err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, "The form could not be read.")
	}
	st := teamFormState{form: form.ParseTeam(values), editing: editing,
		resourceVersion: values.Get("resourceVersion"), allocation: values.Get("allocation")}
	if editing {
		st.form.Name = c.Param("team") // immutable: the path names the team
	}
	shapes, _, err := d.fleet()
	if err != nil {
		return err
	}
	team, errs := st.form.Validate(shapes)
	if !editing && errs.Get("name") == "" {
		if _, err := d.Cache.ClusterQueues.Get(d.Settings.ClusterQueue(st.form.Name)); err == nil {
			errs.Add("name", fmt.Sprintf("A team named %q already exists.", st.form.Name))
		} else if !apierrors.IsNotFound(err) {
			return err
		}
	}
	st.errs = errs
	if errs.Any() {
		return d.renderTeamForm(c, http.StatusUnprocessableEntity, st)
	}
	// What the admin loaded: a browser's edit form always sends it. Clients
	// that send no allocation (scripts) get last-write-wins.
	var loaded *domain.Team
	if editing && st.allocation != "" {
		t, err := parseAllocation(st.allocation)
		if err != nil {
			return echo.NewHTTPError(http.StatusBadRequest, "The form could not be read: its allocation field is damaged. Reload the page.")
		}
		loaded = &t
	}
	objs, err := domain.BuildTeam(d.Settings, team, shapes)
	if err != nil {
		return err
	}
	applier, ctx, err := d.writer(c)
	if err != nil {
		return err
	}
	what := "team " + team.Name
	for attempt := 1; ; attempt++ {
		if loaded != nil {
			conflict, err := d.checkTeamConflict(ctx, &st, *loaded, objs)
			if err != nil {
				return err
			}
			if conflict {
				d.Log.Info("team changed by someone else since the form was loaded", "team", team.Name, "user", auth.From(c).Name)
				return d.renderTeamForm(c, http.StatusConflict, st)
			}
		}
		// The dry run refuses what Kueue's webhooks reject before anything is written (422).
		status := http.StatusUnprocessableEntity
		err := applier.CheckTeam(ctx, objs)
		if err == nil {
			status = http.StatusBadGateway
			err = applier.ApplyTeam(ctx, objs)
		}
		if err == nil {
			break
		}
		if msg, ok := d.forbidden(c, err, what); ok {
			d.Log.Info("team change forbidden", "team", team.Name, "user", auth.From(c).Name, "err", err)
			st.applyErr = msg
			return d.renderTeamForm(c, http.StatusForbidden, st)
		}
		if loaded != nil && apierrors.IsConflict(err) && attempt < maxConflictRetries {
			continue // the ClusterQueue moved (Kueue's status, or another admin): check again
		}
		d.Log.Warn("team not saved", "team", team.Name, "err", err)
		st.applyErr = explainWriteError(err)
		return d.renderTeamForm(c, status, st)
	}
	d.Log.Info("team saved", "team", team.Name, "editing", editing, "user", auth.From(c).Name)
	d.waitForTeam(ctx, team)
	auth.SetFlashOf(c, "Team "+team.Name+" saved.")
	return c.Redirect(http.StatusSeeOther, "/teams?saved="+url.QueryEscape(team.Name))
}

// checkTeamConflict compares the allocation the admin loaded with the one
// stored now (read fresh from the apiserver). When they differ it fills in
// the conflict and the current version for the form, and reports true. When
// they agree it pins the apply to the ClusterQueue's current resourceVersion,
// so a change landing between this read and the write fails with a conflict
// instead of being overwritten. Kueue's status updates move the
// resourceVersion without changing the allocation: they are no conflict.
func (d Deps) checkTeamConflict(ctx context.Context, st *teamFormState, loaded domain.Team, objs domain.TeamObjects) (bool, error) {
	name := *objs.ClusterQueue.Name
	live, err := d.Applier.Kueue.KueueV1beta2().ClusterQueues().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("Team %q was deleted after you opened this form; nothing was saved.", st.form.Name))
	}
	if err != nil {
		return false, err
	}
	stored, ok := domain.TeamFromClusterQueue(live)
	if !ok {
		return false, echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("There is no team %q managed by this console.", st.form.Name))
	}
	if live.ResourceVersion != st.resourceVersion && !sameAllocation(loaded, stored) {
		current, err := allocationJSON(stored)
		if err != nil {
			return false, err
		}
		st.conflict = domain.DiffTeams(loaded, stored)
		if len(st.conflict) == 0 {
			st.conflict = []string{"other settings of the allocation changed"}
		}
		st.resourceVersion, st.allocation = live.ResourceVersion, current
		return true, nil
	}
	objs.ClusterQueue.WithResourceVersion(live.ResourceVersion)
	return false, nil
}

// allocationJSON is the hidden allocation field of the edit form.
func allocationJSON(t domain.Team) (string, error) {
	b, err := json.Marshal(t)
	return string(b), err
}

func parseAllocation(s string) (domain.Team, error) {
	var t domain.Team
	err := json.Unmarshal([]byte(s), &t)
	return t, err
}

// sameAllocation compares two allocations as the console stores them.
func sameAllocation(a, b domain.Team) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && string(ja) == string(jb)
}

// waitForTeam lets the informer catch up (usually milliseconds) so the page
// after the redirect shows the change; it gives up quietly after 3 s.
func (d Deps) waitForTeam(ctx context.Context, want domain.Team) {
	_ = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 3*time.Second, true, func(context.Context) (bool, error) {
		cq, err := d.Cache.ClusterQueues.Get(d.Settings.ClusterQueue(want.Name))
		if err != nil {
			return false, nil
		}
		got, ok := domain.TeamFromClusterQueue(cq)
		return ok && reflect.DeepEqual(got, want), nil
	})
}

func (d Deps) renderTeamForm(c echo.Context, status int, st teamFormState) error {
	shapes, available, err := d.fleet()
	if err != nil {
		return err
	}
	f := st.form
	view := templates.TeamFormView{
		Page:            templates.Page{Title: "Create team allocation", Active: "teams", Problem: problem(d.Cache)},
		Form:            f,
		Errors:          st.errs,
		Editing:         st.editing,
		Action:          "/teams",
		NamespacePrefix: d.Settings.NamespacePrefix,
		ApplyError:      st.applyErr,
		MaxRows:         form.MaxQuotaRows,
		ResourceVersion: st.resourceVersion,
		Allocation:      st.allocation,
		Conflict:        st.conflict,
		ReadOnly:        d.readOnly(c, mayEditTeams),
	}
	if st.editing {
		view.Title = "Edit team " + f.Name
		view.Action = "/teams/" + f.Name
	}
	for _, t := range domain.KnownTypes(available) {
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

func optionLabel(s domain.InstanceShape, available int) string {
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
func describeQuota(in domain.QuotaInput, shapes domain.ShapeLookup, available map[string]int) (derived, warning string) {
	shape, ok := shapes(in.InstanceType)
	if !ok || (in.Count == nil && in.GPUs == nil && in.Neuron == nil && in.VCPU == nil) {
		return "", ""
	}
	q := domain.DeriveQuota(in, shape)
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
			q := domain.DeriveQuota(in, shape)
			out.VCPU, out.MemoryGiB = formatMilli(q.CPUMilli), formatMiB(q.MemoryMiB)
		}
		return c.JSON(http.StatusOK, out)
	}
}
