package schedule

import "testing"

// DST behaviour, pinned as DESIGN.md "Time" describes it (classic
// Vixie/ISC cron). 2026 changes:
//
//	America/New_York  2026-03-08 02:00 EST -> 03:00 EDT (07:00Z)
//	                  2026-11-01 02:00 EDT -> 01:00 EST (06:00Z)
//	Europe/Berlin     2026-03-29 02:00 CET -> 03:00 CEST (01:00Z)
//	                  2026-10-25 03:00 CEST -> 02:00 CET (01:00Z)
func TestNextDST(t *testing.T) {
	const ny, berlin = "America/New_York", "Europe/Berlin"
	runNextCases(t, []nextCase{
		// New York, spring forward: 02:00-02:59 does not exist.
		{"NY spring wildcard minutes", "0 */30 * * * *", ny, "2026-03-08T00:45:00-05:00",
			[]string{"2026-03-08T01:00:00-05:00", "2026-03-08T01:30:00-05:00", "2026-03-08T03:00:00-04:00", "2026-03-08T03:30:00-04:00"}},
		{"NY spring wildcard hour", "0 30 * * * *", ny, "2026-03-08T00:45:00-05:00",
			[]string{"2026-03-08T01:30:00-05:00", "2026-03-08T03:30:00-04:00", "2026-03-08T04:30:00-04:00"}},
		{"NY spring wildcard seconds skip the day's only minute", "* 30 2 * * *", ny, "2026-03-07T02:30:58-05:00",
			[]string{"2026-03-07T02:30:59-05:00", "2026-03-09T02:30:00-04:00", "2026-03-09T02:30:01-04:00"}},
		{"NY spring every 15 seconds", "*/15 * * * * *", ny, "2026-03-08T01:59:30-05:00",
			[]string{"2026-03-08T01:59:45-05:00", "2026-03-08T03:00:00-04:00", "2026-03-08T03:00:15-04:00"}},
		{"NY spring @hourly", "@hourly", ny, "2026-03-08T00:30:00-05:00",
			[]string{"2026-03-08T01:00:00-05:00", "2026-03-08T03:00:00-04:00", "2026-03-08T04:00:00-04:00"}},
		{"NY spring fixed in the gap", "0 30 2 * * *", ny, "2026-03-07T03:00:00-05:00",
			[]string{"2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00", "2026-03-10T02:30:00-04:00"}},
		{"NY spring fixed at the gap start", "0 0 2 * * *", ny, "2026-03-08T00:00:00-05:00",
			[]string{"2026-03-08T03:00:00-04:00", "2026-03-09T02:00:00-04:00"}},
		{"NY spring fixed times sharing the gap", "0 0,30 2 * * *", ny, "2026-03-08T00:00:00-05:00",
			[]string{"2026-03-08T03:00:00-04:00", "2026-03-09T02:00:00-04:00", "2026-03-09T02:30:00-04:00"}},
		{"NY spring fixed hour range", "0 0 1-4 * * *", ny, "2026-03-08T00:00:00-05:00",
			[]string{"2026-03-08T01:00:00-05:00", "2026-03-08T03:00:00-04:00", "2026-03-08T04:00:00-04:00", "2026-03-09T01:00:00-04:00"}},
		{"NY spring fixed around the gap", "0 59 1,3 * * *", ny, "2026-03-08T00:00:00-05:00",
			[]string{"2026-03-08T01:59:00-05:00", "2026-03-08T03:59:00-04:00"}},
		{"NY spring fixed, next from the gap end", "0 30 2 * * *", ny, "2026-03-08T03:00:00-04:00",
			[]string{"2026-03-09T02:30:00-04:00"}},
		{"NY spring fixed, from inside the day", "0 30 2 * * *", ny, "2026-03-08T01:59:59.5-05:00",
			[]string{"2026-03-08T03:00:00-04:00"}},
		{"NY spring @daily", "@daily", ny, "2026-03-07T12:00:00-05:00",
			[]string{"2026-03-08T00:00:00-05:00", "2026-03-09T00:00:00-04:00"}},
		{"NY spring fixed on the second Sunday of March", "0 30 2 ? 3 SUN#2", ny, "2026-01-01T00:00:00-05:00",
			[]string{"2026-03-08T03:00:00-04:00", "2027-03-14T03:00:00-04:00"}},
		{"NY spring wildcard on the second Sunday of March", "0 */30 2-3 ? MAR SUN#2", ny, "2026-01-01T00:00:00-05:00",
			[]string{"2026-03-08T03:00:00-04:00", "2026-03-08T03:30:00-04:00", "2027-03-14T03:00:00-04:00"}},

		// New York, fall back: 01:00-01:59 happens twice.
		{"NY fall wildcard minutes", "0 */30 * * * *", ny, "2026-11-01T00:45:00-04:00",
			[]string{"2026-11-01T01:00:00-04:00", "2026-11-01T01:30:00-04:00", "2026-11-01T01:00:00-05:00",
				"2026-11-01T01:30:00-05:00", "2026-11-01T02:00:00-05:00"}},
		{"NY fall @hourly", "@hourly", ny, "2026-10-31T23:30:00-04:00",
			[]string{"2026-11-01T00:00:00-04:00", "2026-11-01T01:00:00-04:00", "2026-11-01T01:00:00-05:00", "2026-11-01T02:00:00-05:00"}},
		{"NY fall wildcard seconds in both passes", "*/20 30 1 * * *", ny, "2026-11-01T01:29:59-04:00",
			[]string{"2026-11-01T01:30:00-04:00", "2026-11-01T01:30:20-04:00", "2026-11-01T01:30:40-04:00",
				"2026-11-01T01:30:00-05:00", "2026-11-01T01:30:20-05:00", "2026-11-01T01:30:40-05:00",
				"2026-11-02T01:30:00-05:00"}},
		{"NY fall fixed runs in the first pass only", "0 30 1 * * *", ny, "2026-10-31T12:00:00-04:00",
			[]string{"2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"}},
		{"NY fall fixed, from the second pass", "0 15 1 * * *", ny, "2026-11-01T01:05:00-05:00",
			[]string{"2026-11-02T01:15:00-05:00"}},
		{"NY fall fixed, from between the passes", "0 0,30 1 * * *", ny, "2026-11-01T01:10:00-04:00",
			[]string{"2026-11-01T01:30:00-04:00", "2026-11-02T01:00:00-05:00"}},
		{"NY fall fixed, from the end of the first pass", "0 0,30 1,2 * * *", ny, "2026-11-01T01:59:59-04:00",
			[]string{"2026-11-01T02:00:00-05:00", "2026-11-01T02:30:00-05:00", "2026-11-02T01:00:00-05:00"}},
		{"NY fall fixed hour range", "0 0 0-3 * * *", ny, "2026-10-31T23:30:00-04:00",
			[]string{"2026-11-01T00:00:00-04:00", "2026-11-01T01:00:00-04:00", "2026-11-01T02:00:00-05:00", "2026-11-01T03:00:00-05:00"}},

		// Berlin, spring forward: 02:00-02:59 does not exist.
		{"Berlin spring wildcard", "0 */20 * * * *", berlin, "2026-03-29T01:30:00+01:00",
			[]string{"2026-03-29T01:40:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-29T03:20:00+02:00"}},
		{"Berlin spring wildcard hour", "0 15 * * * *", berlin, "2026-03-29T00:30:00+01:00",
			[]string{"2026-03-29T01:15:00+01:00", "2026-03-29T03:15:00+02:00"}},
		{"Berlin spring fixed in the gap", "0 30 2 * * *", berlin, "2026-03-28T12:00:00+01:00",
			[]string{"2026-03-29T03:00:00+02:00", "2026-03-30T02:30:00+02:00"}},
		{"Berlin spring fixed on weekdays", "0 45 2 * * SUN", berlin, "2026-03-22T12:00:00+01:00",
			[]string{"2026-03-29T03:00:00+02:00", "2026-04-05T02:45:00+02:00"}},

		// Berlin, fall back: 02:00-02:59 happens twice.
		{"Berlin fall wildcard minutes", "0 */30 2 * * *", berlin, "2026-10-25T01:00:00+02:00",
			[]string{"2026-10-25T02:00:00+02:00", "2026-10-25T02:30:00+02:00", "2026-10-25T02:00:00+01:00",
				"2026-10-25T02:30:00+01:00", "2026-10-26T02:00:00+01:00"}},
		{"Berlin fall @hourly", "@hourly", berlin, "2026-10-25T01:30:00+02:00",
			[]string{"2026-10-25T02:00:00+02:00", "2026-10-25T02:00:00+01:00", "2026-10-25T03:00:00+01:00"}},
		{"Berlin fall fixed", "0 30 2 * * *", berlin, "2026-10-24T12:00:00+02:00",
			[]string{"2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"}},
		{"Berlin fall fixed, from the second pass", "0 30 2 * * *", berlin, "2026-10-25T02:10:00+01:00",
			[]string{"2026-10-26T02:30:00+01:00"}},
		{"Berlin fall @daily", "@daily", berlin, "2026-10-24T12:00:00+02:00",
			[]string{"2026-10-25T00:00:00+02:00", "2026-10-26T00:00:00+01:00"}},

		// Midnight itself skipped (São Paulo, 2018-11-04 00:00 -> 01:00):
		// a fixed daily job runs at 01:00, a wildcard one skips the hour.
		{"midnight gap fixed", "@daily", "America/Sao_Paulo", "2018-11-03T12:00:00-03:00",
			[]string{"2018-11-04T01:00:00-02:00", "2018-11-05T00:00:00-02:00"}},
		{"midnight gap wildcard", "0 30 * * * *", "America/Sao_Paulo", "2018-11-03T23:00:00-03:00",
			[]string{"2018-11-03T23:30:00-03:00", "2018-11-04T01:30:00-02:00"}},
		// A half-hour change (Lord Howe, 2026-10-04 02:00 -> 02:30).
		{"half hour gap fixed", "0 15 2 * * *", "Australia/Lord_Howe", "2026-10-03T12:00:00+10:30",
			[]string{"2026-10-04T02:30:00+11:00", "2026-10-05T02:15:00+11:00"}},
		// Every second by fixed fields ("0-59" is not a wildcard): the
		// second pass of the repeated hour is skipped in one step.
		{"NY fall fixed every second, from the second pass", "0-59 0-59 0-23 * * *", ny, "2026-11-01T01:30:00-05:00",
			[]string{"2026-11-01T02:00:00-05:00", "2026-11-01T02:00:01-05:00"}},
		{"NY fall fixed every second, from the first pass", "0-59 0-59 0-23 * * *", ny, "2026-11-01T01:59:58-04:00",
			[]string{"2026-11-01T01:59:59-04:00", "2026-11-01T02:00:00-05:00"}},

		// Beyond the zone's listed transitions (2037), where Go derives them
		// from the TZ rule and misreports zone bounds at the end of leap
		// years (golang/go#81583).
		{"rule-derived spring", "0 30 2 * * *", ny, "2088-03-13T12:00:00-05:00",
			[]string{"2088-03-14T03:00:00-04:00", "2088-03-15T02:30:00-04:00"}},
		{"rule-derived leap year end wildcard", "0 0 */6 * * *", ny, "2088-12-30T20:00:00-05:00",
			[]string{"2088-12-31T00:00:00-05:00", "2088-12-31T06:00:00-05:00", "2088-12-31T12:00:00-05:00",
				"2088-12-31T18:00:00-05:00", "2089-01-01T00:00:00-05:00"}},
		{"rule-derived leap year end fixed", "0 30 23 * * *", berlin, "2088-12-30T12:00:00+01:00",
			[]string{"2088-12-30T23:30:00+01:00", "2088-12-31T23:30:00+01:00", "2089-01-01T23:30:00+01:00"}},

		// A whole day skipped (Samoa, 2011-12-30 did not happen).
		{"skipped day fixed", "0 0 12 * * *", "Pacific/Apia", "2011-12-29T00:00:00-10:00",
			[]string{"2011-12-29T12:00:00-10:00", "2011-12-31T00:00:00+14:00", "2011-12-31T12:00:00+14:00"}},
		{"skipped day wildcard", "0 0 */12 * * *", "Pacific/Apia", "2011-12-29T00:00:00-10:00",
			[]string{"2011-12-29T12:00:00-10:00", "2011-12-31T00:00:00+14:00", "2011-12-31T12:00:00+14:00"}},
	})
}
