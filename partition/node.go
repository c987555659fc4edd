// Package partition decides which tockd scheduler node fires which bucket
// of jobs: etcd membership, bucket ownership, sticky rebalancing and the
// fencing epochs that make a deposed owner harmless.
//
// Assignment is leaderless. Every node watches the member and owner keys
// and computes the same answer: the desired owner of bucket b is the live
// member with the highest rendezvous hash of (member, b). A joining node is
// the winner for about N/(n+1) buckets and for no others, so only those
// move; a leaving node's buckets spread over the survivors. No leader
// election is needed (and so no leader failover); a node claims a free
// bucket it wins with an etcd transaction that succeeds only if the owner
// key does not exist, and gives up a bucket it no longer wins only after its
// scanner has stopped firing there (Handler.Release), by deleting the key.
//
// Keys, all under /tock/<cluster>/ and readable with etcdctl:
//
//	members/<node>   JSON {"node","addr","started_at"}, on the node's lease
//	owners/<bucket>  the owner's node id, on the owner's lease; the bucket
//	                 is zero-padded to 5 digits so keys sort
//
// Lease loss. A bucket's epoch grows with every new ownership: it is the
// etcd revision at which its owner key was created, with the cluster's etcd
// generation in its high bits (Epoch). The scanner records it in Postgres
// before firing and every firing transaction checks it, so safety never
// rests on the lease alone. On top of that a node stops firing on its
// own before its lease can have expired: it measures every keep-alive by
// its local monotonic clock (the lease is valid until at least send time +
// TTL) and releases all buckets locally when that deadline comes near, or
// when the concurrency.Session reports the lease gone. It then starts over
// with a new lease; it never trusts a claim made with a lease it has
// already given up (etcd issue 19597, "phantom leadership").
//
// etcd wiped. Revisions alone would not do as epochs: an etcd that lost
// its data (or was restored from an older snapshot) counts revisions from
// near 1 again, below the epochs Postgres recorded, and every claim would
// be fenced for good. So each life of etcd gets a generation, allocated in
// Postgres (Config.Fencing) above every generation before and published in
// etcd under generation; an epoch is generation<<40 | revision. A node
// reads the generation when it joins, and starts a new one when etcd has
// none or is behind the highest epoch Postgres recorded; a node that sees
// the generation change while it holds buckets lets them all go and joins
// again. Epochs therefore grow across a wipe as they do within one etcd
// life, and a deposed owner's stale claim still loses.
//
//	generation       decimal generation number, no lease
package partition

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/tock-sched/tock/internal/retry"
)

var rebalances = promauto.NewCounter(prometheus.CounterOpts{
	Name: "tock_rebalances_total",
	Help: "Buckets this node acquired or gave up (each counts once).",
})

// Handler is told which buckets this node fires. The scanner implements it.
type Handler interface {
	// Acquire: this node now owns bucket at epoch; it may fire there once
	// the epoch is recorded in Postgres.
	Acquire(bucket int, epoch int64)
	// Release: stop firing in bucket. It must return only when no firing
	// in the bucket is in flight; the owner key is deleted after it returns.
	Release(bucket int)
}

// Config configures a Node. Client, NodeID and Buckets are required.
type Config struct {
	Client  *clientv3.Client
	Cluster string // default "default"
	NodeID  string
	Addr    string // advertised API address, shown in members/<node>
	Buckets int
	// TTL of the node's lease; default 5s, at least 2s.
	TTL time.Duration
	// Resync is how often the node recomputes assignment even without
	// etcd events; default TTL.
	Resync time.Duration
	Logger *slog.Logger
	// Fencing keeps epochs growing when etcd starts over (see the package
	// doc); *store.Store is one. Without it an epoch is the bare create
	// revision of the owner key, and after etcd loses its data every
	// claim is fenced until its revision passes the recorded epochs.
	Fencing Fencing
}

func (c *Config) validate() error {
	if c.Client == nil {
		return errors.New("partition: Config.Client is required")
	}
	if c.NodeID == "" {
		return errors.New("partition: Config.NodeID is required")
	}
	if strings.ContainsAny(c.NodeID, "/ ") {
		return fmt.Errorf("partition: node id %q must not contain '/' or spaces", c.NodeID)
	}
	if c.Buckets <= 0 {
		return fmt.Errorf("partition: Config.Buckets must be positive, got %d", c.Buckets)
	}
	if c.Cluster == "" {
		c.Cluster = "default"
	}
	if c.TTL == 0 {
		c.TTL = 5 * time.Second
	}
	if c.TTL < 2*time.Second {
		return fmt.Errorf("partition: TTL %s is below the 2s minimum", c.TTL)
	}
	if c.Resync == 0 {
		c.Resync = c.TTL
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// Prefix is the root of a cluster's keys: /tock/<cluster>/.
func Prefix(cluster string) string { return "/tock/" + cluster + "/" }

// MembersPrefix holds one key per live scheduler node.
func MembersPrefix(cluster string) string { return Prefix(cluster) + "members/" }

// OwnersPrefix holds one key per owned bucket.
func OwnersPrefix(cluster string) string { return Prefix(cluster) + "owners/" }

// OwnerKey is the key naming bucket's owner.
func OwnerKey(cluster string, bucket int) string {
	return fmt.Sprintf("%s%05d", OwnersPrefix(cluster), bucket)
}

// Member is the value of a member key.
type Member struct {
	Node      string    `json:"node"`
	Addr      string    `json:"addr,omitempty"`
	StartedAt time.Time `json:"started_at"`
}

// Owner is one bucket's ownership as seen in etcd.
type Owner struct {
	Node  string
	Epoch int64 // Epoch(generation, create revision of the owner key)
	Lease clientv3.LeaseID
}

// Node is one scheduler node's membership and bucket ownership.
type Node struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	members map[string]Member
	owners  map[int]Owner
	owned   map[int]int64 // buckets this node has handed to its Handler
	seen    map[int]int64 // newest revision applied per owner key
	gen     int64         // this session's etcd generation
	genGone bool          // the generation key changed since the session read it
	lease   clientv3.LeaseID
	prev    clientv3.LeaseID // the lease of the session before, if not revoked
	until   time.Time        // local monotonic deadline before which the lease is surely alive
	rebal   int              // buckets acquired or released since start
}

// New checks cfg and returns a Node that does nothing until Run.
func New(cfg Config) (*Node, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Node{cfg: cfg, log: cfg.Logger.With("node", cfg.NodeID)}, nil
}

// Valid reports whether this node's lease is surely alive now, by its
// local monotonic clock: the last keep-alive's send time plus the TTL, less
// a safety margin. The scanner checks it before every firing transaction,
// so a node that was frozen (SIGSTOP, a long GC pause) past its lease fires
// nothing when it wakes up, even before it has noticed the loss.
func (n *Node) Valid() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.lease != 0 && time.Now().Before(n.until)
}

// Owned returns the buckets this node fires in, with their epochs.
func (n *Node) Owned() map[int]int64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make(map[int]int64, len(n.owned))
	for b, e := range n.owned {
		out[b] = e
	}
	return out
}

// Rebalances counts bucket acquisitions and releases by this node.
func (n *Node) Rebalances() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.rebal
}

// Run joins the cluster and keeps this node's share of buckets until ctx
// ends; then it releases every bucket (Handler.Release first, then the
// key), removes its member key and revokes its lease, so survivors take
// over at once instead of after the TTL. If the lease is lost, Run releases
// everything locally and joins again with a new lease.
func (n *Node) Run(ctx context.Context, h Handler) error {
	backoff := retry.Backoff{Initial: 500 * time.Millisecond, Max: 500 * time.Millisecond}
	for {
		err := n.session(ctx, h)
		if ctx.Err() != nil {
			return nil
		}
		if !backoff.Wait(ctx, n.log, "partition session ended; rejoining", "err", err) {
			return nil
		}
	}
}

var errLeaseLost = errors.New("lease lost")

// session is one life of the node: one lease, from join to leave.
func (n *Node) session(ctx context.Context, h Handler) error {
	cli := n.cfg.Client
	ttl := int64(n.cfg.TTL / time.Second)
	n.mu.Lock()
	prev := n.prev
	n.mu.Unlock()
	if prev != 0 {
		// Our keys from the last session (etcd was unreachable when it
		// ended, or restored its leases on restart) would block our own
		// claims until they expire: revoke them first.
		if _, err := cli.Revoke(ctx, prev); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return fmt.Errorf("revoke previous lease: %w", err)
		}
		n.mu.Lock()
		n.prev = 0
		n.mu.Unlock()
	}
	// The generation is read before the lease is granted, so that its
	// Postgres round trips do not eat into the lease; load checks below
	// that etcd still has it once the lease exists, so a claim with this
	// lease cannot succeed in an etcd life the generation is not from.
	gen, err := n.generation(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	grant, err := cli.Grant(ctx, ttl)
	if err != nil {
		return fmt.Errorf("grant lease: %w", err)
	}
	sess, err := concurrency.NewSession(cli, concurrency.WithLease(grant.ID), concurrency.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("session: %w", err)
	}
	n.mu.Lock()
	n.gen, n.genGone = gen, false
	n.lease = grant.ID
	n.until = start.Add(n.cfg.TTL - n.margin())
	n.members, n.owners, n.owned, n.seen = map[string]Member{}, map[int]Owner{}, map[int]int64{}, map[int]int64{}
	n.mu.Unlock()

	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer func() {
		// Stop firing everywhere first; only then give the keys back.
		n.releaseAll(h)
		// Revoking deletes the member and owner keys at once, so others
		// take over now rather than after the TTL. If etcd cannot be
		// reached, the next session revokes it first.
		rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Second)
		if _, rerr := cli.Revoke(rctx, grant.ID); rerr != nil && !errors.Is(rerr, rpctypes.ErrLeaseNotFound) {
			n.mu.Lock()
			n.prev = grant.ID
			n.mu.Unlock()
		}
		rcancel()
		sess.Orphan()
	}()

	member, _ := json.Marshal(Member{Node: n.cfg.NodeID, Addr: n.cfg.Addr, StartedAt: time.Now().UTC()})
	mkey := MembersPrefix(n.cfg.Cluster) + n.cfg.NodeID
	if _, err = cli.Put(sctx, mkey, string(member), clientv3.WithLease(grant.ID)); err != nil {
		return fmt.Errorf("register member: %w", err)
	}
	rev, err := n.load(sctx)
	if err != nil {
		return err
	}
	wch := cli.Watch(clientv3.WithRequireLeader(sctx), Prefix(n.cfg.Cluster), clientv3.WithPrefix(), clientv3.WithRev(rev+1))

	guard := time.NewTicker(n.cfg.TTL / 5)
	defer guard.Stop()
	keep := time.NewTicker(n.cfg.TTL / 3)
	defer keep.Stop()
	resync := time.NewTicker(n.cfg.Resync)
	defer resync.Stop()

	n.reconcile(sctx, h)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-sess.Done():
			err = errLeaseLost
			return err
		case <-keep.C:
			t0 := time.Now()
			kctx, kcancel := context.WithTimeout(sctx, n.cfg.TTL/3)
			resp, kerr := cli.KeepAliveOnce(kctx, grant.ID)
			kcancel()
			if kerr == nil && resp.TTL > 0 {
				n.mu.Lock()
				n.until = t0.Add(time.Duration(resp.TTL)*time.Second - n.margin())
				n.mu.Unlock()
			} else if errors.Is(kerr, rpctypes.ErrLeaseNotFound) {
				err = errLeaseLost
				return err
			}
		case <-guard.C:
			n.mu.Lock()
			expired := time.Now().After(n.until)
			n.mu.Unlock()
			if expired {
				// We cannot prove the lease is alive: another node may own
				// our buckets any moment now. Stop firing before that.
				n.log.Warn("lease not renewed in time; releasing all buckets")
				err = errLeaseLost
				return err
			}
		case wr, ok := <-wch:
			if !ok || wr.Err() != nil {
				if ctx.Err() != nil {
					return nil
				}
				// Reload and rewatch; the guard keeps us safe meanwhile.
				if rev, err = n.load(sctx); err != nil {
					return err
				}
				wch = cli.Watch(clientv3.WithRequireLeader(sctx), Prefix(n.cfg.Cluster), clientv3.WithPrefix(), clientv3.WithRev(rev+1))
				continue
			}
			for _, ev := range wr.Events {
				n.apply(ev)
			}
			if n.generationGone() {
				// Our epochs are fenced from now on: let everything go
				// and join again in the new generation.
				err = errGenerationChanged
				return err
			}
			n.reconcile(sctx, h)
		case <-resync.C:
			n.reconcile(sctx, h)
		}
	}
}

// margin is how much of the TTL the node keeps in hand for clock drift and
// for stopping its scanners before the lease can expire.
func (n *Node) margin() time.Duration { return n.cfg.TTL / 5 }

// load reads all member and owner keys and returns the revision read at.
func (n *Node) load(ctx context.Context) (int64, error) {
	resp, err := n.cfg.Client.Get(ctx, Prefix(n.cfg.Cluster), clientv3.WithPrefix())
	if err != nil {
		return 0, fmt.Errorf("load cluster state: %w", err)
	}
	n.mu.Lock()
	n.members, n.owners, n.seen = map[string]Member{}, map[int]Owner{}, map[int]int64{}
	n.mu.Unlock()
	hasGen := false
	for _, kv := range resp.Kvs {
		hasGen = hasGen || string(kv.Key) == GenerationKey(n.cfg.Cluster)
		n.apply(&clientv3.Event{Type: clientv3.EventTypePut, Kv: kv})
	}
	if n.cfg.Fencing != nil && !hasGen {
		// Deleted, or etcd was wiped since the session read it.
		n.mu.Lock()
		n.genGone = true
		n.mu.Unlock()
	}
	if n.generationGone() {
		return 0, errGenerationChanged
	}
	return resp.Header.Revision, nil
}

func (n *Node) generationGone() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.genGone
}

func (n *Node) apply(ev *clientv3.Event) {
	key := string(ev.Kv.Key)
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case key == GenerationKey(n.cfg.Cluster):
		if n.cfg.Fencing != nil && (ev.Type == clientv3.EventTypeDelete || string(ev.Kv.Value) != strconv.FormatInt(n.gen, 10)) {
			n.genGone = true
		}
	case strings.HasPrefix(key, MembersPrefix(n.cfg.Cluster)):
		id := strings.TrimPrefix(key, MembersPrefix(n.cfg.Cluster))
		if ev.Type == clientv3.EventTypeDelete {
			delete(n.members, id)
			return
		}
		var m Member
		if json.Unmarshal(ev.Kv.Value, &m) != nil {
			m = Member{Node: id}
		}
		n.members[id] = m
	case strings.HasPrefix(key, OwnersPrefix(n.cfg.Cluster)):
		b, err := strconv.Atoi(strings.TrimPrefix(key, OwnersPrefix(n.cfg.Cluster)))
		if err != nil {
			return
		}
		// A watch can deliver an event older than what a claim of ours
		// already told us; never let it undo newer knowledge.
		if ev.Kv.ModRevision <= n.seen[b] {
			return
		}
		n.seen[b] = ev.Kv.ModRevision
		if ev.Type == clientv3.EventTypeDelete {
			delete(n.owners, b)
			return
		}
		n.owners[b] = Owner{Node: string(ev.Kv.Value), Epoch: Epoch(n.gen, ev.Kv.CreateRevision), Lease: clientv3.LeaseID(ev.Kv.Lease)}
	}
}

// reconcile moves this node toward its desired set: release what it no
// longer wins, claim free buckets it wins.
func (n *Node) reconcile(ctx context.Context, h Handler) {
	n.mu.Lock()
	members := make([]string, 0, len(n.members))
	for m := range n.members {
		members = append(members, m)
	}
	sort.Strings(members)
	var release, claim []int
	for b := 0; b < n.cfg.Buckets; b++ {
		want := Assign(members, b) == n.cfg.NodeID
		_, mine := n.owned[b]
		o, taken := n.owners[b]
		switch {
		case mine && !want:
			release = append(release, b)
		case mine && (!taken || o.Node != n.cfg.NodeID || o.Lease != n.lease):
			// Our key vanished or was replaced: we are no longer the owner.
			release = append(release, b)
		case !mine && want && !taken:
			claim = append(claim, b)
		case !mine && want && taken && o.Node == n.cfg.NodeID && o.Lease != n.lease:
			// A key of ours from an older lease; it goes when that lease
			// expires or is revoked. Wait for the delete event.
		}
	}
	n.mu.Unlock()

	for _, b := range release {
		n.release(ctx, h, b)
	}
	for _, b := range claim {
		if err := n.claim(ctx, h, b); err != nil && ctx.Err() == nil {
			n.log.Warn("claim bucket", "bucket", b, "err", err)
		}
	}
}

func (n *Node) claim(ctx context.Context, h Handler, b int) error {
	n.mu.Lock()
	lease, until, gen := n.lease, n.until, n.gen
	n.mu.Unlock()
	key := OwnerKey(n.cfg.Cluster, b)
	resp, err := n.cfg.Client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, n.cfg.NodeID, clientv3.WithLease(lease))).
		Commit()
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		return nil // someone else got there first; the watch will tell us
	}
	// A claim that returns after our lease may have expired is not trusted
	// (phantom ownership): the key would be gone already or soon.
	if time.Now().After(until) {
		return fmt.Errorf("claim of bucket %d returned after the lease deadline", b)
	}
	rev := resp.Header.Revision
	if rev >= 1<<RevisionBits {
		// Unreachable in practice; an epoch must not spill into the
		// generation bits.
		return fmt.Errorf("claim of bucket %d at etcd revision %d: beyond the %d bits an epoch keeps for revisions", b, rev, RevisionBits)
	}
	epoch := Epoch(gen, rev)
	n.mu.Lock()
	n.owned[b] = epoch
	n.owners[b] = Owner{Node: n.cfg.NodeID, Epoch: epoch, Lease: lease}
	if n.seen[b] < rev {
		n.seen[b] = rev
	}
	n.rebal++
	rebalances.Inc()
	n.mu.Unlock()
	n.log.Debug("acquired bucket", "bucket", b, "epoch", epoch)
	h.Acquire(b, epoch)
	return nil
}

func (n *Node) release(ctx context.Context, h Handler, b int) {
	h.Release(b)
	n.mu.Lock()
	epoch, lease := n.owned[b], n.lease
	delete(n.owned, b)
	n.rebal++
	rebalances.Inc()
	n.mu.Unlock()
	key := OwnerKey(n.cfg.Cluster, b)
	// Delete only our own key of this ownership, never a successor's.
	_, err := n.cfg.Client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", EpochRevision(epoch)),
			clientv3.Compare(clientv3.LeaseValue(key), "=", lease)).
		Then(clientv3.OpDelete(key)).
		Commit()
	if err != nil && ctx.Err() == nil {
		n.log.Warn("release bucket", "bucket", b, "err", err)
	}
	n.log.Debug("released bucket", "bucket", b, "epoch", epoch)
}

func (n *Node) releaseAll(h Handler) {
	n.mu.Lock()
	buckets := make([]int, 0, len(n.owned))
	for b := range n.owned {
		buckets = append(buckets, b)
	}
	n.owned = map[int]int64{}
	n.mu.Unlock()
	for _, b := range buckets {
		h.Release(b)
	}
}

// Assign is the desired owner of bucket among members: the member with the
// highest rendezvous hash of (member, bucket). "" when there are none.
func Assign(members []string, bucket int) string {
	var best string
	var bestScore uint64
	for _, m := range members {
		s := score(m, bucket)
		if best == "" || s > bestScore || (s == bestScore && m < best) {
			best, bestScore = m, s
		}
	}
	return best
}

func score(member string, bucket int) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(member))
	_, _ = h.Write([]byte{0, byte(bucket >> 24), byte(bucket >> 16), byte(bucket >> 8), byte(bucket)})
	// FNV alone mixes the last bytes poorly; finish with splitmix64.
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// DefaultNodeID is hostname-pid, unique enough for one machine.
func DefaultNodeID() string {
	h, _ := os.Hostname()
	if h == "" {
		h = "node"
	}
	return fmt.Sprintf("%s-%d", h, os.Getpid())
}
