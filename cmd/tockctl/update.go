package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/api/models"
)

type jobUpdateCmd struct {
	jobID

	File string `short:"f" help:"Send the JSON object of this file (\"-\": standard input) as the body of PATCH /v1/jobs/{id}: each field present replaces the job's, null removes a payload or timeout. The other flags set fields on top of it." placeholder:"FILE"`

	Cron   string `help:"Cron expression, seconds first (\"0 30 9 * * MON-FRI\")." xor:"schedule" group:"Schedule (one of; a new schedule replaces the whole schedule and recomputes the next run)" placeholder:"EXPR"`
	TZ     string `name:"tz" help:"IANA time zone of --cron (default UTC)." group:"Schedule (one of; a new schedule replaces the whole schedule and recomputes the next run)" placeholder:"ZONE"`
	Anchor string `help:"With --cron '@every D': the RFC 3339 time its runs start from (default the Unix epoch)." group:"Schedule (one of; a new schedule replaces the whole schedule and recomputes the next run)" placeholder:"TIME"`
	At     string `help:"Run once at this RFC 3339 time." xor:"schedule" group:"Schedule (one of; a new schedule replaces the whole schedule and recomputes the next run)" placeholder:"TIME"`
	In     string `help:"Run once after this delay (\"90s\")." xor:"schedule" group:"Schedule (one of; a new schedule replaces the whole schedule and recomputes the next run)" placeholder:"DUR"`
	Now    bool   `help:"Run once, now." xor:"schedule" group:"Schedule (one of; a new schedule replaces the whole schedule and recomputes the next run)"`

	StartAt string `help:"With --cron: no run before this RFC 3339 time." group:"Schedule window and jitter (only with a new schedule)" placeholder:"TIME"`
	EndAt   string `help:"With --cron: no run after this RFC 3339 time; the job completes after its last run." group:"Schedule window and jitter (only with a new schedule)" placeholder:"TIME"`
	MaxRuns *int64 `help:"With --cron: complete the job once this many runs have fired (runs skipped by a policy, and manual runs, do not count)." group:"Schedule window and jitter (only with a new schedule)" placeholder:"N"`
	Jitter  string `help:"With --cron, --at, --in or --now: publish each run up to this much after its time (\"30s\"), by an offset fixed per job and run." group:"Schedule window and jitter (only with a new schedule)" placeholder:"DUR"`

	HTTP      string            `name:"http" help:"Send an HTTP request to this URL." xor:"handler" group:"Handler (one of; replaces the whole handler)" placeholder:"URL"`
	Method    string            `help:"HTTP method for --http (default POST)." group:"Handler (one of; replaces the whole handler)" placeholder:"METHOD"`
	Header    map[string]string `help:"HTTP header for --http, NAME=VALUE (repeatable)." group:"Handler (one of; replaces the whole handler)"`
	NATS      string            `name:"nats" help:"Publish to this NATS subject." xor:"handler" group:"Handler (one of; replaces the whole handler)" placeholder:"SUBJECT"`
	WaitReply bool              `help:"With --nats, wait for a reply." group:"Handler (one of; replaces the whole handler)"`
	Custom    string            `help:"Hand executions to the custom executors serving this name." xor:"handler" group:"Handler (one of; replaces the whole handler)" placeholder:"NAME"`

	Payload   string `help:"JSON payload handed to the handler." xor:"payload" placeholder:"JSON"`
	NoPayload bool   `help:"Remove the payload." xor:"payload"`
	Timeout   string `help:"Longest an attempt may run (\"30s\")." xor:"timeout" placeholder:"DUR"`
	NoTimeout bool   `help:"Remove the timeout." xor:"timeout"`

	MaxAttempts  int    `help:"Attempts before an execution is dead. Replaces the whole retry policy: what is not given takes the cluster's default." placeholder:"N"`
	Backoff      string `help:"Delay before the second attempt (\"1s\"). Replaces the whole retry policy, as --max-attempts does." placeholder:"DUR"`
	DefaultRetry bool   `help:"Reset the retry policy to the cluster's default."`
	Priority     string `help:"Priority class: high, normal or low." placeholder:"CLASS"`

	Missed      string   `help:"What to do with runs missed by more than --grace: skip, latest or all. Replaces the whole missed-run policy: what is not given takes the cluster's default." group:"Schedule policies" placeholder:"POLICY"`
	Grace       string   `help:"How late a run may fire before it counts as missed (\"60s\", at least 1s). Replaces the whole missed-run policy, as --missed does." group:"Schedule policies" placeholder:"DUR"`
	MissedMax   *int     `help:"With --missed all, the most missed runs fired (1-1000). Replaces the whole missed-run policy, as --missed does." group:"Schedule policies" placeholder:"N"`
	Overlap     string   `help:"When a run comes due while an earlier execution is queued or running: allow, skip, buffer_one or cancel_running." group:"Schedule policies" placeholder:"POLICY"`
	Calendar    []string `help:"Replace the job's calendars (repeat for several)." group:"Schedule policies" placeholder:"NAME"`
	NoCalendars bool     `help:"Remove the job's calendars." group:"Schedule policies"`
	OnExcluded  string   `help:"A run the job's calendars exclude: skip or next_allowed." group:"Schedule policies" placeholder:"CHOICE"`

	Pause  bool `help:"Pause the job (POST /v1/jobs/{id}/pause, after the change)." xor:"state"`
	Resume bool `help:"Resume the job (POST /v1/jobs/{id}/resume, after the change)." xor:"state"`
}

// Run changes the job with one PATCH request, and then pauses or resumes
// it: PATCH does not change a job's state, so --pause and --resume are a
// second request.
func (c *jobUpdateCmd) Run(a *app) error {
	id, err := parseID(c.ID)
	if err != nil {
		return err
	}
	body, err := c.patch(a.stdin)
	if err != nil {
		return err
	}
	if len(body) == 0 && !c.Pause && !c.Resume {
		return errors.New("nothing to change: give -f FILE, a field's flag, --pause or --resume (see --help)")
	}

	var (
		raw []byte
		job *models.Job
	)
	if len(body) > 0 {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		r, err := a.api.UpdateJobWithBodyWithResponse(a.ctx, id, nil, "application/json", bytes.NewReader(b))
		if err := check(r, err); err != nil {
			return err
		}
		raw, job = r.Body, r.JSON200
	}
	if c.Pause || c.Resume {
		change, what := a.pause, "pause"
		if c.Resume {
			change, what = func(id uuid.UUID) ([]byte, *models.Job, error) { return a.resume(id, false) }, "resume"
		}
		if raw, job, err = change(id); err != nil {
			if len(body) > 0 {
				return fmt.Errorf("the job was changed, but not %sd: %w", what, err)
			}
			return err
		}
	}
	return a.printJob(raw, job)
}

// patch is the body of the PATCH request: the fields of -f, with the
// fields of the flags on top.
func (c *jobUpdateCmd) patch(stdin io.Reader) (map[string]any, error) {
	body := map[string]any{}
	if c.File != "" {
		var (
			b   []byte
			err error
		)
		if c.File == "-" {
			b, err = io.ReadAll(stdin)
		} else {
			b, err = os.ReadFile(c.File)
		}
		if err != nil {
			return nil, err
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(b, &fields); err != nil || fields == nil {
			return nil, fmt.Errorf("%s: want one JSON object, the fields to change as PATCH /v1/jobs/{id} takes them", c.File)
		}
		for k, v := range fields {
			body[k] = v
		}
	}

	if err := c.scheduleFields(body); err != nil {
		return nil, err
	}
	h, err := handlerOf(c.HTTP, c.Method, c.Header, c.NATS, c.WaitReply, c.Custom)
	if err != nil {
		return nil, err
	}
	if h != nil {
		body["handler"] = h
	}
	p, err := payloadOf(c.Payload)
	if err != nil {
		return nil, err
	}
	switch {
	case p != nil:
		body["payload"] = p
	case c.NoPayload:
		body["payload"] = nil
	}
	switch {
	case c.Timeout != "":
		body["timeout"] = c.Timeout
	case c.NoTimeout:
		body["timeout"] = nil
	}
	r := retryOf(c.MaxAttempts, c.Backoff)
	switch {
	case r != nil && c.DefaultRetry:
		return nil, errors.New("--default-retry cannot be used with --max-attempts or --backoff")
	case r != nil:
		body["retry"] = r
	case c.DefaultRetry:
		body["retry"] = models.RetryPolicy{}
	}
	if c.Priority != "" {
		body["priority"] = c.Priority
	}
	if m := missedOf(c.Missed, c.Grace, c.MissedMax); m != nil {
		body["missed"] = m
	}
	if c.Overlap != "" {
		body["overlap"] = c.Overlap
	}
	switch {
	case c.NoCalendars && len(c.Calendar) > 0:
		return nil, errors.New("--no-calendars cannot be used with --calendar")
	case c.NoCalendars:
		body["calendars"] = []string{}
	case len(c.Calendar) > 0:
		body["calendars"] = c.Calendar
	}
	if c.OnExcluded != "" {
		body["on_excluded"] = c.OnExcluded
	}
	return body, nil
}

// scheduleFields sets the schedule of the flags in body. A schedule in a
// PATCH replaces the whole schedule, so the flags that are part of one
// (--jitter; --tz, --anchor and the window with --cron) come only with a
// schedule flag: alone they would remove the rest of the job's.
func (c *jobUpdateCmd) scheduleFields(body map[string]any) error {
	f := scheduleFlags{cron: c.Cron, tz: c.TZ, anchor: c.Anchor, at: c.At, in: c.In, now: c.Now,
		startAt: c.StartAt, endAt: c.EndAt, maxRuns: c.MaxRuns, jitter: c.Jitter}
	if f.jitter != "" && f.cron == "" && f.at == "" && f.in == "" && !f.now {
		return errors.New("--jitter needs --cron, --at, --in or --now: a new schedule replaces the whole schedule")
	}
	s, err := f.schedule()
	if err != nil {
		return err
	}
	if s != nil {
		body["schedule"] = s
	}
	return nil
}
