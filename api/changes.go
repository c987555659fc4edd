package api

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	json "github.com/segmentio/encoding/json"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/changes"
	"github.com/tock-sched/tock/jobs"
	"github.com/tock-sched/tock/store/model"
)

// The change stream's bounds, per connection.
const (
	// watchBuffer is how many batches of changes a connection may fall
	// behind (Config.ChangeBuffer) before it is told to resync and
	// closed: a slow client never holds up the feed or anyone else.
	watchBuffer = 256
	// watchHeartbeat is how often an idle stream sends a comment, so that
	// proxies keep it open and a dead client is noticed.
	watchHeartbeat = 15 * time.Second
	// watchMaxDuration ends every stream after this long; the client
	// reconnects with Last-Event-ID (EventSource does so by itself) and is
	// authenticated again, so that a deleted key or an expired token stops
	// watching within this time.
	watchMaxDuration = 10 * time.Minute
	// watchWriteTimeout bounds each write to the client.
	watchWriteTimeout = 10 * time.Second
)

// WatchChanges handles GET /v1/changes: the change feed as server-sent
// events, from now on or, with Last-Event-ID, from after that event.
func (h *endpoints) WatchChanges(c echo.Context, p models.WatchChangesParams) error {
	// The parameters are checked before NATS is asked: the namespace
	// goes into the consumer's subject filter, where a space or a
	// wildcard is an error of NATS's, and a few KiB of text exceed its
	// control line and cost the server its connection. Bad input is the
	// caller's 400, never a 503.
	ns, err := h.s.listNamespace(c, "watchChanges", deref(p.Namespace))
	if err != nil {
		return err
	}
	var errs fieldErrors
	if ns != "" {
		if msg := jobs.NameProblem(ns); msg != "" {
			errs.add("namespace", "%s", msg)
		}
	}
	if k := deref(p.Kind); k != "" && !k.Valid() {
		errs.add("kind", "must be one of execution, job")
	}
	var after uint64
	if id := strings.TrimSpace(deref(p.LastEventID)); id != "" {
		if after, err = strconv.ParseUint(id, 10, 64); err != nil || after == 0 {
			errs.add("Last-Event-ID", "must be the id of an event of this stream (a positive integer)")
		}
	}
	if err := errs.err(); err != nil {
		return err
	}
	if h.s.changes == nil {
		return newProblem(http.StatusServiceUnavailable, ProblemUnavailable, "Change feed unavailable",
			"This server has no NATS connection.")
	}
	var namespaces []string
	if ns != "" {
		namespaces = []string{ns}
	}
	keep := changeFilter(p)

	ctx, cancel := context.WithTimeout(c.Request().Context(), watchMaxDuration)
	defer cancel()
	resync := ""
	w, err := h.s.changes.Watch(ctx, namespaces, after, h.s.changeBuffer)
	if errors.Is(err, changes.ErrExpired) {
		resync = "expired"
		w, err = h.s.changes.Watch(ctx, namespaces, 0, h.s.changeBuffer)
	}
	if err != nil {
		h.s.log.WarnContext(ctx, "watch the change feed", "err", err)
		return newProblem(http.StatusServiceUnavailable, ProblemUnavailable, "Change feed unavailable",
			"NATS did not answer; try again shortly.")
	}
	defer w.Stop()

	res := c.Response()
	res.Header().Set(echo.HeaderContentType, "text/event-stream")
	res.Header().Set(echo.HeaderCacheControl, "no-cache")
	res.Header().Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	res.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(res)
	write := func(s string) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(watchWriteTimeout))
		if _, err := io.WriteString(res, s); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	// EventSource waits this long before it reconnects.
	if !write("retry: 2000\n\n") {
		return nil
	}
	if resync != "" && !write(resyncEvent(resync)) {
		return nil
	}
	beat := time.NewTicker(watchHeartbeat)
	defer beat.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-w.Behind():
			write(resyncEvent("behind"))
			return nil
		case b := <-w.Batches():
			if text := batchEvents(b, keep); text != "" && !write(text) {
				return nil
			}
		case <-beat.C:
			if !write(": keepalive\n\n") {
				return nil
			}
		}
	}
}

// changeFilter keeps the changes p asks for: of one job, of one kind.
func changeFilter(p models.WatchChangesParams) func(*changes.Change) bool {
	job := ""
	if p.JobId != nil {
		job = p.JobId.String()
	}
	kind := changes.Kind(deref((*string)(p.Kind)))
	return func(ch *changes.Change) bool {
		// A change of many jobs (no job id) concerns a watcher of one job too.
		return (job == "" || ch.JobID == job || ch.JobID == "") && (kind == "" || ch.Kind == kind)
	}
}

// batchEvents writes the changes of b that keep keeps as events, one per
// change, the last carrying the batch's position as its id; "" if none.
func batchEvents(b changes.Batch, keep func(*changes.Change) bool) string {
	var sb strings.Builder
	last := -1
	for i := range b.Changes {
		if keep(&b.Changes[i]) {
			last = i
		}
	}
	for i := range b.Changes {
		ch := &b.Changes[i]
		if !keep(ch) {
			continue
		}
		data, err := json.Marshal(ch)
		if err != nil {
			continue
		}
		if i == last {
			sb.WriteString("id: " + strconv.FormatUint(b.Seq, 10) + "\n")
		}
		sb.WriteString("event: " + string(ch.Kind) + "\ndata: ")
		sb.Write(data)
		sb.WriteString("\n\n")
	}
	return sb.String()
}

// resyncEvent tells the client that it missed changes: reload the
// lists, then watch again without Last-Event-ID.
func resyncEvent(reason string) string {
	return `event: resync` + "\n" + `data: {"reason":"` + reason + `"}` + "\n\n"
}

// jobChanged publishes j's state to the change feed.
func (s *Server) jobChanged(j *model.Job) {
	s.changes.Publish(changes.Change{Kind: changes.KindJob, Namespace: j.Namespace, JobID: j.ID.String(),
		State: string(j.State), At: time.Now().UTC()})
}

// executionChanged publishes e's state to the change feed.
func (s *Server) executionChanged(e *model.Execution) {
	s.changes.Publish(changes.Change{Kind: changes.KindExecution, Namespace: e.Namespace, JobID: e.JobID.String(),
		ExecutionID: e.ID.String(), State: string(e.State), Attempt: e.Attempts, At: time.Now().UTC()})
}
