package domain

import (
	"crypto/sha1"
	"encoding/binary"
	"time"

	"github.com/google/uuid"
)

// ExecutionID is the id of the execution of job at scheduledFor. It is
// derived, not random, so the same firing always carries the same id (it is
// the JetStream Nats-Msg-Id and the handlers' idempotency key).
//
// Layout (a UUIDv8, RFC 9562): the first 48 bits are scheduledFor in Unix
// milliseconds, like UUIDv7, so ids sort by time and the executions
// partition is found from the id alone; the remaining bits come from
// SHA-1(job id, scheduledFor in nanoseconds).
func ExecutionID(job uuid.UUID, scheduledFor time.Time) uuid.UUID {
	h := sha1.New()
	h.Write(job[:])
	var ts [8]byte
	binary.BigEndian.PutUint64(ts[:], uint64(scheduledFor.UnixNano()))
	h.Write(ts[:])
	sum := h.Sum(nil)

	var id uuid.UUID
	copy(id[:], sum[:16])
	ms := uint64(scheduledFor.UnixMilli())
	id[0], id[1], id[2] = byte(ms>>40), byte(ms>>32), byte(ms>>24)
	id[3], id[4], id[5] = byte(ms>>16), byte(ms>>8), byte(ms)
	id[6] = (id[6] & 0x0f) | 0x80 // version 8
	id[8] = (id[8] & 0x3f) | 0x80 // RFC 9562 variant
	return id
}

// ExecutionTime is the scheduled time (millisecond precision) encoded in
// an id made by ExecutionID.
func ExecutionTime(id uuid.UUID) time.Time {
	ms := int64(id[0])<<40 | int64(id[1])<<32 | int64(id[2])<<24 |
		int64(id[3])<<16 | int64(id[4])<<8 | int64(id[5])
	return time.UnixMilli(ms).UTC()
}
