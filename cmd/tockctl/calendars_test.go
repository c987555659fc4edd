package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A calendar from a YAML file: created, replaced, listed, shown with the
// periods it does not allow, refused when bad, deleted.
func TestCalendarsCommands(t *testing.T) {
	t.Parallel()
	hs := fileServer(t)
	file := filepath.Join(t.TempDir(), "holidays.yaml")
	write := func(body string) {
		if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("name: holidays\ntimezone: Europe/Berlin\ndates: [\"2030-12-25\"]\n")
	if out := ok(t, hs.URL, "calendars", "apply", "-f", file); out != "calendar holidays created\n" {
		t.Fatalf("apply printed %q", out)
	}
	day := time.Now().UTC().AddDate(0, 0, 30)
	if day.Weekday() == time.Sunday {
		day = day.AddDate(0, 0, 1) // else Saturday night's stretch starts the period
	}
	d1, d2 := day.Format(time.DateOnly), day.AddDate(0, 0, 1).Format(time.DateOnly)
	write("name: holidays\ntimezone: UTC\ndates: [\"" + d1 + "\", \"" + d2 + "\"]\nweekly: [{days: [SAT], start: \"22:00\", end: \"02:00\"}]\n")
	if out := ok(t, hs.URL, "calendars", "apply", "-f", file); out != "calendar holidays replaced\n" {
		t.Fatalf("apply again printed %q", out)
	}
	if out := ok(t, hs.URL, "calendars", "list"); !strings.Contains(out, "holidays  UTC   exclude  2 dates, 1 weekly") {
		t.Fatalf("list:\n%s", out)
	}
	out := ok(t, hs.URL, "calendars", "get", "holidays", "--days", "60")
	// The two days are one period (a Saturday's night may join it).
	if !strings.Contains(out, d1+"T00:00:00Z") || !strings.Contains(out, "holidays  date "+d1) {
		t.Fatalf("get:\n%s", out)
	}
	write("name: holidays\ntimezone: Europe/Berlin\ndates: [\"2030-02-30\"]\n")
	if r := tockctl(t, hs.URL, "calendars", "apply", "-f", file); r.code != 1 || !strings.Contains(r.stderr, "dates[0]") {
		t.Fatalf("a bad date: exit %d\n%s", r.code, r.stderr)
	}
	ok(t, hs.URL, "calendars", "delete", "holidays")
	if r := tockctl(t, hs.URL, "calendars", "get", "holidays"); r.code != 1 {
		t.Fatalf("get after delete: exit %d", r.code)
	}
}
