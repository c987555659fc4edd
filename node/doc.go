// Package node is a tock server node, the library tockd is built on:
// Config says which roles a node runs (api, scheduler, executor,
// recorder) and where etcd, NATS and PostgreSQL are, and Run runs them
// until its context ends.
package node
