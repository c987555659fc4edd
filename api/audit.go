package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/auth"
	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/store/model"
)

// The audit trail: every change made through the API (the operations
// with a role of operator or more that are not GETs) is written to the
// audit_log table once it has succeeded: who (the key), the action, the
// namespace, the resource, and the resource before and after as the API
// shows it, so with secret values masked (a notification channel's
// secret is never in it); a created key's secret is left out. Entries
// are written after the change commits, by the node that made it: a node
// that dies between the two loses the entry.

// bulk are the changes by selector: their audit entry records the
// selection from the request's body.
var bulk = map[string]bool{"pauseJobs": true, "resumeJobs": true}

// audited writes the audit entries of a successful change by op.
func (s *Server) audited(op string, p permission) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			req := c.Request()
			var body []byte // the selection of a bulk change, its only entry's record of what it changed
			if bulk[op] {
				var err error
				if body, err = io.ReadAll(http.MaxBytesReader(c.Response(), req.Body, maxBodyBytes)); err != nil {
					return newProblem(http.StatusRequestEntityTooLarge, ProblemTooLarge, "Request body too large", err.Error())
				}
				req.Body = io.NopCloser(bytes.NewReader(body))
			}
			before, ns, resource := s.auditBefore(c, op, p.Scope)
			rec := &responseCopy{ResponseWriter: c.Response().Writer}
			c.Response().Writer = rec
			if err := next(c); err != nil {
				c.Error(err) // into rec, so that the status is known
			}
			res := c.Response()
			if res.Status < 200 || res.Status > 299 || res.Header().Get(ReplayedHeader) != "" {
				return nil
			}
			entries := auditEntries(op, p, principal(c).Subject, body, rec.body.Bytes(), before, ns, resource, c.Param("namespace"))
			ctx := context.WithoutCancel(req.Context())
			if err := s.store.CreateAuditEntries(ctx, entries); err != nil {
				s.log.ErrorContext(ctx, "audit entry not written", "action", p.Action, "path", req.URL.Path, "err", err)
			}
			return nil
		}
	}
}

// auditBefore reads the resource a change of scope applies to: its API
// form, namespace and name; nil before when there is none to read.
func (s *Server) auditBefore(c echo.Context, op, scope string) (before json.RawMessage, ns, resource string) {
	ctx := c.Request().Context()
	id := strings.TrimSpace(c.Param("id"))
	if op == "putCalendar" || op == "deleteCalendar" {
		ns := namespaceOrDefault(c.QueryParam("namespace"))
		if cal, err := s.store.GetCalendar(ctx, ns, c.Param("name")); err == nil {
			b, _ := json.Marshal(calendarOf(cal, nil))
			return b, ns, "calendar " + cal.Name
		}
		return nil, ns, "calendar " + c.Param("name")
	}
	switch scope {
	case "job":
		u, err := uuid.Parse(id)
		if err != nil {
			return nil, "", ""
		}
		if j, err := s.store.GetJob(ctx, u); err == nil {
			b, _ := json.Marshal(jobOf(j))
			return b, j.Namespace, "job " + u.String()
		}
	case "execution":
		u, err := uuid.Parse(id)
		if err != nil {
			return nil, "", ""
		}
		if e, err := s.store.GetExecution(ctx, u); err == nil {
			b, _ := json.Marshal(executionOf(e, false))
			return b, e.Namespace, "execution " + u.String()
		}
	case "channel":
		u, err := uuid.Parse(id)
		if err != nil {
			return nil, "", ""
		}
		if ch, err := s.store.GetChannel(ctx, u); err == nil {
			b, _ := json.Marshal(channelOf(ch)) // its secret is never in the API's form
			return b, ch.Namespace, "channel " + u.String()
		}
	case "rule":
		u, err := uuid.Parse(id)
		if err != nil {
			return nil, "", ""
		}
		if r, err := s.store.GetRule(ctx, u); err == nil {
			b, _ := json.Marshal(ruleOf(r))
			return b, r.Namespace, "rule " + u.String()
		}
	case "key":
		if k, err := s.store.GetAPIKey(ctx, c.Param("key_id")); err == nil {
			b, _ := json.Marshal(keyOf(k))
			return b, k.Namespace, "key " + k.ID
		}
	}
	return nil, "", ""
}

// auditEntries are the entries of a change: one per job a batch
// created, one otherwise.
func auditEntries(op string, p permission, actor string, reqBody, resBody, before json.RawMessage, ns, resource, pathNS string) []model.AuditEntry {
	at := time.Now()
	after := json.RawMessage(nil)
	if len(bytes.TrimSpace(resBody)) > 0 && json.Valid(resBody) {
		after = resBody
	}
	var fields struct {
		ID        string `json:"id"`
		Namespace string `json:"namespace"`
	}
	_ = json.Unmarshal(after, &fields)
	switch op {
	case "createJobBatch":
		var res models.JobBatchResult
		_ = json.Unmarshal(resBody, &res)
		var out []model.AuditEntry
		for _, it := range res.Items {
			if it.Job == nil {
				continue
			}
			b, _ := json.Marshal(it.Job)
			out = append(out, model.AuditEntry{At: at, Actor: actor, Namespace: it.Job.Namespace, Action: p.Action,
				Resource: "job " + it.Job.Id.String(), After: b})
		}
		return out
	case "createJob":
		resource = "job " + fields.ID
		ns = fields.Namespace
	case "createChannel":
		resource, ns = "channel "+fields.ID, fields.Namespace
	case "createRule":
		resource, ns = "rule "+fields.ID, fields.Namespace
	case "createCalendar":
		var cal struct{ Name string }
		_ = json.Unmarshal(after, &cal)
		resource, ns = "calendar "+cal.Name, fields.Namespace
	case "createKey":
		// The key itself is shown once, to its creator, never kept.
		var k map[string]any
		_ = json.Unmarshal(resBody, &k)
		delete(k, "key")
		after, _ = json.Marshal(k)
		resource, ns = "key "+fields.ID, fields.Namespace
	case "pauseJobs", "resumeJobs":
		var sel struct {
			Namespace string `json:"namespace"`
		}
		_ = json.Unmarshal(reqBody, &sel)
		after, _ = json.Marshal(map[string]json.RawMessage{"selection": reqBody, "result": resBody})
		resource, ns = "jobs", sel.Namespace
	case "putNamespace":
		resource, ns = "namespace "+pathNS, pathNS
	}
	if ns == "" {
		ns = auth.AllNamespaces
	}
	return []model.AuditEntry{{At: at, Actor: actor, Namespace: ns, Action: p.Action, Resource: resource, Before: before, After: after}}
}

// ListAudit handles GET /v1/audit.
func (h *endpoints) ListAudit(c echo.Context, p models.ListAuditParams) error {
	var errs fieldErrors
	f := store.AuditFilter{Actor: deref(p.Actor), Action: deref(p.Action), Cursor: deref(p.Cursor), Limit: limitOf(p.Limit, &errs)}
	who := principal(c)
	switch ns := deref(p.Namespace); {
	case ns != "":
		f.Namespaces = []string{ns}
	case !who.Allows(auth.AllNamespaces, auth.Admin):
		f.Namespaces = who.NamespacesWith(auth.Admin)
	}
	for name, v := range map[string]string{"actor": f.Actor, "action": f.Action} {
		if strings.ContainsRune(v, 0) || len(v) > 200 {
			errs.add(name, "must be at most 200 characters, without U+0000")
		}
	}
	if p.Since != nil || p.Until != nil {
		now, err := h.s.jobs.Now(c.Request().Context())
		if err != nil {
			return h.internal(c, err)
		}
		f.Since = timeParam("since", p.Since, now, &errs)
		f.Until = timeParam("until", p.Until, now, &errs)
	}
	if err := errs.err(); err != nil {
		return err
	}
	entries, next, err := h.s.store.ListAuditEntries(c.Request().Context(), f)
	if err != nil {
		return h.storeError(c, err, "audit entry", uuid.Nil)
	}
	out := models.AuditList{Items: make([]models.AuditEntry, 0, len(entries)), NextCursor: nonEmpty(next)}
	for _, e := range entries {
		item := models.AuditEntry{At: e.At, Id: e.ID, Actor: e.Actor, Namespace: e.Namespace, Action: e.Action, Resource: e.Resource}
		item.Before, item.After, item.Detail = jsonObject(e.Before), jsonObject(e.After), jsonObject(e.Detail)
		out.Items = append(out.Items, item)
	}
	return c.JSON(http.StatusOK, out)
}

// jsonObject decodes a stored JSON object; nil for none.
func jsonObject(b json.RawMessage) *map[string]any {
	if len(b) == 0 {
		return nil
	}
	var m map[string]any
	if json.Unmarshal(b, &m) != nil || m == nil {
		return nil
	}
	return &m
}
