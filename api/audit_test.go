package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/auth"
)

// Every change through the API is in the audit trail, newest first, with
// who made it and the job before and after as the API shows it (secret
// values masked, a key's secret never); a refused change leaves no
// entry; admins see their namespace's entries only.
func TestAuditTrail(t *testing.T) {
	t.Parallel()
	a := newAuthEnv(t)
	editor, adminA, adminB := a.key("team-a", "editor", nil), a.key("team-a", "admin", nil), a.key("team-b", "admin", nil)
	editorKey, _ := auth.ParseKey(editor)
	const credential = "Bearer s3cr3t-value-for-audit"
	body := jobBody("audited")
	body["namespace"] = "team-a"
	body["description"] = "first"
	body["handler"] = map[string]any{"type": "http", "url": "https://example.com/hook", "headers": map[string]any{"Authorization": credential}}
	r := a.as(editor, "POST", "/v1/jobs", body)
	mustStatus(t, r, http.StatusCreated)
	var j models.Job
	r.decode(t, &j)
	id := j.Id.String()
	mustStatus(t, a.as(editor, "PATCH", "/v1/jobs/"+id, map[string]any{"description": "second"}), http.StatusOK)
	mustStatus(t, a.as(editor, "POST", "/v1/jobs/"+id+"/pause", nil), http.StatusOK)
	// Refused and failed changes leave no entry.
	reader := a.key("team-a", "reader", nil)
	if r := a.as(reader, "DELETE", "/v1/jobs/"+id, nil); r.status != http.StatusForbidden {
		t.Fatalf("reader delete: %d", r.status)
	}
	if r := a.as(editor, "PATCH", "/v1/jobs/"+id, map[string]any{"priority": "urgent"}); r.status != http.StatusBadRequest {
		t.Fatalf("bad patch: %d", r.status)
	}
	made := a.as(adminA, "POST", "/v1/keys", map[string]any{"namespace": "team-a", "role": "reader"})
	mustStatus(t, made, http.StatusCreated)
	var key models.KeyCreated
	made.decode(t, &key)
	mustStatus(t, a.as(editor, "POST", "/v1/jobs:resume", map[string]any{"namespace": "team-a"}), http.StatusOK)
	mustStatus(t, a.as(editor, "DELETE", "/v1/jobs/"+id, nil), http.StatusNoContent)

	r = a.as(adminA, "GET", "/v1/audit", nil)
	mustStatus(t, r, http.StatusOK)
	if strings.Contains(string(r.body), "s3cr3t") || strings.Contains(string(r.body), key.Key) {
		t.Fatalf("the audit trail shows a secret: %s", r.body)
	}
	var l models.AuditList
	r.decode(t, &l)
	var actions []string
	for _, e := range l.Items {
		actions = append(actions, e.Action)
		if e.Namespace != "team-a" {
			t.Errorf("entry of namespace %s", e.Namespace)
		}
	}
	if want := "jobs.delete jobs.resume keys.create jobs.pause jobs.update jobs.create"; strings.Join(actions, " ") != want {
		t.Fatalf("actions %v, want %s", actions, want)
	}
	// A change by selector records the selection and what it did.
	if bulk := l.Items[1]; bulk.Resource != "jobs" || bulk.After == nil ||
		!strings.Contains(string(mustJSON(t, *bulk.After)), `"selection":{"namespace":"team-a"}`) || !strings.Contains(string(mustJSON(t, *bulk.After)), `"changed":1`) {
		t.Errorf("bulk entry %+v", bulk)
	}
	upd := l.Items[4]
	if upd.Actor != "key:"+editorKey.ID || upd.Resource != "job "+id {
		t.Errorf("update entry: %+v", upd)
	}
	desc := func(v *map[string]any) string {
		if v == nil {
			return ""
		}
		s, _ := (*v)["description"].(string)
		return s
	}
	if desc(upd.Before) != "first" || desc(upd.After) != "second" {
		t.Errorf("update before %v after %v", upd.Before, upd.After)
	}
	if l.Items[5].Before != nil || desc(l.Items[5].After) != "first" {
		t.Errorf("create entry %+v", l.Items[5])
	}
	if l.Items[0].After != nil || desc(l.Items[0].Before) != "second" {
		t.Errorf("delete entry %+v", l.Items[0])
	}
	// The stored rows hold no secret either.
	var n int
	if err := a.store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM audit_log
		WHERE before::text LIKE '%s3cr3t%' OR after::text LIKE '%s3cr3t%' OR after::text LIKE '%' || $1 || '%'`, key.Key).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d stored entries hold a secret (%v)", n, err)
	}

	// Filters, and who may read.
	r = a.as(adminA, "GET", "/v1/audit?action=jobs.update&actor=key:"+editorKey.ID, nil)
	mustStatus(t, r, http.StatusOK)
	r.decode(t, &l)
	if len(l.Items) != 1 || l.Items[0].Action != "jobs.update" {
		t.Errorf("filtered: %s", r.body)
	}
	r = a.as(adminB, "GET", "/v1/audit", nil)
	mustStatus(t, r, http.StatusOK)
	r.decode(t, &l)
	if len(l.Items) != 0 {
		t.Errorf("team-b admin sees %d entries of team-a", len(l.Items))
	}
	for _, k := range []string{reader, editor} {
		if r := a.as(k, "GET", "/v1/audit", nil); r.status != http.StatusForbidden {
			t.Errorf("non-admin reads the audit trail: %d", r.status)
		}
	}
	if r := a.as(adminB, "GET", "/v1/audit?namespace=team-a", nil); r.status != http.StatusForbidden {
		t.Errorf("team-b admin reads team-a's trail: %d", r.status)
	}
	// Paging is newest first and complete.
	var all []string
	cursor := ""
	for range 10 {
		r := a.as(a.admin, "GET", "/v1/audit?limit=2&cursor="+cursor, nil)
		mustStatus(t, r, http.StatusOK)
		var page models.AuditList
		if err := json.Unmarshal(r.body, &page); err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Items {
			all = append(all, e.Action)
		}
		if page.NextCursor == nil || *page.NextCursor == "" {
			break
		}
		cursor = *page.NextCursor
	}
	if len(all) != 6 {
		t.Errorf("paged through %v", all)
	}
}
