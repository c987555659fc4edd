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
// # Day fields
//
// A run needs the second, minute, hour and month fields to match, and the
// two day fields combine as in Vixie cron, which decides by a field's
// first character: a day field starting with "*" or "?" is a star, and
// then a day must match both fields; otherwise either field may match.
//
//	0 0 12 13 * FRI      the 13th, and every Friday
//	0 0 12 */2 * MON     odd-numbered days that are Mondays ("*/2" is a star)
//	0 0 12 1,* * MON     every day ("1,*" starts with 1: not a star)
//	0 0 12 13 * */5      the 13th when it is a Sunday or a Friday
//
// Beyond the classic syntax the day fields take forms that depend on the
// month. Names are case-insensitive and weekdays are 0 (Sunday) to 6 or
// SUN to SAT.
//
//   - Day of month "L": the last day. "L-n": n days before it ("L-0" is
//     "L"); in a month too short for it, as "L-28" in a common February,
//     there is no run.
//   - Day of month "LW": the last weekday (Monday to Friday) of the
//     month: the last day, or the Friday before a Saturday or Sunday one.
//   - Day of month "nW": the weekday (Monday to Friday) nearest to day n,
//     never in another month: with the 1st a Saturday, "1W" is Monday the
//     3rd; with a Sunday 31st, "31W" is Friday the 29th. In a month
//     without day n ("31W" in April) there is no run.
//   - Day of week "DAY#n": the nth such weekday of the month, n from 1 to
//     5 ("MON#1", "5#3"); in a month with only four there is no run.
//   - Day of week "DAYL": the last such weekday ("FRIL", "5L"). "L" alone
//     is refused.
//
// A list is the union of its elements ("L,15W", "MON#1,FRIL"); ranges
// and steps of these forms are refused. They count as restrictions under
// the rule above: "0 0 9 L * FRIL" runs on the last day and on the last
// Friday, "0 0 9 ? 2 MON#5" only on a Monday February 29 (the next is in
// 2044), and "0 0 9 */20 * MON#2" never, so Compile refuses it.
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
// The day forms change nothing here: "0 30 2 ? 3 SUN#2" in New York runs
// at 03:00 on the day clocks spring forward.
//
// "@every <duration>" is a pure interval and ignores the time zone: its
// runs fall at Spec.Anchor (default the Unix epoch) plus multiples of the
// interval; see Compile.
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
// Compile refuses expressions that can never run, such as "0 0 0 30 2 *"
// or "0 0 0 30 2 */2", and Next searches 40 years ahead, which finds a run
// of any other: the rarest dates, such as February 29 on a Saturday, can
// be 40 years apart. Only an expression whose every match falls in a
// skipped DST hour ("* 30 2 ? 3 SUN#2" in New York, by the wall clock)
// has no next run; First reports it.
package schedule
