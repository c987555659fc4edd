package node

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
)

// --auth none is said at every start, in the log; the profiler is not
// served unauthenticated on an API that requires keys.
func TestAuthNoneWarnsAndPprofNeedsMetricsAddr(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	cfg := Config{Roles: RolesOf(RoleAPI), AuthNone: true, HTTPAddr: "0.0.0.0:8080"}
	if err := checkAuth(context.Background(), cfg, nil, log); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "the API is open") {
		t.Errorf("no warning: %q", logs.String())
	}
	cfg = Config{Roles: RolesOf(RoleAPI), Pprof: true, PostgresURL: "postgres://db", EtcdEndpoints: []string{"http://etcd:2379"},
		NATSURL: "nats://nats:4222"}.WithDefaults()
	if err := cfg.validate(); err == nil || !strings.Contains(err.Error(), "--metrics-addr") {
		t.Errorf("--pprof with keys and no --metrics-addr: %v", err)
	}
}
