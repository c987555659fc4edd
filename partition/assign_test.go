package partition

import (
	"slices"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
)

func TestBucketMove(t *testing.T) {
	const self, lease = "a", clientv3.LeaseID(7)
	ours := Owner{Node: self, Lease: lease}
	for _, tc := range []struct {
		name       string
		want, mine bool
		owner      Owner
		taken      bool
		expect     move
	}{
		{name: "wins, holds, key is ours", want: true, mine: true, owner: ours, taken: true, expect: moveNone},
		{name: "no longer wins", want: false, mine: true, owner: ours, taken: true, expect: moveRelease},
		{name: "no longer wins, key already gone", want: false, mine: true, expect: moveRelease},
		{name: "our key vanished", want: true, mine: true, expect: moveRelease},
		{name: "key replaced by another node", want: true, mine: true, owner: Owner{Node: "b", Lease: 9}, taken: true, expect: moveRelease},
		{name: "key ours but on another lease", want: true, mine: true, owner: Owner{Node: self, Lease: 3}, taken: true, expect: moveRelease},
		{name: "wins a free bucket", want: true, expect: moveClaim},
		{name: "wins a bucket another node still holds", want: true, owner: Owner{Node: "b", Lease: 9}, taken: true, expect: moveNone},
		{name: "wins, our key of an older lease", want: true, owner: Owner{Node: self, Lease: 3}, taken: true, expect: moveNone},
		{name: "wins, our key claimed but not yet applied", want: true, owner: ours, taken: true, expect: moveNone},
		{name: "does not win a free bucket", want: false, expect: moveNone},
		{name: "does not win, another's", want: false, owner: Owner{Node: "b", Lease: 9}, taken: true, expect: moveNone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := bucketMove(self, lease, tc.want, tc.mine, tc.owner, tc.taken); got != tc.expect {
				t.Fatalf("bucketMove = %d, want %d", got, tc.expect)
			}
		})
	}
}

func TestDecide(t *testing.T) {
	const buckets = 64
	two := []string{"b", "a"} // order must not matter
	var winsA, winsB []int
	for bk := range buckets {
		if Assign([]string{"a", "b"}, bk) == "a" {
			winsA = append(winsA, bk)
		} else {
			winsB = append(winsB, bk)
		}
	}
	if len(winsA) == 0 || len(winsB) == 0 {
		t.Fatalf("test needs both nodes to win some buckets: a %v, b %v", winsA, winsB)
	}
	// all maps each bucket to an owner of node on lease, and its epoch.
	all := func(node string, lease clientv3.LeaseID, bs []int) (map[int]Owner, map[int]int64) {
		owners, owned := map[int]Owner{}, map[int]int64{}
		for _, bk := range bs {
			owners[bk] = Owner{Node: node, Epoch: int64(bk + 1), Lease: lease}
			owned[bk] = int64(bk + 1)
		}
		return owners, owned
	}
	every := make([]int, buckets)
	for i := range every {
		every[i] = i
	}
	aliceAll, aliceOwned := all("a", 1, every)
	bobsOwn, bobOwned := all("b", 2, winsB)
	oldLease, _ := all("a", 99, winsA)

	for _, tc := range []struct {
		name             string
		v                view
		release, claimed []int
	}{
		{name: "alone in an empty cluster claims everything",
			v:       view{self: "a", lease: 1, buckets: buckets, members: []string{"a"}},
			claimed: every},
		{name: "before its member key is seen, nothing",
			v: view{self: "a", lease: 1, buckets: buckets}},
		{name: "alone and holding everything: nothing to do",
			v: view{self: "a", lease: 1, buckets: buckets, members: []string{"a"}, owners: aliceAll, owned: aliceOwned}},
		{name: "a second node joins: give up what it wins, claim nothing",
			v:       view{self: "a", lease: 1, buckets: buckets, members: two, owners: aliceAll, owned: aliceOwned},
			release: winsB},
		{name: "the joining node waits for the keys to go",
			v: view{self: "b", lease: 2, buckets: buckets, members: two, owners: aliceAll}},
		{name: "the joining node claims what has been let go",
			v:       view{self: "b", lease: 2, buckets: buckets, members: two, owners: func() map[int]Owner { o, _ := all("a", 1, winsA); return o }()},
			claimed: winsB},
		{name: "the other node leaves: claim its buckets",
			v:       view{self: "b", lease: 2, buckets: buckets, members: []string{"b"}, owners: bobsOwn, owned: bobOwned},
			claimed: winsA},
		{name: "keys of an older lease of ours block claims until they go",
			v: view{self: "a", lease: 1, buckets: buckets, members: two, owners: oldLease}},
		{name: "our keys gone (lease lost in etcd): release all we hold",
			v:       view{self: "a", lease: 1, buckets: buckets, members: []string{"a"}, owned: map[int]int64{3: 1, 5: 1}},
			release: []int{3, 5}, claimed: slices.DeleteFunc(slices.Clone(every), func(b int) bool { return b == 3 || b == 5 })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := decide(tc.v)
			if !slices.Equal(p.release, tc.release) {
				t.Errorf("release %v, want %v", p.release, tc.release)
			}
			if !slices.Equal(p.claim, tc.claimed) {
				t.Errorf("claim %v, want %v", p.claim, tc.claimed)
			}
		})
	}
}

func TestDecideDoesNotReorderMembers(t *testing.T) {
	members := []string{"c", "a", "b"}
	decide(view{self: "a", lease: 1, buckets: 4, members: members})
	if !slices.Equal(members, []string{"c", "a", "b"}) {
		t.Fatalf("decide sorted its caller's slice: %v", members)
	}
}
