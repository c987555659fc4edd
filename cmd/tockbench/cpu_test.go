package main

import (
	"os"
	"testing"
)

func TestParseStat(t *testing.T) {
	// A command name with spaces and parentheses: fields are counted from
	// its last ')'. utime 1234 and stime 56 are fields 14 and 15.
	line := "4242 (post (gres) x) S 1 4242 4242 0 -1 4194560 100 0 0 0 1234 56 0 0 20 0 1 0 100 1000 10\n"
	comm, ticks, ok := parseStat([]byte(line))
	if !ok || comm != "post (gres) x" || ticks != 1290 {
		t.Fatalf("parseStat = %q, %d, %v; want %q, 1290, true", comm, ticks, ok, "post (gres) x")
	}
	if _, _, ok := parseStat([]byte("4242 (cut")); ok {
		t.Fatal("a cut line parsed")
	}
}

func TestCPUBetween(t *testing.T) {
	self := os.Getpid()
	a := procTimes{10: {"postgres", 100}, 11: {"tockd", 50}, self: {"tockbench", 10}, 12: {"bash", 5}}
	b := procTimes{10: {"postgres", 300}, 11: {"tockd", 150}, self: {"tockbench", 60}, 12: {"bash", 500},
		13: {"postgres", 100}} // a backend that started during the interval counts whole
	c := cpuBetween(a, b, 10, 1000)
	want := map[string]float64{"postgres": 3000, "tockd": 1000, "executors (tockbench)": 500} // µs per execution
	if len(c.Components) != len(want) {
		t.Fatalf("components %+v, want %v", c.Components, want)
	}
	for _, comp := range c.Components {
		if comp.USPerExecution != want[comp.Name] {
			t.Errorf("%s: %v µs, want %v", comp.Name, comp.USPerExecution, want[comp.Name])
		}
	}
	if c.Components[0].Name != "postgres" || c.Components[0].Processes != 2 || c.Components[0].Cores != 0.3 {
		t.Errorf("heaviest first, with its processes and cores: %+v", c.Components[0])
	}
	if c.TotalUS != 4500 {
		t.Errorf("total %v, want 4500", c.TotalUS)
	}
}
