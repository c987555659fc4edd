package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tock-sched/tock/api/models"
)

// printJob prints what an endpoint answering with one job returned: its
// raw JSON, and the job the generated client decoded from it.
func (a *app) printJob(raw []byte, v *models.Job) error {
	if a.json {
		return a.printRawJSON(raw)
	}
	j, err := decoded(v)
	if err != nil {
		return err
	}
	a.jobTable([]models.Job{j})
	a.jobDetails(j)
	return nil
}

// jobDetails prints, below a single job's table, what does not fit in a
// row: when it last succeeded, the names of its secret headers, its missed-run and overlap policies, its calendars, the
// runs it fired, and its schedule's window, max_runs and jitter when set.
func (a *app) jobDetails(j models.Job) {
	var d details
	if j.LastSuccessAt != nil {
		d.add("last success", timeText(j.LastSuccessAt))
	}
	if s := j.Handler.SecretHeaders; s != nil && len(*s) > 0 {
		// Their names only: the API shows no value.
		d.add("secret headers", strings.Join(slices.Sorted(maps.Keys(*s)), ", "))
	}
	if m := j.Missed; m != nil {
		d.add("missed", missedText(*m))
	}
	if j.Overlap != nil {
		d.add("overlap", string(*j.Overlap))
	}
	if c := j.Concurrency; c != nil {
		d.add("concurrency", fmt.Sprintf("%d at once by key %s (%s scope, on limit %s)", c.Limit, c.Key, deref(c.Scope), deref(c.OnLimit)))
	}
	if r := j.RateLimit; r != nil {
		d.add("rate limit", fmt.Sprintf("%d per %s, burst %d, by key %s (on limit %s)", r.Limit, r.Per, deref(r.Burst), r.Key, deref(r.OnLimit)))
	}
	if j.Calendars != nil && len(*j.Calendars) > 0 {
		d.add("calendars", strings.Join(*j.Calendars, ", ")+" (on_excluded "+string(deref(j.OnExcluded))+")")
	}
	s := j.Schedule
	switch runs := deref(j.Runs); {
	case s.MaxRuns != nil:
		d.add("runs", fmt.Sprintf("%d of max_runs %d", runs, *s.MaxRuns))
	case j.Runs != nil:
		d.add("runs", strconv.FormatInt(runs, 10))
	}
	var window []string
	if s.StartAt != nil {
		window = append(window, "from "+timeText(s.StartAt))
	}
	if s.EndAt != nil {
		window = append(window, "until "+timeText(s.EndAt))
	}
	if len(window) > 0 {
		d.add("window", strings.Join(window, " "))
	}
	if s.Jitter != nil {
		d.add("jitter", *s.Jitter)
	}
	if j.DependsOn != nil {
		d.add("waits for", dependsText(j))
		d.add("wait timeout", fmt.Sprintf("%s, then %s (an upstream without the run: %s)", deref(j.WaitTimeout),
			deref(j.OnTimeout), deref(j.OnUpstreamSkipped)))
	}
	a.printDetails(d)
}

// executionDetails prints, below a single execution's table, when a
// jittered run was due to be published and whether a backfill made it.
func (a *app) executionDetails(e models.Execution) {
	var d details
	if e.DueAt != nil {
		d.add("due at", timeText(e.DueAt))
	}
	if deref(e.Backfill) {
		d.add("backfill", "yes")
	}
	for _, w := range deref(e.WaitingFor) {
		d.add("waiting for", fmt.Sprintf("%s (%s): %s", deref(w.JobName), w.Status, w.Detail))
	}
	if e.WaitUntil != nil {
		d.add("wait until", timeText(e.WaitUntil))
	}
	for _, l := range deref(e.Upstreams) {
		d.add("let run by", fmt.Sprintf("%s %s (%s, %s)", l.JobName, l.ExecutionId, timeText(&l.ScheduledFor), l.State))
	}
	for _, l := range deref(e.Released) {
		d.add("released", fmt.Sprintf("%s %s (%s, now %s)", l.JobName, l.ExecutionId, timeText(&l.ScheduledFor), l.State))
	}
	a.printDetails(d)
}

// details are the "name: value" lines printed below a single job's or
// execution's table.
type details [][2]string

func (d *details) add(name, value string) { *d = append(*d, [2]string{name, value}) }

// printDetails prints d after a blank line, its values aligned; nothing
// when d is empty.
func (a *app) printDetails(d details) {
	if len(d) == 0 {
		return
	}
	fmt.Fprintln(a.stdout)
	w := a.table()
	for _, l := range d {
		fmt.Fprintf(w, "%s:\t%s\n", l[0], l[1])
	}
	w.Flush()
}

// missedText is a missed-run policy as "latest (grace 1m, max 100)".
func missedText(m models.MissedPolicy) string {
	s := orDash(string(deref(m.Policy)))
	var opts []string
	if m.Grace != nil {
		opts = append(opts, "grace "+*m.Grace)
	}
	if m.Max != nil {
		opts = append(opts, "max "+strconv.Itoa(*m.Max))
	}
	if len(opts) > 0 {
		s += " (" + strings.Join(opts, ", ") + ")"
	}
	return s
}

// printExecution prints what an endpoint answering with one execution
// returned (run, cancel, retry).
func (a *app) printExecution(raw []byte, v *models.Execution) error {
	if a.json {
		return a.printRawJSON(raw)
	}
	e, err := decoded(v)
	if err != nil {
		return err
	}
	a.executionTable([]models.Execution{e})
	return nil
}

// printRawJSON prints the API's JSON, indented.
func (a *app) printRawJSON(raw []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return fmt.Errorf("unexpected response: %w", err)
	}
	buf.WriteByte('\n')
	_, err := a.stdout.Write(buf.Bytes())
	return err
}

// printJSON prints v as indented JSON.
func (a *app) printJSON(v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(a.stdout, "%s\n", b)
	return err
}

func (a *app) table() *tabwriter.Writer {
	return tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
}

func (a *app) jobTable(jobs []models.Job) {
	w := a.table()
	fmt.Fprintln(w, "ID\tNAME\tSTATE\tSCHEDULE\tHANDLER\tNEXT RUN")
	for _, j := range jobs {
		name := j.Name
		if j.Namespace != "default" {
			name = j.Namespace + "/" + j.Name
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", j.Id, name, j.State, scheduleText(j.Schedule), handlerText(j.Handler), timeText(j.NextRunAt))
	}
	w.Flush()
}

func (a *app) executionTable(execs []models.Execution) {
	w := a.table()
	fmt.Fprintln(w, "ID\tJOB\tSCHEDULED FOR\tSTATE\tATTEMPTS\tDISPATCHED\tSTARTED\tFINISHED")
	for _, e := range execs {
		job := e.JobName
		if e.Namespace != "default" {
			job = e.Namespace + "/" + e.JobName
		}
		state := string(e.State)
		if e.Manual {
			state += " (manual)"
		}
		if e.NextAttemptAt != nil && e.State != models.ExecutionStateCancelled && e.State != models.ExecutionStateWaiting {
			state += " (next " + timeText(e.NextAttemptAt) + ")"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", e.Id, job, timeText(&e.ScheduledFor), state, e.Attempts,
			timeText(e.DispatchedAt), timeText(e.StartedAt), timeText(e.FinishedAt))
	}
	w.Flush()
}

func (a *app) attemptTable(attempts []models.Attempt) {
	w := a.table()
	fmt.Fprintln(w, "ATTEMPT\tEXECUTOR\tSTARTED\tFINISHED\tOUTCOME\tERROR")
	for _, t := range attempts {
		outcome := string(deref(t.Outcome))
		if outcome == "" {
			outcome = "running"
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\n", t.Number, orDash(deref(t.ExecutorId)), timeText(t.StartedAt),
			timeText(t.FinishedAt), outcome, orDash(oneLine(deref(t.Error), 60)))
	}
	w.Flush()
}

func scheduleText(s models.Schedule) string {
	switch {
	case s.Cron != nil:
		if s.Timezone != nil {
			return "cron " + *s.Cron + " (" + *s.Timezone + ")"
		}
		return "cron " + *s.Cron
	case s.At != nil:
		return "at " + s.At.UTC().Format(time.RFC3339)
	case s.In != nil:
		return "in " + *s.In
	}
	return "now"
}

func handlerText(h models.Handler) string {
	switch h.Type {
	case models.HandlerTypeHttp:
		return "http " + deref(h.Method) + " " + deref(h.Url)
	case models.HandlerTypeNats:
		s := "nats " + deref(h.Subject)
		if deref(h.WaitReply) {
			s += " (wait reply)"
		}
		return s
	case models.HandlerTypeCustom:
		return "custom " + deref(h.Name)
	}
	return string(h.Type)
}

func timeText(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine fits s on one table line of at most n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
