// Package domain is tock's vocabulary of jobs and executions: handlers,
// retry policies, priorities, job and execution states, attempt outcomes,
// the events executors report, buckets and execution ids. It holds the
// rules that need no I/O (a retry policy's validation, defaults and
// delays; which bucket a job is in) and imports nothing of tock, so every
// other package can share it.
package domain
