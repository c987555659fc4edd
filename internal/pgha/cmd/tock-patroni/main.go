// Command tock-patroni runs the Patroni cluster the failover tests use (a
// PostgreSQL primary and a synchronous standby on loopback, see package
// pgha) until it is interrupted, for manual experiments and for
// scripts/patroni.sh. It prints the multi-host URL tockd takes as
// --postgres-url.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tock-sched/tock/internal/embedded"
	"github.com/tock-sched/tock/internal/pgha"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "tock-patroni:", err)
		os.Exit(1)
	}
}

func run() error {
	etcdURL := flag.String("etcd", "", "etcd endpoint for Patroni (default: start an embedded etcd on a free port)")
	members := flag.Int("members", 2, "Patroni members (one primary, the others standbys)")
	async := flag.Bool("async", false, "asynchronous replication (synchronous_mode off): a failover may lose commits")
	ttl := flag.Int("ttl", 10, "leader key TTL in seconds: how long a dead primary keeps leading")
	db := flag.String("db", "tock", "database to create")
	urlFile := flag.String("url-file", "", "also write the multi-host URL to this file")
	verbose := flag.Bool("v", false, "Patroni's and Postgres's logs on stderr")
	flag.Parse()
	if *members < 1 {
		return fmt.Errorf("-members %d: at least 1", *members)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *etcdURL == "" {
		dir, err := os.MkdirTemp("", "tock-patroni-etcd-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		e := &embedded.Etcd{Dir: dir}
		if err := e.Start(); err != nil {
			return err
		}
		defer e.Stop()
		*etcdURL = e.Endpoint()
	}
	cfg := pgha.Config{Etcd: *etcdURL, Members: *members, Async: *async, TTL: *ttl}
	if *verbose {
		cfg.Log = os.Stderr
	}
	if why := pgha.Available(); why != "" {
		return fmt.Errorf("%s", why)
	}
	sctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	c, err := pgha.Start(sctx, cfg)
	cancel()
	if err != nil {
		return err
	}
	defer c.Stop()
	if err := createDatabase(ctx, c.URL("postgres"), *db); err != nil {
		return err
	}
	url := c.URL(*db)
	fmt.Printf("etcd: %s\nPatroni REST APIs:", *etcdURL)
	for _, m := range c.Members {
		fmt.Printf(" %s=%s", m.Name, m.API())
	}
	fmt.Printf("\npostgres: %s\n", url)
	if *urlFile != "" {
		if err := os.WriteFile(*urlFile, []byte(url+"\n"), 0o644); err != nil {
			return err
		}
	}
	<-ctx.Done()
	fmt.Println("stopping")
	return nil
}

// createDatabase creates database name at url unless it exists.
func createDatabase(ctx context.Context, url, name string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return nil
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	return err
}
