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

// TestNextDayFields pins the day-field rule (a field starting with "*" or
// "?" is a star, and a star field must match as well as the other) and
// the day forms L, L-n, LW, nW, DAY#n and DAYL.
func TestNextDayFields(t *testing.T) {
	runNextCases(t, []nextCase{
		// The rule, by the first character. January 2026 starts on a
		// Thursday.
		{"step in day of month is a star: odd Mondays", "0 0 12 */2 * MON", "", "2026-01-01T00:00:00Z",
			[]string{"2026-01-05T12:00:00Z", "2026-01-19T12:00:00Z", "2026-02-09T12:00:00Z", "2026-02-23T12:00:00Z", "2026-03-09T12:00:00Z"}},
		{"list starting with a number is not a star: every day", "0 0 12 1,* * MON", "", "2026-01-01T00:00:00Z",
			[]string{"2026-01-01T12:00:00Z", "2026-01-02T12:00:00Z", "2026-01-03T12:00:00Z", "2026-01-04T12:00:00Z"}},
		{"list starting with a star is a star: Mondays", "0 0 12 *,1 * MON", "", "2026-01-01T00:00:00Z",
			[]string{"2026-01-05T12:00:00Z", "2026-01-12T12:00:00Z"}},
		{"step in day of week is a star: 13th on Sundays and Fridays", "0 0 12 13 * */5", "", "2026-01-01T00:00:00Z",
			[]string{"2026-02-13T12:00:00Z", "2026-03-13T12:00:00Z", "2026-09-13T12:00:00Z", "2026-11-13T12:00:00Z", "2026-12-13T12:00:00Z"}},
		{"day of week list starting with a number: every day", "0 0 12 13 * 1,*", "", "2026-01-01T00:00:00Z",
			[]string{"2026-01-01T12:00:00Z", "2026-01-02T12:00:00Z", "2026-01-03T12:00:00Z"}},
		{"day of week list starting with a star: the 13th", "0 0 12 13 * *,1", "", "2026-01-01T00:00:00Z",
			[]string{"2026-01-13T12:00:00Z", "2026-02-13T12:00:00Z"}},
		{"February 29 on a Sunday", "0 0 12 29 2 */7", "", "2026-01-01T00:00:00Z",
			[]string{"2032-02-29T12:00:00Z", "2060-02-29T12:00:00Z"}},

		// Day of month: L, L-n, nW.
		{"L", "0 0 0 L * *", "", "2027-12-01T00:00:00Z",
			[]string{"2027-12-31T00:00:00Z", "2028-01-31T00:00:00Z", "2028-02-29T00:00:00Z", "2028-03-31T00:00:00Z"}},
		{"L in February of a common year", "0 0 0 L 2 ?", "", "2026-01-01T00:00:00Z",
			[]string{"2026-02-28T00:00:00Z", "2027-02-28T00:00:00Z", "2028-02-29T00:00:00Z", "2029-02-28T00:00:00Z"}},
		{"L-0 is L", "0 0 0 L-0 2 *", "", "2028-01-01T00:00:00Z",
			[]string{"2028-02-29T00:00:00Z", "2029-02-28T00:00:00Z"}},
		{"L-2", "0 0 0 L-2 * *", "", "2028-01-01T00:00:00Z",
			[]string{"2028-01-29T00:00:00Z", "2028-02-27T00:00:00Z", "2028-03-29T00:00:00Z"}},
		{"L-1 in February", "0 0 0 l-1 2 *", "", "2027-01-01T00:00:00Z",
			[]string{"2027-02-27T00:00:00Z", "2028-02-28T00:00:00Z", "2029-02-27T00:00:00Z"}},
		{"L-28 before the 1st does not run", "0 0 0 L-28 2 *", "", "2026-01-01T00:00:00Z",
			[]string{"2028-02-01T00:00:00Z", "2032-02-01T00:00:00Z"}},
		{"1W on a Saturday 1st is Monday the 3rd", "0 0 9 1W * *", "", "2026-07-15T00:00:00Z",
			[]string{"2026-08-03T09:00:00Z", "2026-09-01T09:00:00Z", "2026-10-01T09:00:00Z"}},
		{"31W on a Sunday 31st is Friday the 29th; not in 30-day months", "0 0 9 31W * *", "", "2026-03-01T00:00:00Z",
			[]string{"2026-03-31T09:00:00Z", "2026-05-29T09:00:00Z", "2026-07-31T09:00:00Z", "2026-08-31T09:00:00Z"}},
		{"15W on a Sunday is Monday", "0 0 9 15w * *", "", "2026-02-01T00:00:00Z",
			[]string{"2026-02-16T09:00:00Z", "2026-03-16T09:00:00Z", "2026-04-15T09:00:00Z"}},
		// LW: January 2026 ends on a Saturday, February on a Saturday, March
		// on a Tuesday, April on a Thursday, May on a Sunday.
		{"LW", "0 0 9 LW * *", "", "2026-01-01T00:00:00Z",
			[]string{"2026-01-30T09:00:00Z", "2026-02-27T09:00:00Z", "2026-03-31T09:00:00Z", "2026-04-30T09:00:00Z", "2026-05-29T09:00:00Z"}},
		{"LW in February, leap years included", "0 0 9 lw 2 ?", "", "2028-01-01T00:00:00Z",
			[]string{"2028-02-29T09:00:00Z", "2029-02-28T09:00:00Z", "2030-02-28T09:00:00Z", "2031-02-28T09:00:00Z", "2032-02-27T09:00:00Z"}},
		{"LW or the 1st", "0 0 9 1,LW * *", "", "2026-05-01T00:00:00Z",
			[]string{"2026-05-01T09:00:00Z", "2026-05-29T09:00:00Z", "2026-06-01T09:00:00Z", "2026-06-30T09:00:00Z"}},

		// Day of week: DAY#n, DAYL.
		{"MON#1", "0 0 9 ? * MON#1", "", "2026-01-01T00:00:00Z",
			[]string{"2026-01-05T09:00:00Z", "2026-02-02T09:00:00Z", "2026-03-02T09:00:00Z"}},
		{"fifth Monday of February", "0 0 9 ? 2 MON#5", "", "2026-01-01T00:00:00Z",
			[]string{"2044-02-29T09:00:00Z", "2072-02-29T09:00:00Z"}},
		{"FRIL", "0 0 9 ? * FRIL", "", "2026-01-01T00:00:00Z",
			[]string{"2026-01-30T09:00:00Z", "2026-02-27T09:00:00Z", "2026-03-27T09:00:00Z"}},
		{"weekday numbers and lower case", "0 0 9 ? * 1#1,fril", "", "2026-01-01T00:00:00Z",
			[]string{"2026-01-05T09:00:00Z", "2026-01-30T09:00:00Z", "2026-02-02T09:00:00Z", "2026-02-27T09:00:00Z"}},

		// Unions: within a field, and across two restricted fields.
		{"last day or last Friday", "0 0 9 L * FRIL", "", "2026-01-01T00:00:00Z",
			[]string{"2026-01-30T09:00:00Z", "2026-01-31T09:00:00Z", "2026-02-27T09:00:00Z", "2026-02-28T09:00:00Z", "2026-03-27T09:00:00Z", "2026-03-31T09:00:00Z"}},
		{"L,15W", "0 0 9 L,15W * *", "", "2026-01-01T00:00:00Z",
			[]string{"2026-01-15T09:00:00Z", "2026-01-31T09:00:00Z", "2026-02-16T09:00:00Z", "2026-02-28T09:00:00Z"}},
		{"L or the 10th", "0 0 9 10,L * ?", "", "2026-01-01T00:00:00Z",
			[]string{"2026-01-10T09:00:00Z", "2026-01-31T09:00:00Z", "2026-02-10T09:00:00Z"}},
		{"star with a day form: last Fridays that are odd", "0 0 9 */2 * FRIL", "", "2026-01-01T00:00:00Z",
			[]string{"2026-02-27T09:00:00Z", "2026-03-27T09:00:00Z", "2026-05-29T09:00:00Z"}},
	})
}

func TestNextHorizon(t *testing.T) {
	// 2100 is not a leap year: from March 2096 the next February 29 is in
	// 2104.
	c := mustCompile(t, Spec{Cron: "0 0 0 29 2 *"})
	if got, ok := c.Next(mustTime(t, "2096-03-01T00:00:00Z")); !ok || !got.Equal(mustTime(t, "2104-02-29T00:00:00Z")) {
		t.Errorf("Next = %v, %v; want 2104-02-29", got, ok)
	}
	// February 29 on a Saturday: 2076, then 2116, 40 years on.
	c = mustCompile(t, Spec{Cron: "0 0 0 ? 2 SAT#5"})
	if got, ok := c.Next(mustTime(t, "2076-03-01T00:00:00Z")); !ok || !got.Equal(mustTime(t, "2116-02-29T00:00:00Z")) {
		t.Errorf("Next = %v, %v; want 2116-02-29", got, ok)
	}
}

func TestNextEveryAnchor(t *testing.T) {
	anchor := mustTime(t, "2026-03-01T09:00:05+01:00")
	tests := []struct {
		name, cron, tz, from string
		want                 []string
	}{
		{"before the anchor: the anchor first", "@every 25h", "", "2026-01-01T00:00:00Z",
			[]string{"2026-03-01T08:00:05Z", "2026-03-02T09:00:05Z", "2026-03-03T10:00:05Z"}},
		{"on the anchor: strictly after", "@every 1h", "", "2026-03-01T08:00:05Z",
			[]string{"2026-03-01T09:00:05Z", "2026-03-01T10:00:05Z"}},
		{"long after: on the grid", "@every 90m", "", "2026-03-02T00:00:00Z",
			[]string{"2026-03-02T00:30:05Z", "2026-03-02T02:00:05Z"}},
		{"the zone does not matter", "@every 24h", "America/New_York", "2026-03-08T00:00:00Z",
			[]string{"2026-03-08T08:00:05Z", "2026-03-09T08:00:05Z"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustCompile(t, Spec{Cron: tt.cron, Timezone: tt.tz, Anchor: &anchor})
			after := mustTime(t, tt.from)
			for i, w := range tt.want {
				got, ok := c.Next(after)
				if !ok || !got.Equal(mustTime(t, w)) || got.Location() != time.UTC {
					t.Fatalf("run %d: Next(%v) = %v, %v; want %s", i, after, got, ok, w)
				}
				after = got
			}
		})
	}
	// The same run times whatever time the chain starts from: a restart
	// or a resume finds the same grid.
	c := mustCompile(t, Spec{Cron: "@every 7m", Anchor: &anchor})
	for _, from := range []string{"2026-05-01T00:00:00Z", "2026-05-01T00:03:17.5Z", "2026-05-01T00:06:59Z"} {
		got, _ := c.Next(mustTime(t, from))
		if (got.Unix()-anchor.Unix())%(7*60) != 0 {
			t.Errorf("Next(%s) = %v, not on the anchor's grid", from, got)
		}
	}
}
