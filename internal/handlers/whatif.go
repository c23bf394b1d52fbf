package handlers

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/form"
	"github.com/openquota/console/internal/kueue"
	"github.com/openquota/console/internal/taskhistory"
	"github.com/openquota/console/web/templates"
)

// whatIfPage answers "if I submit this job to my team now, does it start,
// and if not, when?" with Kueue's own scheduler over a copy of the team's
// cohort with the job added. It is a GET, as it changes nothing: an answer
// can be linked, and ?format=json gives it to scripts.
type whatIfPage struct {
	frame
	teams  whatIfTeams
	whatIf WhatIf
	// rates are the admission rates the Tasks page estimates waits with.
	rates *admissionRates
}

// whatIfTeams are the console's teams a job may be asked about, and the
// instance shapes.
type whatIfTeams interface {
	teamList
	fleet
}

func (p whatIfPage) show(c echo.Context) error {
	query := c.QueryParams()
	asJSON := query.Get("format") == "json"
	f := form.ParseWhatIf(query)
	visible, _ := p.scopeOf(c)
	shapes, available := p.teams.Fleet()
	choices := p.choices(visible, shapes)
	view := whatIfFormView(f, choices, available)
	view.Page = templates.Page{Title: "What if I submit this job?", Active: "whatif", Problem: p.problem()}
	if !asJSON && !query.Has("team") {
		return render(c, http.StatusOK, templates.WhatIf(view)) // nothing asked yet
	}

	job, errs := f.Validate(choices)
	var a domain.WhatIfAnswer
	var err error
	if !errs.Any() {
		a, err = p.whatIf.WhatIf(c.Request().Context(), job)
		if errors.Is(err, kueue.ErrNoLocalQueue) { // the question, not the console: say so at the team
			errs.Add("team", "Team "+job.Team+" has no LocalQueue in a namespace its ClusterQueue admits, so a job submitted to it would never start. "+
				"Add one there, then ask again.")
		}
	}
	if errs.Any() {
		if asJSON {
			return c.JSON(http.StatusUnprocessableEntity, map[string]templates.FieldErrors{"errors": fieldErrors(errs)})
		}
		view.Errors = fieldErrors(errs)
		return render(c, http.StatusUnprocessableEntity, templates.WhatIf(view))
	}
	ctx := c.Request().Context()
	if err != nil {
		msg := p.unanswered(err)
		if asJSON {
			return c.JSON(http.StatusServiceUnavailable, map[string]string{"problem": msg})
		}
		view.Unanswered = msg
		return render(c, http.StatusServiceUnavailable, templates.WhatIf(view))
	}
	r := p.reply(ctx, job.Team, a, visible)
	if asJSON {
		return c.JSON(http.StatusOK, r.json())
	}
	asked := maps.Clone(query)
	asked.Set("format", "json")
	view.Answer = r.view("/whatif?" + asked.Encode())
	return render(c, http.StatusOK, templates.WhatIf(view))
}

// choices are what the viewer may ask about: the teams they may see (those
// of the ClusterQueues the console does not manage too, with their flavors
// that are no instance type), the cluster's priority classes, the instance
// shapes.
func (p whatIfPage) choices(visible scope, shapes domain.ShapeLookup) form.WhatIfChoices {
	snap := p.queues.Snapshot()
	c := form.WhatIfChoices{SeesAll: visible.all, Shapes: shapes, Classes: snap.Classes, PodClasses: snap.PodClasses}
	for _, t := range p.teams.Teams() {
		if visible.sees(t.Name) {
			c.Teams = append(c.Teams, t.Name)
		}
	}
	for _, r := range snap.Teams {
		if r.Manager == "" || !visible.sees(r.Team) || slices.Contains(c.Teams, r.Team) {
			continue
		}
		c.Teams = append(c.Teams, r.Team)
		for _, l := range r.Limits {
			if _, known := shapes(l.Flavor); !known && !slices.Contains(c.Flavors, l.Flavor) {
				c.Flavors = append(c.Flavors, l.Flavor)
			}
		}
	}
	slices.Sort(c.Teams)
	slices.Sort(c.Flavors)
	return c
}

// unanswered says why Kueue's answer could not be computed.
func (p whatIfPage) unanswered(err error) string {
	switch {
	case errors.Is(err, kueue.ErrNoPreview):
		return "The console is still reading the cluster; ask again in a moment."
	case errors.Is(err, kueue.ErrPreviewBusy):
		return "The console is answering other questions like this one; ask again in a few seconds."
	}
	p.log.Error("what-if failed", "err", err)
	return "Kueue's answer could not be computed: " + err.Error() + "."
}

// reply is the answer as the viewer may see it, with its estimated start.
func (p whatIfPage) reply(ctx context.Context, team string, a domain.WhatIfAnswer, visible scope) whatIfReply {
	r := whatIfReply{WhatIfAnswer: a}
	for _, t := range a.Preempts {
		if visible.sees(t.Team) {
			r.shown = append(r.shown, t)
		} else {
			r.hidden++
		}
	}
	r.start, r.basis = p.estimate(ctx, team, a)
	return r
}

// estimate is when the job would start, worded as the Tasks page words a
// queued task's wait: the tasks ahead of it in its ClusterQueue, admitted
// at the queue's rate over the last day.
func (p whatIfPage) estimate(ctx context.Context, team string, a domain.WhatIfAnswer) (short, basis string) {
	if a.Admitted {
		return "now", ""
	}
	row, ok := teamRow(p.queues.Snapshot(), team)
	if !ok || a.Position < 1 { // in no queue Kueue knows
		return "", ""
	}
	if why := row.Halted(); why != "" {
		return haltedWait(why)
	}
	if why := a.CannotStart(); why != "" {
		return cannotStartWait("its queue, as it is defined, can never hold it: " + why)
	}
	rates, ok := p.rates.at(ctx, time.Now())
	if !ok {
		why := "the task history is unavailable right now"
		if err := p.rates.taskHistory.Available(); errors.Is(err, errTaskHistoryOff) {
			why = err.Error()
		}
		return "unknown", "unknown: " + why
	}
	ahead := a.Position - 1
	return taskhistory.QueuedTaskWait(ahead, rates, row.ClusterQueue).Words(strconv.Itoa(ahead) + " ahead")
}

// whatIfReply is Kueue's answer as the viewer may see it: the tasks it
// would preempt of the teams they see, how many of others, and the
// estimated start.
type whatIfReply struct {
	domain.WhatIfAnswer
	shown        []domain.ImpactTask
	hidden       int
	start, basis string
}

// whatIfJSON is the answer of ?format=json.
type whatIfJSON struct {
	Admitted       bool           `json:"admitted"`
	Borrowing      bool           `json:"borrowing"`
	Position       int            `json:"position"`
	EstimatedStart string         `json:"estimatedStart"`
	Basis          string         `json:"basis"`
	Reason         string         `json:"reason"`
	Preempts       []whatIfTaskID `json:"preempts"`
	PreemptsHidden int            `json:"preemptsHidden"`
	Uncertain      string         `json:"uncertain"`
	Verdict        string         `json:"verdict"`
	LocalQueue     string         `json:"localQueue"`
}

// whatIfTaskID is a task the job would preempt.
type whatIfTaskID struct {
	Team string `json:"team"`
	Task string `json:"task"` // namespace/Workload
	// OwnerKind and OwnerName name the task as its owner knows it (empty
	// for a Workload without an owner).
	OwnerKind string `json:"owner_kind"`
	OwnerName string `json:"owner_name"`
	Class     string `json:"class"`
	GPUs      int64  `json:"gpus"`
}

func (r whatIfReply) json() whatIfJSON {
	out := whatIfJSON{Admitted: r.Admitted, Borrowing: r.Borrowing, Position: r.Position, EstimatedStart: r.start, Basis: r.basis,
		Reason: r.Reason, Preempts: []whatIfTaskID{}, PreemptsHidden: r.hidden, Uncertain: r.Uncertain, Verdict: r.Verdict(), LocalQueue: r.LocalQueue}
	for _, t := range r.shown {
		out.Preempts = append(out.Preempts, whatIfTaskID{Team: t.Team, Task: t.Namespace + "/" + t.Name, OwnerKind: t.OwnerKind, OwnerName: t.OwnerName, Class: t.Class, GPUs: t.GPUs})
	}
	return out
}

func (r whatIfReply) view(jsonURL string) *templates.WhatIfAnswerView {
	v := &templates.WhatIfAnswerView{Verdict: r.Verdict(), Waiting: !r.Admitted, Reason: r.Reason, Estimate: r.basis, AskedIn: r.AskedIn(),
		Uncertain: r.Uncertain, Kueue: r.Kueue, JSON: jsonURL}
	switch {
	case !r.Admitted:
		v.Borrowing = "It borrows nothing while it waits."
	case r.Borrowing:
		v.Borrowing = "It would borrow: its team would hold more than its quota, on quota other teams lend now."
	default:
		v.Borrowing = "It would not borrow: it fits in its team's quota."
	}
	switch {
	case r.Admitted:
	case r.Position == 1:
		v.Position = "It would be first in its team's queue: no task is ahead of it."
	case r.Position > 1:
		v.Position = fmt.Sprintf("It would be at position %d in its team's queue: %s ahead of it.", r.Position, tasksWord(r.Position-1))
	default:
		v.Position = "It would be in no queue Kueue knows: its team's LocalQueue or ClusterQueue is stopped or missing."
	}
	if v.Estimate == "" {
		v.Estimate = r.start
	}
	for _, t := range r.shown {
		v.Preempts = append(v.Preempts, templates.WhatIfTaskRow{Team: t.Team, Task: taskLabel(t.Named()), Class: t.Class,
			GPUs: itoa(t.GPUs), Ran: duration(t.Ran, 1), GPUHours: fmt.Sprintf("%.1f", t.GPUHours)})
	}
	switch {
	case r.hidden > 0 && len(r.shown) > 0:
		v.PreemptsHidden = "and " + tasksWord(r.hidden) + " of teams you cannot see."
	case r.hidden > 0:
		v.PreemptsHidden = "It would preempt " + tasksWord(r.hidden) + " of teams you cannot see."
	}
	return v
}

// tasksWord is "1 task", "3 tasks".
func tasksWord(n int) string {
	if n == 1 {
		return "1 task"
	}
	return strconv.Itoa(n) + " tasks"
}

// whatIfFormView is the form as typed, with one empty row to add one.
func whatIfFormView(f form.WhatIfForm, c form.WhatIfChoices, available map[string]int) templates.WhatIfView {
	v := templates.WhatIfView{Team: selected(c.Teams, f.Team), Class: selected(c.Classes, f.Class)}
	rows := f.Rows
	if len(rows) < form.MaxQuotaRows {
		rows = append(rows, form.WhatIfRow{})
	}
	types := domain.KnownTypes(available)
	for i, r := range rows {
		v.Rows = append(v.Rows, templates.WhatIfRowView{Index: i, Row: templates.WhatIfRowFields(r)})
		if r.InstanceType != "" && !slices.Contains(types, r.InstanceType) && !slices.Contains(c.Flavors, r.InstanceType) {
			v.InstanceTypes = append(v.InstanceTypes, templates.InstanceOption{Type: r.InstanceType, Label: r.InstanceType + " (unknown)"})
		}
	}
	for _, t := range types {
		shape, _ := c.Shapes(t)
		v.InstanceTypes = append(v.InstanceTypes, templates.InstanceOption{Type: t, Label: optionLabel(shape, available[t])})
	}
	for _, fl := range c.Flavors {
		v.InstanceTypes = append(v.InstanceTypes, templates.InstanceOption{Type: fl,
			Label: fl + " — a flavor of a queue the console does not manage: type what each pod asks for"})
	}
	return v
}

// selected are the choices of a select with typed selected; a typed value
// that is not a choice is shown too, with its field's error.
func selected(values []string, typed string) []templates.Choice {
	out := make([]templates.Choice, 0, len(values)+1)
	for _, v := range values {
		out = append(out, templates.Choice{Value: v, Label: v, Selected: v == typed})
	}
	if typed != "" && !slices.Contains(values, typed) {
		out = append(out, templates.Choice{Value: typed, Label: typed, Selected: true})
	}
	return out
}
