package embedded

import (
	"net"
	"strconv"
	"testing"
)

// FreePort's ports lie below the kernel's ephemeral range, where no
// outgoing connection or port-0 listener can take one while a stopped
// server waits to start on it again, and can be bound.
func TestFreePortBelowEphemeralRange(t *testing.T) {
	lo := ephemeralLow()
	if lo <= minPort+1000 {
		t.Skipf("no ephemeral range to stay below (ip_local_port_range starts at %d)", lo)
	}
	seen := map[int]bool{}
	for range 50 {
		p, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if p < minPort || p >= lo {
			t.Fatalf("port %d is not in [%d, %d)", p, minPort, lo)
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("port %d: %v", p, err)
		}
		l.Close()
		seen[p] = true
	}
	if len(seen) < 40 {
		t.Errorf("50 picks gave only %d ports", len(seen))
	}
}
