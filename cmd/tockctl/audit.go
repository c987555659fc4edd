package main

import (
	"fmt"

	"github.com/tock-sched/tock/api/models"
)

type auditCmd struct {
	Namespace string `help:"Only entries of this namespace."`
	Actor     string `help:"Only entries by this actor (key:<id>)."`
	Action    string `help:"Only entries of this action (jobs.update)."`
	Since     string `help:"Only entries at or after this time (RFC 3339) or this long ago (24h)."`
	Until     string `help:"Only entries before this time (RFC 3339) or this long ago."`
	Limit     int    `help:"Entries per page." default:"50"`
	Cursor    string `help:"The next_cursor of an earlier page."`
}

// Run lists the audit trail, newest first.
func (c *auditCmd) Run(a *app) error {
	p := &models.ListAuditParams{Namespace: optional(c.Namespace), Actor: optional(c.Actor), Action: optional(c.Action),
		Since: optional(c.Since), Until: optional(c.Until), Limit: &c.Limit, Cursor: optional(c.Cursor)}
	r, err := a.api.ListAuditWithResponse(a.ctx, p)
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
	fmt.Fprintln(w, "AT\tACTOR\tNAMESPACE\tACTION\tRESOURCE")
	for _, e := range l.Items {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", timeText(&e.At), e.Actor, e.Namespace, e.Action, e.Resource)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if l.NextCursor != nil && *l.NextCursor != "" {
		fmt.Fprintf(a.stderr, "more: --cursor %s\n", *l.NextCursor)
	}
	return nil
}
