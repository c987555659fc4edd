package schedule

import (
	"testing"
	"time"
)

// Equal cron specs share one compiled schedule; invalid specs, one-shot
// ones and anchors are told apart, and a full cache starts over.
func TestCacheSharesCompiledSchedules(t *testing.T) {
	c := Cache{max: 3}
	mustCompile := func(sp Spec) *Schedule {
		t.Helper()
		s, err := c.Compile(sp)
		if err != nil {
			t.Fatalf("%+v: %v", sp, err)
		}
		return s
	}
	a := mustCompile(Spec{Cron: "0 30 9 * * MON-FRI", Timezone: "Europe/Berlin"})
	if b := mustCompile(Spec{Cron: "0 30 9 * * MON-FRI", Timezone: "Europe/Berlin"}); b != a {
		t.Error("the same spec compiled twice")
	}
	if b := mustCompile(Spec{Cron: "0 30 9 * * MON-FRI"}); b == a {
		t.Error("another zone shares the compiled schedule")
	}
	for range 2 {
		if _, err := c.Compile(Spec{Cron: "0 61 * * * *"}); err == nil {
			t.Error("an invalid spec compiled")
		}
	}
	if len(c.m) != 2 {
		t.Errorf("%d kept after an invalid spec, want 2", len(c.m))
	}
	whole := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	anchored := mustCompile(Spec{Cron: "@every 36h", Anchor: &whole})
	if b := mustCompile(Spec{Cron: "@every 36h"}); b == anchored {
		t.Error("an anchored and an unanchored @every share the compiled schedule")
	}
	// A fractional anchor is refused even after its whole second compiled.
	frac := whole.Add(time.Millisecond)
	if _, err := c.Compile(Spec{Cron: "@every 36h", Anchor: &frac}); err == nil {
		t.Error("a fractional anchor compiled")
	}
	if len(c.m) > 3 {
		t.Errorf("%d kept, max 3", len(c.m))
	}
	at := whole
	if _, err := c.Compile(Spec{At: &at}); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.m[cacheKey{}]; ok {
		t.Error("a one-shot spec was kept")
	}
}
