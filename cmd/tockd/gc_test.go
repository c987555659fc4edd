package main

import (
	"runtime/debug"
	"testing"
)

// tockd collects garbage at defaultGOGC unless the environment names a
// target, which Go's runtime has applied already and tockd leaves alone.
func TestDefaultGOGC(t *testing.T) {
	was := debug.SetGCPercent(100)
	defer debug.SetGCPercent(was)

	applyDefaultGOGC(func(string) string { return "" })
	if got := debug.SetGCPercent(100); got != defaultGOGC {
		t.Errorf("GOGC unset: GC percent %d, want %d", got, defaultGOGC)
	}
	applyDefaultGOGC(func(k string) string { return map[string]string{"GOGC": "100"}[k] })
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC=100: GC percent %d, want it left at 100", got)
	}
}
