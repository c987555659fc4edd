// Package conformance is the conformance kit of custom executors: it
// starts a real tock (embedded etcd and NATS, a database of its own on
// the given Postgres, one bucket), starts the executor under test as a
// child process, and runs scenarios of the wire protocol against it, each
// a named check that passes or fails with a reason. It reads which form of
// the protocol the executor speaks from its consumers' metadata (one
// execution per message, or batch messages as well) and checks each form
// it speaks: the checks of the batch form (batch.go) do not apply to an
// executor taking one execution per message.
//
// The executor under test serves one custom handler, named by the
// environment variable TOCK_CONFORMANCE_HANDLER, on the NATS server of
// TOCK_NATS_URL, and does what each execution's payload says under the
// key "conformance" (Instruction): succeed with an output, fail a number
// of attempts, or work for a while (watching for cancellation and its
// timeout). examples/conformance-executor is the Go SDK's.
package conformance

import (
	"encoding/json"
	"time"
)

// Environment variables the kit sets for the executor under test.
const (
	EnvNATSURL = "TOCK_NATS_URL"
	EnvHandler = "TOCK_CONFORMANCE_HANDLER"
)

// What an Instruction asks of an attempt.
const (
	// DoSucceed: return Output.
	DoSucceed = "succeed"
	// DoFail: fail (a retryable failure with the error "conformance:
	// asked to fail") while the attempt number is at most FailAttempts,
	// then succeed with Output.
	DoFail = "fail"
	// DoWork: work for WorkMS milliseconds, then succeed with Output;
	// stop at once, reporting the attempt cancelled or timed out, when
	// the execution is cancelled or the job's timeout passes.
	DoWork = "work"
)

// Instruction is what an execution's payload asks the executor under
// test to do: {"conformance": {"do": "fail", "fail_attempts": 2,
// "output": "ok"}}.
type Instruction struct {
	Do           string `json:"do"`
	Output       string `json:"output,omitempty"`
	FailAttempts int    `json:"fail_attempts,omitempty"`
	WorkMS       int64  `json:"work_ms,omitempty"`
	// EchoID: the output is the execution id the attempt was given
	// (what a handler uses as its idempotency key) instead of Output.
	EchoID bool `json:"echo_id,omitempty"`
	// Log: the attempt writes these lines to its log (stdout), in order,
	// before it ends.
	Log []string `json:"log,omitempty"`
}

// Payload is the payload of a job asking for in.
func Payload(in Instruction) json.RawMessage {
	b, _ := json.Marshal(map[string]Instruction{"conformance": in})
	return b
}

// ReadInstruction reads an execution's payload; ok is false when it
// holds no instruction.
func ReadInstruction(payload []byte) (in Instruction, ok bool) {
	var p struct {
		Conformance *Instruction `json:"conformance"`
	}
	if err := json.Unmarshal(payload, &p); err != nil || p.Conformance == nil {
		return Instruction{}, false
	}
	return *p.Conformance, true
}

// Work is how long a DoWork instruction works.
func (in Instruction) Work() time.Duration { return time.Duration(in.WorkMS) * time.Millisecond }
