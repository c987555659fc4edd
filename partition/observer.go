package partition

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Observer is a read-only view of a cluster's members and bucket owners
// in etcd, for operators (the API's /v1/nodes and /v1/buckets). It
// holds no state and starts no goroutines: every call reads etcd afresh.
// It never writes, so it is safe to use from any node, scheduler or not.
type Observer struct {
	cli     *clientv3.Client
	cluster string
}

// NewObserver returns an Observer of cluster ("default" when empty)
// through cli.
func NewObserver(cli *clientv3.Client, cluster string) *Observer {
	if cluster == "" {
		cluster = "default"
	}
	return &Observer{cli: cli, cluster: cluster}
}

// MemberInfo is one live scheduler node as etcd shows it.
type MemberInfo struct {
	Node      string
	Addr      string // advertised API address; "" when none
	StartedAt time.Time
	// LeaseTTL is the time left on the member key's lease, to the second
	// (etcd reports whole seconds); 0 when the lease has just expired.
	LeaseTTL time.Duration
	// Buckets are the buckets whose owner key names this node, ascending.
	Buckets []int
}

// Members lists the cluster's live members, sorted by node id, each with
// the buckets it owns. Members and owners are read at one revision.
func (o *Observer) Members(ctx context.Context) ([]MemberInfo, error) {
	resp, err := o.cli.Get(ctx, Prefix(o.cluster), clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("partition: read cluster %s: %w", o.cluster, err)
	}
	mprefix, oprefix := MembersPrefix(o.cluster), OwnersPrefix(o.cluster)
	byNode := map[string]*MemberInfo{}
	leases := map[string]clientv3.LeaseID{}
	owned := map[string][]int{}
	for _, kv := range resp.Kvs {
		key := string(kv.Key)
		switch {
		case strings.HasPrefix(key, mprefix):
			id := strings.TrimPrefix(key, mprefix)
			var m Member
			// A value that does not parse still names a live member.
			_ = json.Unmarshal(kv.Value, &m)
			byNode[id] = &MemberInfo{Node: id, Addr: m.Addr, StartedAt: m.StartedAt.UTC()}
			leases[id] = clientv3.LeaseID(kv.Lease)
		case strings.HasPrefix(key, oprefix):
			b, err := strconv.Atoi(strings.TrimPrefix(key, oprefix))
			if err != nil {
				continue
			}
			node := string(kv.Value)
			owned[node] = append(owned[node], b)
		}
	}
	out := make([]MemberInfo, 0, len(byNode))
	for id, m := range byNode {
		if lease := leases[id]; lease != clientv3.NoLease {
			if m.LeaseTTL, err = o.timeLeft(ctx, lease); err != nil {
				return nil, fmt.Errorf("partition: lease of member %s: %w", id, err)
			}
		}
		m.Buckets = owned[id]
		sort.Ints(m.Buckets)
		if m.Buckets == nil {
			m.Buckets = []int{}
		}
		out = append(out, *m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out, nil
}

// timeLeft is the remaining TTL of lease, 0 once it has expired.
func (o *Observer) timeLeft(ctx context.Context, lease clientv3.LeaseID) (time.Duration, error) {
	resp, err := o.cli.TimeToLive(ctx, lease)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if resp.TTL <= 0 { // -1: expired since the keys were read
		return 0, nil
	}
	return time.Duration(resp.TTL) * time.Second, nil
}

// Owners reads every bucket's owner key: bucket → owner, with the epoch
// (Epoch of the cluster's etcd generation and the key's create revision)
// and lease. Buckets nobody owns are absent.
func (o *Observer) Owners(ctx context.Context) (map[int]Owner, error) {
	prefix := OwnersPrefix(o.cluster)
	// One transaction: the generation and the owners at one revision.
	resp, err := o.cli.Txn(ctx).Then(clientv3.OpGet(GenerationKey(o.cluster)), clientv3.OpGet(prefix, clientv3.WithPrefix())).Commit()
	if err != nil {
		return nil, fmt.Errorf("partition: read owners of cluster %s: %w", o.cluster, err)
	}
	var gen int64
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) == 1 {
		// No generation, or one that does not parse: nodes use 0 then too.
		gen, _ = strconv.ParseInt(string(kvs[0].Value), 10, 64)
	}
	kvs := resp.Responses[1].GetResponseRange().Kvs
	out := make(map[int]Owner, len(kvs))
	for _, kv := range kvs {
		b, err := strconv.Atoi(strings.TrimPrefix(string(kv.Key), prefix))
		if err != nil {
			continue
		}
		out[b] = Owner{Node: string(kv.Value), Epoch: Epoch(gen, kv.CreateRevision), Lease: clientv3.LeaseID(kv.Lease)}
	}
	return out, nil
}
