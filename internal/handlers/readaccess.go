package handlers

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"

	"github.com/labstack/echo/v4"

	"github.com/openquota/console/internal/auth"
	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/kueue"
)

// Reading needs a right the cluster grants, asked about the user
// (SubjectAccessReviews with their name, groups, UID and extras, cached like
// the forms' checks):
//   - platform viewers, who may list ClusterQueues, see everything;
//   - a team member, who may list Workloads in the team's namespace, sees
//     that team's pages and the cluster's totals;
//   - anyone else gets a 403 page that says which right is missing.
//
// In auth mode none the console shows everything: it runs on loopback for
// the one person at the machine.

var mayListClusterQueues = kueue.Permission{Verb: "list", Group: "kueue.x-k8s.io", Resource: "clusterqueues", What: "list ClusterQueues"}

func mayListWorkloads(namespace string) kueue.Permission {
	return kueue.Permission{Verb: "list", Group: "kueue.x-k8s.io", Resource: "workloads", Namespace: namespace, What: "list Workloads in " + namespace}
}

// scope is what a user may see.
type scope struct {
	all   bool            // a platform viewer
	teams map[string]bool // the teams they are a member of
}

func (s scope) sees(team string) bool { return s.all || s.teams[team] }
func (s scope) empty() bool           { return !s.all && len(s.teams) == 0 }

// reviewConcurrency bounds the access reviews made at once for one user.
const reviewConcurrency = 8

const echoScopeKey = "handlers.scope"

// scopeOf is the request's scope; known is false when the cluster could not
// answer the reviews.
func (f frame) scopeOf(c echo.Context) (s scope, known bool) {
	if cached, ok := c.Get(echoScopeKey).(scope); ok {
		return cached, true
	}
	if !f.auth.Impersonates() {
		return scope{all: true}, true
	}
	ctx, id := c.Request().Context(), f.identity(c)
	all, known := f.allowed(ctx, id, mayListClusterQueues)
	if !known {
		return scope{}, false
	}
	if all {
		c.Set(echoScopeKey, scopeAll)
		return scope{all: true}, true
	}
	s = scope{teams: f.memberOf(ctx, id)}
	c.Set(echoScopeKey, s)
	return s, true
}

// scopeAll is a platform viewer's scope, as the echo context keeps it.
var scopeAll any = scope{all: true}

// memberOf are the teams whose Workloads id may list in one of their
// namespaces.
func (f frame) memberOf(ctx context.Context, id kueue.Identity) map[string]bool {
	teams := map[string]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, reviewConcurrency)
	for team, namespaces := range f.teamNamespaces() {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			for _, ns := range namespaces {
				if ok, _ := f.allowed(ctx, id, mayListWorkloads(ns)); ok {
					mu.Lock()
					teams[team] = true
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return teams
}

// teamNamespaces are the namespaces of each team, whoever made its queue:
// the team namespace of each team the console manages, and those whose
// LocalQueues feed its ClusterQueue (the read model's rows; Kueue's
// namespaceSelector decides which do). A console team's are those of the
// queue the console keeps it by: another queue with its labels, which
// whoever may create ClusterQueues can make, gives nobody the team.
func (f frame) teamNamespaces() map[string][]string {
	out := map[string][]string{}
	queueOf := map[string]string{} // a console team → its ClusterQueue
	if f.teams != nil {
		for _, t := range f.teams.Teams() {
			if t.ClusterQueue == nil {
				continue
			}
			// Two queues claiming one team: the one named as the console
			// names it, which nobody else can have made.
			if prev, ok := queueOf[t.Name]; ok && prev == f.settings.ClusterQueue(t.Name) {
				continue
			}
			queueOf[t.Name] = t.ClusterQueue.Name
			// An imported queue keeps its own namespaces: the conventional
			// one is not the team's, whoever may create it.
			if !domain.Imported(t.ClusterQueue) {
				out[t.Name] = []string{f.settings.Namespace(t.Name)}
			}
		}
	}
	if f.queues != nil {
		for _, r := range f.queues.Snapshot().Teams {
			if cq, ok := queueOf[r.Team]; ok && cq != r.ClusterQueue {
				continue
			}
			for _, ns := range r.Namespaces {
				if !slices.Contains(out[r.Team], ns) {
					out[r.Team] = append(out[r.Team], ns)
				}
			}
		}
	}
	return out
}

// readAccess refuses requests for pages the user may not see: any page
// needs a scope, a team's pages (routes with :team) need that team.
func (f frame) readAccess() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if isPublic(c) || c.Path() == auth.SignOutPath {
				return next(c)
			}
			s, known := f.scopeOf(c)
			switch {
			case !known:
				return echo.NewHTTPError(http.StatusServiceUnavailable,
					"The cluster could not say what you may see right now, so nothing is shown. Try again in a moment.")
			case s.empty():
				return echo.NewHTTPError(http.StatusForbidden, fmt.Sprintf(
					"%s may not see this console's pages. Platform viewers need list on ClusterQueues (the quota-console-viewer role); "+
						"team members need list on Workloads in their team's namespace (the console binds them when a platform admin adds them to the team). "+
						"Ask a platform admin for one of these.", "Your account "+auth.From(c).Name))
			}
			if team := c.Param("team"); team != "" && !s.sees(team) {
				return echo.NewHTTPError(http.StatusForbidden, fmt.Sprintf(
					"%s may not see team %s. It needs list on Workloads in namespace %s (members of team %s) or list on ClusterQueues (platform viewers). "+
						"Ask a platform admin to add you to the team.", "Your account "+auth.From(c).Name, quoteName(team), quoteName(f.settings.Namespace(team)), quoteName(team)))
			}
			return next(c)
		}
	}
}

// platformOnly refuses a page to team members with a sentence: it shows
// what is beyond their teams (every queue, the cohort tree).
func (f frame) platformOnly(what string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if s, _ := f.scopeOf(c); !s.all {
				return echo.NewHTTPError(http.StatusForbidden, what+" is for platform viewers and admins; your account sees only its teams.")
			}
			return next(c)
		}
	}
}
