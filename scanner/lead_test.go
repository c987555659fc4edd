package scanner

import (
	"container/heap"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/internal/testenv"
	"github.com/tock-sched/tock/store/model"
)

// leadScanner is a Scanner with n runs due at each of the given times,
// counted as a scan counts them, firing at rate runs per second.
func leadScanner(t *testing.T, rate float64, due map[time.Time]int) *Scanner {
	t.Helper()
	s := &Scanner{cfg: Config{FireLead: 500 * time.Millisecond, MaxFireLead: 5 * time.Second,
		Lookahead: 6 * time.Second, FireConcurrency: 3}, index: map[uuid.UUID]*entry{}, fireRate: rate}
	for at, n := range due {
		for range n {
			e := &entry{job: model.Due{ID: uuid.New(), NextRunAt: at}, due: at}
			s.index[e.job.ID] = e
			heap.Push(&s.heap, e)
		}
	}
	s.countDue()
	return s
}

func TestFireLeadGrowsWithABurst(t *testing.T) {
	burst := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	s := leadScanner(t, 20_000, map[time.Time]int{burst: 50_000})
	// 50,000 at 20,000/s take 2.5 s: fired from 3 s before (2.5 s + FireLead).
	cases := []struct {
		before time.Duration
		fires  bool
	}{
		{10 * time.Second, false},
		{3100 * time.Millisecond, false},
		{2900 * time.Millisecond, true},
		{100 * time.Millisecond, true},
	}
	for _, c := range cases {
		now := burst.Add(-c.before)
		if got := !s.fireHorizon(now).Before(burst); got != c.fires {
			t.Errorf("%s before the burst: fires %v, want %v (horizon %s)", c.before, got, c.fires, s.fireHorizon(now))
		}
	}
	if at := s.fireAt(burst); !at.Equal(burst.Add(-3 * time.Second)) {
		t.Errorf("fireAt = %s before the burst, want 3s", burst.Sub(at))
	}
}

func TestFireLeadIsBoundedByMaxFireLead(t *testing.T) {
	burst := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	s := leadScanner(t, 1_000, map[time.Time]int{burst: 50_000}) // would need 50 s
	if !s.fireHorizon(burst.Add(-5100 * time.Millisecond)).Before(burst) {
		t.Error("fired more than MaxFireLead ahead")
	}
	if s.fireHorizon(burst.Add(-4900 * time.Millisecond)).Before(burst) {
		t.Error("not fired at MaxFireLead ahead")
	}
}

func TestFireLeadStaysAtFireLeadWhenLight(t *testing.T) {
	base := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	due := map[time.Time]int{}
	for i := range 6 {
		due[base.Add(time.Duration(i)*time.Second)] = 100 // 100 a second, at 20,000/s: 5 ms each
	}
	s := leadScanner(t, 20_000, due)
	second := base.Add(3 * time.Second)
	// Up to it, 400 runs: 20 ms of firing, so the lead is FireLead + 20 ms.
	if s.fireHorizon(second.Add(-600 * time.Millisecond)).After(second) {
		t.Error("a light second fired 600ms ahead")
	}
	if s.fireHorizon(second.Add(-510 * time.Millisecond)).Before(second) {
		t.Error("a light second not fired 510ms ahead (FireLead plus its share)")
	}
}

func TestMeasureFire(t *testing.T) {
	s := &Scanner{cfg: Config{FireConcurrency: 3}}
	if s.rate() != initialFireRate {
		t.Fatalf("rate before any batch %v, want %v", s.rate(), float64(initialFireRate))
	}
	s.measureFire(10, time.Millisecond) // too small to say anything
	if s.fireRate != 0 {
		t.Fatalf("a batch of 10 was measured: %v", s.fireRate)
	}
	s.measureFire(1000, 300*time.Millisecond) // 3,333/s per transaction, 3 at once
	if s.rate() < 9_999 || s.rate() > 10_001 {
		t.Fatalf("rate %v, want 10,000", s.rate())
	}
	s.measureFire(1000, 100*time.Millisecond) // 30,000/s: moves a fifth of the way
	if s.rate() < 13_999 || s.rate() > 14_001 {
		t.Fatalf("rate %v, want 14,000", s.rate())
	}
}

func TestMaxFireLeadDefault(t *testing.T) {
	for _, c := range []struct {
		lookahead, fireLead, want time.Duration
	}{
		{0, 0, 5 * time.Second},                                             // the defaults: 6s and 500ms
		{2 * time.Second, 0, 2 * time.Second * 5 / 6},                       // a short look-ahead
		{3 * time.Second, 2900 * time.Millisecond, 2900 * time.Millisecond}, // never below FireLead
	} {
		cfg := Config{Lookahead: c.lookahead, FireLead: c.fireLead, NodeID: "n",
			Store: struct{ Store }{}, Dispatcher: struct{ Dispatcher }{}, Clock: struct{ Clock }{}}.WithDefaults()
		if cfg.MaxFireLead != c.want {
			t.Errorf("Lookahead %s, FireLead %s: MaxFireLead %s, want %s", c.lookahead, c.fireLead, cfg.MaxFireLead, c.want)
		}
		if err := cfg.validate(); err != nil {
			t.Errorf("Lookahead %s, FireLead %s: %v", c.lookahead, c.fireLead, err)
		}
	}
}

// A burst is committed well before its second: with 10,000 runs due at
// once and no firing measured yet (5,000/s assumed), the scanner starts
// firing them about 2.5 s ahead, not FireLead (500ms) ahead as it fires
// a lone job (TestFiresEverySecondOnTime).
func TestBurstFiresAheadOfFireLead(t *testing.T) {
	st := newFakeStore()
	at := time.Now().Truncate(time.Second).Add(5 * time.Second)
	const n = 10_000
	for range n {
		st.add(cronJob(1, at))
	}
	s, stop := newScanner(t, st, Config{})
	defer stop()
	s.Acquire(1, 10)
	testenv.WaitFor(t, 15*time.Second, "the burst fired", func() bool {
		st.mu.Lock()
		defer st.mu.Unlock()
		got := 0
		for _, x := range st.fired {
			if x.ScheduledFor.Equal(at) {
				got++
			}
		}
		return got == n
	})
	st.mu.Lock()
	defer st.mu.Unlock()
	for i, x := range st.fired {
		if ahead := at.Sub(st.firedAt[i]); x.ScheduledFor.Equal(at) && ahead < time.Second {
			t.Fatalf("a run of the burst committed %s ahead of its second, want at least 1s (the lead for 10,000 at 5,000/s is 2.5s)", ahead)
		}
	}
}
