package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/client"
)

type execWatchCmd struct {
	Namespace string `help:"The namespace to watch (default: the key's own)." placeholder:"NS"`
	Job       string `help:"Only this job's executions and changes." placeholder:"ID"`
	Kind      string `enum:"execution,job," default:"" help:"Only changes of this kind: execution or job (default both)."`

	headed bool // the table's header is out: once, when the first stream opens
}

// Run prints each change of GET /v1/changes as a line (or, with -o
// json, its JSON), reconnecting from the last change it printed when the
// stream ends (every 10 minutes, or when the server goes away), until
// the command is interrupted. When the server says changes were missed,
// it says so on stderr and goes on from now.
func (c *execWatchCmd) Run(a *app) error {
	var p models.WatchChangesParams
	p.Namespace = optional(c.Namespace)
	if c.Job != "" {
		id, err := uuid.Parse(c.Job)
		if err != nil {
			return fmt.Errorf("--job %q: not a job id (a UUID)", c.Job)
		}
		p.JobId = &id
	}
	if c.Kind != "" {
		k := models.WatchChangesParamsKind(c.Kind)
		p.Kind = &k
	}
	lastID := ""
	for {
		next, err := c.stream(a, p, lastID)
		if a.ctx.Err() != nil {
			return nil // interrupted: the way a watch ends
		}
		var pe *problemError
		if errors.As(err, &pe) {
			return err // refused (a bad flag, a key that may not): retrying will not help
		}
		if err != nil {
			fmt.Fprintf(a.stderr, "tockctl: %v; reconnecting\n", err)
			time.Sleep(2 * time.Second)
		}
		lastID = next
	}
}

// stream reads one connection of the stream and returns the id to
// resume after ("" after a resync).
func (c *execWatchCmd) stream(a *app, p models.WatchChangesParams, lastID string) (string, error) {
	if lastID != "" {
		p.LastEventID = &lastID
	}
	res, err := a.stream.ClientInterface.WatchChanges(a.ctx, &p, func(_ context.Context, req *http.Request) error {
		req.Header.Set("Accept", "text/event-stream")
		return nil
	})
	if err != nil {
		return lastID, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		// A refusal is a problem like any other command's.
		return lastID, check(client.ParseWatchChangesResponse(res))
	}
	if !a.json && !c.headed {
		fmt.Fprintln(a.stdout, "AT                        KIND       STATE      ATTEMPT  JOB                                   EXECUTION")
		c.headed = true
	}
	err = readEvents(res.Body, func(event, id, data string) bool {
		switch event {
		case "resync":
			fmt.Fprintln(a.stderr, "tockctl: changes were missed (the watch fell behind, or was away too long); list executions to catch up. Watching from now.")
			lastID = ""
		case "execution", "job":
			c.print(a, data)
		}
		if id != "" {
			lastID = id
		}
		return true
	})
	if err != nil && a.ctx.Err() == nil {
		return lastID, err
	}
	return lastID, nil // the server ended the stream: reconnect
}

// readEvents reads a stream of server-sent events (one data line each, as
// tock's streams send them), calling fn with each event's type, id ("" if
// it has none) and data, until the stream ends or fn returns false.
// Comments (": keepalive") are skipped.
func readEvents(r io.Reader, fn func(event, id, data string) bool) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var id, event, data string
	for sc.Scan() {
		field, value, _ := strings.Cut(sc.Text(), ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			id = value
		case "event":
			event = value
		case "data":
			data = value
		case "":
			if sc.Text() != "" {
				continue // a comment
			}
			if !fn(event, id, data) {
				return nil
			}
			id, event, data = "", "", ""
		}
	}
	return sc.Err()
}

func (c *execWatchCmd) print(a *app, data string) {
	if a.json {
		fmt.Fprintln(a.stdout, data)
		return
	}
	var ch change
	if err := json.Unmarshal([]byte(data), &ch); err != nil {
		return
	}
	attempt := "-"
	if ch.Attempt > 0 {
		attempt = fmt.Sprint(ch.Attempt)
	}
	fmt.Fprintf(a.stdout, "%-25s %-10s %-10s %-8s %-37s %s\n", ch.At.UTC().Format("2006-01-02T15:04:05.000Z"), ch.Kind,
		orDash(ch.State), attempt, orDash(ch.JobID), orDash(ch.ExecutionID))
}

// change is the data of an event of GET /v1/changes (a stream, which
// the generated models do not cover).
type change struct {
	Kind        string    `json:"kind"`
	Namespace   string    `json:"namespace"`
	JobID       string    `json:"job_id"`
	ExecutionID string    `json:"execution_id"`
	State       string    `json:"state"`
	Attempt     int       `json:"attempt"`
	At          time.Time `json:"at"`
}
