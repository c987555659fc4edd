package partition

import (
	"hash/fnv"
	"sort"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// This file decides, without any I/O, which buckets a node should give up
// and which it should claim. The Node feeds it what it has read from etcd
// and carries the answer out.

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

// view is what a node knows when it decides what to claim and release.
type view struct {
	self    string           // this node's id
	lease   clientv3.LeaseID // this node's current lease
	buckets int
	members []string      // live members, this node among them once registered
	owners  map[int]Owner // owner keys as last seen in etcd
	owned   map[int]int64 // buckets this node has handed to its Assignee
}

// plan is what moves a node toward its desired buckets, both ascending.
type plan struct {
	release []int // stop firing, then delete our owner key
	claim   []int // free buckets this node wins: try to create the owner key
}

// decide returns the plan for v: release every owned bucket the node no
// longer wins or whose owner key is no longer this lease's, and claim every
// bucket it wins that has no owner key.
func decide(v view) plan {
	members := append([]string(nil), v.members...)
	sort.Strings(members)
	var p plan
	for b := 0; b < v.buckets; b++ {
		o, taken := v.owners[b]
		_, mine := v.owned[b]
		switch bucketMove(v.self, v.lease, Assign(members, b) == v.self, mine, o, taken) {
		case moveRelease:
			p.release = append(p.release, b)
		case moveClaim:
			p.claim = append(p.claim, b)
		}
	}
	return p
}

// move is what a node does about one bucket.
type move int

const (
	moveNone    move = iota // keep it, leave it to its owner, or wait
	moveRelease             // stop firing and delete our key
	moveClaim               // try to create the owner key
)

// bucketMove decides one bucket: want says this node wins it, mine that
// its Assignee fires there, and o (when taken) is its owner key in etcd.
func bucketMove(self string, lease clientv3.LeaseID, want, mine bool, o Owner, taken bool) move {
	ours := taken && o.Node == self && o.Lease == lease
	switch {
	case mine && !want:
		return moveRelease
	case mine && !ours:
		// Our key vanished or was replaced: we are no longer the owner.
		return moveRelease
	case !mine && want && !taken:
		return moveClaim
	default:
		// Among these: a key of ours from an older lease, which goes when
		// that lease expires or is revoked. Wait for the delete event.
		return moveNone
	}
}
