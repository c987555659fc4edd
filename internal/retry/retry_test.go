package retry

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"
)

// pauses returns the next n pauses of b.
func pauses(b *Backoff, n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = b.Next()
	}
	return out
}

func TestBackoffGrowsToCap(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name string
		b    Backoff
		want []time.Duration
	}{
		{"zero value", Backoff{}, []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3200 * ms, 5000 * ms, 5000 * ms}},
		{"cap not a power of two", Backoff{Initial: 100 * ms, Max: 2 * time.Second}, []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 2000 * ms, 2000 * ms}},
		{"fixed", Backoff{Initial: time.Second, Max: time.Second}, []time.Duration{time.Second, time.Second, time.Second}},
		{"max below initial", Backoff{Initial: 500 * ms, Max: 100 * ms}, []time.Duration{500 * ms, 500 * ms}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.b
			b.rand = func() float64 { return 0 } // no jitter: the un-jittered pause
			got := pauses(&b, len(tc.want))
			for i := range tc.want {
				if got[i] != tc.want[i] {
					t.Fatalf("pauses = %v, want %v", got, tc.want)
				}
			}
		})
	}
}

func TestBackoffJitterBounds(t *testing.T) {
	// The extremes of the random source give the bounds of the pause.
	for _, r := range []float64{0, 0.5, 0.999999} {
		b := Backoff{Initial: 100 * time.Millisecond, Max: 5 * time.Second, rand: func() float64 { return r }}
		for i, d := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond} {
			got := b.Next()
			if got > d || got <= d/2 {
				t.Errorf("r=%v: pause %d = %v, want in (%v, %v]", r, i, got, d/2, d)
			}
		}
	}
	// With the real source, pauses differ (lockstep is what jitter avoids)
	// and stay in bounds.
	seen := map[time.Duration]bool{}
	for range 100 {
		b := Backoff{Initial: time.Second, Max: time.Second}
		d := b.Next()
		if d > time.Second || d <= time.Second/2 {
			t.Fatalf("pause %v out of (500ms, 1s]", d)
		}
		seen[d] = true
	}
	if len(seen) < 50 {
		t.Errorf("100 pauses took only %d values", len(seen))
	}
}

func TestBackoffReset(t *testing.T) {
	b := Backoff{Initial: 100 * time.Millisecond, Max: 5 * time.Second, rand: func() float64 { return 0 }}
	pauses(&b, 4)
	b.Reset()
	if got := b.Next(); got != 100*time.Millisecond {
		t.Errorf("pause after Reset = %v, want 100ms", got)
	}
	if got := b.Next(); got != 200*time.Millisecond {
		t.Errorf("second pause after Reset = %v, want 200ms", got)
	}
}

func TestSleep(t *testing.T) {
	if !Sleep(context.Background(), time.Millisecond) {
		t.Error("Sleep with a live context reported it was cut short")
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if Sleep(ctx, 0) {
		t.Error("Sleep with an ended context reported it waited")
	}

	ctx, cancel = context.WithCancel(context.Background())
	done := make(chan bool)
	go func() { done <- Sleep(ctx, time.Hour) }()
	cancel()
	select {
	case waited := <-done:
		if waited {
			t.Error("Sleep cut short by its context reported it waited")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Sleep did not return when its context ended")
	}
}

func TestWaitLogsThePause(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	b := Backoff{Initial: time.Millisecond, Max: time.Millisecond, rand: func() float64 { return 0 }}
	if !b.Wait(context.Background(), log, "pull executions", "queue", "http") {
		t.Fatal("Wait with a live context reported it was cut short")
	}
	var rec struct {
		Level   string `json:"level"`
		Msg     string `json:"msg"`
		Queue   string `json:"queue"`
		RetryIn int64  `json:"retry_in"`
	}
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatalf("log line %q: %v", buf.String(), err)
	}
	if rec.Level != "WARN" || rec.Msg != "pull executions" || rec.Queue != "http" || time.Duration(rec.RetryIn) != time.Millisecond {
		t.Errorf("log line = %s, want a warning with queue=http and retry_in=1ms", buf.String())
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b = Backoff{Initial: time.Hour, Max: time.Hour}
	if b.Wait(ctx, log, "pull executions") {
		t.Error("Wait with an ended context reported it slept")
	}
}
