package wire

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	json "github.com/segmentio/encoding/json"
)

// Several executions in one message (the batch form).
//
// tock fires thousands of executions of a bucket for the same instant
// (every cron job at second 0 of a minute, say), and JetStream's work per
// message, on the server and on both clients, was the largest cost of an
// execution left after the Postgres work (docs/bench.md). A queue whose
// executors say so in their consumers' metadata (MetaBatch) therefore
// receives the first dispatch of fired executions as batch messages: a JSON
// array of Execution on the same subject, with HeaderBatch set to the
// number of members.
//
// Exactly once holds as for one execution per message. A message's
// members are fixed when they are fired: the firing statement writes the
// same batch id on every member's row, and every publish of the batch,
// the first or one by a later owner of the bucket after a crash, carries
// Nats-Msg-Id BatchMsgID(batch, subject). The members of a republish can
// only be fewer (those an executor has reported on are left out), never
// others, so JetStream dropping the copy within its duplicate window
// loses nothing. Retries, deferrals, re-drives and manual runs are
// published one per message, as before.
//
// Executors run the members independently (each its own attempt,
// heartbeat, cancellation, timeout and retry) and settle the message once
// every member is settled. A redelivered batch message (its executor died,
// or its ack was lost) is not run again: the executor hands every member
// back to tock with a deferred event, and tock publishes again, one per
// message, those that no executor finished.
const (
	// HeaderBatch is set on a batch message: how many executions its
	// body holds.
	HeaderBatch = "Tock-Batch"
	// MetaBatch is the key, in a queue's consumer metadata, that says its
	// executors take batch messages, with the value BatchFormV1. Without
	// it the queue gets one execution per message.
	MetaBatch = "tock.batch"
	// BatchFormV1 is MetaBatch's value for the batch form described here.
	BatchFormV1 = "1"
	// MaxBatchMembers is the most members tock puts in one message; an
	// executor taking batch messages takes any number up to it.
	MaxBatchMembers = 128
	// MaxBatchMemberBytes: an execution whose own body is larger (a big
	// payload) is always published on its own, so that a batch message
	// stays within 512 KiB, well inside NATS's default max_payload
	// (1 MiB). Execution bodies never change between publishes (the
	// payload is the job spec's), so the choice is the same on every
	// publish.
	MaxBatchMemberBytes = 4096
)

// BatchMsgID is the Nats-Msg-Id of a batch message: the batch id (the
// execution id of its first member, as fired) and the subject, since a
// batch's members are split by queue and priority class.
func BatchMsgID(batch, subject string) string {
	return "batch:" + batch + ":" + subject
}

// BatchForm reads a queue consumer's metadata: whether its executors take
// batch messages.
func BatchForm(metadata map[string]string) bool { return metadata[MetaBatch] == BatchFormV1 }

// BatchMsg is a batch message on subject whose members are bodies, each
// an Execution's JSON (Execution.Body).
func BatchMsg(subject string, bodies [][]byte) *nats.Msg {
	size := 2 + len(bodies)
	for _, b := range bodies {
		size += len(b)
	}
	data := make([]byte, 0, size)
	data = append(data, '[')
	for i, b := range bodies {
		if i > 0 {
			data = append(data, ',')
		}
		data = append(data, b...)
	}
	data = append(data, ']')
	msg := nats.NewMsg(subject)
	msg.Data = data
	msg.Header.Set(HeaderBatch, strconv.Itoa(len(bodies)))
	return msg
}

// IsBatch reports whether an execution message is a batch message.
func IsBatch(h nats.Header) bool { return h != nil && h.Get(HeaderBatch) != "" }

// ErrEmptyBatch is DecodeBatch's error for a batch message without
// members.
var ErrEmptyBatch = errors.New("batch message without executions")

// DecodeBatch splits a batch message's body into its members' JSON,
// without decoding them.
func DecodeBatch(data []byte) ([]json.RawMessage, error) {
	var members []json.RawMessage
	if err := json.Unmarshal(bytes.TrimSpace(data), &members); err != nil {
		return nil, fmt.Errorf("decode batch message: %w", err)
	}
	if len(members) == 0 {
		return nil, ErrEmptyBatch
	}
	return members, nil
}
