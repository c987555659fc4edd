package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

func TestQuantiles(t *testing.T) {
	var ms []float64
	for i := 1; i <= 100; i++ {
		ms = append(ms, float64(101-i))
	}
	if p50, p99, most := quantiles(ms); p50 != 50 || p99 != 99 || most != 100 {
		t.Errorf("quantiles of 1..100 = %v %v %v; want 50 99 100", p50, p99, most)
	}
	if p50, p99, most := quantiles(nil); p50 != 0 || p99 != 0 || most != 0 {
		t.Errorf("quantiles of nothing = %v %v %v", p50, p99, most)
	}
}

func TestExpand(t *testing.T) {
	now := time.Date(2026, 11, 29, 3, 0, 0, 0, time.UTC)
	got, err := expand("/v1/jobs?a={now}&b={now+1h}&c={now-30m}", now)
	if want := "/v1/jobs?a=2026-11-29T03%3A00%3A00Z&b=2026-11-29T04%3A00%3A00Z&c=2026-11-29T02%3A30%3A00Z"; err != nil || got != want {
		t.Errorf("expand = %q, %v; want %q", got, err, want)
	}
	for _, bad := range []string{"/v1/jobs?a={now+1h", "/v1/jobs?a={now+soon}"} {
		if _, err := expand(bad, now); err == nil {
			t.Errorf("expand(%q): no error", bad)
		}
	}
}

// A list of 30 pages: the deep page is reached by following cursors, its
// count is read, and under load a refusal is counted by status, not
// timed.
func TestReadMix(t *testing.T) {
	var calls, refused atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if r.URL.Query().Get("refuse") != "" {
			refused.Add(1)
			w.Header().Set("Retry-After", "2")
			http.Error(w, "too expensive", http.StatusServiceUnavailable)
			return
		}
		n, _ := strconv.Atoi(r.URL.Query().Get("cursor"))
		next := ""
		if n < 29 {
			next = fmt.Sprintf(`,"next_cursor":"%d"`, n+1)
		}
		fmt.Fprintf(w, `{"items":[{"page":%d},{}],"total":60%s}`, n, next)
	}))
	defer srv.Close()
	c := &cli{Server: srv.URL, Clients: 4, Duration: 300 * time.Millisecond, Output: "text",
		readFlags: readFlags{ReadQuery: []string{"/v1/jobs?namespace=a"}, ReadRepeat: 3, ReadDepth: 20}}
	rep, err := c.runRead(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	q := rep.Queries[0]
	if q.Items != 2 || q.Total == nil || *q.Total != 60 || q.Calls != 3 || q.Deep == nil || q.Deep.Calls != 3 {
		t.Fatalf("alone: %+v", q)
	}
	// 1 untimed + 3 first pages + 20 to walk + 3 deep.
	if n := calls.Load(); n != 27 {
		t.Errorf("%d calls, want 27", n)
	}
	// A refusal is counted, not fatal, and ends that query's calls.
	c.ReadQuery = []string{"/v1/jobs?refuse=1", "/v1/jobs?namespace=a"}
	if rep, err = c.runRead(context.Background()); err != nil || rep.Queries[0].Codes[503] != 1 || rep.Queries[0].Calls != 1 ||
		rep.Queries[1].Calls != 3 {
		t.Errorf("a refused query: %+v, %v", rep, err)
	}
	c.ReadQuery = []string{"/v1/jobs?namespace=a"}
	c.ReadDepth = 40
	if rep, err = c.runRead(context.Background()); err != nil || rep.Queries[0].Deep != nil {
		t.Errorf("a depth past the last page: %+v, %v; want no deep page", rep, err)
	}

	c.ReadLoad, c.ReadQuery = true, []string{"/v1/jobs?namespace=a", "/v1/jobs?refuse=1"}
	if rep, err = c.runRead(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Paced: 100 reads a second in all, for 0.3 s.
	c.ReadRate = 100
	paced, err := c.runRead(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n := paced.Codes[200] + paced.Codes[503]; n < 10 || n > 40 {
		t.Errorf("paced at 100/s for 0.3 s: %d reads, want about 30", n)
	}
	if rep.Codes[200] == 0 || rep.Codes[503] == 0 || int64(rep.Codes[503]) > refused.Load() || rep.Queries[1].Calls != 0 ||
		rep.Queries[1].Codes[503] == 0 || rep.PerSec <= 0 {
		t.Errorf("under load: %+v (refused %d)", rep, refused.Load())
	}
}
