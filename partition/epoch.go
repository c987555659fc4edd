package partition

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// RevisionBits is how many low bits of an epoch hold the etcd revision;
// the bits above hold the generation. 2^40 revisions is more than an etcd
// cluster reaches in decades of writes.
const RevisionBits = 40

// Epoch is the fencing epoch of an ownership whose owner key was created
// at revision in etcd generation generation: generation<<RevisionBits |
// revision. Epochs of one generation grow with etcd's revision; every
// epoch of a later generation is greater than all of an earlier one.
func Epoch(generation, revision int64) int64 { return generation<<RevisionBits | revision }

// EpochGeneration is the generation part of epoch.
func EpochGeneration(epoch int64) int64 { return epoch >> RevisionBits }

// EpochRevision is the etcd revision part of epoch: the create revision
// of the owner key.
func EpochRevision(epoch int64) int64 { return epoch & (1<<RevisionBits - 1) }

// GenerationKey holds the cluster's etcd generation, a decimal number,
// with no lease.
func GenerationKey(cluster string) string { return Prefix(cluster) + "generation" }

// Fencing is what a Node needs from the store of fencing epochs
// (Postgres; *store.Store is one) to keep epochs growing when etcd starts
// over with revisions near 1.
type Fencing interface {
	// GetMaxEpoch is the highest epoch recorded for any bucket; 0 if none.
	GetMaxEpoch(ctx context.Context) (int64, error)
	// NextGeneration allocates and returns a generation greater than
	// above and than every generation it returned before, so that two
	// etcd lives never share one, even when no epoch of the first was
	// recorded.
	NextGeneration(ctx context.Context, above int64) (int64, error)
}

// errGenerationChanged ends a session whose generation was replaced in
// etcd: its epochs would be fenced from now on.
var errGenerationChanged = errors.New("etcd generation changed")

// generation returns the etcd generation this session's epochs use,
// starting a new one when etcd cannot give epochs above those Postgres
// has recorded: it has no generation key (a new or wiped etcd, or a
// cluster started before generations existed), or its revision is behind
// the newest recorded epoch of its generation (etcd restored from an
// older snapshot). Every node of the cluster reads the same key, so all
// agree; a new generation is written with a compare-and-swap, and the
// others read it. Without Config.Fencing the generation is 0 and epochs
// are bare revisions.
func (n *Node) generation(ctx context.Context) (int64, error) {
	if n.cfg.Fencing == nil {
		return 0, nil
	}
	cli, key := n.cfg.Client, GenerationKey(n.cfg.Cluster)
	for {
		resp, err := cli.Get(ctx, key)
		if err != nil {
			return 0, fmt.Errorf("read etcd generation: %w", err)
		}
		var gen, mod int64
		if len(resp.Kvs) == 1 {
			mod = resp.Kvs[0].ModRevision
			// A value that does not parse is replaced like a missing one.
			if gen, err = strconv.ParseInt(string(resp.Kvs[0].Value), 10, 64); err != nil || gen < 0 {
				gen = 0
			}
		}
		floor, err := n.cfg.Fencing.GetMaxEpoch(ctx)
		if err != nil {
			return 0, fmt.Errorf("read highest recorded epoch: %w", err)
		}
		// Claims from now on get revisions above the one just read.
		if gen > 0 && Epoch(gen, resp.Header.Revision) >= floor {
			return gen, nil
		}
		next, err := n.cfg.Fencing.NextGeneration(ctx, max(gen, EpochGeneration(floor)))
		if err != nil {
			return 0, fmt.Errorf("allocate etcd generation: %w", err)
		}
		put, err := cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", mod)).
			Then(clientv3.OpPut(key, strconv.FormatInt(next, 10))).
			Commit()
		if err != nil {
			return 0, fmt.Errorf("write etcd generation %d: %w", next, err)
		}
		if put.Succeeded {
			// A cluster's first generation is news to nobody; a later one
			// means etcd lost what it knew.
			logf := n.log.Warn
			if gen == 0 && floor == 0 {
				logf = n.log.Info
			}
			logf("etcd has no generation above the recorded epochs (new, wiped or restored); starting a new one",
				"generation", next, "previous", gen, "etcd_revision", resp.Header.Revision, "highest_recorded_epoch", floor)
		}
		// Read it back, ours or the one another node wrote meanwhile.
	}
}
