package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tock-sched/tock/api"
	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/internal/testenv"
	"github.com/tock-sched/tock/partition"
	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/store/storetest"
)

// recordingHandler records each bucket's ownership in Postgres, as the
// scanner does.
type recordingHandler struct {
	t  *testing.T
	st *store.Store
}

func (h recordingHandler) Acquire(b int, epoch int64) {
	if err := h.st.ClaimBucket(context.Background(), b, "n1", epoch); err != nil {
		h.t.Errorf("record bucket %d: %v", b, err)
	}
}

func (recordingHandler) Release(int) {}

// clusterServer runs the API with a cluster view over a real etcd, in
// which scheduler node n1 runs; stop stops n1.
func clusterServer(t *testing.T) (u string, st *store.Store, n1 *partition.Node, stop func()) {
	t.Helper()
	st = storetest.New(t, 16)
	e := testenv.Etcd(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Endpoint()}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() }) // after n1 has stopped
	srv, err := api.New(api.Config{
		Store:    st,
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		Registry: prometheus.NewRegistry(),
		Open:     true,
		Cluster:  partition.NewObserver(cli, "t"),
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)

	n1, err = partition.New(partition.Config{Client: cli, Cluster: "t", NodeID: "n1", Addr: "10.0.0.1:8080",
		Buckets: st.Buckets(), TTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	nctx, ncancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n1.Run(nctx, recordingHandler{t, st}) }()
	stop = sync.OnceFunc(func() {
		ncancel()
		if err := <-done; err != nil {
			t.Errorf("n1: %v", err)
		}
	})
	t.Cleanup(stop)
	return hs.URL, st, n1, stop
}

const (
	nodeHeader   = "NODE ADDR BUCKETS LEASE TTL STARTED"
	bucketHeader = "BUCKET OWNER EPOCH JOBS ACTIVE NEXT DUE"
)

func TestNodesAndBuckets(t *testing.T) {
	t.Parallel()
	u, st, n1, stop := clusterServer(t)
	buckets := st.Buckets()
	testenv.WaitFor(t, 10*time.Second, "n1 owns and has recorded every bucket", func() bool {
		stats, err := st.ListBucketStats(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range stats {
			if s.Node != "n1" {
				return false
			}
		}
		return len(n1.Owned()) == buckets
	})
	ok(t, u, "jobs", "create", "--name", "soon", "--in", "1h", "--custom", "w")
	ok(t, u, "jobs", "create", "--name", "paused", "--in", "1h", "--custom", "w")
	var jobs models.JobList
	if err := json.Unmarshal([]byte(ok(t, u, "-o", "json", "jobs", "list")), &jobs); err != nil {
		t.Fatal(err)
	}
	soon, paused := jobs.Items[1], jobs.Items[0]
	ok(t, u, "jobs", "pause", paused.Id.String())

	out := ok(t, u, "nodes")
	r := rows(t, out, nodeHeader)
	if len(r) != 1 {
		t.Fatalf("nodes:\n%s", out)
	}
	if f := strings.Fields(r[0]); len(f) != 5 || f[0] != "n1" || f[1] != "10.0.0.1:8080" || f[2] != fmt.Sprint(buckets) ||
		(f[3] != "1s" && f[3] != "2s") || !strings.HasPrefix(f[4], time.Now().UTC().Format("2006-01-02")) {
		t.Errorf("nodes row %q", r[0])
	}
	var nodes models.NodeList
	if err := json.Unmarshal([]byte(ok(t, u, "-o", "json", "nodes")), &nodes); err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != 1 || nodes.Items[0].BucketCount != buckets || len(nodes.Items[0].Buckets) != buckets {
		t.Errorf("nodes JSON: %+v", nodes)
	}

	out = ok(t, u, "buckets")
	r = rows(t, out, bucketHeader)
	if len(r) != buckets {
		t.Fatalf("buckets: %d rows, want %d\n%s", len(r), buckets, out)
	}
	owned := n1.Owned()
	for i, row := range r {
		f := strings.Fields(row)
		jobs, active, due := "0", "0", "-"
		switch i {
		case soon.Bucket:
			jobs, active, due = "1", "1", soon.NextRunAt.UTC().Format(time.RFC3339)
		case paused.Bucket:
			jobs = "1"
		}
		if soon.Bucket == paused.Bucket && i == soon.Bucket {
			jobs = "2"
		}
		want := []string{fmt.Sprint(i), "n1", fmt.Sprint(owned[i]), jobs, active, due}
		if strings.Join(f, " ") != strings.Join(want, " ") {
			t.Errorf("buckets row %q, want %q", row, strings.Join(want, " "))
		}
	}
	var parts models.BucketList
	if err := json.Unmarshal([]byte(ok(t, u, "-o", "json", "buckets")), &parts); err != nil {
		t.Fatal(err)
	}
	if len(parts.Items) != buckets || deref(parts.Items[3].Owner) != "n1" || deref(parts.Items[3].RecordedEpoch) != owned[3] {
		t.Errorf("buckets JSON: %+v", parts.Items[3])
	}

	// n1 leaves: no node owns anything, and Postgres still shows the
	// last recorded owner.
	stop()
	testenv.WaitFor(t, 10*time.Second, "no live nodes", func() bool {
		return len(rows(t, ok(t, u, "nodes"), nodeHeader)) == 0
	})
	r = rows(t, ok(t, u, "partitions"), bucketHeader) // the old name still works
	for i, row := range r {
		if f := strings.Fields(row); len(f) < 5 || strings.Join(f[1:5], " ") != fmt.Sprintf("- (recorded n1@%d) -", owned[i]) {
			t.Errorf("bucket %d without owner: %q", i, row)
		}
	}
}

func TestClusterViewUnavailable(t *testing.T) {
	t.Parallel()
	hs, _ := server(t) // an API without a cluster view
	for _, cmd := range []string{"nodes", "buckets", "partitions"} {
		res := tockctl(t, hs.URL, cmd)
		if res.code != 1 || !strings.HasPrefix(res.stderr, "error: this node has no etcd connection") || res.stdout != "" {
			t.Errorf("%s: %+v", cmd, res)
		}
	}
}
