package main

import (
	"fmt"

	"github.com/tock-sched/tock/api/models"
)

type nsListCmd struct{}

// Run lists the namespaces with their job counts and retention.
func (c *nsListCmd) Run(a *app) error {
	r, err := a.api.ListNamespacesWithResponse(a.ctx)
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
	a.namespaceTable(l.Items...)
	return nil
}

type nsSetCmd struct {
	Namespace string `arg:"" help:"Namespace." name:"namespace"`
	Retention string `help:"How long its execution history is kept: days (30d) or a duration (36h); \"\" for the cluster's." required:""`
}

// Run sets a namespace's retention.
func (c *nsSetCmd) Run(a *app) error {
	body := models.NamespaceSettings{Retention: optional(c.Retention)}
	r, err := a.api.PutNamespaceWithResponse(a.ctx, c.Namespace, body)
	if err := check(r, err); err != nil {
		return err
	}
	if a.json {
		return a.printRawJSON(r.Body)
	}
	n, err := decoded(r.JSON200)
	if err != nil {
		return err
	}
	a.namespaceTable(n)
	return nil
}

// namespaceTable prints namespaces: name, jobs, the retention that
// applies, whether it is the namespace's own, and when its oldest ended
// execution goes.
func (a *app) namespaceTable(ns ...models.Namespace) {
	w := a.table()
	fmt.Fprintln(w, "NAMESPACE\tJOBS\tRETENTION\tOWN\tOLDEST GOES")
	for _, n := range ns {
		own := "-"
		if n.Retention != nil {
			own = "yes"
		}
		fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\n", n.Name, n.Jobs, n.EffectiveRetention, own, timeText(n.HistoryExpiresAt))
	}
	w.Flush()
}
