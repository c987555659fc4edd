// Package calendar says which instants business-time calendars allow:
// calendars that exclude days and stretches of time (holidays, weekends,
// maintenance windows), or include only some (business days), each read
// by the local date and wall clock of its own IANA time zone. It is pure:
// no I/O and no clock of its own; callers pass the time.
//
// # What a calendar lists
//
// A calendar lists periods, and an instant is in one when its local date
// and time in the calendar's zone (the instant's t.In(zone)) falls in it.
// The periods are the union of:
//
//   - Dates: whole local days, "2026-12-25".
//   - Windows: dated stretches of wall time, from start up to but not
//     including end, "2026-12-24T18:00" to "2026-12-27T06:00" (seconds
//     optional, "18:00:30").
//   - Weekly: days of the week, whole ({"days": ["SAT", "SUN"]}) or from
//     one time to another on each of them ({"days": ["SAT"], "start":
//     "02:00", "end": "06:00"}).
//   - Daily: a stretch of every day's clock, {"start": "22:00", "end":
//     "06:00"}.
//   - Days: cron-style day rules "DOM MONTH DOW", each listing whole local
//     days: "25 12 *" (every 25 December), "L * *" (the last day of each
//     month), "* * MON#1" (the first Monday), "* * SAT,SUN".
//
// A Weekly or Daily stretch whose end is at or before its start runs into
// the next day: Saturday 22:00 to 02:00 is Saturday 22:00 to Sunday
// 02:00, and a stretch from a time to the same time is a whole day of
// clock, so daily "00:00" to "00:00" lists every day whole.
//
// Day rules mean what a job's cron day fields mean (see the schedule
// package): names and numbers of months and weekdays, ranges, steps and
// lists, L, L-n, LW and nW in the day of month, DAY#n and DAYL in the day
// of week, and the two day fields joined as in Vixie cron: when either
// begins with "*" or "?" a day must match both, otherwise either. So
// "13 * FRI" lists every 13th and every Friday, not Fridays the 13th.
// Rules that match no day, such as "30 2 *", are refused.
//
// # Local time and daylight saving
//
// Everything is decided by the wall clock, so a whole day is a whole day
// of the zone's clock whatever its length: the day clocks spring forward
// lasts 23 hours and the day they fall back 25. A stretch that covers a
// skipped hour covers less real time; one that covers a repeated hour
// covers both of its passes. In zones that have skipped midnight (as
// America/Sao_Paulo did on 2018-11-04), a day starts at the first instant
// whose local date is that day, and a day a zone skipped entirely (as
// Pacific/Apia skipped 2011-12-30) lists no instant at all.
//
// # Allowed instants
//
// In the mode "exclude" (the default), a calendar allows every instant it
// does not list; in "include", only the instants it lists ("business days
// only"). A calendar that extends others allows an instant only when they
// all allow it too, each by its own mode, and so on down what they extend:
// the allowed sets intersect. Cycles of Extends are refused.
//
// Instants count by the whole second: every rule is at second granularity,
// so a fraction of a second is allowed when its second is.
//
// # Searching
//
// NextAllowed finds the first allowed instant at or after a time, and
// FirstAllowed the first of a schedule's runs that calendars allow. Both
// step from the end of one listed stretch to the next, and from one zone
// offset to the next, never second by second, and take a limit: an
// include calendar with no rules, or an exclude calendar listing daily
// "00:00" to "00:00", allows nothing, and the search gives up at the
// limit.
package calendar
