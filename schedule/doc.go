// Package schedule turns a job's schedule as users write it (a cron
// expression with an IANA time zone, a moment, a delay, or "now") into run
// times. It is pure: no I/O, no clock of its own; callers pass the time.
//
// # Run times
//
// Every time this package returns is in UTC with at most millisecond
// precision, so that a run time survives a round trip through PostgreSQL
// and JSON unchanged and can key an execution (job id, scheduled time).
// Cron run times are whole seconds.
//
// Next depends only on its argument, never on when a job was created or on
// a wall clock, so every scheduler node computes the same sequence and a
// scanner that always passes the previous scheduled time fires each run
// exactly once.
//
// # Daylight saving time
//
// Cron expressions follow classic Vixie/ISC cron (see DESIGN.md, "Time"):
//
//   - If the second, minute or hour field begins with "*" (for example "*"
//     or "*/15"), the job runs by the wall clock as it is: there are no runs
//     in a skipped hour and runs in both passes of a repeated hour, so its
//     runs stay evenly spaced in real time. @hourly is "0 0 * * * *" and so
//     belongs here.
//   - Otherwise the job names fixed times of day (for example "0 30 2 * * *"
//     or @daily) and runs once per named time: a time inside a skipped hour
//     runs at the first instant after the gap (02:30 on the US
//     spring-forward day runs at 03:00 EDT), and a time inside a repeated
//     hour runs on its first occurrence only. Named times that all fall in
//     one gap share that single run.
//
// "@every <duration>" is a pure interval and ignores the time zone; see
// Compile for its anchor.
//
// # Preview
//
// Preview lists a schedule's next runs as firing would make them (First,
// then Next of each run) and Classify marks each run a daylight saving
// change shaped: moved out of a skipped hour, or in a repeated one (which
// pass). Neither computes a run of its own.
//
// # Horizon
//
// Next searches about five years ahead. An expression that names a
// possible date runs well within that, except February 29 across a
// skipped leap year (2100): there Next reports no next run. Compile
// rejects expressions that can never run, such as "0 0 0 30 2 *".
package schedule
