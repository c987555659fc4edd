// Package models holds the types of tock's REST API: the jobs, executions,
// problems and other bodies the server sends and the client decodes.
//
// models.gen.go is generated from api/openapi.yaml by `go generate
// ./api/models` (part of `make generate`); do not edit it. The package is
// shared by the server (package api) and the Go client (package client),
// so both speak the same types, and it imports nothing of the server: a
// program that links it does not link Echo, pgx, etcd or NATS.
package models
