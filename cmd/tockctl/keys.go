package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/tock-sched/tock/api/models"
)

type keysCreateCmd struct {
	Namespace string `required:"" help:"The namespace the key's role holds in; '*' for every namespace."`
	Role      string `required:"" enum:"reader,operator,editor,admin" help:"reader, operator, editor or admin (making keys needs admin in the namespace)."`
	Expires   string `help:"How long the key is valid: days (90d) or a duration (12h); default: it never expires."`
	Name      string `help:"What the key is for, shown in listings."`
}

// Run creates a key and prints it alone on stdout (-o json: the whole
// answer), what it is on stderr.
func (c *keysCreateCmd) Run(a *app) error {
	body := models.KeyCreate{Namespace: c.Namespace, Role: models.Role(c.Role), ExpiresIn: optional(c.Expires), Name: optional(c.Name)}
	r, err := a.api.CreateKeyWithResponse(a.ctx, body)
	if err := check(r, err); err != nil {
		return err
	}
	if a.json {
		return a.printRawJSON(r.Body)
	}
	k, err := decoded(r.JSON201)
	if err != nil {
		return err
	}
	fmt.Fprintln(a.stdout, k.Key)
	fmt.Fprintf(a.stderr, "created key %s: role %s in namespace %s, %s. It is shown only now.\n", k.Id, k.Role, k.Namespace, expiry(k.ExpiresAt))
	return nil
}

type keysListCmd struct {
	Namespace string `help:"Only the keys of this namespace ('*': the keys for every namespace)."`
}

// Run lists keys.
func (c *keysListCmd) Run(a *app) error {
	r, err := a.api.ListKeysWithResponse(a.ctx, &models.ListKeysParams{Namespace: optional(c.Namespace)})
	if err := check(r, err); err != nil {
		return err
	}
	if a.json {
		return a.printRawJSON(r.Body)
	}
	l, err := decoded(r.JSON200)
	if err != nil {
		return err
	}
	w := a.table()
	fmt.Fprintln(w, "ID\tNAMESPACE\tROLE\tNAME\tCREATED\tBY\tEXPIRES\tLAST USED")
	for _, k := range l.Items {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k.Id, k.Namespace, k.Role, orDash(k.Name),
			timeText(&k.CreatedAt), k.CreatedBy, timeText(k.ExpiresAt), timeText(k.LastUsedAt))
	}
	return w.Flush()
}

type keysDeleteCmd struct {
	ID string `arg:"" name:"id" help:"The key's id (the part after tock_)."`
}

// Run deletes a key.
func (c *keysDeleteCmd) Run(a *app) error {
	r, err := a.api.DeleteKeyWithResponse(a.ctx, c.ID)
	if err := check(r, err); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "deleted key %s\n", c.ID)
	return nil
}

func expiry(t *time.Time) string {
	if t == nil {
		return "never expires"
	}
	return "expires " + t.Format(time.RFC3339)
}

type whoamiCmd struct{}

// Run shows the caller's subject, grants and, per action, where it may
// take it (GET /v1/whoami).
func (c *whoamiCmd) Run(a *app) error {
	r, err := a.api.WhoamiWithResponse(a.ctx)
	if err := check(r, err); err != nil {
		return err
	}
	if a.json {
		return a.printRawJSON(r.Body)
	}
	w, err := decoded(r.JSON200)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "subject: %s\n", w.Subject)
	if w.Open {
		fmt.Fprintln(a.stdout, "the server asks no credential (--auth none)")
	}
	for _, g := range w.Grants {
		fmt.Fprintf(a.stdout, "grant:   %s in %s\n", g.Role, namespaceText(g.Namespace))
	}
	t := a.table()
	fmt.Fprintln(t, "ACTION\tALLOWED IN")
	for _, action := range slices.Sorted(maps.Keys(w.Actions)) {
		ns := w.Actions[action]
		where := strings.Join(ns, ",")
		if len(ns) == 0 {
			where = "-"
		}
		fmt.Fprintf(t, "%s\t%s\n", action, where)
	}
	return t.Flush()
}

// namespaceText names a grant's namespace: "*" reads as every namespace.
func namespaceText(ns string) string {
	if ns == "*" {
		return "every namespace"
	}
	return "namespace " + ns
}
