// Package write is the console's one write path. Every state-changing page
// calls a Service method, which runs the same steps in the same order:
//
//	validate (the form's validation, also for a revision or adopted edits)
//	→ authorize (SubjectAccessReviews: may the signed-in user make each
//	  request of the change? Kubernetes RBAC decides)
//	→ conflict check (has someone else changed it since the form was loaded?)
//	→ dry run (Kueue's webhooks and the admission policy judge the objects
//	  before anything is written)
//	→ apply with the console's own identity, which holds only what the
//	  console writes and which the admission policy confines to what it manages
//	→ revision and Event (recorded by the console itself, see kueue.Applier)
//	→ wait until the console's own read model shows the change,
//
// and ends with an Outcome that one helper in the handlers answers with.
// It owns no HTTP and no wording of pages; it must not import echo,
// templ or the handlers.
package write

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/form"
	"github.com/openquota/console/internal/kueue"
)

// Service makes the console's changes.
type Service struct {
	Settings domain.Settings
	Cache    *kueue.Cache
	Live     *kueue.Live
	// Applier writes with the console's own identity, after Access has
	// answered that the user may make every request of the change.
	Applier kueue.Applier
	Access  *kueue.Access
	Log     *slog.Logger
	// Scheduler reads Kueue's controller configuration for the impact
	// preview (fair sharing); nil assumes Kueue's defaults.
	Scheduler func(context.Context) (kueue.SchedulerConfig, error)
	// Patience is how long a change waits for the read model (default 3 s);
	// a slower cluster still gets the change, the next page just shows it
	// late.
	Patience time.Duration
}

// maxConflictRetries bounds how often an apply is retried when only
// Kueue's status updates moved the object's resourceVersion under it.
const maxConflictRetries = 3

// plan is one change as the write path runs it: its steps.
type plan struct {
	// what the change is about, for messages: "team nlp", "the cluster policy".
	what string
	// validate is the first step; a non-Saved Outcome stops the change.
	validate func() Outcome
	// writes are the requests apply will make, which the user must be
	// allowed to make themselves.
	writes func(ctx context.Context, a kueue.Applier) ([]kueue.Permission, error)
	// conflict checks concurrent changes with a's reads; it may pin the
	// apply to the version it checked.
	conflict func(ctx context.Context, a kueue.Applier) Outcome
	dryRun   func(ctx context.Context, a kueue.Applier) error
	apply    func(ctx context.Context, a kueue.Applier) error
	// shows reports whether the cache shows the change.
	shows func() bool
	// done is the message of a saved change.
	done string
}

// run is the write path.
func (s Service) run(ctx context.Context, who kueue.Identity, ch plan) Outcome {
	// A change's checks (that a team or a queue of its name exists, who
	// manages it) read the caches: until they hold the cluster, nothing is
	// written.
	if !s.Cache.Synced() {
		return Outcome{Kind: Unavailable, Message: "The console is still reading the cluster, so nothing was changed. Try again in a moment."}
	}
	if ch.validate != nil {
		if o := ch.validate(); o.Kind != Saved {
			return o
		}
	}
	a := s.Applier
	if o := s.authorize(ctx, a, who, ch); o.Kind != Saved {
		return o
	}
	ctx = kueue.WithActor(ctx, who.Name)
	for attempt := 1; ; attempt++ {
		if ch.conflict != nil {
			if o := ch.conflict(ctx, a); o.Kind != Saved {
				return o
			}
		}
		err := ch.dryRun(ctx, a)
		if err == nil {
			err = ch.apply(ctx, a)
		}
		if err == nil {
			break
		}
		o := failed(err, consoleAccount, ch.what)
		if who.Name != "" {
			o = failedForUser(err, ch.what)
		}
		if o.Kind == Conflict && ch.conflict != nil && attempt < maxConflictRetries {
			continue // the object moved (Kueue's status, or another admin): check again
		}
		s.Log.Info("change not made", "what", ch.what, "user", who.Name, "outcome", o.Kind, "err", err)
		return o
	}
	s.Log.Info("change made", "what", ch.what, "user", who.Name)
	s.waitFor(ctx, ch.shows)
	return saved(ch.done)
}

// waitFor lets the informers and the read model catch up (usually
// milliseconds), so that the page after the redirect shows the change; it
// gives up quietly after Patience.
func (s Service) waitFor(ctx context.Context, shows func() bool) {
	patience := s.Patience
	if patience <= 0 {
		patience = 3 * time.Second
	}
	var seen time.Time
	_ = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, patience, true, func(context.Context) (bool, error) {
		if seen.IsZero() {
			if shows != nil && !shows() {
				return false, nil
			}
			seen = time.Now()
		}
		return s.Live == nil || s.Live.Fresh(seen), nil
	})
}

// authorize asks the cluster whether the user may make every request of the
// change; the console makes them only then. The console itself (auth mode
// none, on loopback) asks nobody: the cluster judges its own requests.
func (s Service) authorize(ctx context.Context, a kueue.Applier, who kueue.Identity, ch plan) Outcome {
	if who.Name == "" {
		return Outcome{}
	}
	if ch.writes == nil || s.Access == nil {
		s.Log.Error("a change without its permissions", "what", ch.what, "user", who.Name)
		return Outcome{Kind: Unavailable, Message: "The console could not check whether you may make this change, so nothing was changed."}
	}
	perms, err := ch.writes(ctx, a)
	if err != nil {
		return failedForUser(err, ch.what)
	}
	denied, err := s.Access.Authorize(ctx, who, perms)
	if err != nil {
		s.Log.Info("change not checked", "what", ch.what, "user", who.Name, "err", err)
		return Outcome{Kind: Unavailable, Message: "The cluster could not say whether you may make this change, so nothing was changed. Try again in a moment."}
	}
	if len(denied) > 0 {
		s.Log.Info("change not allowed", "what", ch.what, "user", who.Name, "denied", fmt.Sprint(denied))
		return notAllowed(who.Name, ch.what, denied)
	}
	return Outcome{}
}

// mayTry refuses a change before anything it names is looked at when who
// may not p at all: what the change's checks say (that a team or a
// namespace of that name exists) is for those who may make it.
func (s Service) mayTry(ctx context.Context, who kueue.Identity, p kueue.Permission, what string) Outcome {
	if who.Name == "" {
		return Outcome{} // the console's own account: checked when it writes
	}
	return s.authorize(ctx, kueue.Applier{}, who, plan{what: what,
		writes: func(context.Context, kueue.Applier) ([]kueue.Permission, error) { return []kueue.Permission{p}, nil }})
}

// TeamSave is a team form as posted.
type TeamSave struct {
	Form form.TeamForm
	// Editing: the team exists and Form.Name names it.
	Editing bool
	// Loaded is what the edit form was loaded with; nil from a client that
	// posts none (a script): then the last write wins.
	Loaded *Loaded
}

// SaveTeam creates or changes a team.
func (s Service) SaveTeam(ctx context.Context, who kueue.Identity, req TeamSave) Outcome {
	if o := s.mayTry(ctx, who, kueue.ChangeClusterQueues, "team "+req.Form.Name); o.Kind != Saved {
		return o
	}
	shapes, _ := s.Cache.Fleet()
	team, o := s.validTeam(req, shapes)
	if o.Kind != Saved {
		return o
	}
	tr := s.teamChange(team, shapes, "Team "+team.Name+" saved.")
	if req.Loaded != nil {
		loaded := *req.Loaded
		tr.conflict = func(ctx context.Context, a kueue.Applier) Outcome {
			o, rv := s.checkTeamConflict(ctx, loaded, team.Name)
			if o.Kind == Saved {
				tr.pin(rv)
			}
			return o
		}
	}
	return s.run(ctx, who, tr.plan)
}

// validTeam is the team req describes, or why it cannot be saved.
func (s Service) validTeam(req TeamSave, shapes domain.ShapeLookup) (domain.Team, Outcome) {
	if req.Editing {
		if _, _, ok := s.Cache.Team(s.Settings, req.Form.Name); !ok {
			return domain.Team{}, notFound("There is no team %q managed by this console.", req.Form.Name)
		}
	}
	team, errs := req.Form.Validate(shapes)
	imported := false
	if cq, stored, ok := s.Cache.Team(s.Settings, req.Form.Name); ok && req.Editing {
		imported = domain.Imported(cq)
		if kept := domain.KeptQuota(cq, shapes); imported && len(req.Form.Quota) == 0 && len(kept) > 0 {
			errs.Forget("quota") // its quota is on flavors the form does not show, kept as they are
			// Their limits are kept too: a new strategy or percentage
			// would be recorded and change nothing in Kueue.
			if team.Lending != stored.Lending || team.BorrowLimitPercent != stored.BorrowLimitPercent {
				field := "borrowLimit"
				if team.Lending != stored.Lending {
					field = "lending"
				}
				errs.Add(field, "This queue's quota is all on flavors the console keeps as they are ("+strings.Join(kept, "; ")+
					"), and so are their lending and borrowing limits: change them in Kueue.")
			}
		}
	}
	if team.Cohort == s.Settings.Cohort && !imported { // an imported team's cohort is literal
		team.Cohort = ""
	}
	if team.Cohort != "" && errs.Get("cohort") == "" && !slices.Contains(s.Cache.ConsoleCohorts(s.Settings), team.Cohort) {
		// An imported queue may stay where it is.
		if cq, _, ok := s.Cache.Team(s.Settings, req.Form.Name); !ok || !domain.Imported(cq) || string(cq.Spec.CohortName) != team.Cohort {
			errs.Add("cohort", "Choose one of the console's cohorts: "+quote(team.Cohort)+" is not one.")
		}
	}
	if cq, stored, ok := s.Cache.Team(s.Settings, req.Form.Name); ok && req.Editing && domain.Imported(cq) &&
		errs.Get("users") == "" && !domain.SameMembers(stored.Members, team.Members) {
		errs.Add("users", "Team "+req.Form.Name+" is an imported ClusterQueue: its members are the RoleBindings of its own namespaces, which the console does not write. Change them there.")
	}
	if !req.Editing && errs.Get("name") == "" {
		// Any ClusterQueue of that name, managed or not: a create must
		// not take over a queue someone else made.
		switch cq, _, managed := s.Cache.Team(s.Settings, req.Form.Name); {
		case managed:
			errs.Add("name", "A team named "+quote(req.Form.Name)+" already exists.")
		case cq != nil:
			errs.Add("name", "The ClusterQueue "+quote(cq.Name)+" already exists and is not managed by this console; choose another name.")
		default:
			// Nor a namespace someone else made: the team would take it over.
			if ns, err := s.Cache.Namespaces.Get(s.Settings.Namespace(req.Form.Name)); err == nil && !domain.ManagedByConsole(ns) {
				errs.Add("name", "The namespace "+quote(ns.Name)+" already exists and is not managed by this console; choose another name.")
			}
		}
	}
	if errs.Any() {
		return domain.Team{}, rejectedFields(errs)
	}
	return team, Outcome{}
}

// teamPlan is the plan of a change of a team.
type teamPlan struct {
	plan
	// pin makes the apply fail with a conflict if the ClusterQueue is no
	// longer at resourceVersion rv.
	pin func(rv string)
}

// teamChange applies a validated allocation.
func (s Service) teamChange(team domain.Team, shapes domain.ShapeLookup, done string) *teamPlan {
	objs, buildErr := domain.BuildTeam(s.Settings, team, shapes)
	if cq, _, ok := s.Cache.Team(s.Settings, team.Name); ok && domain.Imported(cq) {
		objs, buildErr = domain.BuildImportedTeam(s.Settings, team, cq, shapes)
	}
	tr := &teamPlan{plan: plan{what: "team " + team.Name, done: done}}
	tr.dryRun = func(ctx context.Context, a kueue.Applier) error {
		if buildErr != nil {
			return buildErr
		}
		return a.CheckTeam(ctx, objs)
	}
	tr.writes = func(ctx context.Context, a kueue.Applier) ([]kueue.Permission, error) {
		if buildErr != nil {
			return nil, buildErr
		}
		return a.TeamWrites(ctx, objs)
	}
	tr.apply = func(ctx context.Context, a kueue.Applier) error { return a.ApplyTeam(ctx, objs) }
	tr.shows = func() bool {
		_, got, ok := s.Cache.Team(s.Settings, team.Name)
		if !ok || !domain.SameAllocation(got, team) {
			return false
		}
		// A re-apply keeps the allocation: what shows it is that the hand
		// edits are gone from the cache too.
		rep, _, err := s.Cache.TeamDrift(s.Settings, team.Name, shapes)
		return err == nil && !rep.Drifted()
	}
	tr.pin = func(rv string) { objs.ClusterQueue.WithResourceVersion(rv) }
	return tr
}

// checkTeamConflict compares the allocation an edit form was loaded with
// and the one the console acts on now (its latest saved revision, read
// from the apiserver, not the cache). Kueue's status updates move the
// resourceVersion without changing the allocation: they are no conflict.
// When there is none it returns the resourceVersion to pin the apply to.
func (s Service) checkTeamConflict(ctx context.Context, loaded Loaded, name string) (Outcome, string) {
	live, stored, err := s.Applier.TrustedTeam(ctx, s.Settings, name)
	switch {
	case errors.Is(err, kueue.ErrNotManaged):
		return notFound("Team %q was deleted after you opened this form; nothing was saved.", name), ""
	case err != nil:
		return failed(err, "", "team "+name), ""
	}
	if live.ResourceVersion != loaded.ResourceVersion && !domain.SameAllocation(loaded.Allocation, stored) {
		changes := domain.DiffTeams(loaded.Allocation, stored)
		if len(changes) == 0 {
			changes = []string{"other settings of the allocation changed"}
		}
		return Outcome{Kind: Conflict, Changes: changes, Current: &Loaded{ResourceVersion: live.ResourceVersion, Allocation: stored},
			Message: "Someone else changed team " + name + " after you opened this form, so nothing was saved."}, ""
	}
	return Outcome{}, live.ResourceVersion
}

func quote(s string) string { return "\"" + s + "\"" }
