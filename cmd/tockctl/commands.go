package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/api/models"
)

// idempotency is the --idempotency-key of the writes that take one.
type idempotency struct {
	IdempotencyKey string `name:"idempotency-key" help:"Send this Idempotency-Key: the same command again (a retry after a timeout, say) gets the first answer instead of doing the work twice; kept 24 h by the server." placeholder:"KEY"`
}

// key is the header's value; nil sends none.
func (i idempotency) key() *string { return optional(i.IdempotencyKey) }

type jobsCreateCmd struct {
	idempotency
	// File is in both required groups, so that it stands in for --name
	// and a handler, and kong refuses it together with either.
	File string `short:"f" required:"" xor:"name,handler" help:"Create the jobs of this JSON Lines file instead, one job per line as POST /v1/jobs takes it (\"-\": standard input); sent ${max_batch} per request to POST /v1/jobs:batch. Failures are reported by line; the exit code is 1 if any job was not created." placeholder:"FILE"`

	Name      string `required:"" xor:"name" help:"Job name, unique in its namespace." placeholder:"NAME"`
	Namespace string `help:"Namespace (the server's default is \"default\")." placeholder:"NS"`

	Cron   string `help:"Cron expression, seconds first (\"0 30 9 * * MON-FRI\")." xor:"schedule" group:"Schedule (one of; default --now)" placeholder:"EXPR"`
	TZ     string `name:"tz" help:"IANA time zone of --cron (default UTC)." group:"Schedule (one of; default --now)" placeholder:"ZONE"`
	Anchor string `help:"With --cron '@every D': the RFC 3339 time its runs start from (default the Unix epoch)." group:"Schedule (one of; default --now)" placeholder:"TIME"`
	At     string `help:"Run once at this RFC 3339 time." xor:"schedule" group:"Schedule (one of; default --now)" placeholder:"TIME"`
	In     string `help:"Run once after this delay (\"90s\")." xor:"schedule" group:"Schedule (one of; default --now)" placeholder:"DUR"`
	Now    bool   `help:"Run once, now." xor:"schedule" group:"Schedule (one of; default --now)"`

	StartAt string `help:"With --cron: no run before this RFC 3339 time." group:"Schedule window and jitter" placeholder:"TIME"`
	EndAt   string `help:"With --cron: no run after this RFC 3339 time; the job completes after its last run." group:"Schedule window and jitter" placeholder:"TIME"`
	MaxRuns *int64 `help:"With --cron: complete the job once this many runs have fired (runs skipped by a policy, and manual runs, do not count)." group:"Schedule window and jitter" placeholder:"N"`
	Jitter  string `help:"Publish each run up to this much after its time (\"30s\"), by an offset fixed per job and run." group:"Schedule window and jitter" placeholder:"DUR"`

	Missed     string   `help:"What to do with runs missed by more than --grace: skip (fire none), latest (fire the most recent) or all (fire each, up to --missed-max). Default: the cluster's." group:"Schedule policies" placeholder:"POLICY"`
	Grace      string   `help:"How late a run may fire before it counts as missed (\"60s\", at least 1s). Default: the cluster's." group:"Schedule policies" placeholder:"DUR"`
	MissedMax  *int     `help:"With --missed all, the most missed runs fired (the newest; 1-1000). Default: the cluster's." group:"Schedule policies" placeholder:"N"`
	Overlap    string   `help:"When a run comes due while an earlier execution is queued or running: allow, skip, buffer_one or cancel_running. Default: the cluster's." group:"Schedule policies" placeholder:"POLICY"`
	Calendar   []string `help:"A calendar of the job's namespace that must allow each run (repeat for several; see calendars)." group:"Schedule policies" placeholder:"NAME"`
	OnExcluded string   `help:"With --calendar, a run the calendars exclude: skip (default) or next_allowed (run once at the first instant they allow)." group:"Schedule policies" placeholder:"CHOICE"`

	HTTP      string            `name:"http" help:"Send an HTTP request to this URL." xor:"handler" required:"" group:"Handler (one of)" placeholder:"URL"`
	Method    string            `help:"HTTP method for --http (default POST)." group:"Handler (one of)" placeholder:"METHOD"`
	Header    map[string]string `help:"HTTP header for --http, NAME=VALUE (repeatable)." group:"Handler (one of)"`
	NATS      string            `name:"nats" help:"Publish to this NATS subject." xor:"handler" required:"" group:"Handler (one of)" placeholder:"SUBJECT"`
	WaitReply bool              `help:"With --nats, wait for a reply." group:"Handler (one of)"`
	Custom    string            `help:"Hand executions to the custom executors serving this name." xor:"handler" required:"" group:"Handler (one of)" placeholder:"NAME"`
	LogCap    int64             `help:"Bytes of each attempt's log kept (default 1 MiB; at most the cluster's --log-max-cap)." group:"Handler (one of)" placeholder:"BYTES"`
	LogPolicy string            `help:"Past the log cap: head_tail (keep both ends, the default), head, or fail (fail the attempt)." group:"Handler (one of)" placeholder:"POLICY"`

	Payload     string `help:"JSON payload handed to the handler." placeholder:"JSON"`
	Timeout     string `help:"Longest an attempt may run (\"30s\")." placeholder:"DUR"`
	MaxAttempts int    `help:"Attempts before an execution is dead (default: the cluster's, 3 unless tockd says otherwise)." placeholder:"N"`
	Backoff     string `help:"Delay before the second attempt (\"1s\"; later ones grow by the cluster's multiplier)." placeholder:"DUR"`
	Priority    string `help:"Priority class: high, normal or low (default normal)." placeholder:"CLASS"`

	Label       map[string]string `help:"Label, KEY=VALUE (repeatable), for selecting jobs with jobs list --selector."`
	Description string            `help:"Free text describing the job." placeholder:"TEXT"`

	dependsFlags
}

// singleJobFlags reports the flags of a single job that are set, which
// -f does not take.
func (c *jobsCreateCmd) singleJobFlags() []string {
	var set []string
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"--namespace", c.Namespace != ""}, {"--cron", c.Cron != ""}, {"--tz", c.TZ != ""}, {"--anchor", c.Anchor != ""}, {"--at", c.At != ""},
		{"--in", c.In != ""}, {"--now", c.Now}, {"--method", c.Method != ""}, {"--header", len(c.Header) > 0},
		{"--wait-reply", c.WaitReply}, {"--payload", c.Payload != ""}, {"--timeout", c.Timeout != ""},
		{"--log-cap", c.LogCap != 0}, {"--log-policy", c.LogPolicy != ""},
		{"--max-attempts", c.MaxAttempts != 0}, {"--backoff", c.Backoff != ""}, {"--priority", c.Priority != ""},
		{"--label", len(c.Label) > 0}, {"--description", c.Description != ""},
		{"--start-at", c.StartAt != ""}, {"--end-at", c.EndAt != ""}, {"--max-runs", c.MaxRuns != nil}, {"--jitter", c.Jitter != ""},
		{"--missed", c.Missed != ""}, {"--grace", c.Grace != ""}, {"--missed-max", c.MissedMax != nil}, {"--overlap", c.Overlap != ""}, {"--idempotency-key", c.IdempotencyKey != ""},
		{"--calendar", len(c.Calendar) > 0}, {"--on-excluded", c.OnExcluded != ""},
	} {
		if f.set {
			set = append(set, f.name)
		}
	}
	return append(set, c.dependsFlags.set()...)
}

func (c *jobsCreateCmd) Run(a *app) error {
	if c.File != "" {
		if set := c.singleJobFlags(); len(set) > 0 {
			return fmt.Errorf("%s cannot be used with --file: each line of the file is a whole job", strings.Join(set, ", "))
		}
		return c.createFromFile(a)
	}
	body := models.JobCreate{Name: c.Name, Namespace: optional(c.Namespace)}
	var err error
	if body.Schedule, err = c.scheduleFlags().schedule(); err != nil {
		return err
	}
	h, err := handlerOf(c.HTTP, c.Method, c.Header, c.NATS, c.WaitReply, c.Custom)
	if err != nil {
		return err
	}
	if h != nil {
		body.Handler = *h
		if c.LogCap != 0 || c.LogPolicy != "" {
			lp := models.LogPolicy{}
			if c.LogCap != 0 {
				lp.CapBytes = &c.LogCap
			}
			if c.LogPolicy != "" {
				pol := models.LogPolicyPolicy(c.LogPolicy)
				lp.Policy = &pol
			}
			body.Handler.Log = &lp
		}
	}
	if body.Payload, err = payloadOf(c.Payload); err != nil {
		return err
	}
	body.Timeout = optional(c.Timeout)
	body.Retry = retryOf(c.MaxAttempts, c.Backoff)
	body.Priority = (*models.Priority)(optional(c.Priority))
	if len(c.Label) > 0 {
		body.Labels = (*models.Labels)(&c.Label)
	}
	body.Description = optional(c.Description)
	body.Missed = missedOf(c.Missed, c.Grace, c.MissedMax)
	body.Overlap = (*models.Overlap)(optional(c.Overlap))
	if len(c.Calendar) > 0 {
		body.Calendars = (*models.JobCalendars)(&c.Calendar)
	}
	body.OnExcluded = (*models.OnExcluded)(optional(c.OnExcluded))
	if err := c.dependsFlags.apply(&body); err != nil {
		return err
	}
	r, err := a.api.CreateJobWithResponse(a.ctx, &models.CreateJobParams{IdempotencyKey: c.key()}, body)
	if err := check(r, err); err != nil {
		return err
	}
	return a.printJob(r.Body, r.JSON201)
}

// scheduleFlags are a command's schedule flags: --cron (with --tz and
// --anchor), --at, --in or --now, and the window (--start-at, --end-at,
// --max-runs) and --jitter.
type scheduleFlags struct {
	cron, tz, anchor, at, in string
	now                      bool
	startAt, endAt           string
	maxRuns                  *int64
	jitter                   string
}

func (c *jobsCreateCmd) scheduleFlags() scheduleFlags {
	return scheduleFlags{cron: c.Cron, tz: c.TZ, anchor: c.Anchor, at: c.At, in: c.In, now: c.Now,
		startAt: c.StartAt, endAt: c.EndAt, maxRuns: c.MaxRuns, jitter: c.Jitter}
}

// schedule is the schedule of the flags; nil when none is set. --jitter
// alone is a run once, now, with that jitter. The values are the
// server's to check, but for the RFC 3339 times, which must parse.
func (f scheduleFlags) schedule() (*models.Schedule, error) {
	for _, c := range []struct {
		flag string
		set  bool
	}{
		{"--tz", f.tz != ""}, {"--anchor", f.anchor != ""}, {"--start-at", f.startAt != ""},
		{"--end-at", f.endAt != ""}, {"--max-runs", f.maxRuns != nil},
	} {
		if c.set && f.cron == "" {
			return nil, fmt.Errorf("%s needs --cron", c.flag)
		}
	}
	var (
		s   = &models.Schedule{Jitter: optional(f.jitter)}
		err error
	)
	switch {
	case f.cron != "":
		s.Cron, s.Timezone, s.MaxRuns = &f.cron, optional(f.tz), f.maxRuns
		if s.Anchor, err = rfc3339("--anchor", f.anchor, "2026-07-01T09:00:00+02:00"); err != nil {
			return nil, err
		}
		if s.StartAt, err = rfc3339("--start-at", f.startAt, "2026-07-01T00:00:00Z"); err != nil {
			return nil, err
		}
		if s.EndAt, err = rfc3339("--end-at", f.endAt, "2026-12-31T23:59:59Z"); err != nil {
			return nil, err
		}
	case f.at != "":
		if s.At, err = rfc3339("--at", f.at, "2026-12-01T09:00:00Z"); err != nil {
			return nil, err
		}
	case f.in != "":
		s.In = &f.in
	case !f.now && f.jitter == "":
		return nil, nil
	}
	return s, nil
}

// rfc3339 parses the value of a time flag; nil when it is not set.
func rfc3339(flag, value, example string) (*time.Time, error) {
	if value == "" {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339, value)
	if err != nil {
		return nil, fmt.Errorf("%s %q is not an RFC 3339 time such as %s", flag, value, example)
	}
	return &t, nil
}

// missedOf is the missed-run policy of the --missed, --grace and
// --missed-max flags; nil when none is set. What is not set takes the
// cluster's default.
func missedOf(policy, grace string, most *int) *models.MissedPolicy {
	if policy == "" && grace == "" && most == nil {
		return nil
	}
	return &models.MissedPolicy{Policy: (*models.MissedPolicyPolicy)(optional(policy)), Grace: optional(grace), Max: most}
}

// handlerOf is the handler of the --http (with --method and --header),
// --nats (with --wait-reply) and --custom flags; nil when none is set.
func handlerOf(httpURL, method string, header map[string]string, subject string, waitReply bool, custom string) (*models.Handler, error) {
	if httpURL == "" && (method != "" || len(header) > 0) {
		return nil, errors.New("--method and --header need --http")
	}
	if subject == "" && waitReply {
		return nil, errors.New("--wait-reply needs --nats")
	}
	switch {
	case httpURL != "":
		h := &models.Handler{Type: models.HandlerTypeHttp, Url: &httpURL, Method: optional(method)}
		if len(header) > 0 {
			h.Headers = &header
		}
		return h, nil
	case subject != "":
		h := &models.Handler{Type: models.HandlerTypeNats, Subject: &subject}
		if waitReply {
			h.WaitReply = &waitReply
		}
		return h, nil
	case custom != "":
		return &models.Handler{Type: models.HandlerTypeCustom, Name: &custom}, nil
	}
	return nil, nil
}

// payloadOf is the payload of --payload; nil when it is not set.
func payloadOf(s string) (*json.RawMessage, error) {
	if s == "" {
		return nil, nil
	}
	if !json.Valid([]byte(s)) {
		return nil, errors.New("--payload is not valid JSON")
	}
	p := json.RawMessage(s)
	return &p, nil
}

// retryOf is the retry policy of the --max-attempts and --backoff flags;
// nil when neither is set.
func retryOf(maxAttempts int, backoff string) *models.RetryPolicy {
	if maxAttempts == 0 && backoff == "" {
		return nil
	}
	r := models.RetryPolicy{InitialBackoff: optional(backoff)}
	if maxAttempts != 0 {
		r.MaxAttempts = &maxAttempts
	}
	return &r
}

// jobPages reads the pages of GET /v1/jobs with p, for listPages.
func (a *app) jobPages(p *models.ListJobsParams) func(cursor *string) ([]models.Job, *string, []byte, error) {
	return func(cursor *string) ([]models.Job, *string, []byte, error) {
		p.Cursor = cursor
		r, err := a.api.ListJobsWithResponse(a.ctx, p)
		if err := check(r, err); err != nil {
			return nil, nil, nil, err
		}
		page, err := decoded(r.JSON200)
		return page.Items, page.NextCursor, r.Body, err
	}
}

type jobsListCmd struct {
	State      string `help:"Only jobs in this state: active, paused or completed."`
	Prefix     string `help:"Only jobs whose name starts with this." placeholder:"P"`
	Namespace  string `help:"Only jobs in this namespace." placeholder:"NS"`
	Selector   string `short:"l" help:"Only jobs whose labels match this selector (\"team in (payments,billing),tier!=batch\"; key, !key, =, !=, in and notin as in Kubernetes)." placeholder:"SEL"`
	Handler    string `help:"Only jobs of this handler queue: http, nats, or a custom handler's name." placeholder:"Q"`
	NextAfter  string `name:"next-run-after" help:"Only jobs whose next run is at or after this time (RFC 3339)." placeholder:"TIME"`
	NextBefore string `name:"next-run-before" help:"Only jobs whose next run is before this time (RFC 3339)." placeholder:"TIME"`
	Count      bool   `help:"Also say how many jobs match (counted up to 1,000), on stderr."`
	Limit      int    `help:"Jobs per page (1-500, server default 50)." placeholder:"N"`
	Cursor     string `help:"Continue a listing from a previous page's cursor."`
	All        bool   `help:"Follow every page."`
}

func (c *jobsListCmd) Run(a *app) error {
	p := models.ListJobsParams{
		Namespace:     optional(c.Namespace),
		State:         (*models.JobState)(optional(c.State)),
		Handler:       optional(c.Handler),
		NamePrefix:    optional(c.Prefix),
		Selector:      optional(c.Selector),
		NextRunAfter:  optional(c.NextAfter),
		NextRunBefore: optional(c.NextBefore),
	}
	if c.Limit != 0 {
		p.Limit = &c.Limit
	}
	if c.Count {
		p.Count = &c.Count
	}
	// The first page alone is asked for the count.
	var total models.JobList
	pages := a.jobPages(&p)
	counted := func(cursor *string) ([]models.Job, *string, []byte, error) {
		items, next, raw, err := pages(cursor)
		if err == nil && p.Count != nil {
			p.Count = nil
			err = json.Unmarshal(raw, &total)
		}
		return items, next, raw, err
	}
	items, raw, cursor, err := listPages(c.Cursor, c.All, counted)
	if err != nil {
		return err
	}
	if err := printPage(a, c.All, raw, cursor, "jobs", items, a.jobTable,
		func(items []models.Job) any {
			return models.JobList{Items: items, Total: total.Total, TotalExact: total.TotalExact}
		}); err != nil {
		return err
	}
	if total.Total != nil && !a.json {
		if deref(total.TotalExact) {
			fmt.Fprintf(a.stderr, "%d jobs match\n", *total.Total)
		} else {
			fmt.Fprintf(a.stderr, "at least %d jobs match\n", *total.Total)
		}
	}
	return nil
}

// jobID is a command's job id argument.
type jobID struct {
	ID string `arg:"" help:"Job id." name:"id"`
}

type jobGetCmd struct{ jobID }

func (c *jobGetCmd) Run(a *app) error {
	id, err := parseID(c.ID)
	if err != nil {
		return err
	}
	r, err := a.api.GetJobWithResponse(a.ctx, id)
	if err := check(r, err); err != nil {
		return err
	}
	return a.printJob(r.Body, r.JSON200)
}

// bulkFlags select the jobs of a bulk pause or resume.
type bulkFlags struct {
	ID        string `arg:"" optional:"" help:"Job id; or select jobs with --namespace (and --selector)." name:"id"`
	Namespace string `help:"Every job of this namespace instead of one job (with --selector: those matching it)." placeholder:"NS"`
	Selector  string `short:"l" help:"With --namespace, only jobs whose labels match this selector (\"team=payments\")." placeholder:"SEL"`
}

// bulk runs a bulk pause or resume when the flags select jobs rather
// than name one; done is false when they name one job.
func (f *bulkFlags) bulk(a *app, verb string,
	call func(models.JobSelection) (response, []byte, *models.BulkChange, error)) (done bool, err error) {
	switch {
	case f.ID != "" && (f.Namespace != "" || f.Selector != ""):
		return true, errors.New("give a job id or --namespace (with --selector), not both")
	case f.ID != "":
		return false, nil
	case f.Namespace == "":
		return true, fmt.Errorf("%s needs a job id, or --namespace to %s its jobs", verb, verb)
	}
	r0, raw, res, err := call(models.JobSelection{Namespace: f.Namespace, Selector: optional(f.Selector)})
	if err := check(r0, err); err != nil {
		return true, err
	}
	if a.json {
		return true, a.printRawJSON(raw)
	}
	r, err := decoded(res)
	if err != nil {
		return true, err
	}
	fmt.Fprintf(a.stdout, "%sd %d of %d matching jobs in namespace %s\n", verb, r.Changed, r.Matched, f.Namespace)
	return true, nil
}

// run pauses or resumes (verb) the jobs the flags select with many, or
// the one job they name with one.
func (f *bulkFlags) run(a *app, verb string,
	many func(models.JobSelection) (response, []byte, *models.BulkChange, error),
	one func(uuid.UUID) ([]byte, *models.Job, error)) error {
	if done, err := f.bulk(a, verb, many); done {
		return err
	}
	id, err := parseID(f.ID)
	if err != nil {
		return err
	}
	raw, j, err := one(id)
	if err != nil {
		return err
	}
	return a.printJob(raw, j)
}

type jobPauseCmd struct{ bulkFlags }

func (c *jobPauseCmd) Run(a *app) error {
	return c.run(a, "pause", func(sel models.JobSelection) (response, []byte, *models.BulkChange, error) {
		r, err := a.api.PauseJobsWithResponse(a.ctx, sel)
		if err != nil {
			return nil, nil, nil, err
		}
		return r, r.Body, r.JSON200, nil
	}, a.pause)
}

type jobResumeCmd struct {
	bulkFlags
	CatchUp bool `help:"Apply each job's missed-run policy to the runs of its pause (default: skip them)."`
}

func (c *jobResumeCmd) Run(a *app) error {
	return c.run(a, "resume", func(sel models.JobSelection) (response, []byte, *models.BulkChange, error) {
		r, err := a.api.ResumeJobsWithResponse(a.ctx, models.JobResumeSelection{
			Namespace: sel.Namespace, Selector: sel.Selector, CatchUp: trueOrNil(c.CatchUp)})
		if err != nil {
			return nil, nil, nil, err
		}
		return r, r.Body, r.JSON200, nil
	}, func(id uuid.UUID) ([]byte, *models.Job, error) { return a.resume(id, c.CatchUp) })
}

// pause pauses job id, and returns the answer: its raw JSON, and the job.
func (a *app) pause(id uuid.UUID) ([]byte, *models.Job, error) {
	r, err := a.api.PauseJobWithResponse(a.ctx, id)
	if err := check(r, err); err != nil {
		return nil, nil, err
	}
	return r.Body, r.JSON200, nil
}

// resume resumes job id, with or without catch-up, and returns the
// answer: its raw JSON, and the job.
func (a *app) resume(id uuid.UUID, catchUp bool) ([]byte, *models.Job, error) {
	r, err := a.api.ResumeJobWithResponse(a.ctx, id, models.ResumeOptions{CatchUp: trueOrNil(catchUp)})
	if err := check(r, err); err != nil {
		return nil, nil, err
	}
	return r.Body, r.JSON200, nil
}

type jobRunCmd struct {
	jobID
	idempotency
}

func (c *jobRunCmd) Run(a *app) error {
	id, err := parseID(c.ID)
	if err != nil {
		return err
	}
	r, err := a.api.RunJobWithResponse(a.ctx, id, &models.RunJobParams{IdempotencyKey: c.key()})
	if err := check(r, err); err != nil {
		return err
	}
	return a.printExecution(r.Body, r.JSON202)
}

type jobDeleteCmd struct {
	jobID
	Force bool `help:"Delete it even if other jobs depend on it: it is taken out of their dependencies (each change in the audit trail)."`
}

func (c *jobDeleteCmd) Run(a *app) error {
	id, err := parseID(c.ID)
	if err != nil {
		return err
	}
	var p models.DeleteJobParams
	if c.Force {
		p.Force = &c.Force
	}
	r, err := a.api.DeleteJobWithResponse(a.ctx, id, &p)
	if err := check(r, err); err != nil {
		return err
	}
	if !a.json {
		fmt.Fprintf(a.stdout, "deleted job %s\n", c.ID)
	}
	return nil
}

type execListCmd struct {
	Job           string `help:"Only this job's executions (default: every job's)." placeholder:"ID"`
	State         string `help:"Only executions in one of these states, comma-separated: queued, running, succeeded, failed, cancelled, dead (\"failed,dead\")."`
	Namespace     string `help:"Only executions of this namespace's jobs." placeholder:"NS"`
	Name          string `help:"Only executions of jobs whose name starts with this." placeholder:"PREFIX"`
	Handler       string `help:"Only executions for this handler queue: http, nats, or a custom handler's name." placeholder:"NAME"`
	Since         string `help:"Only executions scheduled at or after this time: RFC 3339, or a duration before now (\"24h\")." placeholder:"TIME"`
	Until         string `help:"Only executions scheduled before this time (RFC 3339, or a duration before now)." placeholder:"TIME"`
	StartedBefore string `help:"Only executions started before this time (RFC 3339, or a duration before now): with --state running, stuck work." placeholder:"TIME"`
	Error         string `help:"Only executions whose error contains this text, in any case." placeholder:"TEXT"`
	Manual        *bool  `help:"Only manual runs (--manual) or only scheduled ones (--manual=false)."`
	Backfill      *bool  `help:"Only backfill runs (--backfill) or none of them (--backfill=false)."`
	Count         bool   `help:"Also print how many executions match (every page)."`
	Limit         int    `help:"Executions per page (1-500, server default 50)." placeholder:"N"`
	Cursor        string `help:"Continue a listing from a previous page's cursor."`
	All           bool   `help:"Follow every page."`
}

// search is the GET /v1/executions query of the flags.
func (c *execListCmd) search() (*models.ListExecutionsParams, error) {
	p := &models.ListExecutionsParams{Namespace: optional(c.Namespace), Job: optional(c.Name),
		Handler: optional(c.Handler), Since: optional(c.Since), Until: optional(c.Until),
		StartedBefore: optional(c.StartedBefore), Error: optional(c.Error), Manual: c.Manual, Backfill: c.Backfill}
	if c.State != "" {
		var states []models.ExecutionState
		for _, st := range strings.Split(c.State, ",") {
			states = append(states, models.ExecutionState(strings.TrimSpace(st)))
		}
		p.State = &states
	}
	if c.Count {
		p.Count = &c.Count
	}
	if c.Job != "" {
		id, err := parseID(c.Job)
		if err != nil {
			return nil, fmt.Errorf("--job: %w", err)
		}
		p.JobId = &id
	}
	return p, nil
}

func (c *execListCmd) Run(a *app) error {
	var limit *int
	if c.Limit != 0 {
		limit = &c.Limit
	}
	params, err := c.search()
	if err != nil {
		return err
	}
	params.Limit = limit
	var total *int64
	// page gets one page of the listing at cursor.
	page := func(cursor *string) ([]models.Execution, *string, []byte, error) {
		params.Cursor = cursor
		r, err := a.api.ListExecutionsWithResponse(a.ctx, params)
		if err := check(r, err); err != nil {
			return nil, nil, nil, err
		}
		l, err := decoded(r.JSON200)
		if err == nil && l.Total != nil {
			total = l.Total
		}
		return l.Items, l.NextCursor, r.Body, err
	}
	items, raw, cursor, err := listPages(c.Cursor, c.All, page)
	if err != nil {
		return err
	}
	err = printPage(a, c.All, raw, cursor, "executions", items, a.executionTable,
		func(items []models.Execution) any { return models.ExecutionList{Items: items, Total: total} })
	if err == nil && !a.json && total != nil {
		fmt.Fprintf(a.stderr, "%d executions match\n", *total)
	}
	return err
}

type execGetCmd struct {
	ID string `arg:"" help:"Execution id." name:"id"`
}

func (c *execGetCmd) Run(a *app) error {
	id, err := parseID(c.ID)
	if err != nil {
		return err
	}
	r, err := a.api.GetExecutionWithResponse(a.ctx, id)
	if err := check(r, err); err != nil {
		return err
	}
	if a.json {
		return a.printRawJSON(r.Body)
	}
	e, err := decoded(r.JSON200)
	if err != nil {
		return err
	}
	a.executionTable([]models.Execution{e})
	if e.Wait != nil {
		fmt.Fprintf(a.stdout, "\nwaiting: %s (%s)\n", e.Wait.Message, e.Wait.Reason)
	}
	a.executionDetails(e)
	if e.AttemptList != nil && len(*e.AttemptList) > 0 {
		fmt.Fprintln(a.stdout)
		a.attemptTable(*e.AttemptList)
	}
	if e.Notes != nil {
		fmt.Fprintln(a.stdout, "\nwhat tock did:")
		for _, n := range *e.Notes {
			fmt.Fprintf(a.stdout, "  %s  %s  %s\n", n.At.UTC().Format(time.RFC3339), n.Kind, n.Note)
		}
	}
	if e.Error != nil {
		fmt.Fprintf(a.stdout, "\nerror: %s\n", *e.Error)
	}
	if e.Output != nil {
		fmt.Fprintf(a.stdout, "\noutput: %s\n", *e.Output)
	}
	return nil
}

type execCancelCmd struct {
	ID string `arg:"" help:"Execution id." name:"id"`
}

func (c *execCancelCmd) Run(a *app) error {
	id, err := parseID(c.ID)
	if err != nil {
		return err
	}
	r, err := a.api.CancelExecutionWithResponse(a.ctx, id)
	if err := check(r, err); err != nil {
		return err
	}
	return a.printExecution(r.Body, r.JSON200)
}

type execRetryCmd struct {
	ID string `arg:"" help:"Execution id." name:"id"`
}

func (c *execRetryCmd) Run(a *app) error {
	id, err := parseID(c.ID)
	if err != nil {
		return err
	}
	r, err := a.api.RetryExecutionWithResponse(a.ctx, id)
	if err := check(r, err); err != nil {
		return err
	}
	return a.printExecution(r.Body, r.JSON202)
}

// optional is s, or nil when s is empty: an unset flag leaves a query
// parameter out.
// trueOrNil is &b when b is true, so that false is left out of a request.
func trueOrNil(b bool) *bool {
	if !b {
		return nil
	}
	return &b
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// listPages gets the page of a listing at cursor, or with all every page
// from there on; page gets one page: its items, the cursor of the next
// and its raw JSON. listPages returns the items, the raw JSON of the last
// page read and the cursor of the page after it ("" at the end).
// printPage prints what listPages read: with -o json the last page's
// answer as the server sent it (with all, every page's items as one
// list), else a table, and on standard error how to get the next page
// when there is one (noun names the items).
func printPage[T any](a *app, all bool, raw []byte, cursor, noun string, items []T, table func([]T), list func([]T) any) error {
	if a.json {
		if all {
			return a.printJSON(list(items))
		}
		return a.printRawJSON(raw)
	}
	table(items)
	if cursor != "" {
		fmt.Fprintf(a.stderr, "more %s: --cursor %s (or --all)\n", noun, cursor)
	}
	return nil
}

func listPages[T any](cursor string, all bool, page func(cursor *string) ([]T, *string, []byte, error)) (items []T, raw []byte, next string, err error) {
	items = []T{} // so that -o json --all prints "items": [] for none
	for {
		var (
			got  []T
			more *string
		)
		if got, more, raw, err = page(optional(cursor)); err != nil {
			return nil, nil, "", err
		}
		items = append(items, got...)
		cursor = deref(more)
		if !all || cursor == "" {
			return items, raw, cursor, nil
		}
	}
}
