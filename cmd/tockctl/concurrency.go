package main

import (
	"fmt"

	"github.com/tock-sched/tock/api/models"
)

// concurrencyCmd is tockctl concurrency: the keys in use, or one key's
// holders and queue.
type concurrencyCmd struct {
	Namespace string `help:"The keys of this namespace's executions (default: your key's, or \"default\")." placeholder:"NS"`
	Key       string `arg:"" optional:"" help:"One key, as the jobs' template rendered it: the executions holding its slots and those waiting, in the order they will start."`
	Cluster   bool   `help:"KEY is a cluster-wide key (scope cluster)."`
}

// Run lists concurrency keys, or one.
func (c *concurrencyCmd) Run(a *app) error {
	p := &models.ListConcurrencyKeysParams{Namespace: optional(c.Namespace), Key: optional(c.Key)}
	if c.Cluster {
		p.Scope = ptr(models.ListConcurrencyKeysParamsScopeCluster)
	}
	r, err := a.api.ListConcurrencyKeysWithResponse(a.ctx, p)
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
	if c.Key == "" {
		w := a.table()
		fmt.Fprintln(w, "KEY\tSCOPE\tHELD\tWAITING\tOLDEST WAITING")
		for _, k := range l.Items {
			oldest := "-"
			if k.OldestWaiting != nil {
				oldest = timeText(k.OldestWaiting)
			}
			fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%s\n", k.Key, k.Scope, k.Held, k.Waiting, oldest)
		}
		return w.Flush()
	}
	if len(l.Items) == 0 {
		fmt.Fprintf(a.stdout, "no execution holds or waits for %s\n", c.Key)
		return nil
	}
	k := l.Items[0]
	fmt.Fprintf(a.stdout, "%s (%s): %d held, %d waiting\n", k.Key, k.Scope, k.Held, k.Waiting)
	w := a.table()
	fmt.Fprintln(w, "\tEXECUTION\tSCHEDULED FOR\tSINCE")
	for _, h := range deref(k.Holding) {
		fmt.Fprintf(w, "holding\t%s\t%s\t%s\n", h.ExecutionId, timeText(&h.ScheduledFor), timeText(&h.Since))
	}
	for i, h := range deref(k.Queue) {
		fmt.Fprintf(w, "waiting %d\t%s\t%s\t%s\n", i+1, h.ExecutionId, timeText(&h.ScheduledFor), timeText(&h.Since))
	}
	return w.Flush()
}
