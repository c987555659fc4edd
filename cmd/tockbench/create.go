package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/store"
)

// CreateReport is what a create run measured: jobs created through the
// REST API, as clients would create them.
type CreateReport struct {
	Mix       string `json:"mix"`
	Server    string `json:"server"`
	Endpoint  string `json:"endpoint"`
	Jobs      int    `json:"jobs"`
	Clients   int    `json:"clients"`
	Batch     int    `json:"batch"`
	Namespace string `json:"namespace"`

	Seconds           float64 `json:"seconds"`
	JobsPerSecond     float64 `json:"jobs_per_second"`
	Requests          int     `json:"requests"`
	RequestsPerSecond float64 `json:"requests_per_second"`
	// Latency is the time of one request, sent to answered, in ms.
	Latency Lag `json:"latency_ms"`
	// Failed counts jobs the API did not create (a failed request counts
	// all its jobs); Stored is the jobs of the run found in Postgres
	// afterwards, which must equal Jobs - Failed.
	Failed int64 `json:"failed"`
	Stored int64 `json:"stored"`
	// FirstError is the first failure's message, if any.
	FirstError string `json:"first_error,omitempty"`
}

// runCreate creates --jobs jobs through the API from --clients concurrent
// clients, --batch jobs per request, and reports the rate. The jobs run on
// 1 January only, so nothing fires during the run, and are deleted after
// it (unless --keep).
func (b *bench) runCreate(ctx context.Context) (*CreateReport, error) {
	endpoint := "/v1/jobs"
	if b.Batch > 1 {
		endpoint = "/v1/jobs:batch"
	}
	rep := &CreateReport{Mix: b.Mix, Server: b.Server, Endpoint: "POST " + endpoint, Jobs: b.Jobs,
		Clients: b.Clients, Batch: b.Batch, Namespace: b.ns}

	// The bodies are encoded before the clock starts: the bench shares the
	// machine with the server, and its own JSON encoding is not what is
	// measured.
	bodies, err := b.createBodies()
	if err != nil {
		return nil, err
	}
	rep.Requests = len(bodies)
	b.say("creating %d jobs through POST %s%s, %d per request, from %d clients (namespace %s)",
		b.Jobs, b.Server, endpoint, b.Batch, b.Clients, b.ns)
	defer b.cleanUpCreated(ctx)

	client := &http.Client{
		Timeout: time.Minute,
		// One kept-alive connection per client: the default keeps only two
		// idle per host, and the others would reconnect for every request.
		Transport: &http.Transport{MaxIdleConnsPerHost: b.Clients, MaxConnsPerHost: b.Clients},
	}
	defer client.CloseIdleConnections()
	url := strings.TrimRight(b.Server, "/") + endpoint

	start := time.Now()
	latencies, failed, firstErr := b.postAll(ctx, client, url, bodies)
	took := time.Since(start)
	if ctx.Err() != nil {
		return nil, errors.New("interrupted")
	}

	var all []float64
	for _, l := range latencies {
		all = append(all, l...)
	}
	rep.Seconds = took.Seconds()
	rep.Failed = failed
	rep.JobsPerSecond = float64(int64(b.Jobs)-rep.Failed) / took.Seconds()
	rep.RequestsPerSecond = float64(len(all)) / took.Seconds()
	rep.Latency = lagOf(all)
	if firstErr != nil {
		rep.FirstError = firstErr.Error()
	}
	if err := b.st.Pool().QueryRow(ctx, "SELECT count(*) FROM job_names WHERE namespace = $1", b.ns).Scan(&rep.Stored); err != nil {
		return nil, fmt.Errorf("count the jobs created: %w", err)
	}
	return rep, nil
}

// cleanUpCreated deletes the run's jobs (unless --keep) and, with
// autovacuum off, vacuums the jobs tables.
func (b *bench) cleanUpCreated(ctx context.Context) {
	if b.Keep {
		b.say("kept namespace %s's jobs", b.ns)
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
	defer cancel()
	if err := b.deleteJobs(cctx); err != nil {
		b.say("%v; delete namespace %s's jobs yourself", err, b.ns)
		return
	}
	if b.noAutovacuum && !b.NoAnalyze {
		// Standing in for autovacuum, as the other mixes do: without
		// it every run leaves its jobs behind as dead rows, and the
		// next run inserts into ever larger indexes.
		start := time.Now()
		if err := b.exec(cctx, "VACUUM (ANALYZE) jobs, job_names"); err != nil {
			b.say("vacuum the jobs tables: %v", err)
			return
		}
		b.say("autovacuum is off: vacuumed the jobs tables in %s", time.Since(start).Round(time.Millisecond))
	}
}

// postAll sends bodies from b.Clients clients, each taking the next
// body not yet sent, and returns each client's request latencies (ms),
// the jobs not created and the first error.
func (b *bench) postAll(ctx context.Context, client *http.Client, url string, bodies [][]byte) ([][]float64, int64, error) {
	var (
		next      atomic.Int64
		failed    atomic.Int64
		firstErr  error
		errOnce   sync.Once
		wg        sync.WaitGroup
		latencies = make([][]float64, b.Clients)
	)
	fail := func(jobs int, err error) {
		failed.Add(int64(jobs))
		errOnce.Do(func() { firstErr = err })
	}
	for c := range b.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= len(bodies) {
					return
				}
				jobs := min(b.Batch, b.Jobs-i*b.Batch)
				t0 := time.Now()
				err := b.post(ctx, client, url, bodies[i], jobs)
				latencies[c] = append(latencies[c], float64(time.Since(t0).Microseconds())/1000)
				if err != nil {
					var pe *partialError
					if errors.As(err, &pe) {
						fail(pe.failed, err)
					} else {
						fail(jobs, err)
					}
				}
			}
		}()
	}
	wg.Wait()
	return latencies, failed.Load(), firstErr
}

// createBodies are the run's request bodies: one job each for POST
// /v1/jobs, else up to --batch jobs each.
func (b *bench) createBodies() ([][]byte, error) {
	job := func(i int) map[string]any {
		return map[string]any{
			"name":      jobName(i),
			"namespace": b.ns,
			// Once a year, at a minute of the day spread over the jobs:
			// nothing fires during a run, and the first run is computed in
			// a time zone as for any cron job.
			"schedule": map[string]any{"cron": fmt.Sprintf("0 %d %d 1 1 *", i%60, i/60%24), "timezone": "Europe/Berlin"},
			"handler":  map[string]any{"type": "custom", "name": b.Handler},
			"payload":  map[string]any{"n": i},
		}
	}
	var bodies [][]byte
	for off := 0; off < b.Jobs; off += b.Batch {
		var v any
		if b.Batch == 1 {
			v = job(off)
		} else {
			jobs := make([]any, 0, min(b.Batch, b.Jobs-off))
			for i := off; i < min(off+b.Batch, b.Jobs); i++ {
				jobs = append(jobs, job(i))
			}
			v = map[string]any{"jobs": jobs}
		}
		body, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		bodies = append(bodies, body)
	}
	return bodies, nil
}

// partialError is a batch request some of whose jobs were not created.
type partialError struct {
	failed int
	first  string
}

func (e *partialError) Error() string {
	return fmt.Sprintf("%d jobs of a batch not created, the first: %s", e.failed, e.first)
}

// post sends one request of jobs jobs and checks that all were created.
func (b *bench) post(ctx context.Context, client *http.Client, url string, body []byte, jobs int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	setToken(req)
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	if err != nil {
		return fmt.Errorf("read the answer: %w", err)
	}
	if b.Batch == 1 {
		if res.StatusCode != http.StatusCreated {
			return fmt.Errorf("POST %s: %d %s", url, res.StatusCode, bytes.TrimSpace(out))
		}
		return nil
	}
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %d %s", url, res.StatusCode, bytes.TrimSpace(out))
	}
	// The counts alone, unless some job failed: decoding a thousand jobs
	// would cost the bench more CPU than the server spends on them, on
	// the cores they share.
	var counts struct {
		Created int `json:"created"`
	}
	if err := json.Unmarshal(out, &counts); err != nil {
		return fmt.Errorf("POST %s: unexpected answer: %w", url, err)
	}
	if counts.Created != jobs {
		var r models.JobBatchResult
		if err := json.Unmarshal(out, &r); err != nil {
			return fmt.Errorf("POST %s: unexpected answer: %w", url, err)
		}
		first := "?"
		for _, it := range r.Items {
			if it.Problem != nil && it.Problem.Detail != nil {
				first = *it.Problem.Detail
				break
			}
		}
		return &partialError{failed: jobs - r.Created, first: first}
	}
	return nil
}

// write prints the report as text or JSON.
func (r *CreateReport) write(w io.Writer, format string) error {
	if format == "json" {
		return writeJSON(w, r)
	}
	var s strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&s, format+"\n", args...) }
	p("tockbench create: %d jobs through %s at %s, %d per request, %d clients (namespace %s)",
		r.Jobs, r.Endpoint, r.Server, r.Batch, r.Clients, r.Namespace)
	p("  created        %.0f jobs/s (%.1f s)", r.JobsPerSecond, r.Seconds)
	p("  requests       %d, %.0f/s; latency %s", r.Requests, r.RequestsPerSecond, r.Latency)
	p("  failed         %d jobs not created; %d of the run's jobs stored", r.Failed, r.Stored)
	if r.FirstError != "" {
		p("  first error    %s", r.FirstError)
	}
	if r.Failed > 0 || r.Stored != int64(r.Jobs)-r.Failed {
		p("FAIL: not every job was created exactly once")
	}
	_, err := io.WriteString(w, s.String())
	return err
}

// ok reports whether every job was created, and stored once.
func (r *CreateReport) ok() bool { return r.Failed == 0 && r.Stored == int64(r.Jobs) }

// openStore opens the store only (a create run needs no NATS): to count
// the jobs created and to delete them.
func (b *bench) openStore(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	st, err := store.Open(cctx, b.PostgresURL)
	if err != nil {
		return err
	}
	b.st = st
	var autovacuum string
	if err := st.Pool().QueryRow(cctx, "SHOW autovacuum").Scan(&autovacuum); err == nil && autovacuum != "on" {
		b.noAutovacuum = true
	}
	return nil
}
