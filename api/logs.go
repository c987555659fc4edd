package api

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	json "github.com/segmentio/encoding/json"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/logs"
	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/store/model"
	"github.com/tock-sched/tock/wire"
)

// A follow of an execution's log (GET /v1/executions/{id}/logs?follow=true).
const (
	// followPoll is how often a follow reads the chunks recorded since
	// its last read: a line written is on the wire within about the
	// executor's flush (200 ms), the recorder's batch and this.
	followPoll = 200 * time.Millisecond
	// followQuiet ends a follow of an attempt that is over (the
	// execution moved on) whose log has no end chunk (its executor died)
	// once no chunk came for this long.
	followQuiet = 5 * time.Second
	// logPageDefault is a page's chunks unless limit says otherwise.
	logPageDefault = 200
)

// GetExecutionLogs handles GET /v1/executions/{id}/logs.
func (h *endpoints) GetExecutionLogs(c echo.Context, id models.ID, p models.GetExecutionLogsParams) error {
	var errs fieldErrors
	attempt := deref(p.Attempt)
	if p.Attempt != nil && (attempt < 1 || attempt > 1<<30) {
		errs.add("attempt", "must be an attempt number from 1")
	}
	stream := deref(p.Stream)
	if p.Stream != nil {
		if err := wire.ValidLogStream(stream); err != nil {
			errs.add("stream", "must be 1 to 64 letters, digits, '-', '_' or '.'")
		}
	}
	search := deref(p.Q)
	if len(search) > 256 {
		errs.add("q", "must be at most 256 bytes")
	}
	limit := logPageDefault
	if p.Limit != nil {
		if limit = *p.Limit; limit < 1 || limit > 1000 {
			errs.add("limit", "must be between 1 and 1000")
		}
	}
	var from logs.Position
	if a := deref(p.After); a != "" {
		var err error
		if from, err = logs.ParsePosition(a); err != nil {
			errs.add("after", "%s", err.Error())
		}
	}
	follow := deref(p.Follow)
	if le := strings.TrimSpace(deref(p.LastEventID)); le != "" && follow {
		var err error
		if from, err = logs.ParsePosition(le); err != nil {
			errs.add("Last-Event-ID", "%s", err.Error())
		}
	}
	if follow && (search != "" || stream != "") {
		errs.add("follow", "cannot be combined with q or stream: a follow reads the whole attempt")
	}
	if err := errs.err(); err != nil {
		return err
	}
	ctx := c.Request().Context()
	e, err := h.s.store.GetExecution(ctx, id)
	if err != nil {
		return h.storeError(c, err, "execution", id)
	}
	if follow {
		return h.followLog(c, e, attempt, from)
	}
	f := store.LogFilter{ExecutionID: e.ID, ScheduledFor: e.ScheduledFor, Attempt: attempt, Stream: stream,
		After: [2]int{from.Attempt, from.Seq}, Search: search, Limit: limit, Young: logs.HoleWait}
	chunks, err := h.s.store.ListLogChunks(ctx, f)
	if err != nil {
		return h.storeError(c, err, "execution", id)
	}
	page, held := logs.Assemble(chunks, from, stream == "" && search == "", search, false)
	var out models.ExecutionLog
	out.Items = []models.LogEntry{}
	for _, ch := range page {
		out.Items = append(out.Items, entriesOf(ch.Entries)...)
	}
	if len(page) > 0 && (len(chunks) == limit || held) {
		next := page[len(page)-1].After.String()
		out.Next = &next
	}
	if wantsText(c.Request()) {
		var b strings.Builder
		var entries []logs.Entry
		for _, ch := range page {
			entries = append(entries, ch.Entries...)
		}
		logs.Text(&b, entries, from.Attempt)
		if out.Next != nil {
			c.Response().Header().Set("Tock-Log-Next", *out.Next)
		}
		return c.Blob(http.StatusOK, "text/plain; charset=utf-8", []byte(b.String()))
	}
	return c.JSON(http.StatusOK, out)
}

// wantsText reports whether the request's Accept prefers text/plain to
// JSON.
func wantsText(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt := strings.TrimSpace(strings.SplitN(part, ";", 2)[0])
		switch mt {
		case "text/plain":
			return true
		case "application/json", "application/problem+json", "*/*":
			return false
		}
	}
	return false
}

func entriesOf(es []logs.Entry) []models.LogEntry {
	out := make([]models.LogEntry, 0, len(es))
	for _, e := range es {
		le := models.LogEntry{Attempt: e.Attempt, Seq: e.Seq, Stream: e.Stream}
		if !e.At.IsZero() {
			at := e.At
			le.At = &at
		}
		if e.Text != "" {
			t := e.Text
			le.Text = &t
		}
		if e.Split {
			le.Split = &e.Split
		}
		if e.GapBytes > 0 {
			g := e.GapBytes
			le.GapBytes = &g
		}
		if e.End {
			le.End = &e.End
		}
		out = append(out, le)
	}
	return out
}

// followLog streams the log of e's attempt (attempt, or its current one)
// as server-sent events from from, until the attempt's log ends.
func (h *endpoints) followLog(c echo.Context, e *model.Execution, attempt int, from logs.Position) error {
	if attempt == 0 {
		attempt = max(from.Attempt, e.Attempts, 1)
	}
	if from.Attempt != attempt {
		from = logs.Position{Attempt: attempt}
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), watchMaxDuration)
	defer cancel()
	res := c.Response()
	res.Header().Set(echo.HeaderContentType, "text/event-stream")
	res.Header().Set(echo.HeaderCacheControl, "no-cache")
	res.Header().Set("X-Accel-Buffering", "no")
	res.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(res)
	write := func(s string) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(watchWriteTimeout))
		if _, err := res.Write([]byte(s)); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !write("retry: 2000\n\n") {
		return nil
	}
	end := func(reason string) error {
		write("event: end\ndata: {\"attempt\":" + strconv.Itoa(attempt) + ",\"reason\":\"" + reason + "\"}\n\n")
		return nil
	}
	tick := time.NewTicker(followPoll)
	defer tick.Stop()
	lastNew, lastBeat := time.Now(), time.Now()
	for {
		chunks, err := h.s.store.ListLogChunks(ctx, store.LogFilter{ExecutionID: e.ID, ScheduledFor: e.ScheduledFor,
			Attempt: attempt, After: [2]int{from.Attempt, from.Seq}, Limit: 200, Young: logs.HoleWait})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			h.s.log.WarnContext(ctx, "follow an execution's log", "execution_id", e.ID, "err", err)
			return end("unavailable")
		}
		page, _ := logs.Assemble(chunks, from, true, "", true)
		for _, ch := range page {
			data, err := json.Marshal(models.ExecutionLog{Items: entriesOf(ch.Entries)})
			if err != nil {
				return h.internal(c, err)
			}
			if !write("id: " + ch.After.String() + "\nevent: log\ndata: " + string(data) + "\n\n") {
				return nil
			}
			from, lastNew, lastBeat = ch.After, time.Now(), time.Now()
			if n := len(ch.Entries); n > 0 && ch.Entries[n-1].End {
				return end("complete")
			}
		}
		if len(page) == 0 && time.Since(lastNew) > followQuiet {
			// No end chunk: is the attempt over?
			cur, err := h.s.store.GetExecution(ctx, e.ID)
			if err == nil && attemptOver(cur, attempt) {
				return end("attempt over")
			}
		}
		if time.Since(lastBeat) > watchHeartbeat {
			if !write(": keepalive\n\n") {
				return nil
			}
			lastBeat = time.Now()
		}
		if len(page) < 200 {
			select {
			case <-ctx.Done():
				return nil
			case <-tick.C:
			}
		}
	}
}

// attemptOver reports whether e has moved past attempt: a later attempt
// began, or the execution ended, or it waits for its next attempt.
func attemptOver(e *model.Execution, attempt int) bool {
	return e.Attempts > attempt || e.State.Final() || (e.Attempts == attempt && e.State != domain.ExecRunning)
}
