// Package testenv starts the real dependencies tock's tests talk to:
// embedded etcd and NATS JetStream servers on free loopback ports (which a
// test may stop, kill and restart), and a fresh PostgreSQL database per
// test, dropped when the test ends: empty (Postgres), or a copy of a
// template database migrated once for all test binaries (PostgresFrom;
// store/storetest gives tock's schema).
package testenv
