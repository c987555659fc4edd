package api

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/internal/testenv"
	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/store/storetest"
)

// The fuzz targets send whatever the fuzzer makes to the API over a real
// Postgres store and check the one promise the API makes about bad input:
// no 5xx and no panic (which the recover middleware would turn into a
// 500), and every 4xx a problem+json whose 400s name the faulty field.
// `go test` runs their seeds; `make fuzz` runs each for a while.

// fuzzEnv is an API server over a fresh real store, for one fuzz target.
type fuzzEnv struct {
	srv  *Server
	st   *store.Store
	logs *syncBuffer
	job  uuid.UUID // a stored job, for PATCH and the per-job lists
}

func newFuzzEnv(f *testing.F) *fuzzEnv {
	f.Helper()
	st := storetest.New(f, 16)
	logs := &syncBuffer{}
	// With a key, so that secret headers are sealed, not refused.
	keys := testenv.Keyring(f)
	srv, err := New(Config{Store: st, Logger: slog.New(slog.NewTextHandler(logs, nil)), Registry: prometheus.NewRegistry(), Secrets: keys, Open: true})
	if err != nil {
		f.Fatal(err)
	}
	fe := &fuzzEnv{srv: srv, st: st, logs: logs}
	for _, name := range []string{"fuzz-a", "fuzz-b", "fuzz-c"} {
		rec := fe.serve(f, "POST", "/v1/jobs", "", rawJob(name, `{"k":[1,"<x>"]}`))
		if rec.Code != http.StatusCreated {
			f.Fatalf("create %s: %d %s", name, rec.Code, rec.Body)
		}
		var j models.Job
		if err := json.Unmarshal(rec.Body.Bytes(), &j); err != nil {
			f.Fatal(err)
		}
		fe.job = j.Id
	}
	return fe
}

// serve sends one request straight to the handler; rawQuery goes into
// the URL as it is, whatever bytes it holds.
func (fe *fuzzEnv) serve(t testing.TB, method, path, rawQuery, body string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, "http://localhost"+path, nil)
	req.URL.RawQuery = rawQuery
	if body != "" {
		req = httptest.NewRequest(method, "http://localhost"+path, strings.NewReader(body))
		req.URL.RawQuery = rawQuery
		req.Header.Set("Content-Type", "application/json")
	}
	req = req.WithContext(context.Background())
	rec := httptest.NewRecorder()
	fe.srv.Handler().ServeHTTP(rec, req)
	return rec
}

// check fails t unless rec keeps the promise.
func (fe *fuzzEnv) check(t *testing.T, what string, rec *httptest.ResponseRecorder) {
	t.Helper()
	if rec.Code >= 500 {
		t.Fatalf("%s: status %d: %s\nlog: %s", what, rec.Code, rec.Body, fe.logs.String())
	}
	if rec.Code < 400 {
		return
	}
	if msg := problemFault(rec.Code, rec.Header(), rec.Body.Bytes()); msg != "" {
		t.Fatalf("%s: %s", what, msg)
	}
}

// jsonSeeds are payloads (JSON texts, some not valid) that tock once
// could not store, or that are on the edge of what it can.
var jsonSeeds = []string{
	`{"s":"\u0000"}`,
	`{"k\u0000":1}`,
	`"\ud800"`,
	`"\udc00\ud800"`,
	`"\ud800\u0041"`,
	`"\ud83d\ude00"`,
	"\"\xff\"",
	"{\"\xc3\":1}",
	"\"\xed\xa0\x80\"",
	`1e1000000`,
	`-1e-1000000`,
	`0e99999999999999999999`,
	`1e1000`,
	`1E+1001`,
	`123.4500e-3`,
	`-0.0`,
	`[` + strings.Repeat("9", 1000) + `]`,
	`"` + strings.Repeat("<", 50<<10) + `"`,
	`"` + strings.Repeat("\u2028", 1000) + `"`,
	strings.Repeat("[", 200) + strings.Repeat("]", 200),
	`{"a":1,"a":2}`,
	`null`,
	`{}`,
	`[true,false,null]`,
	`{"a"`,
}

func FuzzCreateJob(f *testing.F) {
	fe := newFuzzEnv(f)
	for _, p := range jsonSeeds {
		f.Add(rawJob("fuzz-new", p))
	}
	f.Add(`{"name":"\u0000","handler":{"type":"http","url":"https://example.com"}}`)
	f.Add("{\"name\":\"a\xff\",\"handler\":{\"type\":\"custom\",\"name\":\"x\"}}")
	f.Add(`{"name":"x","namespace":"\ud800","handler":{"type":"custom","name":"x"},"labels":{"a\u0000":"b"}}`)
	f.Add(`{"name":"x","handler":{"type":"http","url":"https://example.com","headers":{"X":"\udfff"}},"description":"\u0000"}`)
	f.Add(`{"name":"x","handler":{"type":"http","url":"https://example.com","secret_headers":{"Authorization":"v","a b":"\u0000","X":"\ud800"}}}`)
	f.Add(`{"name":"x","handler":{"type":"http","url":"https://example.com","headers":{"x":"1"},"secret_headers":{"X":"***","Y":null}}}`)
	f.Add(`{"name":"x","handler":{"type":"nats","subject":"a"},"retry":{"max_attempts":1e1000000,"multiplier":1e400}}`)
	f.Add(`{"name":"x","handler":{"type":"nats","subject":"a"},"schedule":{"in":"1e1000000s","max_runs":-1e-5}}`)
	f.Fuzz(func(t *testing.T, body string) {
		fe.check(t, "POST /v1/jobs", fe.serve(t, "POST", "/v1/jobs", "", body))
		fe.check(t, "POST /v1/jobs:batch", fe.serve(t, "POST", "/v1/jobs:batch", "", `{"jobs":[`+body+`]}`))
	})
}

func FuzzPatchJob(f *testing.F) {
	fe := newFuzzEnv(f)
	for _, p := range jsonSeeds {
		f.Add(`{"payload":` + p + `}`)
	}
	f.Add(`{"labels":{"a":"\u0000"}}`)
	f.Add(`{"labels":{"\ud800":"b"}}`)
	f.Add(`{"description":"\udbff"}`)
	f.Add("{\"description\":\"\x80\"}")
	f.Add(`{"timeout":"1e1000000s"}`)
	f.Add(`{"missed":{"max":1e1000000}}`)
	f.Add(`{"schedule":{"cron":"\u0000"}}`)
	f.Add(`{"handler":{"type":"http","url":"https://example.com/\u0000"}}`)
	f.Add(`{"handler":{"type":"http","url":"https://example.com/","secret_headers":{"Authorization":"***","B":"b"}}}`)
	f.Add(`{"handler":{"type":"http","url":"https://other.example/","secret_headers":null,"headers":{"Cookie":"***"}}}`)
	f.Add(`{"handler":{"type":"custom","name":"x","secret_headers":{}}}`)
	f.Fuzz(func(t *testing.T, body string) {
		fe.check(t, "PATCH /v1/jobs/{id}", fe.serve(t, "PATCH", "/v1/jobs/"+fe.job.String(), "", body))
	})
}

func FuzzListJobs(f *testing.F) {
	fe := newFuzzEnv(f)
	for _, q := range []string{
		"", "name_prefix=%00", "name_prefix=%FF", "name_prefix=fuzz", "namespace=%00", "namespace=default&state=%FF",
		"selector=a%00", "selector=%C3%28", "selector=a%3Db,c!%3Dd", "limit=1e1000000", "limit=99999999999999999999",
		"cursor=%00", "cursor=%FF", "%FF=%FF", "a=%zz", "state=active&state=%00", "name_prefix=%ED%A0%80",
		"job=%00", "error=%FF", "error=%25%5C_", "since=1e1000000h", "until=9999-12-31T23:59:59Z", "handler=%00",
		"job_id=%00", "state=failed,%00", "started_before=-1e1000000s", "count=true&manual=%FF", "group_by=%00",
	} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, q string) {
		for _, path := range []string{"/v1/jobs", "/v1/executions", "/v1/jobs/" + fe.job.String() + "/executions", "/v1/stats"} {
			fe.check(t, "GET "+path+"?"+q, fe.serve(t, "GET", path, q, ""))
		}
	})
}

func FuzzCursor(f *testing.F) {
	fe := newFuzzEnv(f)
	rec := fe.serve(f, "GET", "/v1/jobs", "limit=1", "")
	var page models.JobList
	if err := json.Unmarshal(rec.Body.Bytes(), &page); err != nil || page.NextCursor == nil {
		f.Fatalf("no cursor: %s", rec.Body)
	}
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	for _, c := range []string{
		*page.NextCursor,
		*page.NextCursor + "=",
		enc(`["default\u0000","x"]`),
		enc(`["default","\u0000"]`),
		enc("[\"default\",\"\xff\"]"),
		enc(`["default"]`),
		enc(`["default","x","y"]`),
		enc(`"` + uuid.Nil.String() + `"`),
		enc(`"` + uuid.Max.String() + `"`),
		enc(`"ffffffff-ffff-ffff-ffff-ffffffffffff\u0000"`),
		enc(`"0000-01-01T00:00:00Z"`),
		enc(`"9999-12-31T23:59:59.999999999Z"`),
		enc(`"2026-01-01T00:00:00+14:00"`),
		enc(`1e1000000`),
		enc(`null`),
		strings.Repeat("A", 2000),
		"\x00",
		"%",
	} {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, c string) {
		q := "cursor=" + url.QueryEscape(c)
		for _, path := range []string{"/v1/jobs", "/v1/executions", "/v1/jobs/" + fe.job.String() + "/executions",
			"/v1/jobs/" + fe.job.String() + "/skips", "/v1/jobs/" + fe.job.String() + "/backfills"} {
			fe.check(t, "GET "+path+"?"+q, fe.serve(t, "GET", path, q, ""))
		}
	})
}

// FuzzJSONMatchesPostgres checks domain.CheckJSON against Postgres
// itself: what it passes, jsonb stores, and its size is what executors
// receive of what jsonb gives back (encoding/json's encoding of it).
func FuzzJSONMatchesPostgres(f *testing.F) {
	st := storetest.New(f, 1)
	for _, p := range jsonSeeds {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if !json.Valid([]byte(raw)) {
			return // the API refuses it before it looks further
		}
		size, faults := domain.CheckJSON([]byte(raw))
		var text string
		err := st.Pool().QueryRow(context.Background(), "SELECT $1::text::jsonb::text", raw).Scan(&text)
		if len(faults) > 0 {
			return // refused: safe whatever Postgres says (tock is stricter than Postgres 15)
		}
		if err != nil {
			t.Fatalf("CheckJSON passes %q, Postgres refuses it: %v", raw, err)
		}
		wire, err := json.Marshal(json.RawMessage(text))
		if err != nil {
			t.Fatal(err)
		}
		// jsonb drops duplicate keys and the sign of a negative zero;
		// otherwise the size is exact.
		if size < len(wire) || (size > len(wire) && !hasDuplicateKeys(raw) && !strings.Contains(raw, "-0")) {
			t.Fatalf("CheckJSON size %d, wire %d: %s → %s", size, len(wire), raw, wire)
		}
	})
}

// hasDuplicateKeys reports whether some object in raw names a key twice
// (jsonb keeps the last, so the wire is smaller than CheckJSON's size).
func hasDuplicateKeys(raw string) bool {
	d := json.NewDecoder(bytes.NewReader([]byte(raw)))
	var walk func() bool
	walk = func() bool {
		tok, err := d.Token()
		if err != nil {
			return false
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			dup := false
			for d.More() {
				k, _ := d.Token()
				ks, _ := k.(string)
				if seen[ks] {
					dup = true
				}
				seen[ks] = true
				if walk() {
					dup = true
				}
			}
			_, _ = d.Token()
			return dup
		case json.Delim('['):
			dup := false
			for d.More() {
				if walk() {
					dup = true
				}
			}
			_, _ = d.Token()
			return dup
		}
		return false
	}
	return walk()
}
