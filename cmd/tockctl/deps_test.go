package main

import (
	"strings"
	"testing"

	"github.com/tock-sched/tock/internal/testenv"
)

// tockctl is a client: it must not link the server's Echo, pgx, etcd or
// NATS, nor tock's server packages, only the generated client and the
// models it shares with the server, jobfile, the client-side library of
// jobs kept as files, and domain (jobfile's: the API's own rules, such as
// which header names hold credentials; domain imports nothing of tock)
// (its tests may, to start a server).
func TestNoServerDependencies(t *testing.T) {
	t.Parallel()
	server := []string{"github.com/labstack/echo", "github.com/jackc/pgx", "go.etcd.io/etcd", "github.com/nats-io/nats-server", "github.com/nats-io/nats.go"}
	for _, pkg := range testenv.Deps(t) {
		if rest, ok := strings.CutPrefix(pkg, "github.com/tock-sched/tock/"); ok && rest != "client" && rest != "api/models" && rest != "jobfile" && rest != "domain" && rest != "cmd/tockctl" {
			t.Errorf("tockctl depends on %s: it should need only packages client, api/models, jobfile and domain of tock", pkg)
		}
		for _, s := range server {
			if strings.HasPrefix(pkg, s) {
				t.Errorf("tockctl depends on %s, a server dependency", pkg)
			}
		}
	}
}
