package handlers

import (
	"context"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/kueue"
	"github.com/openquota/console/web/templates"
)

// TeamBindings reads the RoleBindings of a team's namespaces
// (kueue.Bindings): an imported team's members.
type TeamBindings interface {
	Of(ctx context.Context, namespaces []string) ([]domain.Binding, error)
}

func mayListRoleBindings(namespace string) kueue.Permission {
	return kueue.Permission{Verb: "list", Group: "rbac.authorization.k8s.io", Resource: "rolebindings", Namespace: namespace,
		What: "list RoleBindings in " + namespace}
}

// membersHidden says why a console team's members are not shown to the
// user: its member RoleBinding in the team namespace holds them, which they
// may not list; "" when they may.
func (f frame) membersHidden(c echo.Context, team string) string {
	ns := f.settings.Namespace(team)
	if ok, _ := f.allowed(c.Request().Context(), f.identity(c), mayListRoleBindings(ns)); ok {
		return ""
	}
	return "Not shown: the team's members are its RoleBinding in " + ns + ", and you may not list RoleBindings there."
}

// boundMembers are the subjects bound in namespaces, read by the console
// but shown only where the user may list RoleBindings themselves.
func (f frame) boundMembers(c echo.Context, reader TeamBindings, namespaces []string) templates.BoundMembers {
	var out templates.BoundMembers
	ctx, id := c.Request().Context(), f.identity(c)
	var shown, hidden []string
	for _, ns := range namespaces {
		if ok, _ := f.allowed(ctx, id, mayListRoleBindings(ns)); ok {
			shown = append(shown, ns)
		} else {
			hidden = append(hidden, ns)
		}
	}
	if len(hidden) > 0 {
		out.Hidden = "Not shown: the RoleBindings of " + strings.Join(hidden, ", ") + ", which you may not list."
	}
	if len(shown) == 0 {
		return out
	}
	if reader == nil {
		out.Problem = "This console does not read RoleBindings."
		return out
	}
	bindings, err := reader.Of(ctx, shown)
	if err != nil {
		f.log.Warn("reading a team's RoleBindings", "namespaces", shown, "error", err)
		out.Problem = "The RoleBindings of " + strings.Join(shown, ", ") + " could not be read now; reload the page to try again."
		return out
	}
	for _, b := range bindings {
		out.Rows = append(out.Rows, templates.BindingRow{Namespace: b.Namespace, Subject: b.Subject.Name, Kind: b.Subject.Kind,
			Role: b.Role, Binding: b.Binding})
	}
	return out
}
