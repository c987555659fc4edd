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
// scanner has stopped firing there (Assignee.Release), by deleting the key.
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
// own before its lease can have expired: a concurrency.Session keeps the
// lease alive (its only keep-alive), and a loop asks etcd how long the
// lease has left (TimeToLive), timing every question by the local
// monotonic clock from before it was sent (etcd keeps the lease until at
// least send time + the remaining TTL it answers, which it rounds down).
// Node.Valid turns false a margin (TTL/5) before that deadline, and the
// node then releases all buckets locally, as it does when etcd reports the
// lease gone or the session ends. It then starts over with a new lease;
// it never trusts a claim that returns when the lease can no longer be
// proven alive, nor any claim made with a lease it has given up (etcd
// issue 19597, "phantom leadership").
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
	"log/slog"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tock-sched/tock/internal/retry"
)

// Assignee is the part of a node that works the buckets assigned to it:
// it is told which buckets this node fires. The scanner implements it.
type Assignee interface {
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
	// Logger is where it logs; tockd's carries the node id (node=...).
	Logger *slog.Logger
	// Fencing keeps epochs growing when etcd starts over (see the package
	// doc); *store.Store is one. Without it an epoch is the bare create
	// revision of the owner key, and after etcd loses its data every
	// claim is fenced until its revision passes the recorded epochs.
	Fencing Fencing
	// Registerer is where the node's Prometheus metrics
	// (tock_rebalances_total) are registered; nil registers them nowhere.
	// tockd passes the node's registry.
	Registerer prometheus.Registerer
}

// WithDefaults is c with the fields it leaves zero set to their
// defaults: cluster "default", a 5s TTL, a resync every TTL and the
// default logger.
func (c Config) WithDefaults() Config {
	if c.Cluster == "" {
		c.Cluster = "default"
	}
	if c.TTL == 0 {
		c.TTL = 5 * time.Second
	}
	if c.Resync == 0 {
		c.Resync = c.TTL
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// validate rejects a configuration (with its defaults) that cannot work.
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
	if c.TTL < 2*time.Second {
		return fmt.Errorf("partition: TTL %s is below the 2s minimum", c.TTL)
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
//
// A Node's life in the cluster is a series of sessions, one etcd lease
// each. When the lease is lost (etcd reports it gone, the session stops
// keeping it alive, or etcd was not seen to keep it past the deadline
// less a margin, by the local monotonic clock) Valid turns false at once,
// the Node releases every bucket through its Assignee without touching
// etcd (the keys go with the lease), and it joins again with a new lease. Claims are never carried from one lease to the next.
type Node struct {
	cfg Config
	log *slog.Logger
	m   *metrics

	mu      sync.Mutex
	members map[string]Member
	owners  map[int]Owner
	owned   map[int]int64    // buckets this node has handed to its Assignee
	seen    map[int]int64    // newest revision applied per owner key
	gen     int64            // this session's etcd generation
	genGone bool             // the generation key changed since the session read it
	lease   *lease           // this session's; nil between sessions
	prev    clientv3.LeaseID // the lease of the session before, if not revoked
	rebal   int              // buckets acquired or released since start (tests read it)
}

// New checks cfg and returns a Node that does nothing until Run.
func New(cfg Config) (*Node, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("partition: register metrics: %w", err)
	}
	return &Node{cfg: cfg, log: cfg.Logger, m: m}, nil
}

// Valid reports whether this node's lease is surely alive now, by its
// local monotonic clock: the newest probe's send time plus the remaining
// TTL etcd answered, less a safety margin. It is false between sessions and from the moment the
// lease is lost or given up. The scanner checks it before every firing
// transaction, so a node that was frozen (SIGSTOP, a long GC pause) past
// its lease fires nothing when it wakes up, even before it has noticed
// the loss.
func (n *Node) Valid() bool {
	n.mu.Lock()
	l := n.lease
	n.mu.Unlock()
	return l != nil && l.Valid()
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

// Run joins the cluster and keeps this node's share of buckets until ctx
// ends; then it releases every bucket (Assignee.Release first, then the
// key), removes its member key and revokes its lease, so survivors take
// over at once instead of after the TTL. If the lease is lost, Run releases
// everything locally (Assignee.Release for each bucket; the owner keys go
// with the lease), revokes it in case etcd still has it, and joins again
// with a new lease after a short pause. Run returns only when ctx ends.
func (n *Node) Run(ctx context.Context, h Assignee) error {
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

// session is one life of the node: one lease, from join to leave. It
// returns nil when ctx ends and an error when the lease is lost, the etcd
// generation changes or etcd fails; either way it has released every
// bucket and revoked its lease (or left it for the next session to revoke)
// by then.
func (n *Node) session(ctx context.Context, h Assignee) error {
	if err := n.revokePrevious(ctx); err != nil {
		return err
	}
	// The generation is read before the lease is granted, so that its
	// Postgres round trips do not eat into the lease; load checks below
	// that etcd still has it once the lease exists, so a claim with this
	// lease cannot succeed in an etcd life the generation is not from.
	gen, err := n.generation(ctx)
	if err != nil {
		return err
	}
	l, err := grantLease(ctx, n.cfg.Client, n.cfg.TTL, n.margin(), nil)
	if err != nil {
		return err
	}
	n.begin(gen, l)
	defer n.leave(h, l)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel() // before leave: stop watching first
	if err := n.register(sctx, l); err != nil {
		return err
	}
	return n.follow(sctx, h, l)
}

// revokePrevious revokes the lease of the session before if that session
// could not (etcd was unreachable when it ended, or restored its leases on
// restart): our keys on it would block our own claims until they expire.
func (n *Node) revokePrevious(ctx context.Context) error {
	n.mu.Lock()
	prev := n.prev
	n.mu.Unlock()
	if prev == clientv3.NoLease {
		return nil
	}
	if err := revokeLease(ctx, n.cfg.Client, prev); err != nil {
		return fmt.Errorf("previous session: %w", err)
	}
	n.mu.Lock()
	n.prev = clientv3.NoLease
	n.mu.Unlock()
	return nil
}

// begin starts a session on lease l in etcd generation gen, knowing
// nothing of the cluster yet.
func (n *Node) begin(gen int64, l *lease) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.gen, n.genGone = gen, false
	n.lease = l
	n.members, n.owners, n.owned, n.seen = map[string]Member{}, map[int]Owner{}, map[int]int64{}, map[int]int64{}
}

// leave ends the session on l. It stops firing everywhere first and only
// then gives the keys back: revoking the lease deletes the member and owner
// keys at once, so others take over now rather than after the TTL. If etcd
// cannot be reached, the next session revokes the lease first.
func (n *Node) leave(h Assignee, l *lease) {
	n.releaseAll(h)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := l.Revoke(ctx)
	n.mu.Lock()
	defer n.mu.Unlock()
	n.lease = nil
	if err != nil {
		n.prev = l.ID()
	}
}

// register writes this node's member key, attached to l.
func (n *Node) register(ctx context.Context, l *lease) error {
	member, _ := json.Marshal(Member{Node: n.cfg.NodeID, Addr: n.cfg.Addr, StartedAt: time.Now().UTC()})
	key := MembersPrefix(n.cfg.Cluster) + n.cfg.NodeID
	if _, err := n.cfg.Client.Put(ctx, key, string(member), clientv3.WithLease(l.ID())); err != nil {
		return fmt.Errorf("register member: %w", err)
	}
	return nil
}

// follow keeps this node's share of buckets for the session on l: it loads
// the cluster's keys, watches them, and reconciles on every change and
// every Resync. It returns nil when ctx ends, and an error when the lease
// is lost, the generation changes, or etcd cannot be read.
func (n *Node) follow(ctx context.Context, h Assignee, l *lease) error {
	rev, err := n.load(ctx)
	if err != nil {
		return err
	}
	wch := n.watch(ctx, rev)
	resync := time.NewTicker(n.cfg.Resync)
	defer resync.Stop()
	n.reconcile(ctx, h)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-l.Done():
			// Valid is false already; the caller releases every bucket.
			return fmt.Errorf("%w: %v", errLeaseLost, l.Err())
		case wr, ok := <-wch:
			if !ok || wr.Err() != nil {
				if ctx.Err() != nil {
					return nil
				}
				// Reload and rewatch; the lease's deadline keeps us safe
				// meanwhile.
				if rev, err = n.load(ctx); err != nil {
					return err
				}
				wch = n.watch(ctx, rev)
				continue
			}
			for _, ev := range wr.Events {
				n.apply(ev)
			}
			if n.generationGone() {
				// Our epochs are fenced from now on: let everything go
				// and join again in the new generation.
				return errGenerationChanged
			}
			n.reconcile(ctx, h)
		case <-resync.C:
			n.reconcile(ctx, h)
		}
	}
}

// watch watches every key of the cluster from the revision after rev.
func (n *Node) watch(ctx context.Context, rev int64) clientv3.WatchChan {
	return n.cfg.Client.Watch(clientv3.WithRequireLeader(ctx), Prefix(n.cfg.Cluster), clientv3.WithPrefix(), clientv3.WithRev(rev+1))
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

// reconcile moves this node toward its desired set (see decide): release
// what it no longer wins or no longer holds, claim free buckets it wins.
func (n *Node) reconcile(ctx context.Context, h Assignee) {
	n.mu.Lock()
	p := decide(view{
		self: n.cfg.NodeID, lease: n.lease.ID(), buckets: n.cfg.Buckets,
		members: slices.Collect(maps.Keys(n.members)), owners: n.owners, owned: n.owned,
	})
	n.mu.Unlock()

	for _, b := range p.release {
		n.release(ctx, h, b)
	}
	for _, b := range p.claim {
		if err := n.claim(ctx, h, b); err != nil && ctx.Err() == nil {
			n.log.Warn("claim bucket", "bucket", b, "err", err)
		}
	}
}

// claim tries to create bucket b's owner key on this session's lease and,
// if it did so while the lease is provably alive, hands b to h.
func (n *Node) claim(ctx context.Context, h Assignee, b int) error {
	n.mu.Lock()
	l, gen := n.lease, n.gen
	n.mu.Unlock()
	key := OwnerKey(n.cfg.Cluster, b)
	resp, err := n.cfg.Client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, n.cfg.NodeID, clientv3.WithLease(l.ID()))).
		Commit()
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		return nil // someone else got there first; the watch will tell us
	}
	// A claim that returns when the lease can no longer be proven alive is
	// not trusted (phantom ownership): the key would be gone already or
	// soon. The node gives the lease up shortly, and the key with it.
	if !l.Valid() {
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
	n.owners[b] = Owner{Node: n.cfg.NodeID, Epoch: epoch, Lease: l.ID()}
	if n.seen[b] < rev {
		n.seen[b] = rev
	}
	n.rebal++
	n.m.rebalances.Inc()
	n.mu.Unlock()
	n.log.Debug("acquired bucket", "bucket", b, "epoch", epoch)
	h.Acquire(b, epoch)
	return nil
}

// release stops firing in bucket b (h.Release returns when nothing is in
// flight there), then deletes its owner key if it is still this
// ownership's.
func (n *Node) release(ctx context.Context, h Assignee, b int) {
	h.Release(b)
	n.mu.Lock()
	epoch, lease := n.owned[b], n.lease.ID()
	delete(n.owned, b)
	n.rebal++
	n.m.rebalances.Inc()
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

// releaseAll stops firing in every bucket without touching etcd: the
// owner keys go when the session's lease is revoked or expires.
func (n *Node) releaseAll(h Assignee) {
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

// DefaultNodeID is hostname-pid, unique enough for one machine.
func DefaultNodeID() string {
	h, _ := os.Hostname()
	if h == "" {
		h = "node"
	}
	return fmt.Sprintf("%s-%d", h, os.Getpid())
}
