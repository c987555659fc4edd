package schedule

import (
	"errors"
	"strings"
	"testing"
	"time"
	// Tests name real zones; embed the database so they do not depend on
	// the machine's copy (the system one still wins when present).
	_ "time/tzdata"
)

func mustTime(t testing.TB, s string) time.Time {
	t.Helper()
	tm, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("bad test time %q: %v", s, err)
	}
	return tm
}

func mustCompile(t testing.TB, s Spec) *Schedule {
	t.Helper()
	c, err := Compile(s)
	if err != nil {
		t.Fatalf("Compile(%+v): %v", s, err)
	}
	return c
}

func ptr[T any](v T) *T { return &v }

func TestSpecKind(t *testing.T) {
	at := time.Now()
	tests := []struct {
		spec Spec
		want Kind
	}{
		{Spec{}, KindNow},
		{Spec{Timezone: "Europe/Berlin"}, KindNow},
		{Spec{Cron: "@daily"}, KindCron},
		{Spec{Cron: " "}, KindCron},
		{Spec{At: &at}, KindAt},
		{Spec{In: "5m"}, KindIn},
	}
	for _, tt := range tests {
		if got := tt.spec.Kind(); got != tt.want {
			t.Errorf("%+v.Kind() = %q, want %q", tt.spec, got, tt.want)
		}
	}
}

func TestCompileAccepts(t *testing.T) {
	tests := []struct {
		spec      Spec
		kind      Kind
		recurring bool
		loc       string
	}{
		{Spec{}, KindNow, false, "UTC"},
		{Spec{Cron: "*/5 * * * *"}, KindCron, true, "UTC"},
		{Spec{Cron: "  0 30 2 * * *\t"}, KindCron, true, "UTC"},
		{Spec{Cron: "@every 1h", Timezone: "Asia/Tokyo"}, KindCron, true, "Asia/Tokyo"},
		{Spec{Cron: "0 0 9 * * MON-FRI", Timezone: "Europe/Berlin"}, KindCron, true, "Europe/Berlin"},
		{Spec{Cron: "0 0 0 29 2 *"}, KindCron, true, "UTC"},
		{Spec{Cron: "0 0 0 30 2 MON"}, KindCron, true, "UTC"}, // either day field may match
		{Spec{Cron: "0 0 0 31 4,5 *"}, KindCron, true, "UTC"}, // May has a 31st
		{Spec{Cron: "0 0 12 ? JAN,jul sun"}, KindCron, true, "UTC"},
		{Spec{Cron: "0 0 0 30 2 1,*"}, KindCron, true, "UTC"},  // a list starting with 1: either field
		{Spec{Cron: "0 0 9 ? 2 MON#5"}, KindCron, true, "UTC"}, // 2044-02-29
		{Spec{Cron: "0 0 9 L-28 2 ?"}, KindCron, true, "UTC"},  // February 1 in leap years
		{Spec{Cron: "0 0 9 31W 4 MON"}, KindCron, true, "UTC"}, // either field: Mondays
		{Spec{Cron: "0 0 9 l-3,15w,L * ?"}, KindCron, true, "UTC"},
		{Spec{Cron: "0 0 9 * * 0#2,5L,wedl,Sat#1"}, KindCron, true, "UTC"},
		{Spec{Cron: "@every 1h", Anchor: ptr(mustTime(t, "2026-01-01T00:00:30+05:30"))}, KindCron, true, "UTC"},
		{Spec{At: ptr(mustTime(t, "2030-01-01T00:00:00Z")), Timezone: "America/New_York"}, KindAt, false, "America/New_York"},
		{Spec{In: "90s"}, KindIn, false, "UTC"},
		{Spec{In: "87600h"}, KindIn, false, "UTC"},
		{Spec{Timezone: "UTC"}, KindNow, false, "UTC"},
	}
	for _, tt := range tests {
		c := mustCompile(t, tt.spec)
		if c.Kind() != tt.kind || c.Recurring() != tt.recurring || c.Location().String() != tt.loc {
			t.Errorf("Compile(%+v) = kind %q recurring %v location %q, want %q %v %q",
				tt.spec, c.Kind(), c.Recurring(), c.Location(), tt.kind, tt.recurring, tt.loc)
		}
	}
}

func TestCompileRejects(t *testing.T) {
	at := mustTime(t, "2030-01-01T00:00:00Z")
	tests := []struct {
		name  string
		spec  Spec
		field string
		msg   string // a substring of the message
	}{
		{"cron and at", Spec{Cron: "@daily", At: &at}, "schedule", "found cron and at"},
		{"cron and in", Spec{Cron: "@daily", In: "5m"}, "schedule", "found cron and in"},
		{"at and in", Spec{At: &at, In: "5m"}, "schedule", "found at and in"},
		{"all three", Spec{Cron: "@daily", At: &at, In: "5m"}, "schedule", "found cron and at and in"},

		{"blank cron", Spec{Cron: " "}, "schedule.cron", "must not be empty"},
		{"tabs only", Spec{Cron: "\t\n"}, "schedule.cron", "must not be empty"},
		{"3 fields", Spec{Cron: "* * *"}, "schedule.cron", "expected 5 or 6 fields, found 3"},
		{"7 fields", Spec{Cron: "0 0 0 1 1 * 2030"}, "schedule.cron", "expected 5 or 6 fields, found 7"},
		{"bad number", Spec{Cron: "0 61 * * * *"}, "schedule.cron", "above maximum"},
		{"bad word", Spec{Cron: "0 0 * * * funday"}, "schedule.cron", "funday"},
		{"dow 7", Spec{Cron: "0 0 * * 7"}, "schedule.cron", "above maximum"},
		{"L alone in day of week", Spec{Cron: "0 0 * * L"}, "schedule.cron", `day of week "L": a lone L is not allowed`},
		{"range to L", Spec{Cron: "0 0 1-L * *"}, "schedule.cron", `day of month "1-L": want L, L-n`},
		{"range of L-n", Spec{Cron: "0 0 L-5-3 * *"}, "schedule.cron", "ranges and steps of these are not allowed"},
		{"step of L", Spec{Cron: "0 0 L/2 * *"}, "schedule.cron", `day of month "L/2"`},
		{"range of W", Spec{Cron: "0 0 1W-5W * *"}, "schedule.cron", `day of month "1W-5W"`},
		{"LW with an offset", Spec{Cron: "0 0 LW-1 * *"}, "schedule.cron", `day of month "LW-1": want L, L-n (n from 0 to 30), LW`},
		{"range to LW", Spec{Cron: "0 0 1-LW * *"}, "schedule.cron", `day of month "1-LW"`},
		{"L-31", Spec{Cron: "0 0 L-31 * *"}, "schedule.cron", "n from 0 to 30"},
		{"0W", Spec{Cron: "0 0 0W * *"}, "schedule.cron", "nW (n from 1 to 31)"},
		{"32W", Spec{Cron: "0 0 32W * *"}, "schedule.cron", `day of month "32W"`},
		{"range of #", Spec{Cron: "0 0 ? * MON#1-FRI#1"}, "schedule.cron", `day of week "MON#1-FRI#1"`},
		{"range into DAYL", Spec{Cron: "0 0 ? * MON-FRIL"}, "schedule.cron", `day of week "MON-FRIL"`},
		{"step of DAYL", Spec{Cron: "0 0 ? * FRIL/2"}, "schedule.cron", "ranges and steps of these are not allowed"},
		{"MON#6", Spec{Cron: "0 0 ? * MON#6"}, "schedule.cron", "DAY#n (n from 1 to 5)"},
		{"MON#0", Spec{Cron: "0 0 ? * MON#0"}, "schedule.cron", `day of week "MON#0"`},
		{"weekday 7 in #", Spec{Cron: "0 0 ? * 7#1"}, "schedule.cron", `day of week "7#1"`},
		{"weekday 7 in DAYL", Spec{Cron: "0 0 ? * 7L"}, "schedule.cron", `day of week "7L"`},
		{"unknown day in DAYL", Spec{Cron: "0 0 ? * FRIDAYL"}, "schedule.cron", `day of week "FRIDAYL"`},
		{"# in day of month", Spec{Cron: "0 0 MON#1 * *"}, "schedule.cron", "invalid expression"},
		{"W in day of week", Spec{Cron: "0 0 * * 1W"}, "schedule.cron", "invalid expression"},
		{"empty list element", Spec{Cron: "0 0 L, * *"}, "schedule.cron", "empty list element"},
		{"star step and MON#2 never meet", Spec{Cron: "0 0 */20 * MON#2"}, "schedule.cron", "never runs"},
		{"February 30 on star-step weekdays", Spec{Cron: "0 0 0 30 2 */2"}, "schedule.cron", "never runs"},
		{"February 30 on a star list", Spec{Cron: "0 0 0 30 2 *,1"}, "schedule.cron", "never runs"},
		{"31W in April", Spec{Cron: "0 0 31W 4 *"}, "schedule.cron", "never runs"},
		{"30W in February", Spec{Cron: "0 0 30W 2 ?"}, "schedule.cron", "never runs"},
		{"L-29 in February", Spec{Cron: "0 0 L-29 2 ?"}, "schedule.cron", "never runs"},
		{"nearest weekdays at weekends", Spec{Cron: "0 0 1W,L-2W * */6"}, "schedule.cron", "L-2W"},
		{"nearest weekdays on star-step weekends", Spec{Cron: "0 0 1W,15W * */6"}, "schedule.cron", "never runs"},
		{"zero step", Spec{Cron: "*/0 * * * *"}, "schedule.cron", "step"},
		{"backwards range", Spec{Cron: "0 0 5-1 * *"}, "schedule.cron", "beyond end"},
		{"TZ prefix", Spec{Cron: "TZ=Europe/Berlin 0 0 * * *"}, "schedule.cron", "set schedule.timezone instead"},
		{"CRON_TZ prefix", Spec{Cron: "CRON_TZ=UTC 0 0 * * *"}, "schedule.cron", "set schedule.timezone instead"},
		{"TZ prefix without space", Spec{Cron: "TZ=UTC"}, "schedule.cron", "set schedule.timezone instead"},
		{"unknown descriptor", Spec{Cron: "@fortnightly"}, "schedule.cron", "unrecognized descriptor"},
		{"descriptor with extra", Spec{Cron: "@daily 5"}, "schedule.cron", "unrecognized descriptor"},
		{"every without duration", Spec{Cron: "@every"}, "schedule.cron", "@every takes one duration"},
		{"every bad duration", Spec{Cron: "@every fast"}, "schedule.cron", "invalid duration"},
		{"every sub-second", Spec{Cron: "@every 500ms"}, "schedule.cron", "shorter than 1s"},
		{"every zero", Spec{Cron: "@every 0s"}, "schedule.cron", "shorter than 1s"},
		{"every negative", Spec{Cron: "@every -1m"}, "schedule.cron", "shorter than 1s"},
		{"every fractional", Spec{Cron: "@every 1.5s"}, "schedule.cron", "whole number of seconds"},
		{"every too long", Spec{Cron: "@every 100000h"}, "schedule.cron", "longer than"},
		{"February 30", Spec{Cron: "0 0 0 30 2 *"}, "schedule.cron", "never runs"},
		{"February 30 and 31", Spec{Cron: "0 0 30,31 2 *"}, "schedule.cron", "never runs"},
		{"April 31", Spec{Cron: "0 0 31 4 ?"}, "schedule.cron", "never runs"},
		{"31st in short months", Spec{Cron: "0 0 0 31 2,4,6,9,11 *"}, "schedule.cron", "never runs"},

		{"anchor with cron fields", Spec{Cron: "0 * * * *", Anchor: &at}, "schedule.anchor", `only allowed with "@every`},
		{"anchor with a descriptor", Spec{Cron: "@hourly", Anchor: &at}, "schedule.anchor", `only allowed with "@every`},
		{"anchor with at", Spec{At: &at, Anchor: &at}, "schedule.anchor", `only allowed with "@every`},
		{"anchor alone", Spec{Anchor: &at}, "schedule.anchor", `only allowed with "@every`},
		{"anchor with a fraction", Spec{Cron: "@every 1m", Anchor: ptr(at.Add(time.Millisecond))}, "schedule.anchor", "whole second"},

		{"unknown zone", Spec{Cron: "@daily", Timezone: "Mars/Olympus_Mons"}, "schedule.timezone", "unknown time zone"},
		{"Local", Spec{Cron: "@daily", Timezone: "Local"}, "schedule.timezone", `"Local" is not allowed`},
		{"zone path escape", Spec{Timezone: "../etc/passwd"}, "schedule.timezone", "unknown time zone"},
		{"zone with at", Spec{At: &at, Timezone: "Nowhere"}, "schedule.timezone", "unknown time zone"},

		{"negative in", Spec{In: "-5m"}, "schedule.in", "must be positive"},
		{"zero in", Spec{In: "0s"}, "schedule.in", "must be positive"},
		{"bare zero in", Spec{In: "0"}, "schedule.in", "must be positive"},
		{"malformed in", Spec{In: "5 minutes"}, "schedule.in", "invalid duration"},
		{"unitless in", Spec{In: "300"}, "schedule.in", "invalid duration"},
		{"blank in", Spec{In: " "}, "schedule.in", "invalid duration"},
		{"in too long", Spec{In: "87601h"}, "schedule.in", "longer than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Compile(tt.spec)
			if err == nil {
				t.Fatalf("Compile(%+v) = %v, want an error", tt.spec, c)
			}
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is a %T, want *FieldError", err, err)
			}
			if fe.Field != tt.field || !strings.Contains(fe.Message, tt.msg) {
				t.Errorf("error = %q, want field %q and a message containing %q", err, tt.field, tt.msg)
			}
			if want := fe.Field + ": " + fe.Message; err.Error() != want {
				t.Errorf("Error() = %q, want %q", err.Error(), want)
			}
		})
	}
}

func TestFieldErrorFormat(t *testing.T) {
	_, err := Compile(Spec{Cron: "* * *"})
	if want := "schedule.cron: expected 5 or 6 fields, found 3"; err == nil || err.Error() != want {
		t.Errorf("error = %v, want %q", err, want)
	}
}

func TestFirst(t *testing.T) {
	now := mustTime(t, "2026-06-15T10:20:30.123456789Z")
	tests := []struct {
		name string
		spec Spec
		now  time.Time
		want string
	}{
		{"now", Spec{}, now, "2026-06-15T10:20:30.123Z"},
		{"now in another zone", Spec{Timezone: "Asia/Tokyo"}, now.In(time.FixedZone("X", 3600)), "2026-06-15T10:20:30.123Z"},
		{"in", Spec{In: "90s"}, now, "2026-06-15T10:22:00.123Z"},
		{"in with spaces", Spec{In: " 1h30m "}, now, "2026-06-15T11:50:30.123Z"},
		{"in ignores zone", Spec{In: "24h", Timezone: "America/New_York"}, now, "2026-06-16T10:20:30.123Z"},
		{"at", Spec{At: ptr(mustTime(t, "2026-06-15T13:00:00.987654+02:00"))}, now, "2026-06-15T11:00:00.987Z"},
		{"at equal to now", Spec{At: ptr(now)}, now, "2026-06-15T10:20:30.123Z"},
		{"at ignores zone", Spec{At: ptr(mustTime(t, "2027-01-01T00:00:00Z")), Timezone: "Asia/Tokyo"}, now, "2027-01-01T00:00:00Z"},
		{"cron", Spec{Cron: "*/15 * * * *"}, now, "2026-06-15T10:30:00Z"},
		{"cron on a run time", Spec{Cron: "*/15 * * * *"}, mustTime(t, "2026-06-15T10:30:00Z"), "2026-06-15T10:45:00Z"},
		{"cron in a zone", Spec{Cron: "0 9 * * *", Timezone: "Asia/Tokyo"}, now, "2026-06-16T00:00:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := mustCompile(t, tt.spec).First(tt.now)
			if err != nil {
				t.Fatal(err)
			}
			if want := mustTime(t, tt.want); !got.Equal(want) || got.Location() != time.UTC {
				t.Errorf("First = %v, want %v in UTC", got, want)
			}
			if got != got.Round(0) {
				t.Errorf("First = %#v carries a monotonic clock reading", got)
			}
		})
	}
}

func TestFirstRejectsPastAt(t *testing.T) {
	now := mustTime(t, "2026-06-15T10:20:30Z")
	c := mustCompile(t, Spec{At: ptr(now.Add(-time.Millisecond))})
	_, err := c.First(now)
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "schedule.at" || !strings.Contains(fe.Message, "must be in the future") {
		t.Errorf("First = %v, want a schedule.at error saying it must be in the future", err)
	}
}

func TestFirstCronWithoutRun(t *testing.T) {
	// Every second of 02:30 on the second Sunday of March, by the wall
	// clock: in New York that hour is always skipped.
	c := mustCompile(t, Spec{Cron: "* 30 2 ? 3 SUN#2", Timezone: "America/New_York"})
	_, err := c.First(mustTime(t, "2026-01-01T00:00:00Z"))
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "schedule.cron" {
		t.Errorf("First = %v, want a schedule.cron error", err)
	}
}

func TestNextOneShot(t *testing.T) {
	now := mustTime(t, "2026-06-15T10:20:30Z")
	for _, s := range []Spec{{}, {In: "5m"}, {At: ptr(now.Add(time.Hour))}} {
		if got, ok := mustCompile(t, s).Next(now); ok || !got.IsZero() {
			t.Errorf("%+v: Next = %v, %v; want zero, false", s, got, ok)
		}
	}
}
