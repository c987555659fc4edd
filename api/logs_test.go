package api

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/store/model"
)

// GET /v1/executions/{id}/logs: a page of entries with the gaps, plain
// text with Accept: text/plain, the next page's position; every bad
// parameter a 400 naming it; an unknown execution a 404.
func TestExecutionLogsEndpoint(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	j := e.createJob(jobBody("chatty"))
	x, err := e.store.CreateManualExecution(e.ctx, j.Id, time.Now().UTC())
	if err != nil {
		t.Fatal(err)
	}
	chunk := func(attempt, seq int, offset int64, texts ...string) model.LogChunk {
		c := model.LogChunk{ExecutionID: x.ID, ScheduledFor: x.ScheduledFor, Namespace: x.Namespace, Attempt: attempt, Seq: seq,
			Stream: "stdout", Offset: offset, At: x.ScheduledFor}
		for _, s := range texts {
			c.Lines = append(c.Lines, model.LogLine{At: x.ScheduledFor, Text: s})
			c.Bytes += len(s)
		}
		return c
	}
	end := chunk(1, 3, 40)
	end.End = true
	if _, err := e.store.RecordLogChunks(e.ctx, []model.LogChunk{chunk(1, 1, 0, "one\n", "two\n"), chunk(1, 2, 18, "three\n"), end,
		chunk(2, 1, 0, "again\n")}, time.Minute); err != nil {
		t.Fatal(err)
	}
	base := "/v1/executions/" + x.ID.String() + "/logs"

	r := e.do("GET", base+"?attempt=1&limit=1", nil)
	mustStatus(t, r, http.StatusOK)
	var page models.ExecutionLog
	r.decode(t, &page)
	if len(page.Items) != 2 || deref(page.Items[1].Text) != "two\n" || page.Next == nil || *page.Next != "1.1.8" {
		t.Fatalf("first page %s", r.body)
	}
	r = e.do("GET", base+"?attempt=1&after="+*page.Next, nil)
	mustStatus(t, r, http.StatusOK)
	r.decode(t, &page)
	var kinds []string
	for _, it := range page.Items {
		switch {
		case it.GapBytes != nil:
			kinds = append(kinds, "gap")
		case it.End != nil:
			kinds = append(kinds, "end")
		default:
			kinds = append(kinds, deref(it.Text))
		}
	}
	if want := []string{"gap", "three\n", "gap", "end"}; !slices.Equal(kinds, want) || page.Next != nil ||
		*page.Items[0].GapBytes != 10 || *page.Items[2].GapBytes != 16 {
		t.Errorf("second page %s; want a gap of 10, three, a gap of 16, the end", r.body)
	}

	r = e.doHeaders("GET", base, nil, map[string]string{"Accept": "text/plain"})
	mustStatus(t, r, http.StatusOK)
	want := "one\ntwo\n[tock: 10 bytes not kept]\nthree\n[tock: 16 bytes not kept]\n=== attempt 2 ===\nagain\n"
	if !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain") || string(r.body) != want {
		t.Errorf("as text: %s %q, want %q", r.header.Get("Content-Type"), r.body, want)
	}
	r = e.do("GET", base+"?q=THR", nil)
	r.decode(t, &page)
	if len(page.Items) != 1 || deref(page.Items[0].Text) != "three\n" {
		t.Errorf("search: %s", r.body)
	}

	for _, bad := range []struct{ query, field string }{
		{"attempt=0", "attempt"}, {"stream=a%20b", "stream"}, {"limit=0", "limit"}, {"limit=1001", "limit"},
		{"after=1.2", "after"}, {"after=x.y.z", "after"}, {"q=" + strings.Repeat("q", 257), "q"},
		{"follow=true&q=x", "follow"},
	} {
		r := e.do("GET", base+"?"+bad.query, nil)
		if r.status != http.StatusBadRequest {
			t.Errorf("?%s: %d, want 400", bad.query, r.status)
			continue
		}
		if p := r.problem(t); p.Errors == nil || !slices.ContainsFunc(*p.Errors, func(f models.FieldError) bool { return f.Field == bad.field }) {
			t.Errorf("?%s: %s, want a fault of %s", bad.query, r.body, bad.field)
		}
	}
	r = e.doHeaders("GET", base+"?follow=true", nil, map[string]string{"Last-Event-ID": "nope"})
	if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "Last-Event-ID") {
		t.Errorf("a bad Last-Event-ID: %d %s", r.status, r.body)
	}
	mustStatus(t, e.do("GET", "/v1/executions/"+uuid.NewString()+"/logs", nil), http.StatusNotFound)
}
