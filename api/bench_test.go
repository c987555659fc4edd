package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/auth"
	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/store/model"
	"github.com/tock-sched/tock/store/storetest"
)

// benchServer serves the API over a fresh store of 256 buckets (a real
// cluster's count) and returns its URL and a client that keeps a
// connection per concurrent request.
func benchServer(b *testing.B) (string, *http.Client) {
	url, client, _ := benchServerWith(b, true)
	return url, client
}

// benchServerWith is benchServer, open or requiring keys, with its store.
func benchServerWith(b *testing.B, open bool) (string, *http.Client, *store.Store) {
	b.Helper()
	st := storetest.New(b, 256)
	srv, err := New(Config{
		Store:    st,
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		Registry: prometheus.NewRegistry(),
		Open:     open,
	})
	if err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	b.Cleanup(hs.Close)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	b.Cleanup(client.CloseIdleConnections)
	return hs.URL, client, st
}

// benchJob is job i of a benchmark: a cron job in a time zone, due on
// 1 January only.
func benchJob(i int64) map[string]any {
	return map[string]any{
		"name":     fmt.Sprintf("job-%09d", i),
		"schedule": map[string]any{"cron": fmt.Sprintf("0 %d %d 1 1 *", i%60, i/60%24), "timezone": "Europe/Berlin"},
		"handler":  map[string]any{"type": "custom", "name": "bench"},
		"payload":  map[string]any{"n": i},
	}
}

// post sends one request and fails the benchmark unless it is answered
// with want.
func post(b *testing.B, client *http.Client, url string, body any, want int) []byte {
	raw, err := json.Marshal(body)
	if err != nil {
		b.Fatal(err)
	}
	res, err := client.Post(url, "application/json", bytes.NewReader(raw))
	if err != nil {
		b.Fatal(err)
	}
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	if err != nil {
		b.Fatal(err)
	}
	if res.StatusCode != want {
		b.Fatalf("POST %s: %d %s", url, res.StatusCode, out)
	}
	return out
}

// BenchmarkCreateJob measures POST /v1/jobs from 16 concurrent clients,
// in process, over real Postgres (the bench command's --mix create
// measures it against a running tockd).
func BenchmarkCreateJob(b *testing.B) {
	url, client := benchServer(b)
	var n atomic.Int64
	b.SetParallelism(16) // 16 clients per GOMAXPROCS; at least 16
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			post(b, client, url+"/v1/jobs", benchJob(n.Add(1)), http.StatusCreated)
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkCreateJobBatch measures POST /v1/jobs:batch with 1,000 jobs
// per request from 4 concurrent clients; an op is one request.
func BenchmarkCreateJobBatch(b *testing.B) {
	url, client := benchServer(b)
	var n atomic.Int64
	b.SetParallelism(2)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			jobs := make([]any, MaxBatchJobs)
			for k := range jobs {
				jobs[k] = benchJob(n.Add(1))
			}
			var res models.JobBatchResult
			if err := json.Unmarshal(post(b, client, url+"/v1/jobs:batch", map[string]any{"jobs": jobs}, http.StatusOK), &res); err != nil {
				b.Fatal(err)
			}
			if res.Created != MaxBatchJobs {
				b.Fatalf("created %d of %d", res.Created, MaxBatchJobs)
			}
		}
	})
	b.ReportMetric(float64(b.N*MaxBatchJobs)/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkGetJob measures GET /v1/jobs/{id} from 16 concurrent clients:
// on an open server, with a key for every namespace (authentication
// only: a cached key), and with a namespace's key (plus the lookup of
// the job's namespace before the handler reads the job).
func BenchmarkGetJob(b *testing.B) {
	for _, c := range []struct {
		name  string
		open  bool
		keyNS string
	}{{"open", true, ""}, {"key-every-namespace", false, "*"}, {"key-one-namespace", false, "default"}} {
		// Set up once per case (b.Run calls its function for each b.N).
		url, client, st := benchServerWith(b, c.open)
		header := ""
		var ids []string
		{
			if !c.open {
				k, err := auth.NewKey()
				if err != nil {
					b.Fatal(err)
				}
				if _, err := st.CreateAPIKey(context.Background(), model.APIKey{ID: k.ID, SecretHash: k.Hash(), Namespace: c.keyNS, Role: "admin"}); err != nil {
					b.Fatal(err)
				}
				header = "Bearer " + k.String()
			}
			for i := range int64(100) {
				req, _ := http.NewRequest("POST", url+"/v1/jobs", bytes.NewReader(must(json.Marshal(benchJob(i)))))
				req.Header.Set("Content-Type", "application/json")
				if header != "" {
					req.Header.Set("Authorization", header)
				}
				res, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				var j models.Job
				_ = json.NewDecoder(res.Body).Decode(&j)
				res.Body.Close()
				ids = append(ids, j.Id.String())
			}
		}
		b.Run(c.name, func(b *testing.B) {
			var n atomic.Int64
			b.SetParallelism(16)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					req, _ := http.NewRequest("GET", url+"/v1/jobs/"+ids[n.Add(1)%int64(len(ids))], nil)
					if header != "" {
						req.Header.Set("Authorization", header)
					}
					res, err := client.Do(req)
					if err != nil {
						b.Fatal(err)
					}
					_, _ = io.Copy(io.Discard, res.Body)
					res.Body.Close()
					if res.StatusCode != http.StatusOK {
						b.Fatalf("GET: %d", res.StatusCode)
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
		})
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// BenchmarkApplySet plans and applies a set of 200 jobs over HTTP: new
// (each iteration a set of its own), then unchanged (the same files
// again: a plan and an apply that change nothing but the set's record),
// then with every job's description changed.
func BenchmarkApplySet(b *testing.B) {
	url, client := benchServer(b)
	post := func(path string, body map[string]any) models.ApplySetPlan {
		raw, _ := json.Marshal(body)
		r, err := client.Post(url+path, "application/json", bytes.NewReader(raw))
		if err != nil {
			b.Fatal(err)
		}
		defer r.Body.Close()
		var p models.ApplySetPlan
		if r.StatusCode != http.StatusOK || json.NewDecoder(r.Body).Decode(&p) != nil {
			msg, _ := io.ReadAll(r.Body)
			b.Fatalf("%s: %d %s", path, r.StatusCode, msg)
		}
		return p
	}
	apply := func(set string, js []any) {
		body := map[string]any{"jobs": js}
		body["plan_hash"] = post("/v1/applysets/"+set+":plan", body).PlanHash
		post("/v1/applysets/"+set+":apply", body)
	}
	jobsOf := func(set, description string) []any {
		js := make([]any, 200)
		for i := range js {
			j := benchJob(int64(i))
			j["name"] = fmt.Sprintf("%s-%03d", set, i)
			j["description"] = description
			js[i] = j
		}
		return js
	}
	var n atomic.Int64
	b.Run("create", func(b *testing.B) {
		for b.Loop() {
			set := fmt.Sprintf("s%d", n.Add(1))
			apply(set, jobsOf(set, "one"))
		}
	})
	apply("same", jobsOf("same", "one"))
	b.Run("unchanged", func(b *testing.B) {
		for b.Loop() {
			apply("same", jobsOf("same", "one"))
		}
	})
	b.Run("update", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			apply("same", jobsOf("same", fmt.Sprint("v", i)))
		}
	})
}
