// Package model holds the plain data types the store reads and writes:
// jobs, executions and their attempts, backfills, namespaces, API keys,
// audit entries and the results of the store's operations.
//
// They are values with no database handle, so the packages that pass
// them around (the API, the scanner, the dispatcher, the recorder, the
// maintenance loops) can name them without depending on the queries in
// package store, and a reader finds what a job or an execution is in one
// small place. Everything that touches PostgreSQL stays in store: its
// queries take and return these types. model imports nothing of tock but
// domain and schedule.
package model
