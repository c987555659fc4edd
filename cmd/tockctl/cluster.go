package main

import (
	"fmt"
	"strconv"
	"time"
)

type bucketsCmd struct{}

func (c *bucketsCmd) Run(a *app) error {
	r, err := a.api.ListBucketsWithResponse(a.ctx)
	if err := check(r, err); err != nil {
		return err
	}
	if a.json {
		return a.printRawJSON(r.Body)
	}
	list, err := decoded(r.JSON200)
	if err != nil {
		return err
	}
	w := a.table()
	fmt.Fprintln(w, "BUCKET\tOWNER\tEPOCH\tJOBS\tACTIVE\tNEXT DUE")
	for _, p := range list.Items {
		owner := orDash(deref(p.Owner))
		// During a hand-over etcd already names the new owner while
		// Postgres (which fencing checks) still has the old one; and a
		// bucket nobody owns keeps its last recorded owner.
		if p.RecordedOwner != nil && (deref(p.Owner) != *p.RecordedOwner || deref(p.Epoch) != deref(p.RecordedEpoch)) {
			owner += fmt.Sprintf(" (recorded %s@%d)", *p.RecordedOwner, deref(p.RecordedEpoch))
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%d\t%d\t%s\n", p.Bucket, owner, epochText(p.Epoch), p.Jobs, p.ActiveJobs, timeText(p.NextDue))
	}
	return w.Flush()
}

type nodesCmd struct{}

func (c *nodesCmd) Run(a *app) error {
	r, err := a.api.ListNodesWithResponse(a.ctx)
	if err := check(r, err); err != nil {
		return err
	}
	if a.json {
		return a.printRawJSON(r.Body)
	}
	list, err := decoded(r.JSON200)
	if err != nil {
		return err
	}
	w := a.table()
	fmt.Fprintln(w, "NODE\tADDR\tBUCKETS\tLEASE TTL\tSTARTED")
	for _, n := range list.Items {
		ttl := time.Duration(n.LeaseTtlSeconds * float64(time.Second)).Round(time.Millisecond)
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\n", n.Node, orDash(deref(n.Addr)), n.BucketCount, ttl, timeText(&n.StartedAt))
	}
	return w.Flush()
}

type handlersCmd struct {
	History bool `help:"Also list each handler's latest circuit breaker transitions (kept a week)."`
}

func (c *handlersCmd) Run(a *app) error {
	r, err := a.api.ListHandlersWithResponse(a.ctx)
	if err := check(r, err); err != nil {
		return err
	}
	if a.json {
		return a.printRawJSON(r.Body)
	}
	list, err := decoded(r.JSON200)
	if err != nil {
		return err
	}
	w := a.table()
	fmt.Fprintln(w, "HANDLER\tQUEUE\tBREAKER\tEXECUTOR\tEXECUTOR BREAKER\tSINCE\tFAILURES/REQUESTS\tIN FLIGHT\tWHY")
	for _, h := range list.Items {
		if len(h.Executors) == 0 {
			fmt.Fprintf(w, "%s\t%s\t-\tnone (last seen %s)\t-\t-\t-\t-\t-\n", h.Handler, h.Queue, timeText(h.LastSeen))
		}
		for _, x := range h.Executors {
			inFlight := strconv.Itoa(x.InFlight)
			if x.Limit != nil {
				inFlight += "/" + strconv.Itoa(*x.Limit)
			}
			why := deref(x.Reason)
			if x.ProbeAt != nil {
				why += "; next probe " + timeText(x.ProbeAt)
			}
			executor := x.ExecutorId
			if x.Version != nil {
				executor += " (" + *x.Version + ")"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%d/%d\t%s\t%s\n", h.Handler, h.Queue, h.Breaker, executor, x.Breaker,
				timeText(&x.Since), x.Failures, x.Requests, inFlight, orDash(why))
		}
	}
	if err := w.Flush(); err != nil || !c.History {
		return err
	}
	fmt.Fprintln(a.stdout)
	w = a.table()
	fmt.Fprintln(w, "HANDLER\tEXECUTOR\tBREAKER\tSINCE\tWHY")
	for _, h := range list.Items {
		for _, t := range h.History {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", h.Handler, t.ExecutorId, t.Breaker, timeText(&t.Since), orDash(t.Reason))
		}
	}
	return w.Flush()
}

func epochText(e *int64) string {
	if e == nil {
		return "-"
	}
	return strconv.FormatInt(*e, 10)
}
