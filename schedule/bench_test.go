package schedule

import (
	"testing"
	"time"
)

// BenchmarkNext measures one Next call, which the scanner makes for every
// fire. Each iteration asks for the run after the previous one, as the
// scanner does, restarting when the sequence ends.
func BenchmarkNext(b *testing.B) {
	for _, bm := range []struct{ name, cron, tz string }{
		{"every-second-utc", "* * * * * *", ""},
		{"every-minute-utc", "0 * * * * *", ""},
		{"every-15s-new-york", "*/15 * * * * *", "America/New_York"},
		{"office-hours-berlin", "0 */20 9-17 * * MON-FRI", "Europe/Berlin"},
		{"daily-fixed-new-york", "0 30 2 * * *", "America/New_York"},
		{"hourly-new-york", "@hourly", "America/New_York"},
		{"yearly-sydney", "@yearly", "Australia/Sydney"},
		{"feb-29-utc", "0 0 0 29 2 *", ""},
		{"last-friday-berlin", "0 0 17 ? * FRIL", "Europe/Berlin"},
		{"last-or-15w-utc", "0 0 9 L,15W * *", ""},
		{"every-90s", "@every 90s", ""},
	} {
		b.Run(bm.name, func(b *testing.B) {
			c := mustCompile(b, Spec{Cron: bm.cron, Timezone: bm.tz})
			start := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
			after := start
			for b.Loop() {
				next, ok := c.Next(after)
				if !ok || next.Year() > 2060 {
					next = start
				}
				after = next
			}
		})
	}
}

// BenchmarkCompile measures compiling a job's schedule, which the API does
// for every job it creates (and the scanner for every new expression).
func BenchmarkCompile(b *testing.B) {
	for _, bm := range []struct{ name, cron, tz string }{
		{"utc", "0 30 9 * * MON-FRI", ""},
		{"berlin", "0 30 9 * * MON-FRI", "Europe/Berlin"},
		{"day-forms", "0 0 9 L-2,15W * MON#1,FRIL", ""},
	} {
		b.Run(bm.name, func(b *testing.B) {
			for b.Loop() {
				mustCompile(b, Spec{Cron: bm.cron, Timezone: bm.tz})
			}
		})
	}
}
