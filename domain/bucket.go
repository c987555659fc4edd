package domain

import (
	"hash/fnv"

	"github.com/google/uuid"
)

// DefaultBuckets is the number of buckets a new cluster gets unless told
// otherwise. It is fixed when the cluster is created.
const DefaultBuckets = 256

// BucketOf is the bucket job id belongs to among n buckets:
// FNV-1a (32 bit) of the id's 16 bytes, modulo n. It never changes for a
// job, so the bucket is stored with the job and its partition is found
// from the id alone.
func BucketOf(id uuid.UUID, n int) int {
	h := fnv.New32a()
	_, _ = h.Write(id[:])
	return int(h.Sum32() % uint32(n))
}
