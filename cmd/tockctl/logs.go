package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/client"
)

type execLogsCmd struct {
	ID      string `arg:"" help:"Execution id." name:"id"`
	Follow  bool   `short:"f" help:"Follow the attempt's log live until it ends (the current attempt, or --attempt)."`
	Attempt int    `help:"Only this attempt (from 1)." placeholder:"N"`
	Stream  string `help:"Only this stream (stdout, stderr, or a handler's own name)." placeholder:"NAME"`
	Grep    string `short:"q" help:"Only lines containing this text (any case)." placeholder:"TEXT"`
}

// Run prints an execution's log (GET /v1/executions/{id}/logs): the text
// as it was written, a gap as "[tock: N bytes not kept]", each attempt
// after the first headed "=== attempt N ===". With -o json, each page's
// JSON (each chunk's, with --follow). --follow reconnects from the last
// chunk it printed when the stream breaks, and returns when the log
// ends.
func (c *execLogsCmd) Run(a *app) error {
	id, err := parseID(c.ID)
	if err != nil {
		return err
	}
	if c.Attempt < 0 {
		return fmt.Errorf("--attempt %d: want an attempt number from 1", c.Attempt)
	}
	var p models.GetExecutionLogsParams
	if c.Attempt > 0 {
		p.Attempt = &c.Attempt
	}
	p.Stream, p.Q = optional(c.Stream), optional(c.Grep)
	w := &logPrinter{a: a}
	if c.Follow {
		return c.follow(a, id, p, w)
	}
	for {
		r, err := a.api.GetExecutionLogsWithResponse(a.ctx, id, &p)
		if err := check(r, err); err != nil {
			return err
		}
		if a.json {
			if err := a.printRawJSON(r.Body); err != nil {
				return err
			}
		} else if page, err := decoded(r.JSON200); err != nil {
			return err
		} else {
			w.print(page.Items)
		}
		if r.JSON200 == nil || r.JSON200.Next == nil {
			return nil
		}
		p.After = r.JSON200.Next
	}
}

// follow reads the log's event stream, reconnecting after the last event
// printed, until the server says it ended.
func (c *execLogsCmd) follow(a *app, id models.ID, p models.GetExecutionLogsParams, w *logPrinter) error {
	t := true
	p.Follow = &t
	for {
		done, err := c.stream(a, id, p, w)
		if done || a.ctx.Err() != nil {
			return nil
		}
		var pe *problemError
		if errors.As(err, &pe) {
			return err
		}
		if err != nil {
			fmt.Fprintf(a.stderr, "tockctl: %v; reconnecting\n", err)
			time.Sleep(time.Second)
		}
		if w.lastID != "" {
			p.LastEventID = &w.lastID
		}
		if p.Attempt == nil && w.attempt > 0 {
			at := w.attempt
			p.Attempt = &at // the attempt being followed, even if another began meanwhile
		}
	}
}

// stream reads one connection; done reports the end event.
func (c *execLogsCmd) stream(a *app, id models.ID, p models.GetExecutionLogsParams, w *logPrinter) (done bool, err error) {
	res, err := a.stream.ClientInterface.GetExecutionLogs(a.ctx, id, &p, func(_ context.Context, req *http.Request) error {
		req.Header.Set("Accept", "text/event-stream")
		return nil
	})
	if err != nil {
		return false, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return false, check(client.ParseGetExecutionLogsResponse(res))
	}
	var decodeErr error
	err = readEvents(res.Body, func(event, id, data string) bool {
		switch event {
		case "log":
			if a.json {
				fmt.Fprintln(a.stdout, data)
			} else {
				var page models.ExecutionLog
				if err := json.Unmarshal([]byte(data), &page); err != nil {
					decodeErr = fmt.Errorf("a log event that does not decode: %w", err)
					return false
				}
				w.print(page.Items)
			}
			if id != "" {
				w.lastID = id
			}
		case "end":
			done = true
			return false
		}
		return true
	})
	if decodeErr != nil {
		return false, decodeErr
	}
	if done {
		return true, nil
	}
	return false, err // nil: the server ended the stream early: reconnect
}

// logPrinter prints log entries as text.
type logPrinter struct {
	a       *app
	attempt int    // of the last entry printed
	lastID  string // the id of the last event printed (a follow)
	midLine bool   // the last text printed did not end its line
}

func (w *logPrinter) print(items []models.LogEntry) {
	out := w.a.stdout
	for _, e := range items {
		if e.Attempt != w.attempt {
			if w.attempt != 0 {
				if w.midLine {
					fmt.Fprintln(out)
				}
				fmt.Fprintf(out, "=== attempt %d ===\n", e.Attempt)
				w.midLine = false
			}
			w.attempt = e.Attempt
		}
		switch {
		case e.GapBytes != nil:
			if w.midLine {
				fmt.Fprintln(out)
			}
			fmt.Fprintf(out, "[tock: %d bytes not kept]\n", *e.GapBytes)
			w.midLine = false
		case e.Text != nil:
			io.WriteString(out, *e.Text)
			w.midLine = !strings.HasSuffix(*e.Text, "\n")
		}
	}
}
