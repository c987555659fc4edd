package api

import (
	"net/http"
	"slices"

	"github.com/labstack/echo/v4"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/auth"
)

// Whoami says who the caller is and, per action, where it may take it:
// what a client (the web UI) needs to hide the actions the caller may
// not take. The guards decide every request on their own; this only
// mirrors them.
func (h *endpoints) Whoami(c echo.Context) error {
	who := principal(c)
	out := models.Whoami{
		Subject: who.Subject,
		Open:    h.s.open,
		Grants:  make([]models.Grant, 0, len(who.Grants)),
		Actions: map[string][]string{},
	}
	if who.KeyID != "" {
		out.KeyId = &who.KeyID
	}
	for _, g := range who.Grants {
		out.Grants = append(out.Grants, models.Grant{Namespace: g.Namespace, Role: models.Role(g.Role.String())})
	}
	for _, p := range actionRoles(h.s.perms) {
		out.Actions[p.Action] = allowedIn(who, p)
	}
	return c.JSON(http.StatusOK, out)
}

// actionRoles is one permission per action of perms (the public ones
// left out): several operations may share an action, and then the one
// that needs the highest role stands for it.
func actionRoles(perms map[string]permission) map[string]permission {
	out := map[string]permission{}
	for _, p := range perms {
		if p.Scope == "public" {
			continue
		}
		if have, ok := out[p.Action]; !ok || p.Role > have.Role || (p.Role == have.Role && p.Scope == "cluster") {
			out[p.Action] = p
		}
	}
	return out
}

// allowedIn is where who may take the action of p: ["*"] for every
// namespace, the namespaces of its grants of p's role, or none.
func allowedIn(who *auth.Principal, p permission) []string {
	if who.Allows(auth.AllNamespaces, p.Role) {
		return []string{auth.AllNamespaces}
	}
	if p.Scope == "cluster" {
		return []string{}
	}
	ns := who.NamespacesWith(p.Role)
	slices.Sort(ns)
	return append([]string{}, slices.Compact(ns)...)
}
