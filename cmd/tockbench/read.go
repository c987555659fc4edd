package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// mixRead times the API's reads: each query alone (its first page, a
// deep page reached by cursor, its count), or all of them at once from
// many clients (--read-load) while something else, such as another
// tockbench, fires (docs/bench.md, issue 44).
const mixRead = "read"

// readFlags are --mix read's.
type readFlags struct {
	ReadQuery  []string `name:"read-query" sep:"none" help:"--mix read: a GET path to time (repeatable), e.g. '/v1/jobs?namespace=billing&selector=team%3Dpayments' ({now+1h}: that time, RFC 3339); default: the job filters of docs/bench.md over scripts/seed-scale.sh's data."`
	ReadRepeat int      `name:"read-repeat" default:"20" help:"--mix read: timed calls of each query's first page, and of its deep page."`
	ReadDepth  int      `name:"read-depth" default:"20" help:"--mix read: the deep page is this many pages in, followed by cursor (0: none)."`
	ReadLoad   bool     `name:"read-load" help:"--mix read: read the queries' first pages from --clients clients for --duration instead, and report the rate, latency and refusals (503, 429)."`
	ReadRate   float64  `name:"read-rate" help:"--mix read --read-load: reads a second in all, shared by the clients (0: each client reads without pause)."`
}

// readQueries are the default queries: every job filter of issue 44,
// alone and combined, over scripts/seed-scale.sh's namespaces and labels,
// then the executions' search and statistics.
var readQueries = []string{
	"/v1/jobs?namespace=billing",
	"/v1/jobs?namespace=billing&selector=team%3Dpayments",
	"/v1/jobs?namespace=default&selector=tock.io%2Falert%3Dtrue",
	"/v1/jobs?namespace=billing&selector=tier",
	"/v1/jobs?namespace=billing&selector=tier+in+(batch,critical)",
	"/v1/jobs?namespace=billing&selector=env!%3Dprod",
	"/v1/jobs?namespace=billing&selector=!tier",
	"/v1/jobs?namespace=billing&selector=team+notin+(payments)",
	"/v1/jobs?namespace=default&selector=team%3Dnobody",
	"/v1/jobs?namespace=billing&state=paused",
	"/v1/jobs?namespace=billing&state=completed",
	"/v1/jobs?namespace=billing&handler=http",
	"/v1/jobs?namespace=billing&name_prefix=billing-0001",
	"/v1/jobs?namespace=billing&next_run_before={now+1h}",
	"/v1/jobs?namespace=billing&next_run_after={now+24h}&next_run_before={now+25h}",
	// A 1 % and a 0.1 % namespace: over the 5,000 jobs probed by key,
	// walked by jobs_due with the namespace tested on its entries.
	"/v1/jobs?namespace=audit&next_run_before={now+1h}",
	"/v1/jobs?namespace=audit&next_run_after={now+24h}&next_run_before={now+25h}",
	"/v1/jobs?namespace=sandbox&next_run_before={now+24h}",
	"/v1/jobs?namespace=billing&state=paused&selector=team%3Dpayments,env%3Dstaging",
	"/v1/jobs?namespace=billing&handler=http&selector=tier%3Dcritical&state=active",
	"/v1/jobs?selector=team%3Dnobody",
	"/v1/jobs?state=completed",
	"/v1/jobs?namespace=billing&count=true",
	"/v1/jobs?namespace=billing&selector=team%3Dpayments&count=true",
	"/v1/jobs?namespace=billing&state=paused&count=true",
	"/v1/jobs?namespace=billing&selector=tier%3Dcritical&handler=http&count=true",
	"/v1/jobs?namespace=billing&next_run_before={now+1h}&count=true",
	// Executions' search and statistics (issue 44, item 3).
	"/v1/executions?namespace=billing&since={now-24h}",
	"/v1/executions?state=failed,dead&since={now-24h}&count=true",
	"/v1/stats?namespace=billing&since={now-24h}&until={now}",
}

// expand replaces {now}, {now+D} and {now-D} (D a Go duration) in q by
// that time, RFC 3339 and escaped, from now.
func expand(q string, now time.Time) (string, error) {
	var b strings.Builder
	for {
		i := strings.Index(q, "{now")
		if i < 0 {
			b.WriteString(q)
			return b.String(), nil
		}
		j := strings.Index(q[i:], "}")
		if j < 0 {
			return "", fmt.Errorf("%q: an unclosed {now", q)
		}
		t, spec := now, q[i+4:i+j]
		if spec != "" {
			d, err := time.ParseDuration(strings.TrimPrefix(spec, "+"))
			if err != nil {
				return "", fmt.Errorf("%q: {now%s}: %w", q, spec, err)
			}
			t = now.Add(d)
		}
		b.WriteString(q[:i] + url.QueryEscape(t.UTC().Format(time.RFC3339)))
		q = q[i+j+1:]
	}
}

// ReadTiming is one query's figures: each alone, or (Load) under load.
type ReadTiming struct {
	Query string  `json:"query"`
	Calls int     `json:"calls"`
	P50MS float64 `json:"p50_ms"`
	P99MS float64 `json:"p99_ms"`
	MaxMS float64 `json:"max_ms"`
	Items int     `json:"items"`
	Total *int64  `json:"total,omitempty"`
	// Deep is the page ReadDepth pages in: its figures, or nil when the
	// query has fewer pages.
	Deep *ReadTiming `json:"deep,omitempty"`
	// Codes counts the answers by status (under load).
	Codes map[int]int `json:"codes,omitempty"`
}

// ReadReport is a --mix read run's.
type ReadReport struct {
	Server  string       `json:"server"`
	Load    bool         `json:"load"`
	Clients int          `json:"clients,omitempty"`
	Rate    float64      `json:"rate,omitempty"`
	Seconds float64      `json:"seconds,omitempty"`
	PerSec  float64      `json:"per_second,omitempty"`
	Codes   map[int]int  `json:"codes,omitempty"`
	Queries []ReadTiming `json:"queries"`
}

func (c *cli) mainRead(ctx context.Context) int {
	rep, err := c.runRead(ctx)
	if err == nil {
		err = rep.write(os.Stdout, c.Output)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "tockbench:", err)
		return 1
	}
	return 0
}

func (c *cli) runRead(ctx context.Context) (*ReadReport, error) {
	qs := slices.Clone(c.ReadQuery)
	if len(qs) == 0 {
		qs = slices.Clone(readQueries)
	}
	switch {
	case c.ReadRepeat < 1:
		return nil, fmt.Errorf("--read-repeat %d: want at least 1", c.ReadRepeat)
	case c.ReadDepth < 0:
		return nil, fmt.Errorf("--read-depth %d: want 0 or more", c.ReadDepth)
	case c.ReadLoad && (c.Clients < 1 || c.Duration <= 0):
		return nil, errors.New("--read-load: want --clients and --duration above 0")
	case c.ReadRate < 0 || (c.ReadRate > 0 && !c.ReadLoad):
		return nil, fmt.Errorf("--read-rate %g: want 0 or more, with --read-load", c.ReadRate)
	}
	now := time.Now()
	for i, q := range qs {
		if !strings.HasPrefix(q, "/") {
			return nil, fmt.Errorf("--read-query %q: want a path starting with /", q)
		}
		var err error
		if qs[i], err = expand(q, now); err != nil {
			return nil, fmt.Errorf("--read-query %w", err)
		}
	}
	r := &reader{server: strings.TrimSuffix(c.Server, "/"),
		client: &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: c.Clients + 1}}}
	rep := &ReadReport{Server: r.server, Load: c.ReadLoad}
	if c.ReadLoad {
		return r.load(ctx, rep, qs, c.Clients, c.Duration, c.ReadRate)
	}
	for _, q := range qs {
		t, err := r.alone(ctx, q, c.ReadRepeat, c.ReadDepth)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(os.Stderr, "%-80s p50 %7.1f ms  p99 %7.1f ms  items %d\n", q, t.P50MS, t.P99MS, t.Items)
		rep.Queries = append(rep.Queries, t)
	}
	return rep, nil
}

// reader calls the API.
type reader struct {
	server string
	client *http.Client
}

// page is what a list answers, as far as a reader reads it.
type page struct {
	Items      []json.RawMessage `json:"items"`
	NextCursor *string           `json:"next_cursor"`
	Total      *int64            `json:"total"`
}

// get calls path and returns the status, the time in ms and the page
// (for a 200).
func (r *reader) get(ctx context.Context, path string) (int, float64, *page, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.server+path, nil)
	if err != nil {
		return 0, 0, nil, err
	}
	setToken(req)
	start := time.Now()
	resp, err := r.client.Do(req)
	if err != nil {
		return 0, 0, nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	ms := float64(time.Since(start).Microseconds()) / 1000
	if err != nil || resp.StatusCode != http.StatusOK {
		return resp.StatusCode, ms, nil, err
	}
	var p page
	if err := json.Unmarshal(body, &p); err != nil {
		return resp.StatusCode, ms, nil, fmt.Errorf("GET %s: %w", path, err)
	}
	return resp.StatusCode, ms, &p, nil
}

// times calls path n times, one after the other, and sums them up. An
// answer other than 200 (the API refusing a read too expensive, say) is
// counted in Codes and ends the calls: the page is nil then.
func (r *reader) times(ctx context.Context, path string, n int) (ReadTiming, *page, error) {
	t := ReadTiming{Query: path}
	var (
		lat   []float64
		first *page
	)
	for range n {
		code, ms, p, err := r.get(ctx, path)
		if err != nil {
			return t, nil, err
		}
		lat = append(lat, ms)
		if code != http.StatusOK {
			t.Codes = map[int]int{code: 1}
			first = nil
			break
		}
		if first == nil {
			first = p
		}
	}
	t.Calls = len(lat)
	if first != nil {
		t.Items, t.Total = len(first.Items), first.Total
	}
	t.P50MS, t.P99MS, t.MaxMS = quantiles(lat)
	return t, first, nil
}

// alone times query q's first page n times, then its page depth pages
// in n times.
func (r *reader) alone(ctx context.Context, q string, n, depth int) (ReadTiming, error) {
	// One call first, not timed: the plan's first run reads cold pages.
	if _, _, _, err := r.get(ctx, q); err != nil {
		return ReadTiming{}, err
	}
	t, p, err := r.times(ctx, q, n)
	if err != nil || depth == 0 || p == nil {
		return t, err
	}
	sep := "?"
	if strings.Contains(q, "?") {
		sep = "&"
	}
	deep := ""
	for i := 0; i < depth; i++ {
		if p.NextCursor == nil {
			return t, nil
		}
		deep = q + sep + "cursor=" + url.QueryEscape(*p.NextCursor)
		code, _, np, err := r.get(ctx, deep)
		if err != nil {
			return t, err
		}
		if code != http.StatusOK {
			t.Deep = &ReadTiming{Query: fmt.Sprintf("page %d", i+2), Codes: map[int]int{code: 1}}
			return t, nil
		}
		p = np
	}
	d, _, err := r.times(ctx, deep, n)
	if err != nil {
		return t, err
	}
	d.Query = fmt.Sprintf("page %d", depth+1)
	t.Deep = &d
	return t, nil
}

// load reads the queries' first pages from clients clients, each taking
// the next query in turn, for d; at rate reads a second in all when rate
// is above 0 (a read that finds every client busy is not made up for).
func (r *reader) load(ctx context.Context, rep *ReadReport, qs []string, clients int, d time.Duration, rate float64) (*ReadReport, error) {
	type call struct {
		q    int
		code int
		ms   float64
	}
	var (
		mu    sync.Mutex
		calls []call
		next  int
		errs  []error
	)
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	start := time.Now()
	var tokens chan struct{}
	if rate > 0 {
		tokens = make(chan struct{})
		go func() {
			t := time.NewTicker(time.Duration(float64(time.Second) / rate))
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					select {
					case tokens <- struct{}{}:
					default: // every client busy
					}
				}
			}
		}()
	}
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if tokens != nil {
					select {
					case <-ctx.Done():
						return
					case <-tokens:
					}
				}
				mu.Lock()
				q := next % len(qs)
				next++
				mu.Unlock()
				code, ms, _, err := r.get(ctx, qs[q])
				if ctx.Err() != nil {
					return
				}
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else {
					calls = append(calls, call{q, code, ms})
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		return nil, fmt.Errorf("%d calls failed, first: %w", len(errs), errs[0])
	}
	rep.Clients, rep.Rate, rep.Seconds = clients, rate, time.Since(start).Seconds()
	rep.PerSec = float64(len(calls)) / rep.Seconds
	rep.Codes = map[int]int{}
	for i, q := range qs {
		t := ReadTiming{Query: q, Codes: map[int]int{}}
		var lat []float64
		for _, c := range calls {
			if c.q != i {
				continue
			}
			t.Codes[c.code]++
			rep.Codes[c.code]++
			if c.code == http.StatusOK {
				lat = append(lat, c.ms)
			}
		}
		t.Calls = len(lat)
		t.P50MS, t.P99MS, t.MaxMS = quantiles(lat)
		rep.Queries = append(rep.Queries, t)
	}
	return rep, nil
}

// quantiles are the median, 99th percentile (nearest rank) and maximum
// of ms; zero when empty.
func quantiles(ms []float64) (p50, p99, most float64) {
	if len(ms) == 0 {
		return 0, 0, 0
	}
	s := slices.Clone(ms)
	slices.Sort(s)
	rank := func(q float64) float64 {
		i := int(q*float64(len(s))+0.999999) - 1
		return s[min(max(i, 0), len(s)-1)]
	}
	return rank(0.5), rank(0.99), s[len(s)-1]
}

func (r *ReadReport) write(w io.Writer, format string) error {
	if format == "json" {
		e := json.NewEncoder(w)
		e.SetIndent("", "  ")
		return e.Encode(r)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if r.Load {
		fmt.Fprintf(tw, "%d clients for %.0f s: %.1f reads/s; answers by status %v\n", r.Clients, r.Seconds, r.PerSec, r.Codes)
		fmt.Fprintln(tw, "query\tcalls (200)\tp50 ms\tp99 ms\tmax ms\tstatuses")
		for _, q := range r.Queries {
			fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%.1f\t%v\n", q.Query, q.Calls, q.P50MS, q.P99MS, q.MaxMS, q.Codes)
		}
		return tw.Flush()
	}
	fmt.Fprintln(tw, "query\titems\ttotal\tp50 ms\tp99 ms\tmax ms\tdeep page p50 ms\tp99 ms\trefused")
	for _, q := range r.Queries {
		total, deep50, deep99, refused := "", "-", "-", ""
		if q.Total != nil {
			total = fmt.Sprint(*q.Total)
		}
		if q.Deep != nil {
			deep50, deep99 = fmt.Sprintf("%.1f", q.Deep.P50MS), fmt.Sprintf("%.1f", q.Deep.P99MS)
			if len(q.Deep.Codes) > 0 {
				refused = fmt.Sprintf("%s: %v", q.Deep.Query, q.Deep.Codes)
			}
		}
		if len(q.Codes) > 0 {
			refused = fmt.Sprint(q.Codes)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%.1f\t%.1f\t%.1f\t%s\t%s\t%s\n", q.Query, q.Items, total, q.P50MS, q.P99MS, q.MaxMS, deep50, deep99, refused)
	}
	return tw.Flush()
}
