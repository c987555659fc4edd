package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/store/model"
	"github.com/tock-sched/tock/store/storetest"
)

// succeed runs job j now and records the run's success at end.
func (e *env) succeed(j models.Job, end time.Time) {
	e.t.Helper()
	x, err := e.store.CreateManualExecution(e.ctx, j.Id, time.Now())
	if err != nil {
		e.t.Fatal(err)
	}
	storetest.Record(e.t, e.store, model.AttemptEvent{ID: x.ID, Attempt: 1, Executor: "x", At: end, Type: domain.EventSucceeded})
}

// die records a dead execution of j (its only attempt failed, finally).
func (e *env) die(j models.Job) {
	e.t.Helper()
	x, err := e.store.CreateManualExecution(e.ctx, j.Id, time.Now())
	if err != nil {
		e.t.Fatal(err)
	}
	storetest.Record(e.t, e.store, model.AttemptEvent{ID: x.ID, Attempt: 1, Executor: "x", At: time.Now(),
		Type: domain.EventFailed, Final: true, Error: "refused"})
}

func TestJobLastSuccessAt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	j := e.createJob(jobBody("nightly"))
	r := e.do("GET", "/v1/jobs/"+j.Id.String(), nil)
	mustStatus(t, r, http.StatusOK)
	if !strings.Contains(string(r.body), `"last_success_at":null`) {
		t.Fatalf("before a success: %s", r.body)
	}

	end := time.Now().UTC().Truncate(time.Millisecond).Add(-time.Minute)
	e.succeed(j, end)
	if got := e.getJob(j.Id).LastSuccessAt; got == nil || !got.Equal(end) {
		t.Fatalf("GET: last_success_at %v, want %v", got, end)
	}
	var list models.JobList
	r = e.do("GET", "/v1/jobs?name_prefix=nightly", nil)
	mustStatus(t, r, http.StatusOK)
	r.decode(t, &list)
	if len(list.Items) != 1 || list.Items[0].LastSuccessAt == nil || !list.Items[0].LastSuccessAt.Equal(end) {
		t.Fatalf("list: %s", r.body)
	}
	// A write answers with the job as stored, its last success included.
	r = e.do("POST", "/v1/jobs/"+j.Id.String()+"/pause", nil)
	mustStatus(t, r, http.StatusOK)
	var paused models.Job
	r.decode(t, &paused)
	if paused.LastSuccessAt == nil || !paused.LastSuccessAt.Equal(end) {
		t.Fatalf("pause: %s", r.body)
	}
}

// seconds is t as the gauge exports it.
func seconds(t time.Time) string {
	return strconv.FormatFloat(float64(t.UnixMilli())/1e3, 'g', -1, 64)
}

func TestLastSuccessMetric(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alert := map[string]any{store.AlertLabel: "true"}
	ok, never, plain := jobBody("ok"), jobBody("never"), jobBody("plain")
	ok["labels"], never["labels"] = alert, alert
	never["namespace"] = "etl"
	jOK, jNever, jPlain := e.createJob(ok), e.createJob(never), e.createJob(plain)
	end := time.Now().UTC().Truncate(time.Millisecond).Add(-time.Hour)
	e.succeed(jOK, end)
	e.succeed(jPlain, end)
	// "never" died twice in a row; "plain" is not labelled.
	e.die(jNever)
	e.die(jNever)
	e.die(jPlain)

	want := fmt.Sprintf(`
# HELP tock_job_consecutive_failures How many of the job's executions in a row went dead, up to now (0 since its last success), for jobs labelled tock.io/alert=true.
# TYPE tock_job_consecutive_failures gauge
tock_job_consecutive_failures{job_name="never",job_namespace="etl"} 2
tock_job_consecutive_failures{job_name="ok",job_namespace="default"} 0
# HELP tock_job_last_success_timestamp_seconds When the job's latest succeeded execution finished, as a Unix time, for jobs labelled tock.io/alert=true; for a job that has not succeeded, when it was created.
# TYPE tock_job_last_success_timestamp_seconds gauge
tock_job_last_success_timestamp_seconds{job_name="never",job_namespace="etl"} %s
tock_job_last_success_timestamp_seconds{job_name="ok",job_namespace="default"} %s
`, seconds(jNever.CreatedAt), seconds(end))
	if err := testutil.GatherAndCompare(e.reg, strings.NewReader(want), "tock_job_last_success_timestamp_seconds",
		"tock_job_consecutive_failures"); err != nil {
		t.Fatal(err)
	}
	// /metrics serves it.
	r := e.do("GET", "/metrics", nil)
	mustStatus(t, r, http.StatusOK)
	if !strings.Contains(string(r.body), `tock_job_last_success_timestamp_seconds{job_name="ok",job_namespace="default"}`) {
		t.Fatalf("/metrics lacks the gauge:\n%s", r.body)
	}
}

// fakeSuccesses counts its reads and answers with jobs or err.
type fakeSuccesses struct {
	mu    sync.Mutex
	reads int
	jobs  []model.JobLastSuccess
	err   error
}

func (f *fakeSuccesses) ListAlertedJobSuccesses(context.Context) ([]model.JobLastSuccess, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	return f.jobs, f.err
}

func (f *fakeSuccesses) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads
}

// One read serves the scrapes of the next few seconds; a failed read
// leaves the gauge out, and a later scrape reads again.
func TestLastSuccessMetricCache(t *testing.T) {
	t.Parallel()
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	src := &fakeSuccesses{jobs: []model.JobLastSuccess{{Namespace: "default", Name: "a", At: at}}}
	logs := &syncBuffer{}
	c := newLastSuccesses(src, slog.New(slog.NewTextHandler(logs, nil)))
	now := at
	c.now = func() time.Time { return now }
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)

	scrape := func() int {
		t.Helper()
		n, err := testutil.GatherAndCount(reg, "tock_job_last_success_timestamp_seconds")
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := scrape(); n != 1 || src.count() != 1 {
		t.Fatalf("%d series after %d reads", n, src.count())
	}
	now = now.Add(4 * time.Second)
	if n := scrape(); n != 1 || src.count() != 1 {
		t.Fatalf("a scrape within the cache's life read again (%d reads), %d series", src.count(), n)
	}
	now = now.Add(2 * time.Second)
	src.mu.Lock()
	src.jobs, src.err = nil, errors.New("database down")
	src.mu.Unlock()
	if n := scrape(); n != 0 || src.count() != 2 {
		t.Fatalf("after a failed read: %d series, %d reads", n, src.count())
	}
	if !strings.Contains(logs.String(), "database down") {
		t.Errorf("the failure was not logged: %s", logs.String())
	}
	now = now.Add(6 * time.Second)
	src.mu.Lock()
	src.jobs, src.err = []model.JobLastSuccess{{Namespace: "default", Name: "a", At: at}}, nil
	src.mu.Unlock()
	if n := scrape(); n != 1 || src.count() != 3 {
		t.Fatalf("after recovery: %d series, %d reads", n, src.count())
	}

	// A second server on the same registry takes the gauge over.
	other := &fakeSuccesses{}
	if err := registerLastSuccesses(reg, other, slog.Default()); err != nil {
		t.Fatal(err)
	}
	if n := scrape(); n != 0 || other.count() != 1 {
		t.Fatalf("after re-registering: %d series, %d reads of the new source", n, other.count())
	}
}
