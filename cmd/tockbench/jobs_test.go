package main

import (
	"testing"
	"time"
)

// Every mix's slots fire at distinct offsets that cover its period once:
// spread-hour's 3,600 slots each fire once an hour, one per second.
func TestSpreadSlots(t *testing.T) {
	from := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		mix    string
		period time.Duration
	}{{mixSpreadMinute, time.Minute}, {mixSpreadHour, time.Hour}} {
		seen := map[time.Time]int{}
		for slot := range slots(tc.mix) {
			ts, err := expectedTimes(cronOf(tc.mix, slot), from, from.Add(tc.period))
			if err != nil {
				t.Fatalf("%s slot %d: %v", tc.mix, slot, err)
			}
			if len(ts) != 1 {
				t.Fatalf("%s slot %d (%q) fires %d times in %s, want once", tc.mix, slot, cronOf(tc.mix, slot), len(ts), tc.period)
			}
			if prev, dup := seen[ts[0]]; dup {
				t.Fatalf("%s slots %d and %d both fire at %s", tc.mix, prev, slot, ts[0])
			}
			seen[ts[0]] = slot
		}
		if want := int(tc.period / time.Second); len(seen) != want {
			t.Errorf("%s: %d distinct seconds, want %d", tc.mix, len(seen), want)
		}
	}
}
