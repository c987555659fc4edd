package partition

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tock-sched/tock/internal/testenv"
)

// fencingTable plays Postgres for a node: it records each acquired
// bucket's epoch as the scanner's ClaimBucket would (refusing an older
// one), and allocates generations.
type fencingTable struct {
	mu      sync.Mutex
	epochs  map[int]int64
	fenced  int // claims refused: epoch below the recorded one
	lastGen int64
}

func (f *fencingTable) GetMaxEpoch(context.Context) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var m int64
	for _, e := range f.epochs {
		m = max(m, e)
	}
	return m, nil
}

func (f *fencingTable) NextGeneration(_ context.Context, above int64) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastGen = max(f.lastGen, above) + 1
	return f.lastGen, nil
}

func (f *fencingTable) Acquire(b int, epoch int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if epoch < f.epochs[b] {
		f.fenced++
		return
	}
	f.epochs[b] = epoch
}

func (f *fencingTable) Release(int) {}

func (f *fencingTable) snapshot() (map[int]int64, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[int]int64, len(f.epochs))
	for b, e := range f.epochs {
		out[b] = e
	}
	return out, f.fenced
}

func etcdClient(t *testing.T, endpoint string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// runFenced runs a node with fencing against f until the test ends.
func runFenced(t *testing.T, cli *clientv3.Client, f *fencingTable, buckets int) *Node {
	t.Helper()
	n, err := New(Config{Client: cli, Cluster: "t", NodeID: "n1", Buckets: buckets, TTL: 2 * time.Second, Fencing: f})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx, f) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return n
}

// ownedAbove waits until the node owns every bucket at an epoch of
// generation gen above the epochs in before, and returns its epochs.
func ownedAbove(t *testing.T, n *Node, buckets int, gen int64, before map[int]int64) map[int]int64 {
	t.Helper()
	var owned map[int]int64
	testenv.WaitFor(t, 30*time.Second, "every bucket owned in generation "+strconv.FormatInt(gen, 10), func() bool {
		owned = n.Owned()
		if len(owned) != buckets {
			return false
		}
		for b, e := range owned {
			if EpochGeneration(e) != gen || e <= before[b] {
				return false
			}
		}
		return true
	})
	return owned
}

func TestEpochsKeepGrowingWhenEtcdIsWiped(t *testing.T) {
	e := testenv.Etcd(t)
	cli := etcdClient(t, e.Endpoint())
	// Some history first, so that the owner keys' revisions are higher
	// than those a wiped etcd gives them.
	for i := range 50 {
		if _, err := cli.Put(context.Background(), "/unrelated", strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	f := &fencingTable{epochs: map[int]int64{}}
	const buckets = 8
	n := runFenced(t, cli, f, buckets)

	// A new etcd gets generation 1: epochs are 1<<40 | create revision.
	first := ownedAbove(t, n, buckets, 1, nil)
	resp, err := cli.Get(context.Background(), OwnersPrefix("t"), clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		b, _ := strconv.Atoi(string(kv.Key[len(OwnersPrefix("t")):]))
		if first[b] != Epoch(1, kv.CreateRevision) {
			t.Errorf("bucket %d at epoch %d, want generation 1 and create revision %d", b, first[b], kv.CreateRevision)
		}
	}

	// etcd loses its data: revisions start again near 1, below every
	// recorded epoch's revision. The node joins the new etcd in
	// generation 2, so its epochs still pass the recorded ones.
	e.Stop()
	e.Dir = t.TempDir()
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	second := ownedAbove(t, n, buckets, 2, first)
	for b, ep := range second {
		if EpochRevision(ep) >= EpochRevision(first[b]) {
			t.Errorf("bucket %d: owner key created at revision %d after the wipe, %d before; the test needs it lower", b, EpochRevision(ep), EpochRevision(first[b]))
		}
	}
	if got, err := cli.Get(context.Background(), GenerationKey("t")); err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "2" {
		t.Fatalf("generation key after the wipe: %v %v, want 2", got, err)
	}
	if _, fenced := f.snapshot(); fenced != 0 {
		t.Fatalf("%d claims were fenced", fenced)
	}
	owners, err := NewObserver(cli, "t").Owners(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for b, o := range owners {
		if o.Epoch != second[b] {
			t.Errorf("observer shows bucket %d at epoch %d, the node owns it at %d", b, o.Epoch, second[b])
		}
	}
}

func TestEtcdBehindTheRecordedEpochsStartsANewGeneration(t *testing.T) {
	e := testenv.Etcd(t)
	cli := etcdClient(t, e.Endpoint())
	// etcd restored from an old snapshot: it has generation 3, but
	// Postgres recorded an epoch of generation 3 at a revision it has
	// not reached.
	if _, err := cli.Put(context.Background(), GenerationKey("t"), "3"); err != nil {
		t.Fatal(err)
	}
	f := &fencingTable{epochs: map[int]int64{0: Epoch(3, 1_000_000)}, lastGen: 3}
	const buckets = 4
	n := runFenced(t, cli, f, buckets)
	ownedAbove(t, n, buckets, 4, map[int]int64{0: Epoch(3, 1_000_000)})

	// Another node starting a new generation (say, it saw the same
	// restore) makes this one let go and join again in that generation.
	before := n.Owned()
	if _, err := cli.Put(context.Background(), GenerationKey("t"), "9"); err != nil {
		t.Fatal(err)
	}
	ownedAbove(t, n, buckets, 9, before)
	if _, fenced := f.snapshot(); fenced != 0 {
		t.Fatalf("%d claims were fenced", fenced)
	}
}
