package schedule

import (
	"testing"
	"time"
)

// nextCase lists the runs a schedule makes after from, in order. Times are
// written with the zone's offset so DST cases read as wall clocks.
type nextCase struct {
	name string
	cron string
	tz   string
	from string
	want []string
}

// runNextCases checks each case by chaining Next from its start, the way
// the scanner does (always passing the previous scheduled time).
func runNextCases(t *testing.T, tests []nextCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustCompile(t, Spec{Cron: tt.cron, Timezone: tt.tz})
			after := mustTime(t, tt.from)
			for i, w := range tt.want {
				got, ok := c.Next(after)
				want := mustTime(t, w)
				if !ok || !got.Equal(want) {
					t.Fatalf("run %d: Next(%s) = %s, %v; want %s (%s)", i, after.In(c.Location()).Format(time.RFC3339),
						got.In(c.Location()).Format(time.RFC3339), ok, want.In(c.Location()).Format(time.RFC3339), want.UTC().Format(time.RFC3339))
				}
				if got.Location() != time.UTC {
					t.Fatalf("Next returned %v, not in UTC", got)
				}
				after = got
			}
		})
	}
}

func TestNext(t *testing.T) {
	runNextCases(t, []nextCase{
		{"five fields", "30 9 * * *", "", "2026-01-01T00:00:00Z",
			[]string{"2026-01-01T09:30:00Z", "2026-01-02T09:30:00Z"}},
		{"six fields", "15 30 9 * * *", "", "2026-01-01T09:30:15Z",
			[]string{"2026-01-02T09:30:15Z", "2026-01-03T09:30:15Z"}},
		{"strictly after a run", "0 0 12 * * *", "", "2026-01-01T12:00:00Z",
			[]string{"2026-01-02T12:00:00Z"}},
		{"fraction of a second", "* * * * * *", "", "2026-01-01T00:00:00.999Z",
			[]string{"2026-01-01T00:00:01Z", "2026-01-01T00:00:02Z"}},
		{"every 15 seconds", "*/15 * * * * *", "", "2026-01-01T00:00:07.5Z",
			[]string{"2026-01-01T00:00:15Z", "2026-01-01T00:00:30Z", "2026-01-01T00:00:45Z", "2026-01-01T00:01:00Z"}},
		{"every 20 minutes in office hours", "0 */20 9-17 * * MON-FRI", "", "2026-01-02T17:30:00Z", // a Friday
			[]string{"2026-01-02T17:40:00Z", "2026-01-05T09:00:00Z", "2026-01-05T09:20:00Z", "2026-01-05T09:40:00Z", "2026-01-05T10:00:00Z"}},
		{"step from an offset", "0 5/20 * * * *", "", "2026-01-01T00:00:00Z",
			[]string{"2026-01-01T00:05:00Z", "2026-01-01T00:25:00Z", "2026-01-01T00:45:00Z", "2026-01-01T01:05:00Z"}},
		{"lists and ranges", "0 0,30 8-9 * * *", "", "2026-01-01T08:10:00Z",
			[]string{"2026-01-01T08:30:00Z", "2026-01-01T09:00:00Z", "2026-01-01T09:30:00Z", "2026-01-02T08:00:00Z"}},
		{"month names", "0 0 0 1 jan,JUL *", "", "2026-02-01T00:00:00Z",
			[]string{"2026-07-01T00:00:00Z", "2027-01-01T00:00:00Z"}},
		{"day of month or day of week", "0 0 0 13 * FRI", "", "2026-02-01T00:00:00Z",
			[]string{"2026-02-06T00:00:00Z", "2026-02-13T00:00:00Z", "2026-02-20T00:00:00Z", "2026-02-27T00:00:00Z", "2026-03-06T00:00:00Z"}},
		{"day of month and star", "0 0 0 * * SUN", "", "2026-05-17T10:00:00Z",
			[]string{"2026-05-24T00:00:00Z", "2026-05-31T00:00:00Z"}},
		{"new year", "0 59 23 31 12 *", "", "2026-06-01T00:00:00Z",
			[]string{"2026-12-31T23:59:00Z", "2027-12-31T23:59:00Z"}},

		{"@yearly", "@yearly", "", "2026-05-17T10:20:30Z", []string{"2027-01-01T00:00:00Z", "2028-01-01T00:00:00Z"}},
		{"@annually", "@annually", "", "2026-05-17T10:20:30Z", []string{"2027-01-01T00:00:00Z"}},
		{"@monthly", "@monthly", "", "2026-05-17T10:20:30Z", []string{"2026-06-01T00:00:00Z", "2026-07-01T00:00:00Z"}},
		{"@weekly", "@weekly", "", "2026-05-17T10:20:30Z", []string{"2026-05-24T00:00:00Z", "2026-05-31T00:00:00Z"}},
		{"@daily", "@daily", "", "2026-05-17T10:20:30Z", []string{"2026-05-18T00:00:00Z", "2026-05-19T00:00:00Z"}},
		{"@midnight", "@midnight", "", "2026-05-17T10:20:30Z", []string{"2026-05-18T00:00:00Z"}},
		{"@hourly", "@hourly", "", "2026-05-17T10:20:30Z", []string{"2026-05-17T11:00:00Z", "2026-05-17T12:00:00Z"}},
		{"@daily in Tokyo", "@daily", "Asia/Tokyo", "2026-05-17T10:20:30Z", []string{"2026-05-17T15:00:00Z", "2026-05-18T15:00:00Z"}},

		// @every is anchored at the Unix epoch, whatever the zone.
		{"@every 90s", "@every 90s", "", "2026-01-01T00:00:00Z",
			[]string{"2026-01-01T00:01:30Z", "2026-01-01T00:03:00Z", "2026-01-01T00:04:30Z"}},
		{"@every 7m", "@every 7m", "", "2026-01-01T00:03:00.5Z",
			[]string{"2026-01-01T00:07:00Z", "2026-01-01T00:14:00Z"}},
		{"@every 25h", "@every 25h", "", "2026-01-01T00:00:00Z",
			[]string{"2026-01-01T04:00:00Z", "2026-01-02T05:00:00Z", "2026-01-03T06:00:00Z"}},
		{"@every ignores the zone", "@every 1h", "Asia/Kolkata", "2026-01-01T00:10:00Z",
			[]string{"2026-01-01T01:00:00Z", "2026-01-01T02:00:00Z"}},
		{"@every across DST", "@every 1h", "America/New_York", "2026-03-08T00:30:00-05:00",
			[]string{"2026-03-08T01:00:00-05:00", "2026-03-08T03:00:00-04:00", "2026-03-08T04:00:00-04:00"}},

		{"Tokyo", "0 0 9 * * *", "Asia/Tokyo", "2026-06-15T00:00:00Z",
			[]string{"2026-06-16T09:00:00+09:00", "2026-06-17T09:00:00+09:00"}},
		{"Los Angeles summer and winter", "0 0 12 1 * *", "America/Los_Angeles", "2026-10-15T00:00:00Z",
			[]string{"2026-11-01T12:00:00-08:00", "2026-12-01T12:00:00-08:00"}},
		{"Kolkata half hour offset", "0 0 0 * * *", "Asia/Kolkata", "2026-06-15T00:00:00Z",
			[]string{"2026-06-15T18:30:00Z", "2026-06-16T18:30:00Z"}},
		{"from a time in another zone", "0 0 9 * * *", "Europe/Berlin", "2026-06-15T09:30:00+02:00",
			[]string{"2026-06-16T09:00:00+02:00"}},

		// Month ends: the 31st only in 31-day months, February 29 only in
		// leap years.
		{"day 31", "0 0 0 31 * *", "", "2026-01-31T00:00:00Z",
			[]string{"2026-03-31T00:00:00Z", "2026-05-31T00:00:00Z", "2026-07-31T00:00:00Z", "2026-08-31T00:00:00Z",
				"2026-10-31T00:00:00Z", "2026-12-31T00:00:00Z", "2027-01-31T00:00:00Z"}},
		{"day 30 skips February", "0 0 0 30 * *", "", "2026-01-30T00:00:00Z",
			[]string{"2026-03-30T00:00:00Z", "2026-04-30T00:00:00Z"}},
		{"February 29", "0 0 0 29 2 *", "", "2026-01-01T00:00:00Z",
			[]string{"2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z", "2036-02-29T00:00:00Z"}},
		{"February 29 in 2000", "0 0 0 29 2 *", "", "1997-01-01T00:00:00Z",
			[]string{"2000-02-29T00:00:00Z", "2004-02-29T00:00:00Z"}},
		{"February 29 or Monday", "0 0 0 29 2 MON", "", "2028-02-20T00:00:00Z",
			[]string{"2028-02-21T00:00:00Z", "2028-02-28T00:00:00Z", "2028-02-29T00:00:00Z", "2029-02-05T00:00:00Z"}},
		{"last days of February", "0 0 12 28,29 2 *", "Europe/Berlin", "2027-01-01T00:00:00Z",
			[]string{"2027-02-28T12:00:00+01:00", "2028-02-28T12:00:00+01:00", "2028-02-29T12:00:00+01:00", "2029-02-28T12:00:00+01:00"}},
	})
}

func TestNextHorizon(t *testing.T) {
	c := mustCompile(t, Spec{Cron: "0 0 0 29 2 *"})
	// 2100 is not a leap year: from March 2096 the next February 29 is in
	// 2104, more than five years on.
	if got, ok := c.Next(mustTime(t, "2096-03-01T00:00:00Z")); ok {
		t.Errorf("Next = %v, want no run within the horizon", got)
	}
	if got, ok := c.Next(mustTime(t, "2099-12-31T00:00:00Z")); !ok || !got.Equal(mustTime(t, "2104-02-29T00:00:00Z")) {
		t.Errorf("Next = %v, %v; want 2104-02-29", got, ok)
	}
}
