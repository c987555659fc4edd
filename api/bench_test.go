package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tock-sched/tock/store/storetest"
)

// benchServer serves the API over a fresh store of 256 buckets (a real
// cluster's count) and returns its URL and a client that keeps a
// connection per concurrent request.
func benchServer(b *testing.B) (string, *http.Client) {
	b.Helper()
	st := storetest.New(b, 256)
	srv, err := New(Config{
		Store:    st,
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		Registry: prometheus.NewRegistry(),
		Open:     true,
	})
	if err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	b.Cleanup(hs.Close)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	b.Cleanup(client.CloseIdleConnections)
	return hs.URL, client
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
			var res JobBatchResult
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
