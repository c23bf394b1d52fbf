package write

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/form"
	"github.com/openquota/console/internal/kueue"
)

// DeleteTeam removes a team's objects (its shared flavors stay).
func (s Service) DeleteTeam(ctx context.Context, who kueue.Identity, team string) Outcome {
	if o := s.mayTry(ctx, who, kueue.DeleteClusterQueues, "team "+team); o.Kind != Saved {
		return o
	}
	cq, _, ok := s.Cache.Team(s.Settings, team)
	if !ok {
		return notFound("There is no team %q managed by this console.", team)
	}
	if domain.Imported(cq) {
		return rejected("Team " + team + " is the imported ClusterQueue " + cq.Name + ": the console does not delete what it did not create. Release it instead; it then stays in Kueue as it is.")
	}
	return s.run(ctx, who, plan{
		what: "team " + team,
		writes: func(context.Context, kueue.Applier) ([]kueue.Permission, error) {
			return kueue.DeleteTeamWrites(s.Settings, team), nil
		},
		dryRun: func(ctx context.Context, a kueue.Applier) error { return a.CheckDeleteTeam(ctx, s.Settings, team) },
		apply:  func(ctx context.Context, a kueue.Applier) error { return a.DeleteTeam(ctx, s.Settings, team) },
		shows: func() bool {
			cq, err := s.Cache.ClusterQueues.Get(s.Settings.ClusterQueue(team))
			return err != nil || cq.DeletionTimestamp != nil
		},
		done: "Team " + team + " deleted.",
	})
}

// RollbackTeam applies an earlier revision of a team again; it is recorded
// as a new revision with action rollback. The revision is validated as a
// saved form is: one that does not pass cannot be applied.
func (s Service) RollbackTeam(ctx context.Context, who kueue.Identity, team string, n int) Outcome {
	if o := s.mayTry(ctx, who, kueue.ChangeClusterQueues, "team "+team); o.Kind != Saved {
		return o
	}
	if _, _, ok := s.Cache.Team(s.Settings, team); !ok {
		return notFound("There is no team %q managed by this console.", team)
	}
	revs, err := s.Applier.TeamRevisions(ctx, s.Settings, team)
	if err != nil {
		return failed(err, "the console", "the revision history of team "+team)
	}
	rev, ok := domain.FindRevision(revs, n)
	if !ok {
		return notFound("%s", domain.NoRevision(revs, n))
	}
	return s.applyTeam(kueue.WithRollback(ctx, n), who, team, rev.Allocation,
		fmt.Sprintf("Revision %d cannot be applied: ", n), fmt.Sprintf("Team %s rolled back to revision %d.", team, n))
}

// ReapplyTeam writes again the allocation the console acts on for a team
// (its latest saved revision), setting hand edits of its objects and of
// its ClusterQueue's allocation annotation back.
func (s Service) ReapplyTeam(ctx context.Context, who kueue.Identity, team string) Outcome {
	if o := s.mayTry(ctx, who, kueue.ChangeClusterQueues, "team "+team); o.Kind != Saved {
		return o
	}
	_, stored, ok := s.Cache.Team(s.Settings, team)
	if !ok {
		return notFound("There is no team %q managed by this console.", team)
	}
	return s.applyTeam(kueue.WithNote(ctx, "re-applied the allocation over hand edits"), who, team, stored,
		"The stored allocation cannot be applied: ", "The allocation of team "+team+" was re-applied.")
}

// AdoptTeam makes the allocation that a hand-edited ClusterQueue gives the
// team's allocation. fingerprint is that of the adoption the page showed
// (Adoption): if the objects changed since, nothing is adopted.
func (s Service) AdoptTeam(ctx context.Context, who kueue.Identity, team, fingerprint string) Outcome {
	if o := s.mayTry(ctx, who, kueue.ChangeClusterQueues, "team "+team); o.Kind != Saved {
		return o
	}
	ad, o := s.Adoption(team)
	if o.Kind != Saved {
		return o
	}
	if !ad.Drifted {
		return saved("")
	}
	if ad.Fingerprint != fingerprint {
		return Outcome{Kind: Conflict,
			Message: "The team's objects changed since the page was loaded, so nothing was adopted: review the hand edits below and adopt them again."}
	}
	return s.applyTeam(kueue.WithNote(ctx, "adopted hand edits of the ClusterQueue"), who, team, ad.Adopted,
		"The hand edits cannot be adopted as they are, because ", "The hand edits were adopted into the allocation of team "+team+".")
}

// Adoption is what adopting a team's hand edits would make its allocation.
type Adoption struct {
	Report  domain.DriftReport
	Drifted bool
	Adopted domain.Team
	// Changes say what adopting changes in the allocation, Notes what could
	// not be adopted exactly, Remaining what applying the adopted allocation
	// would still set back.
	Changes, Notes, Remaining []string
	// Problem says why the adopted allocation does not validate ("" when it
	// does).
	Problem     string
	Fingerprint string
	Shapes      domain.ShapeLookup
}

// Adoption compares a team's objects with its allocation and works out the
// allocation that adopting the differences gives.
func (s Service) Adoption(team string) (Adoption, Outcome) {
	shapes, _ := s.Cache.Fleet()
	rep, ok, err := s.Cache.TeamDrift(s.Settings, team, shapes)
	switch {
	case !ok:
		return Adoption{}, notFound("There is no team %q managed by this console.", team)
	case err != nil:
		return Adoption{}, rejected(fmt.Sprintf("The allocation of team %s cannot be compared with the cluster: %v.", team, err))
	}
	ad := Adoption{Report: rep, Drifted: rep.Drifted() && rep.Live.ClusterQueue != nil, Shapes: shapes}
	if !ad.Drifted {
		return ad, Outcome{}
	}
	ad.Adopted, ad.Notes = domain.AdoptTeam(s.Settings, rep.Team, rep.Live.ClusterQueue, shapes)
	if rep.MembersDrifted() {
		ad.Notes = append(ad.Notes, membersNote(rep.Saved))
	}
	ad.Changes = domain.DiffTeams(rep.Team, ad.Adopted)
	build := func() (domain.TeamObjects, error) { return domain.BuildTeam(s.Settings, ad.Adopted, shapes) }
	if domain.Imported(rep.Live.ClusterQueue) {
		build = func() (domain.TeamObjects, error) {
			return domain.BuildImportedTeam(s.Settings, ad.Adopted, rep.Live.ClusterQueue, shapes)
		}
	}
	if objs, err := build(); err == nil {
		remaining, err := domain.DriftOf(objs, rep.Live)
		if err != nil {
			return Adoption{}, rejected(err.Error())
		}
		for _, r := range remaining {
			ad.Remaining = append(ad.Remaining, r.String())
		}
	}
	ad.Problem = TeamProblem(team, ad.Adopted, rep.Live.ClusterQueue, shapes)
	ad.Fingerprint = fingerprint(ad.Adopted)
	return ad, Outcome{}
}

// membersNote says why the members on a ClusterQueue are not adopted: the
// annotation they are in is writable by anyone who may change ClusterQueues.
func membersNote(saved bool) string {
	if !saved {
		return "The team has no saved revision yet, so no member on its ClusterQueue is trusted: adopting or re-applying binds none of them. " +
			"Add the team's members in the edit form."
	}
	return "Members on the ClusterQueue differ from the last saved revision. Members are never taken from the ClusterQueue, " +
		"which anyone who may change ClusterQueues can edit: adopting or re-applying binds the saved revision's members. Change members in the edit form."
}

// fingerprint identifies an allocation, so that adopting applies exactly
// what the page showed.
func fingerprint(t domain.Team) string {
	data, _ := json.Marshal(t)
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:12])
}

// applyTeam is the write path for an allocation the console already holds
// (a revision, the stored one, an adopted one): it is validated as a form
// would be (problem prefixes why it is not), built, dry-run and applied.
func (s Service) applyTeam(ctx context.Context, who kueue.Identity, team string, t domain.Team, problem, done string) Outcome {
	shapes, _ := s.Cache.Fleet()
	tr := s.teamChange(t, shapes, done)
	tr.validate = func() Outcome {
		cq, _, _ := s.Cache.Team(s.Settings, team)
		if msg := TeamProblem(team, t, cq, shapes); msg != "" {
			return rejected(problem + msg)
		}
		return Outcome{}
	}
	return s.run(ctx, who, tr.plan)
}

// TeamProblem says why a recorded allocation of team cannot be applied: it
// goes through the same validation as a saved form. cq is the team's
// ClusterQueue (nil if not known): an imported queue whose quota is all
// on flavors the form does not show needs no quota row, as in its form.
func TeamProblem(team string, t domain.Team, cq *kueuev1beta2.ClusterQueue, shapes domain.ShapeLookup) string {
	if t.Name != team {
		return fmt.Sprintf("it is an allocation of team %q, not of team %s.", t.Name, team)
	}
	_, errs := form.FromTeam(t).Validate(shapes)
	if cq != nil && domain.Imported(cq) && len(t.Quota) == 0 && len(domain.KeptQuota(cq, shapes)) > 0 {
		for _, f := range errs.Fields() { // the form's blank row is no row
			if f == "quota" || strings.HasPrefix(f, "quota.") {
				errs.Forget(f)
			}
		}
	}
	return fieldsProblem(errs)
}

// PolicyProblem is TeamProblem for the policy.
func PolicyProblem(p domain.Policy) string {
	_, errs := form.FromPolicy(p).Validate()
	return fieldsProblem(errs)
}

func fieldsProblem(errs form.Errors) string {
	if !errs.Any() {
		return ""
	}
	var msgs []string
	for _, f := range errs.Fields() {
		msgs = append(msgs, f+": "+errs.Get(f))
	}
	return "it does not pass the form's validation (" + strings.Join(msgs, " ") + ")."
}

// SavePolicy writes the cluster policy.
func (s Service) SavePolicy(ctx context.Context, who kueue.Identity, f form.PolicyForm) Outcome {
	if o := s.mayTry(ctx, who, kueue.ChangePriorityClasses, "the cluster policy"); o.Kind != Saved {
		return o
	}
	p, errs := f.Validate()
	s.refuseOthersClasses(p, &errs)
	if errs.Any() {
		return rejectedFields(errs)
	}
	return s.applyPolicy(ctx, who, p, "", "Policy saved.")
}

// refuseOthersClasses refuses the policy's classes that name a
// WorkloadPriorityClass someone else made: saving would take it over.
func (s Service) refuseOthersClasses(p domain.Policy, errs *form.Errors) {
	for i, c := range p.Classes {
		if wpc, err := s.Cache.WorkloadPriorityClasses.Get(c.Name); err == nil && !s.Settings.OwnsPriorityClass(wpc) {
			errs.Add(fmt.Sprintf("class.%d.name", i), "A WorkloadPriorityClass named "+quote(c.Name)+" already exists and is not managed by this console; choose another name.")
		}
	}
}

// RollbackPolicy applies an earlier revision of the policy again.
func (s Service) RollbackPolicy(ctx context.Context, who kueue.Identity, n int) Outcome {
	if o := s.mayTry(ctx, who, kueue.ChangePriorityClasses, "the cluster policy"); o.Kind != Saved {
		return o
	}
	revs, err := s.Applier.PolicyRevisions(ctx, s.Settings)
	if err != nil {
		return failed(err, "the console", "the revision history of the policy")
	}
	rev, ok := domain.FindRevision(revs, n)
	if !ok {
		return notFound("%s", domain.NoRevision(revs, n))
	}
	return s.applyPolicy(kueue.WithRollback(ctx, n), who, rev.Allocation, fmt.Sprintf("Revision %d cannot be applied: ", n),
		fmt.Sprintf("Cluster policy rolled back to revision %d.", n))
}

// ReapplyPolicy writes the stored policy again over hand edits of its
// priority classes.
func (s Service) ReapplyPolicy(ctx context.Context, who kueue.Identity) Outcome {
	return s.applyPolicy(kueue.WithNote(ctx, "re-applied over hand edits of the priority classes"), who, s.Cache.Policy(s.Settings),
		"The stored policy cannot be applied: ", "The stored cluster policy was re-applied.")
}

func (s Service) applyPolicy(ctx context.Context, who kueue.Identity, p domain.Policy, problem, done string) Outcome {
	return s.run(ctx, who, plan{
		what: "the cluster policy",
		validate: func() Outcome {
			if msg := PolicyProblem(p); msg != "" {
				return rejected(problem + msg)
			}
			return Outcome{}
		},
		writes: func(ctx context.Context, a kueue.Applier) ([]kueue.Permission, error) {
			return a.PolicyWrites(ctx, s.Settings, p)
		},
		dryRun: func(ctx context.Context, a kueue.Applier) error { return a.CheckPolicy(ctx, s.Settings, p) },
		apply:  func(ctx context.Context, a kueue.Applier) error { return a.ApplyPolicy(ctx, s.Settings, p) },
		shows: func() bool {
			if !domain.SameAllocation(s.Cache.Policy(s.Settings), p) {
				return false
			}
			drift, err := s.Cache.PolicyDrift(s.Settings, p)
			return err == nil && len(drift) == 0
		},
		done: done,
	})
}
