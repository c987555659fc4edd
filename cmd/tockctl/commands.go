package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/tock-sched/tock/api"
)

type jobsCreateCmd struct {
	// File is in both required groups, so that it stands in for --name
	// and a handler, and kong refuses it together with either.
	File string `short:"f" required:"" xor:"name,handler" help:"Create the jobs of this JSON Lines file instead, one job per line as POST /v1/jobs takes it (\"-\": standard input); sent ${max_batch} per request to POST /v1/jobs:batch. Failures are reported by line; the exit code is 1 if any job was not created." placeholder:"FILE"`

	Name      string `required:"" xor:"name" help:"Job name, unique in its namespace." placeholder:"NAME"`
	Namespace string `help:"Namespace (the server's default is \"default\")." placeholder:"NS"`

	Cron string `help:"Cron expression, seconds first (\"0 30 9 * * MON-FRI\")." xor:"schedule" group:"Schedule (one of; default --now)" placeholder:"EXPR"`
	TZ   string `name:"tz" help:"IANA time zone of --cron (default UTC)." group:"Schedule (one of; default --now)" placeholder:"ZONE"`
	At   string `help:"Run once at this RFC 3339 time." xor:"schedule" group:"Schedule (one of; default --now)" placeholder:"TIME"`
	In   string `help:"Run once after this delay (\"90s\")." xor:"schedule" group:"Schedule (one of; default --now)" placeholder:"DUR"`
	Now  bool   `help:"Run once, now." xor:"schedule" group:"Schedule (one of; default --now)"`

	HTTP      string            `name:"http" help:"Send an HTTP request to this URL." xor:"handler" required:"" group:"Handler (one of)" placeholder:"URL"`
	Method    string            `help:"HTTP method for --http (default POST)." group:"Handler (one of)" placeholder:"METHOD"`
	Header    map[string]string `help:"HTTP header for --http, NAME=VALUE (repeatable)." group:"Handler (one of)"`
	NATS      string            `name:"nats" help:"Publish to this NATS subject." xor:"handler" required:"" group:"Handler (one of)" placeholder:"SUBJECT"`
	WaitReply bool              `help:"With --nats, wait for a reply." group:"Handler (one of)"`
	Custom    string            `help:"Hand executions to the custom executors serving this name." xor:"handler" required:"" group:"Handler (one of)" placeholder:"NAME"`

	Payload     string `help:"JSON payload handed to the handler." placeholder:"JSON"`
	Timeout     string `help:"Longest an attempt may run (\"30s\")." placeholder:"DUR"`
	MaxAttempts int    `help:"Attempts before an execution is dead (default: the cluster's, 3 unless tockd says otherwise)." placeholder:"N"`
	Backoff     string `help:"Delay before the second attempt (\"1s\"; later ones grow by the cluster's multiplier)." placeholder:"DUR"`
	Priority    string `help:"Priority class: high, normal or low (default normal)." placeholder:"CLASS"`
}

// singleJobFlags reports the flags of a single job that are set, which
// -f does not take.
func (c *jobsCreateCmd) singleJobFlags() []string {
	var set []string
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"--namespace", c.Namespace != ""}, {"--cron", c.Cron != ""}, {"--tz", c.TZ != ""}, {"--at", c.At != ""},
		{"--in", c.In != ""}, {"--now", c.Now}, {"--method", c.Method != ""}, {"--header", len(c.Header) > 0},
		{"--wait-reply", c.WaitReply}, {"--payload", c.Payload != ""}, {"--timeout", c.Timeout != ""},
		{"--max-attempts", c.MaxAttempts != 0}, {"--backoff", c.Backoff != ""}, {"--priority", c.Priority != ""},
	} {
		if f.set {
			set = append(set, f.name)
		}
	}
	return set
}

func (c *jobsCreateCmd) Run(a *app) error {
	if c.File != "" {
		if set := c.singleJobFlags(); len(set) > 0 {
			return fmt.Errorf("%s cannot be used with --file: each line of the file is a whole job", strings.Join(set, ", "))
		}
		return c.createFromFile(a)
	}
	body := map[string]any{"name": c.Name}
	if c.Namespace != "" {
		body["namespace"] = c.Namespace
	}
	if c.TZ != "" && c.Cron == "" {
		return errors.New("--tz needs --cron")
	}
	switch {
	case c.Cron != "":
		s := map[string]any{"cron": c.Cron}
		if c.TZ != "" {
			s["timezone"] = c.TZ
		}
		body["schedule"] = s
	case c.At != "":
		body["schedule"] = map[string]any{"at": c.At}
	case c.In != "":
		body["schedule"] = map[string]any{"in": c.In}
	}
	if c.HTTP == "" && (c.Method != "" || len(c.Header) > 0) {
		return errors.New("--method and --header need --http")
	}
	if c.NATS == "" && c.WaitReply {
		return errors.New("--wait-reply needs --nats")
	}
	switch {
	case c.HTTP != "":
		h := map[string]any{"type": "http", "url": c.HTTP}
		if c.Method != "" {
			h["method"] = c.Method
		}
		if len(c.Header) > 0 {
			h["headers"] = c.Header
		}
		body["handler"] = h
	case c.NATS != "":
		h := map[string]any{"type": "nats", "subject": c.NATS}
		if c.WaitReply {
			h["wait_reply"] = true
		}
		body["handler"] = h
	case c.Custom != "":
		body["handler"] = map[string]any{"type": "custom", "name": c.Custom}
	}
	if c.Payload != "" {
		if !json.Valid([]byte(c.Payload)) {
			return errors.New("--payload is not valid JSON")
		}
		body["payload"] = json.RawMessage(c.Payload)
	}
	if c.Timeout != "" {
		body["timeout"] = c.Timeout
	}
	retry := map[string]any{}
	if c.MaxAttempts != 0 {
		retry["max_attempts"] = c.MaxAttempts
	}
	if c.Backoff != "" {
		retry["initial_backoff"] = c.Backoff
	}
	if len(retry) > 0 {
		body["retry"] = retry
	}
	if c.Priority != "" {
		body["priority"] = c.Priority
	}
	var j api.Job
	raw, err := a.client.call(a.ctx, "POST", "/v1/jobs", nil, body, &j)
	if err != nil {
		return err
	}
	return a.printJobs(raw, j)
}

type jobsListCmd struct {
	State     string `help:"Only jobs in this state: active, paused or completed."`
	Prefix    string `help:"Only jobs whose name starts with this." placeholder:"P"`
	Namespace string `help:"Only jobs in this namespace." placeholder:"NS"`
	Limit     int    `help:"Jobs per page (1-500, server default 50)." placeholder:"N"`
	Cursor    string `help:"Continue a listing from a previous page's cursor."`
	All       bool   `help:"Follow every page."`
}

func (c *jobsListCmd) Run(a *app) error {
	q := url.Values{}
	setQuery(q, "state", c.State)
	setQuery(q, "name_prefix", c.Prefix)
	setQuery(q, "namespace", c.Namespace)
	if c.Limit != 0 {
		q.Set("limit", strconv.Itoa(c.Limit))
	}
	items, raw, cursor, err := listPages[api.Job](a, "/v1/jobs", q, c.Cursor, c.All)
	if err != nil {
		return err
	}
	if a.json {
		if c.All {
			return a.printJSON(api.JobList{Items: items})
		}
		return a.printRawJSON(raw)
	}
	a.jobTable(items)
	if cursor != "" {
		fmt.Fprintf(a.stderr, "more jobs: --cursor %s (or --all)\n", cursor)
	}
	return nil
}

// jobID is a command's job id argument.
type jobID struct {
	ID string `arg:"" help:"Job id." name:"id"`
}

type jobGetCmd struct{ jobID }

func (c *jobGetCmd) Run(a *app) error { return a.jobAction("GET", c.ID, "") }

type jobPauseCmd struct{ jobID }

func (c *jobPauseCmd) Run(a *app) error { return a.jobAction("POST", c.ID, "/pause") }

type jobResumeCmd struct{ jobID }

func (c *jobResumeCmd) Run(a *app) error { return a.jobAction("POST", c.ID, "/resume") }

// jobAction calls an endpoint that answers with the job, and prints it.
func (a *app) jobAction(method, id, suffix string) error {
	var j api.Job
	raw, err := a.client.call(a.ctx, method, "/v1/jobs/"+url.PathEscape(id)+suffix, nil, nil, &j)
	if err != nil {
		return err
	}
	return a.printJobs(raw, j)
}

type jobRunCmd struct{ jobID }

func (c *jobRunCmd) Run(a *app) error {
	return a.execAction("/v1/jobs/" + url.PathEscape(c.ID) + "/run")
}

type jobDeleteCmd struct{ jobID }

func (c *jobDeleteCmd) Run(a *app) error {
	if _, err := a.client.call(a.ctx, "DELETE", "/v1/jobs/"+url.PathEscape(c.ID), nil, nil, nil); err != nil {
		return err
	}
	if !a.json {
		fmt.Fprintf(a.stdout, "deleted job %s\n", c.ID)
	}
	return nil
}

type execListCmd struct {
	Job    string `help:"Only this job's executions (default: every job's)." placeholder:"ID"`
	State  string `help:"Only executions in this state: queued, running, succeeded, failed, cancelled or dead."`
	Limit  int    `help:"Executions per page (1-500, server default 50)." placeholder:"N"`
	Cursor string `help:"Continue a listing from a previous page's cursor."`
	All    bool   `help:"Follow every page."`
}

func (c *execListCmd) Run(a *app) error {
	q := url.Values{}
	setQuery(q, "state", c.State)
	if c.Limit != 0 {
		q.Set("limit", strconv.Itoa(c.Limit))
	}
	path := "/v1/executions"
	if c.Job != "" {
		path = "/v1/jobs/" + url.PathEscape(c.Job) + "/executions"
	}
	items, raw, cursor, err := listPages[api.Execution](a, path, q, c.Cursor, c.All)
	if err != nil {
		return err
	}
	if a.json {
		if c.All {
			return a.printJSON(api.ExecutionList{Items: items})
		}
		return a.printRawJSON(raw)
	}
	a.executionTable(items)
	if cursor != "" {
		fmt.Fprintf(a.stderr, "more executions: --cursor %s (or --all)\n", cursor)
	}
	return nil
}

type execGetCmd struct {
	ID string `arg:"" help:"Execution id." name:"id"`
}

func (c *execGetCmd) Run(a *app) error {
	var e api.Execution
	raw, err := a.client.call(a.ctx, "GET", "/v1/executions/"+url.PathEscape(c.ID), nil, nil, &e)
	if err != nil {
		return err
	}
	if a.json {
		return a.printRawJSON(raw)
	}
	a.executionTable([]api.Execution{e})
	if e.AttemptList != nil && len(*e.AttemptList) > 0 {
		fmt.Fprintln(a.stdout)
		a.attemptTable(*e.AttemptList)
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
	return a.execAction("/v1/executions/" + url.PathEscape(c.ID) + "/cancel")
}

type execRetryCmd struct {
	ID string `arg:"" help:"Execution id." name:"id"`
}

func (c *execRetryCmd) Run(a *app) error {
	return a.execAction("/v1/executions/" + url.PathEscape(c.ID) + "/retry")
}

// execAction POSTs to an endpoint that answers with an execution (run,
// cancel, retry), and prints it.
func (a *app) execAction(path string) error {
	var e api.Execution
	raw, err := a.client.call(a.ctx, "POST", path, nil, nil, &e)
	if err != nil {
		return err
	}
	if a.json {
		return a.printRawJSON(raw)
	}
	a.executionTable([]api.Execution{e})
	return nil
}

func setQuery(q url.Values, k, v string) {
	if v == "" {
		q.Del(k)
		return
	}
	q.Set(k, v)
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// listPages gets the page of a listing at cursor, or with all every page
// from there on. It returns the items, the raw JSON of the last page read
// and the cursor of the page after it ("" at the end).
func listPages[T any](a *app, path string, q url.Values, cursor string, all bool) (items []T, raw []byte, next string, err error) {
	for {
		setQuery(q, "cursor", cursor)
		var page struct {
			Items      []T     `json:"items"`
			NextCursor *string `json:"next_cursor"`
		}
		if raw, err = a.client.call(a.ctx, "GET", path, q, nil, &page); err != nil {
			return nil, nil, "", err
		}
		items = append(items, page.Items...)
		cursor = deref(page.NextCursor)
		if !all || cursor == "" {
			return items, raw, cursor, nil
		}
	}
}
