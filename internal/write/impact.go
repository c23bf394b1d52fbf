package write

import (
	"context"
	"encoding/json"
	"errors"

	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/form"
	"github.com/openquota/console/internal/kueue"
)

// The impact preview: what Kueue would do after a change, computed before
// it is applied (kueue.Cache.Impact runs Kueue's own scheduler over a copy of
// the cluster). A preview never writes; it validates as the change would,
// so a form that cannot be saved gets its field errors instead.

// PreviewNote is what a revision records of the preview the admin
// accepted.
func PreviewNote(summary string) string {
	if summary == "" {
		return ""
	}
	return "impact preview accepted: " + summary
}

// PreviewTeam is the impact of saving req.
func (s Service) PreviewTeam(ctx context.Context, req TeamSave) (domain.Impact, Outcome) {
	shapes, _ := s.Cache.Fleet()
	team, o := s.validTeam(req, shapes)
	if o.Kind != Saved {
		return domain.Impact{}, o
	}
	objs, err := domain.BuildTeam(s.Settings, team, shapes)
	if cq, _, ok := s.Cache.Team(s.Settings, team.Name); ok && domain.Imported(cq) {
		objs, err = domain.BuildImportedTeam(s.Settings, team, cq, shapes)
	}
	if err != nil {
		return domain.Impact{}, rejected(err.Error())
	}
	var cq kueuev1beta2.ClusterQueue
	if err := convert(objs.ClusterQueue, &cq); err != nil {
		return domain.Impact{}, failed(err, "the console", "the preview")
	}
	what := "Saving team " + team.Name
	ch := kueue.ImpactChange{What: what, Queues: map[string]*kueuev1beta2.ClusterQueue{cq.Name: &cq}}
	if !req.Editing && objs.LocalQueue != nil {
		var lq kueuev1beta2.LocalQueue
		if err := convert(objs.LocalQueue, &lq); err != nil {
			return domain.Impact{}, failed(err, "the console", "the preview")
		}
		ch.LocalQueues = append(ch.LocalQueues, &lq)
	}
	im, o := s.impact(ctx, ch)
	if live, stored, ok := s.Cache.Team(s.Settings, team.Name); ok {
		if note := domain.RecentUseChangeNote(stored, team); note != "" {
			im.Notes = append(im.Notes, note)
		}
		im.Writes = domain.QueueWrites(live, &cq)
		im.WritesTo = "ClusterQueue " + cq.Name
	}
	return im, o
}

// PreviewDeleteTeam is the impact of deleting a team: its namespace goes,
// and its tasks with it.
func (s Service) PreviewDeleteTeam(ctx context.Context, team string) (domain.Impact, Outcome) {
	cq, _, ok := s.Cache.Team(s.Settings, team)
	if !ok {
		return domain.Impact{}, notFound("There is no team %q managed by this console.", team)
	}
	return s.impact(ctx, kueue.ImpactChange{What: "Deleting team " + team,
		Queues: map[string]*kueuev1beta2.ClusterQueue{cq.Name: nil}, DeletedNamespaces: []string{s.Settings.Namespace(team)}})
}

// PreviewPolicy is the impact of saving the policy form: the priority
// classes' new values reach the tasks that name them (Kueue updates them).
func (s Service) PreviewPolicy(ctx context.Context, f form.PolicyForm) (domain.Impact, Outcome) {
	p, errs := f.Validate()
	s.refuseOthersClasses(p, &errs)
	if errs.Any() {
		return domain.Impact{}, rejectedFields(errs)
	}
	values := map[string]int32{}
	for _, c := range domain.BuildPriorityClasses(s.Settings, p) {
		if c.Name != nil && c.Value != nil {
			values[*c.Name] = *c.Value
		}
	}
	return s.impact(ctx, kueue.ImpactChange{What: "Saving the cluster policy", Priorities: values, Everything: true})
}

// PreviewCohort is the impact of saving a cohort form: its quota, its
// parent and its weight change what the queues under it may borrow.
func (s Service) PreviewCohort(ctx context.Context, f form.CohortForm) (domain.Impact, Outcome) {
	shapes, _ := s.Cache.Fleet()
	c, errs := f.Validate(s.Settings, shapes, s.Cache.CohortParents(), s.Cache.ConsoleCohorts(s.Settings))
	if errs.Any() {
		return domain.Impact{}, rejectedFields(errs)
	}
	obj, err := domain.BuildCohortObject(c, shapes)
	if err != nil {
		return domain.Impact{}, rejected(err.Error())
	}
	var co kueuev1beta2.Cohort
	if err := convert(obj, &co); err != nil {
		return domain.Impact{}, failed(err, "the console", "the preview")
	}
	return s.impact(ctx, kueue.ImpactChange{What: "Saving cohort " + c.Name, Cohorts: map[string]*kueuev1beta2.Cohort{c.Name: &co}})
}

func (s Service) impact(ctx context.Context, ch kueue.ImpactChange) (domain.Impact, Outcome) {
	var cfg kueue.SchedulerConfig
	var note string
	if s.Scheduler != nil {
		c, err := s.Scheduler(ctx)
		if err != nil {
			note = domain.KueueDefaultsAssumed
		}
		cfg = c
	}
	im, err := s.Cache.Impact(ctx, s.Settings, cfg, ch)
	switch {
	case errors.Is(err, kueue.ErrNoPreview):
		return domain.Impact{}, Outcome{Kind: Unavailable, Message: "The console is still reading the cluster; try the preview again in a moment."}
	case errors.Is(err, kueue.ErrPreviewBusy):
		return domain.Impact{}, Outcome{Kind: Unavailable, Message: "The console is computing other previews; try again in a few seconds."}
	case err != nil:
		s.Log.Error("impact preview failed", "what", ch.What, "err", err)
		return domain.Impact{}, Outcome{Kind: Unavailable, Message: "The impact could not be computed: " + err.Error()}
	}
	if note != "" {
		im.Notes = append(im.Notes, note)
	}
	return im, Outcome{}
}

// convert turns an apply configuration into the typed object it describes.
func convert(from, to any) error {
	data, err := json.Marshal(from)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, to)
}
