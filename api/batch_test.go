package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/store/model"
)

// batch posts jobs to the batch endpoint and decodes its 200 answer.
func (e *env) batch(jobs ...any) models.JobBatchResult {
	e.t.Helper()
	r := e.do("POST", "/v1/jobs:batch", map[string]any{"jobs": jobs})
	mustStatus(e.t, r, http.StatusOK)
	var res models.JobBatchResult
	r.decode(e.t, &res)
	if len(res.Items) != len(jobs) {
		e.t.Fatalf("%d items for %d jobs: %s", len(res.Items), len(jobs), r.body)
	}
	return res
}

func TestCreateJobBatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	at := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)
	bodies := []map[string]any{
		{
			"name":      "nightly-report",
			"namespace": "reports",
			"schedule":  map[string]any{"cron": "0 30 9 * * MON-FRI", "timezone": "Europe/Berlin"},
			"handler":   map[string]any{"type": "http", "url": "https://example.com/hook", "method": "put", "headers": map[string]string{"X-Team": "abc"}},
			"payload":   map[string]any{"k": "v"},
			"retry":     map[string]any{"max_attempts": 3, "initial_backoff": "1s"},
			"timeout":   "90s",
			"priority":  "high",
		},
		{"name": "once-at", "schedule": map[string]any{"at": at.Format(time.RFC3339)}, "handler": map[string]any{"type": "nats", "subject": "a.b"}},
		{"name": "once-now", "handler": map[string]any{"type": "custom", "name": "send-email"}, "payload": []int{1, 2}},
	}
	items := make([]any, len(bodies))
	for i, b := range bodies {
		items[i] = b
	}
	res := e.batch(items...)
	if res.Created != 3 || res.Failed != 0 {
		t.Fatalf("created %d, failed %d; want 3, 0: %+v", res.Created, res.Failed, res)
	}

	// Each job is what POST /v1/jobs makes of the same body (in another
	// namespace, so that the names are free): the same defaults, the same
	// first run.
	for i, it := range res.Items {
		if it.Status != http.StatusCreated || it.Job == nil || it.Problem != nil {
			t.Fatalf("item %d: %+v", i, it)
		}
		got := *it.Job
		if got.Name != bodies[i]["name"] {
			t.Errorf("item %d is job %q, want %q: items out of request order", i, got.Name, bodies[i]["name"])
		}
		if stored := e.getJob(got.Id); !reflect.DeepEqual(stored, got) {
			t.Errorf("item %d: GET /v1/jobs/{id} = %+v, want %+v", i, stored, got)
		}
		single := map[string]any{}
		for k, v := range bodies[i] {
			single[k] = v
		}
		single["namespace"] = "single"
		want := e.createJob(single)
		if !sameJob(got, want) {
			t.Errorf("item %d differs from the job POST /v1/jobs creates:\n got %+v\nwant %+v", i, got, want)
		}
	}
}

// sameJob compares two jobs created from the same body, apart from what
// differs between any two jobs: id, bucket, namespace, times of creation.
// A relative first run (now, or a delay) may differ by the time between
// the two requests.
func sameJob(a, b models.Job) bool {
	if a.NextRunAt == nil || b.NextRunAt == nil || a.NextRunAt.Sub(*b.NextRunAt).Abs() > 5*time.Second {
		return false
	}
	a.Id, a.Bucket, a.Namespace, a.CreatedAt, a.UpdatedAt, a.NextRunAt = b.Id, b.Bucket, b.Namespace, b.CreatedAt, b.UpdatedAt, b.NextRunAt
	return reflect.DeepEqual(a, b)
}

// Every body POST /v1/jobs refuses is refused as an item of a batch with
// the same problem, its fields under jobs[i]; the valid items of the same
// request are created all the same.
func TestCreateJobBatchValidatesEachJobAsCreateJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var (
		items []any
		cases []validationCase
	)
	for _, tc := range jobValidationCases() {
		s, isString := tc.body.(string)
		if isString && !json.Valid([]byte(s)) {
			continue // not JSON: a fault of the whole request, tested below
		}
		if isString {
			items = append(items, json.RawMessage(s))
		} else {
			items = append(items, tc.body)
		}
		cases = append(cases, tc)
	}
	items = append(items, jobBody("the-valid-one"))
	res := e.batch(items...)
	if res.Created != 1 || res.Failed != len(cases) {
		t.Errorf("created %d, failed %d; want 1, %d", res.Created, res.Failed, len(cases))
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			it := res.Items[i]
			if it.Status != http.StatusBadRequest || it.Problem == nil || it.Job != nil {
				t.Fatalf("item %d: %+v", i, it)
			}
			p := *it.Problem
			if p.Status != http.StatusBadRequest || p.Type != ProblemValidation {
				t.Errorf("problem %+v", p)
			}
			field := fmt.Sprintf("jobs[%d].%s", i, tc.field)
			if tc.field == "body" {
				field = fmt.Sprintf("jobs[%d]", i)
			}
			if !hasField(p, field) {
				t.Fatalf("errors do not name %q: %s", field, fieldsOf(p))
			}
			if tc.msg != "" && !strings.Contains(fieldsOf(p), tc.msg) {
				t.Errorf("errors %s do not say %q", fieldsOf(p), tc.msg)
			}
			// The same problem as POST /v1/jobs, field for field.
			r := e.do("POST", "/v1/jobs", tc.body)
			single := r.problem(t)
			if len(*single.Errors) != len(*p.Errors) {
				t.Fatalf("batch errors %s, POST /v1/jobs errors %s", fieldsOf(p), fieldsOf(single))
			}
			for k, fe := range *single.Errors {
				got := (*p.Errors)[k]
				want := fmt.Sprintf("jobs[%d].%s", i, fe.Field)
				if fe.Field == "body" {
					want = fmt.Sprintf("jobs[%d]", i)
				}
				if got.Field != want || withoutNow(got.Message) != withoutNow(fe.Message) {
					t.Errorf("error %d: %s: %s, want %s: %s", k, got.Field, got.Message, want, fe.Message)
				}
			}
		})
	}
	last := res.Items[len(res.Items)-1]
	if last.Status != http.StatusCreated || last.Job == nil || last.Job.Name != "the-valid-one" {
		t.Errorf("the valid item: %+v", last)
	}
	r := e.do("GET", "/v1/jobs", nil)
	var list models.JobList
	r.decode(t, &list)
	if len(list.Items) != 1 || list.Items[0].Name != "the-valid-one" {
		t.Errorf("%d jobs stored, want only the valid one", len(list.Items))
	}
}

// nowIs is the clock reading some messages carry, which differs between
// two requests.
var nowIs = regexp.MustCompile(`now is [^)]*`)

func withoutNow(msg string) string { return nowIs.ReplaceAllString(msg, "now is …") }

// A name taken by a stored job, or by an earlier job of the request, is a
// conflict of that item only.
func TestCreateJobBatchNameConflicts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	stored := e.createJob(jobBody("taken"))
	other := jobBody("a")
	other["namespace"] = "other"
	bad := jobBody("dup")
	bad["timeout"] = "forever"
	res := e.batch(
		jobBody("a"),     // 0
		jobBody("taken"), // 1: a stored job's name
		jobBody("a"),     // 2: the name of item 0
		other,            // 3: the same name in another namespace
		bad,              // 4: invalid, so it does not take "dup"
		jobBody("dup"),   // 5
	)
	if res.Created != 3 || res.Failed != 3 {
		t.Errorf("created %d, failed %d; want 3, 3", res.Created, res.Failed)
	}
	want := []int{201, 409, 409, 201, 400, 201}
	for i, it := range res.Items {
		if it.Status != want[i] {
			t.Errorf("item %d: status %d, want %d (%+v)", i, it.Status, want[i], it.Problem)
		}
	}
	for _, c := range []struct {
		item   int
		detail string
	}{
		{1, `A job named "taken" already exists in namespace "default".`},
		{2, `A job named "a" in namespace "default" comes earlier in this request (jobs[0]).`},
	} {
		p := res.Items[c.item].Problem
		if p == nil || p.Type != ProblemConflict || p.Status != http.StatusConflict || p.Detail == nil || *p.Detail != c.detail ||
			!hasField(*p, fmt.Sprintf("jobs[%d].name", c.item)) {
			t.Errorf("item %d: problem %+v, want a conflict %q naming jobs[%d].name", c.item, p, c.detail, c.item)
		}
	}
	if got := e.getJob(stored.Id); !reflect.DeepEqual(got, stored) {
		t.Errorf("the stored job changed: %+v", got)
	}
	r := e.do("GET", "/v1/jobs", nil)
	var list models.JobList
	r.decode(t, &list)
	if len(list.Items) != 4 {
		t.Errorf("%d jobs stored, want 4 (taken, a, other/a, dup)", len(list.Items))
	}
}

// Faults of the request as a whole create nothing and are a 4xx problem
// naming the field.
func TestCreateJobBatchRequestFaults(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	many := func(n int) map[string]any {
		jobs := make([]any, n)
		for i := range jobs {
			jobs[i] = jobBody(fmt.Sprintf("j-%04d", i))
		}
		return map[string]any{"jobs": jobs}
	}
	for _, tc := range []struct {
		name  string
		body  any
		field string
		msg   string
	}{
		{"over 1000 jobs", many(MaxBatchJobs + 1), "jobs", "at most 1000"},
		{"no jobs", map[string]any{"jobs": []any{}}, "jobs", "at least one"},
		{"jobs missing", map[string]any{}, "jobs", "required"},
		{"jobs null", map[string]any{"jobs": nil}, "jobs", "array"},
		{"jobs not an array", map[string]any{"jobs": jobBody("x")}, "jobs", "array"},
		{"unknown member", map[string]any{"jobs": []any{jobBody("x")}, "atomic": true}, "atomic", "unknown"},
		{"not JSON", `{"jobs": [`, "body", "JSON"},
		{"an array", `[{"name": "x"}]`, "body", "object"},
		{"empty", ``, "body", "required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do("POST", "/v1/jobs:batch", tc.body)
			mustStatus(t, r, http.StatusBadRequest)
			p := r.problem(t)
			if p.Type != ProblemValidation || !hasField(p, tc.field) || !strings.Contains(fieldsOf(p), tc.msg) {
				t.Errorf("problem %s, want %s naming %q with %q", r.body, ProblemValidation, tc.field, tc.msg)
			}
		})
	}

	// 1000 is allowed.
	if res := e.batch(many(MaxBatchJobs)["jobs"].([]any)...); res.Created != MaxBatchJobs {
		t.Errorf("created %d of %d", res.Created, MaxBatchJobs)
	}

	big := `{"jobs": [{"name": "x", "handler": {"type": "custom", "name": "w"}, "payload": "` +
		strings.Repeat("a", MaxBatchBytes) + `"}]}`
	r := e.do("POST", "/v1/jobs:batch", big)
	mustStatus(t, r, http.StatusRequestEntityTooLarge)
	if p := r.problem(t); p.Type != ProblemTooLarge {
		t.Errorf("problem %+v", p)
	}

	req, _ := http.NewRequest("POST", e.http.URL+"/v1/jobs:batch", strings.NewReader(`jobs=x`))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnsupportedMediaType || res.Header.Get("Content-Type") != ProblemContentType {
		t.Errorf("form body: status %d, content type %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
}

// The literal colon of /v1/jobs:batch is not a path parameter: the jobs
// routes around it still route as before.
func TestCreateJobBatchRouting(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	j := e.createJob(jobBody("routed"))
	if got := e.getJob(j.Id); got.Id != j.Id {
		t.Errorf("GET /v1/jobs/{id}: %+v", got)
	}
	mustStatus(t, e.do("POST", "/v1/jobs/"+j.Id.String()+"/pause", nil), http.StatusOK)
	mustStatus(t, e.do("GET", "/v1/jobs", nil), http.StatusOK)
	for _, path := range []string{"/v1/jobs:other", "/v1/jobsbatch", "/v1/jobs:batchx", "/v1/jobs:"} {
		r := e.do("POST", path, map[string]any{"jobs": []any{jobBody("x")}})
		mustStatus(t, r, http.StatusNotFound)
		if p := r.problem(t); p.Type != ProblemNotFound {
			t.Errorf("POST %s: %+v", path, p)
		}
	}
	r := e.do("GET", "/v1/jobs:batch", nil)
	mustStatus(t, r, http.StatusMethodNotAllowed)
	if allow := r.header.Get("Allow"); !strings.Contains(allow, "POST") {
		t.Errorf("Allow %q", allow)
	}
	r = e.do("GET", "/v1/jobs/"+uuid.NewString(), nil)
	mustStatus(t, r, http.StatusNotFound)

	e.batch(jobBody("counted"))
	if m := string(e.do("GET", "/metrics", nil).body); !strings.Contains(m, `route="/v1/jobs:batch"`) {
		t.Errorf("no request counted under route /v1/jobs:batch in /metrics")
	}
}

// brokenBatchStore fails every batch as a database outage would.
type brokenBatchStore struct{ *store.Store }

func (brokenBatchStore) CreateJobBatch(context.Context, []*model.Job) ([]error, error) {
	return nil, fmt.Errorf("store: create job batch of 1: %w", context.DeadlineExceeded)
}

func TestCreateJobBatchStoreFailureIsA500(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	e := newEnvWith(t, brokenBatchStore{st})
	r := e.do("POST", "/v1/jobs:batch", map[string]any{"jobs": []any{jobBody("x")}})
	mustStatus(t, r, http.StatusInternalServerError)
	if p := r.problem(t); p.Type != ProblemInternal {
		t.Errorf("problem %+v", p)
	}
	if !strings.Contains(e.logs.String(), "create job batch") {
		t.Errorf("the failure was not logged: %s", e.logs.String())
	}
}
