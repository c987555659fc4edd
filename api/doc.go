// Package api is tock's REST API: an Echo v4 server that creates, changes
// and inspects jobs and their executions. It checks the shape of each
// request and translates it; what a change does, and what a valid job is,
// is package jobs' business (jobs.Service), and reads go to the store.
//
// openapi.yaml in this directory is the source of truth. openapi.gen.go
// (the Echo server interface and the embedded document, served at GET
// /openapi.json) is generated from it by `go generate ./api`; the
// endpoints in this package implement that interface. The request and
// response types are generated once, into package api/models, which the
// Go client shares. Errors are RFC 9457 problem details with a stable
// type URI (see the Problem* constants).
package api
