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
	a := procTimes{10: {"postgres", 100, "tock"}, 11: {"tockd", 50, ""}, self: {"tockbench", 10, ""}, 12: {"bash", 5, ""},
		14: {"postgres", 0, ""}, 15: {"postgres", 10, "tock_test_1"}}
	b := procTimes{10: {"postgres", 300, "tock"}, 11: {"tockd", 150, ""}, self: {"tockbench", 60, ""}, 12: {"bash", 500, ""},
		13: {"postgres", 100, "tock"},        // a backend that started during the interval counts whole
		14: {"postgres", 100, ""},            // the WAL writer serves every database: counted
		15: {"postgres", 710, "tock_test_1"}} // another database's backend: apart, not counted
	c := cpuBetween(a, b, "tock", 10, 1000)
	want := map[string]float64{"postgres": 4000, "tockd": 1000, "executors (tockbench)": 500, otherDatabases: 7000} // µs per execution
	if len(c.Components) != len(want) {
		t.Fatalf("components %+v, want %v", c.Components, want)
	}
	for _, comp := range c.Components {
		if comp.USPerExecution != want[comp.Name] {
			t.Errorf("%s: %v µs, want %v", comp.Name, comp.USPerExecution, want[comp.Name])
		}
	}
	if c.Components[1].Name != "postgres" || c.Components[1].Processes != 3 || c.Components[1].Cores != 0.4 {
		t.Errorf("heaviest first, with its processes and cores: %+v", c.Components[1])
	}
	if c.TotalUS != 5500 {
		t.Errorf("total %v, want 5500 (other databases left out)", c.TotalUS)
	}
}

func TestBackendDatabase(t *testing.T) {
	for title, want := range map[string]string{
		"postgres: 15/main: postgres tock 127.0.0.1(40930) idle\x00":           "tock",
		"postgres: 15/main: postgres tock_test_ab 127.0.0.1(1) UPDATE\x00":     "tock_test_ab",
		"postgres: app tock [local] idle in transaction":                       "tock",
		"postgres: 15/main: checkpointer \x00":                                 "",
		"postgres: 15/main: logical replication launcher \x00":                 "",
		"postgres: walwriter   ":                                               "",
		"/usr/lib/postgresql/15/bin/postgres\x00-D\x00/var/lib/postgresql\x00": "",
	} {
		if got := backendDatabase(title); got != want {
			t.Errorf("backendDatabase(%q) = %q, want %q", title, got, want)
		}
	}
}
