package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/domain"
)

// Concurrency by key through the API, on real Postgres, with manual runs
// (the scanner's firings take the same path through the triggers): a key
// rendered from a label, runs over the limit waiting with their key and
// why, the key's holders and queue, a cancel passing the slot on once
// answered, on_limit
// skip refusing a run now, faults by field, PATCH changing and removing
// the policy.
func TestConcurrencyKeys(t *testing.T) {
	t.Parallel()
	e := newControlEnv(t, &fakeExecutors{})
	body := jobBody("sync-acme")
	body["labels"] = map[string]string{"customer": "acme"}
	body["concurrency"] = map[string]any{"key": "{{ .labels.customer }}", "limit": 1}
	j := e.createJob(body)
	if j.Concurrency == nil || j.Concurrency.Key != "{{ .labels.customer }}" || j.Concurrency.Limit != 1 ||
		string(*j.Concurrency.Scope) != "namespace" || string(*j.Concurrency.OnLimit) != "wait" {
		t.Fatalf("job's concurrency: %+v", j.Concurrency)
	}
	run := func() models.Execution {
		t.Helper()
		r := e.do("POST", "/v1/jobs/"+j.Id.String()+"/run", nil)
		mustStatus(t, r, http.StatusAccepted)
		var x models.Execution
		r.decode(t, &x)
		return x
	}
	first, second, third := run(), run(), run()
	if first.State != "queued" || second.State != "waiting" || third.State != "waiting" {
		t.Fatalf("states %s %s %s; want queued, waiting, waiting", first.State, second.State, third.State)
	}
	if second.ConcurrencyKey == nil || *second.ConcurrencyKey != "ns:default:acme" {
		t.Errorf("concurrency_key %v", second.ConcurrencyKey)
	}
	r := e.do("GET", "/v1/executions/"+second.Id.String(), nil)
	mustStatus(t, r, http.StatusOK)
	var got models.Execution
	r.decode(t, &got)
	if got.Wait == nil || got.Wait.Reason != "concurrency" || got.Wait.Key == nil || *got.Wait.Key != "ns:default:acme" ||
		!strings.Contains(got.Wait.Message, "concurrency key ns:default:acme") {
		t.Errorf("wait: %+v", got.Wait)
	}
	if got.NextAttemptAt != nil {
		t.Errorf("a waiting execution's next_attempt_at %v: want none", got.NextAttemptAt)
	}

	var keys models.ConcurrencyKeyList
	r = e.do("GET", "/v1/concurrency", nil)
	mustStatus(t, r, http.StatusOK)
	r.decode(t, &keys)
	if len(keys.Items) != 1 || keys.Items[0].Key != "acme" || keys.Items[0].Held != 1 || keys.Items[0].Waiting != 2 ||
		keys.Items[0].Holding != nil {
		t.Fatalf("keys: %+v", keys.Items)
	}
	r = e.do("GET", "/v1/concurrency?key=acme", nil)
	mustStatus(t, r, http.StatusOK)
	r.decode(t, &keys)
	k := keys.Items[0]
	if k.Holding == nil || len(*k.Holding) != 1 || (*k.Holding)[0].ExecutionId != first.Id ||
		k.Queue == nil || len(*k.Queue) != 2 || (*k.Queue)[0].ExecutionId != second.Id || (*k.Queue)[1].ExecutionId != third.Id {
		t.Fatalf("key acme: %+v", k)
	}

	// A cancel passes the slot on to the oldest waiting execution once
	// the cancelled one's executor has answered (its delivery may be in
	// an executor's hands meanwhile): till then it is still a holder.
	mustStatus(t, e.do("POST", "/v1/executions/"+first.Id.String()+"/cancel", nil), http.StatusOK)
	r = e.do("GET", "/v1/executions/"+second.Id.String(), nil)
	r.decode(t, &got)
	if got.State != "waiting" {
		t.Errorf("after the cancel, before the executor's answer, the second is %s; want waiting", got.State)
	}
	r = e.do("GET", "/v1/concurrency?key=acme", nil)
	r.decode(t, &keys)
	if k := keys.Items[0]; k.Holding == nil || len(*k.Holding) != 1 || (*k.Holding)[0].ExecutionId != first.Id {
		t.Errorf("key acme before the answer: %+v; want the cancelled one holding", k)
	}
	e.finish(first.Id, domain.EventCancelled, false) // it never began
	r = e.do("GET", "/v1/executions/"+second.Id.String(), nil)
	r.decode(t, &got)
	if got.State != "queued" {
		t.Errorf("after the cancel was answered, the second is %s; want queued", got.State)
	}
	r = e.do("GET", "/v1/executions/"+third.Id.String(), nil)
	r.decode(t, &got)
	if got.State != "waiting" {
		t.Errorf("after the cancel, the third is %s; want waiting", got.State)
	}

	// on_limit skip: a run asked for now is refused while the key is full.
	skip := jobBody("sync-acme-2")
	skip["labels"] = map[string]string{"customer": "acme"}
	skip["concurrency"] = map[string]any{"key": "{{ .labels.customer }}", "limit": 1, "on_limit": "skip"}
	s := e.createJob(skip)
	r = e.do("POST", "/v1/jobs/"+s.Id.String()+"/run", nil)
	mustStatus(t, r, http.StatusConflict)
	if !strings.Contains(string(r.body), "ns:default:acme is at its limit of 1") {
		t.Errorf("409 body %s", r.body)
	}

	// Faults, by field.
	for _, c := range []struct {
		conc  any
		field string
	}{
		{map[string]any{"key": "{{ .labels.missing }}", "limit": 1}, "concurrency.key"},
		{map[string]any{"key": "{{ .payload.account }}", "limit": 1}, "concurrency.key"},
		{map[string]any{"key": "{{ .labels.customer", "limit": 1}, "concurrency.key"},
		{map[string]any{"key": "  ", "limit": 1}, "concurrency.key"},
		{map[string]any{"key": "{{ .labels.customer }}{{ .labels.customer }}" + strings.Repeat("x", 300), "limit": 1}, "concurrency.key"},
		{map[string]any{"key": "k", "limit": 0}, "concurrency.limit"},
		{map[string]any{"key": "k", "limit": 1, "on_limit": "later"}, "concurrency.on_limit"},
		{map[string]any{"key": "k", "limit": 1, "scope": "world"}, "concurrency.scope"},
	} {
		b := jobBody("bad")
		b["labels"] = map[string]string{"customer": "acme"}
		b["concurrency"] = c.conc
		r := e.do("POST", "/v1/jobs", b)
		if r.status != http.StatusBadRequest {
			t.Errorf("%v: status %d %s", c.conc, r.status, r.body)
			continue
		}
		var p models.Problem
		r.decode(t, &p)
		if !hasField(p, c.field) {
			t.Errorf("%v: faults %s; want %s", c.conc, fieldsOf(p), c.field)
		}
	}
	dep := jobBody("keyed-chain")
	dep["depends_on"] = []any{map[string]any{"job": "sync-acme"}}
	dep["concurrency"] = map[string]any{"key": "k", "limit": 1}
	r = e.do("POST", "/v1/jobs", dep)
	mustStatus(t, r, http.StatusBadRequest)

	// PATCH: labels change the key; {} removes the policy.
	r = e.do("PATCH", "/v1/jobs/"+j.Id.String(), map[string]any{"labels": map[string]string{"customer": "globex"}})
	mustStatus(t, r, http.StatusOK)
	fourth := run()
	if fourth.State != "queued" || *fourth.ConcurrencyKey != "ns:default:globex" {
		t.Errorf("after the label's change: %s %v; want queued on globex", fourth.State, fourth.ConcurrencyKey)
	}
	r = e.do("PATCH", "/v1/jobs/"+j.Id.String(), map[string]any{"labels": map[string]string{"team": "x"}})
	mustStatus(t, r, http.StatusBadRequest)
	r = e.do("PATCH", "/v1/jobs/"+j.Id.String(), map[string]any{"concurrency": map[string]any{}})
	mustStatus(t, r, http.StatusOK)
	var patched models.Job
	r.decode(t, &patched)
	if patched.Concurrency != nil {
		t.Errorf("after PATCH {}: %+v", patched.Concurrency)
	}
	if x := run(); x.State != "queued" || x.ConcurrencyKey != nil {
		t.Errorf("a run without the policy: %s %v", x.State, x.ConcurrencyKey)
	}
}
