package main

import (
	"fmt"
	"strconv"

	"github.com/tock-sched/tock/api/models"
)

type statsCmd struct {
	Namespace string `help:"Only this namespace's executions." placeholder:"NS"`
	Job       string `help:"Only this job's executions." placeholder:"ID"`
	Since     string `help:"Start of the range of scheduled times: RFC 3339 or a duration before now (server default 24h)." placeholder:"TIME"`
	Until     string `help:"End of the range, exclusive (default now)." placeholder:"TIME"`
	By        string `help:"Group by job, handler, namespace or hour." enum:"job,handler,namespace,hour" default:"job"`
	Interval  string `help:"Print a time series instead, a row per interval (GET /v1/stats/series): 1m, 5m, 15m, 1h, 6h or 1d." enum:",1m,5m,15m,1h,6h,1d" default:""`
	Handler   string `help:"With --interval: only this handler queue's executions." placeholder:"QUEUE"`
}

// Run prints GET /v1/stats: per group, executions by state, success
// rate, attempts per execution, duration and lag percentiles.
func (c *statsCmd) Run(a *app) error {
	if c.Interval != "" {
		return c.series(a)
	}
	if c.Handler != "" {
		return fmt.Errorf("--handler needs --interval")
	}
	by := models.GetStatsParamsGroupBy(c.By)
	p := models.GetStatsParams{Namespace: optional(c.Namespace), Since: optional(c.Since), Until: optional(c.Until), GroupBy: &by}
	if c.Job != "" {
		id, err := parseID(c.Job)
		if err != nil {
			return fmt.Errorf("--job: %w", err)
		}
		p.JobId = &id
	}
	r, err := a.api.GetStatsWithResponse(a.ctx, &p)
	if err := check(r, err); err != nil {
		return err
	}
	if a.json {
		return a.printRawJSON(r.Body)
	}
	rep, err := decoded(r.JSON200)
	if err != nil {
		return err
	}
	w := a.table()
	fmt.Fprintln(w, "KEY\tTOTAL\tSUCCEEDED\tFAILED\tDEAD\tCANCELLED\tRUNNING\tQUEUED\tSUCCESS\tATTEMPTS\tP50 MS\tP99 MS\tLAG P99 MS")
	for _, g := range rep.Groups {
		key := g.Key
		if g.JobName != nil {
			key = *g.JobName + " (" + g.Key + ")"
		}
		var p50, p99, lag *float64
		if g.DurationMs != nil {
			p50, p99 = g.DurationMs.P50, g.DurationMs.P99
		}
		if g.LagMs != nil {
			lag = g.LagMs.P99
		}
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", key, g.Total,
			g.Counts["succeeded"], g.Counts["failed"], g.Counts["dead"], g.Counts["cancelled"], g.Counts["running"],
			g.Counts["queued"], percent(g.SuccessRate), number(g.AttemptsPerExecution), number(p50), number(p99), number(lag))
	}
	w.Flush()
	fmt.Fprintf(a.stderr, "executions scheduled from %s to %s\n", timeText(&rep.Since), timeText(&rep.Until))
	return nil
}

// percent is a rate as a percentage, "-" when absent.
func percent(v *float64) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatFloat(*v*100, 'f', 1, 64) + "%"
}

// number is a figure with up to one decimal, "-" when absent.
func number(v *float64) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatFloat(*v, 'f', 1, 64)
}

// series prints GET /v1/stats/series: per interval, executions by
// state, fire and start lag percentiles.
func (c *statsCmd) series(a *app) error {
	iv := models.GetStatsSeriesParamsInterval(c.Interval)
	p := models.GetStatsSeriesParams{Namespace: optional(c.Namespace), Handler: optional(c.Handler), Since: optional(c.Since),
		Until: optional(c.Until), Interval: &iv}
	if c.Job != "" {
		id, err := parseID(c.Job)
		if err != nil {
			return fmt.Errorf("--job: %w", err)
		}
		p.JobId = &id
	}
	r, err := a.api.GetStatsSeriesWithResponse(a.ctx, &p)
	if err := check(r, err); err != nil {
		return err
	}
	if a.json {
		return a.printRawJSON(r.Body)
	}
	s, err := decoded(r.JSON200)
	if err != nil {
		return err
	}
	w := a.table()
	fmt.Fprintln(w, "AT\tTOTAL\tSUCCEEDED\tFAILED\tDEAD\tCANCELLED\tIN FLIGHT\tFIRE P50 MS\tFIRE P99 MS\tSTART P50 MS\tSTART P99 MS")
	for _, pt := range s.Points {
		var f50, f99, s50, s99 *float64
		if pt.FireLagMs != nil {
			f50, f99 = pt.FireLagMs.P50, pt.FireLagMs.P99
		}
		if pt.StartLagMs != nil {
			s50, s99 = pt.StartLagMs.P50, pt.StartLagMs.P99
		}
		flight := pt.Counts["queued"] + pt.Counts["running"] + pt.Counts["waiting"]
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\n", pt.At.UTC().Format("2006-01-02T15:04Z"), pt.Total,
			pt.Counts["succeeded"], pt.Counts["failed"], pt.Counts["dead"], pt.Counts["cancelled"], flight,
			number(f50), number(f99), number(s50), number(s99))
	}
	w.Flush()
	fmt.Fprintf(a.stderr, "executions scheduled from %s to %s, per %s\n", timeText(&s.Since), timeText(&s.Until), s.Interval)
	return nil
}
