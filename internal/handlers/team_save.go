package handlers

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/form"
	"github.com/openquota/console/internal/write"
	"github.com/openquota/console/web/templates"
)

func (p teamPages) newTeam(c echo.Context) error {
	return p.renderTeamForm(c, http.StatusOK, teamFormState{form: form.NewTeamForm()})
}

func (p teamPages) editTeam(c echo.Context) error {
	cq, team, ok := p.teams.Team(c.Param("team"))
	if !ok {
		return noTeam(c.Param("team"))
	}
	return p.renderTeamForm(c, http.StatusOK, teamFormState{form: form.FromTeam(team), editing: true,
		loaded: &write.Loaded{ResourceVersion: cq.ResourceVersion, Allocation: team}})
}

func (p teamPages) createTeam(c echo.Context) error { return p.saveTeam(c, false) }

func (p teamPages) updateTeam(c echo.Context) error { return p.saveTeam(c, true) }

func noTeam(name string) error {
	return echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("There is no team %s managed by this console.", quoteName(name)))
}

// teamFormState is the team form as it is shown (again).
type teamFormState struct {
	form    form.TeamForm
	editing bool
	// loaded is the version the edit form was loaded with; after a
	// conflict, the current one.
	loaded  *write.Loaded
	outcome write.Outcome
}

// saveTeam is parse → save → answer.
func (p teamPages) saveTeam(c echo.Context, editing bool) error {
	values, err := c.FormParams()
	if err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, "The form could not be read.")
	}
	req := write.TeamSave{Form: form.ParseTeam(values), Editing: editing}
	if editing {
		req.Form.Name = c.Param("team") // immutable: the path names the team
		// What the admin loaded: a browser's edit form always sends it.
		// Clients that send none (scripts) get last-write-wins.
		if raw := values.Get("allocation"); raw != "" {
			var t domain.Team
			if err := json.Unmarshal([]byte(raw), &t); err != nil {
				return echo.NewHTTPError(http.StatusBadRequest, "The form could not be read: its allocation field is damaged. Reload the page.")
			}
			req.Loaded = &write.Loaded{ResourceVersion: values.Get("resourceVersion"), Allocation: t}
		}
	}
	switch step(values, p.previewDenied(c, mayEditTeams)) {
	case stepEdit:
		return p.renderTeamForm(c, http.StatusOK, teamFormState{form: req.Form, editing: editing, loaded: req.Loaded})
	case stepPreview:
		im, out := p.writes.PreviewTeam(c.Request().Context(), req)
		if out.Kind == write.Rejected || out.Kind == write.NotFound {
			return respond(c, out, "", func(status int) error {
				return p.renderTeamForm(c, status, teamFormState{form: req.Form, editing: editing, loaded: req.Loaded, outcome: out})
			})
		}
		action, apply, title := "/teams", "Create team "+req.Form.Name, "Create team "+req.Form.Name+": what Kueue will do"
		if editing {
			action, apply, title = teamURL(req.Form.Name, ""), "Apply the changes", "Edit team "+req.Form.Name+": what Kueue will do"
		}
		return render(c, http.StatusOK, templates.Confirm(templates.ConfirmView{
			Page:   templates.Page{Title: title, Active: "teams", Problem: p.problem()},
			Impact: impactView(im, out), Action: action, Hidden: carried(values), Apply: apply,
			ReadOnly: p.readOnly(c, mayEditTeams),
		}))
	}
	out := p.writes.SaveTeam(withPreviewNote(c, values), p.identity(c), req)
	return respond(c, out, "/teams?saved="+url.QueryEscape(req.Form.Name), func(status int) error {
		st := teamFormState{form: req.Form, editing: editing, loaded: req.Loaded, outcome: out}
		if out.Current != nil {
			st.loaded = out.Current
		}
		return p.renderTeamForm(c, status, st)
	})
}

func (p teamPages) renderTeamForm(c echo.Context, status int, st teamFormState) error {
	shapes, available := p.teams.Fleet()
	f := st.form
	view := templates.TeamFormView{
		Page:            templates.Page{Title: "Create team allocation", Active: "teams", Problem: p.problem()},
		Form:            templates.TeamFields(f.TeamFields),
		Errors:          fieldErrors(st.outcome.Fields),
		Editing:         st.editing,
		Action:          "/teams",
		NamespacePrefix: p.settings.NamespacePrefix,
		MaxRows:         form.MaxQuotaRows,
		Conflict:        st.outcome.Changes,
		ReadOnly:        p.readOnly(c, mayEditTeams),
		WeightMeaning:   domain.FairShareWeightMeaning,
	}
	if p.kueueConfig != nil {
		cfg, err := p.kueueConfig.KueueRecentUse(c.Request().Context())
		view.OrderMeaning = domain.RecentUseMeaning(cfg, err == nil)
	}
	for _, l := range []struct {
		value domain.Lending
		label string
	}{{domain.LendAndBorrow, "Lend and borrow"}, {domain.Lend, "Lend only (borrow nothing)"}, {domain.DontLend, "Don't lend (and borrow nothing)"}} {
		view.LendingChoices = append(view.LendingChoices, templates.LendingChoice{Value: string(l.value), Label: l.label, Meaning: l.value.Meaning()})
		if string(l.value) == f.Lending {
			view.LendingMeaning = l.value.Meaning()
		}
	}
	if len(st.outcome.Changes) == 0 {
		view.ApplyError = st.outcome.Message
	}
	if st.loaded != nil {
		allocation, err := json.Marshal(st.loaded.Allocation)
		if err != nil {
			return err
		}
		view.ResourceVersion, view.Allocation = st.loaded.ResourceVersion, string(allocation)
	}
	if st.editing {
		view.Title = "Edit team " + f.Name
		view.Action = teamURL(f.Name, "")
	}
	imported := false
	if st.editing {
		if cq, _, ok := p.teams.Team(f.Name); ok {
			if imported = domain.Imported(cq); imported {
				view.KeptQuota, view.KeptAsIs = domain.KeptQuota(cq, shapes), domain.KeptAsIs(cq)
			}
		}
	}
	if imported {
		namespaces := p.teamNamespaces()[f.Name]
		view.Imported, view.Namespaces = true, strings.Join(namespaces, ", ")
		view.Bindings = p.boundMembers(c, p.bindings, namespaces)
	} else if st.editing && view.ReadOnly != "" {
		// Whoever may change teams edits their members; a reader sees them
		// where they may read the RoleBinding that holds them.
		if view.MembersHidden = p.membersHidden(c, f.Name); view.MembersHidden != "" {
			// Nor in the allocation the form carries for a save, which a
			// reader cannot make.
			view.Form.Users, view.Form.Groups, view.Allocation, view.ResourceVersion = "", "", "", ""
		}
	}
	view.Cohorts = cohortOptions(p.settings, p.teams.Cohorts(), f.Cohort, imported)
	offeredBy := map[string][]string{}
	for _, t := range domain.KnownTypes(available) {
		shape, _ := shapes(t)
		view.InstanceTypes = append(view.InstanceTypes, templates.InstanceOption{Type: t, Label: optionLabel(shape, available[t])})
		for _, p := range shape.Profiles() {
			offeredBy[p] = append(offeredBy[p], fmt.Sprintf("%s (%d per instance)", t, shape.Partitions[p]))
		}
	}
	for _, p := range slices.Sorted(maps.Keys(offeredBy)) {
		view.Profiles = append(view.Profiles, templates.ProfileOption{Profile: p, Label: strings.Join(offeredBy[p], ", ")})
	}
	rows := f.Quota
	if len(rows) == 0 {
		rows = []form.QuotaRow{{}}
	}
	for i, r := range rows {
		derived, warning := describeQuota(r.Lenient(), shapes, available)
		view.Rows = append(view.Rows, templates.QuotaRowView{Index: i, Row: templates.QuotaFields(r), Derived: derived, Warning: warning})
	}
	return render(c, status, templates.TeamForm(view))
}

func fieldErrors(errs form.Errors) templates.FieldErrors {
	out := templates.FieldErrors{}
	for _, f := range errs.Fields() {
		out[f] = errs.Get(f)
	}
	return out
}

func optionLabel(s domain.InstanceShape, available int) string {
	var parts []string
	switch {
	case s.GPUs > 0:
		parts = append(parts, domain.CountOf(s.GPUs, "GPU"))
	case s.Neuron > 0:
		parts = append(parts, fmt.Sprintf("%d Neuron", s.Neuron))
	}
	parts = append(parts, fmt.Sprintf("%d vCPU", s.VCPU), fmt.Sprintf("%d GiB", s.MemoryGiB))
	return fmt.Sprintf("%s — %s (%d ready)", s.Type, strings.Join(parts, ", "), available)
}

// describeQuota is the live preview of a row: what the console will write,
// and a warning when it exceeds what the cluster has (allowed, flagged).
func describeQuota(in domain.QuotaInput, shapes domain.ShapeLookup, available map[string]int) (derived, warning string) {
	shape, ok := shapes(in.InstanceType)
	if !ok || (in.Count == nil && in.GPUs == nil && in.Neuron == nil && in.VCPU == nil && in.Partitions == nil) {
		return "", ""
	}
	q := domain.DeriveQuota(in, shape)
	var parts []string
	if q.GPUs > 0 {
		parts = append(parts, domain.CountOf(q.GPUs, "GPU"))
	}
	if q.Partitions > 0 {
		parts = append(parts, fmt.Sprintf("%d × %s (%s GPU-equivalent)", q.Partitions, q.Partition,
			domain.FormatGPUs(domain.GPUEquivalent(q.Partition, float64(q.Partitions)))))
	}
	if q.Neuron > 0 {
		parts = append(parts, fmt.Sprintf("%d Neuron", q.Neuron))
	}
	parts = append(parts, domain.FormatVCPU(q.CPUMilli)+" vCPU", domain.FormatGiB(q.MemoryMiB)+" GiB")
	if q.EFA > 0 {
		parts = append(parts, fmt.Sprintf("%d EFA", q.EFA))
	}
	n := available[in.InstanceType]
	if q.Exceeds(domain.Capacity(shape, n)) {
		warning = fmt.Sprintf("Above the %d ready instances the cluster has (planned capacity).", n)
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

func (p teamPages) deriveQuota(c echo.Context) error {
	row := form.QuotaRow{
		InstanceType: c.QueryParam("instanceType"), Count: c.QueryParam("count"), GPUs: c.QueryParam("gpus"),
		Neuron: c.QueryParam("neuron"), VCPU: c.QueryParam("vcpu"), MemoryGiB: c.QueryParam("memoryGiB"),
		Partition: c.QueryParam("partition"), Partitions: c.QueryParam("partitions"),
	}
	shapes, available := p.teams.Fleet()
	in := row.Lenient()
	out := derivedQuota{}
	out.Derived, out.Warning = describeQuota(in, shapes, available)
	if shape, ok := shapes(in.InstanceType); ok && out.Derived != "" {
		q := domain.DeriveQuota(in, shape)
		out.VCPU, out.MemoryGiB = domain.FormatVCPU(q.CPUMilli), domain.FormatGiB(q.MemoryMiB)
	}
	return c.JSON(http.StatusOK, out)
}

// cohortOptions are the cohorts a team may be put in, the console's own
// first (as "", its default), and the team's current one when it is
// elsewhere. An imported team's cohort is literal: "" is none, and the
// console's cohort is named.
func cohortOptions(s domain.Settings, cohorts []string, current string, imported bool) []templates.CohortOption {
	out := []templates.CohortOption{{Name: "", Label: s.Cohort + " (the console's cohort)"}}
	found := current == "" || (current == s.Cohort && !imported)
	if imported {
		out = []templates.CohortOption{{Name: "", Label: "none (borrows and lends nothing)"}}
	}
	for _, c := range cohorts {
		if c == s.Cohort && !imported {
			continue
		}
		out = append(out, templates.CohortOption{Name: c, Label: c})
		found = found || c == current
	}
	if !found {
		out = append(out, templates.CohortOption{Name: current, Label: current + " (where the queue is now)"})
	}
	return out
}
