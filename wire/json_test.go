package wire

import (
	stdjson "encoding/json"
	"reflect"
	"testing"
	"time"

	json "github.com/segmentio/encoding/json"

	"github.com/tock-sched/tock/domain"
)

// The hot path encodes and decodes execution messages and events with
// segmentio/encoding/json (docs/bench.md, issue 20), a drop-in for
// encoding/json. The wire protocol is defined by what encoding/json
// does: both must write the same bytes and read the same values,
// whatever the text an executor reports.
func TestFastJSONMatchesEncodingJSON(t *testing.T) {
	texts := []string{"", "plain", `quote " and \ backslash`, "<html>&amp;</html>", "tab\tnewline\n\x00\x1f\x7f",
		"\u2028\u2029", "héllo wörld ☃ 🚀", "bad utf-8 \xff\xfe", "cut \xe2\x82", string(make([]byte, 300))}
	at := time.Date(2026, 11, 26, 12, 0, 0, 123_000_000, time.UTC)
	for _, s := range texts {
		ev := Event{Type: domain.EventFailed, ExecutionID: s, ScheduledFor: at, Attempt: 2, ExecutorID: s, At: at,
			Error: s, Output: s, StartedAt: &at, Final: true, RetryInMS: 1500, Dispatch: 1, Handler: s}
		ex := Execution{ExecutionID: s, JobID: "j", Namespace: s, JobName: s, ScheduledFor: at,
			Handler: domain.Handler{Type: "http", URL: s, Headers: map[string]string{"X-A": s, s: "b"}},
			Payload: stdjson.RawMessage(`{"a":[1,2,{"b":null}],"c":"` + "x" + `"}`), TimeoutMS: 1000,
			Priority: domain.Priority("high"), AttemptBase: 1, Dispatch: 2}
		for _, v := range []any{ev, []Event{ev, ev}, ex} {
			want, err1 := stdjson.Marshal(v)
			got, err2 := json.Marshal(v)
			if (err1 == nil) != (err2 == nil) || string(got) != string(want) {
				t.Fatalf("%q: segmentio wrote %s (%v), encoding/json %s (%v)", s, got, err2, want, err1)
			}
			// Read back with both into a fresh value of the same type.
			a, b := reflect.New(reflect.TypeOf(v)), reflect.New(reflect.TypeOf(v))
			err1, err2 = stdjson.Unmarshal(want, a.Interface()), json.Unmarshal(want, b.Interface())
			if (err1 == nil) != (err2 == nil) || !reflect.DeepEqual(a.Interface(), b.Interface()) {
				t.Fatalf("%q: read back differently: %+v (%v) against %+v (%v)", s, b.Interface(), err2, a.Interface(), err1)
			}
		}
	}
	// Input that is not tock's own: unknown fields, other key case, nulls.
	for _, in := range []string{`{"execution_id":"a","EXECUTION_ID":"b","unknown":[1,{"x":2}],"payload":null}`,
		`{"execution_id":null,"attempt_base":1.5}`, `{"handler":{"type":"nats","headers":null}}`, `[1,2`, `{"dispatch":"x"}`} {
		var a, b Execution
		err1, err2 := stdjson.Unmarshal([]byte(in), &a), json.Unmarshal([]byte(in), &b)
		if (err1 == nil) != (err2 == nil) || !reflect.DeepEqual(a, b) {
			t.Errorf("%s: segmentio %+v (%v), encoding/json %+v (%v)", in, b, err2, a, err1)
		}
	}
}
