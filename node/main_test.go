package node_test

import (
	"flag"
	"os"
	"testing"

	"github.com/tock-sched/tock/node/nodetest"
)

// TestMain builds the tockd binary of the process tests while the first
// tests run, when it runs them all (no -run): the first test to start a
// tockd process would otherwise wait for the build (a link with the race
// detector, 10-20 s on a 2-core machine).
func TestMain(m *testing.M) {
	if url := os.Getenv(logExecutorEnv); url != "" {
		runLogExecutor(url) // a child of TestKilledAttemptKeepsItsLog
		return
	}
	flag.Parse()
	if flag.Lookup("test.run").Value.String() == "" {
		nodetest.BuildTockdAhead()
	}
	os.Exit(m.Run())
}
