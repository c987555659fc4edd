package domain

import (
	"testing"
	"time"
)

func TestParseRetention(t *testing.T) {
	day := 24 * time.Hour
	for in, want := range map[string]time.Duration{"90d": 90 * day, " 30d ": 30 * day, "36h": 36 * time.Hour, "1h": time.Hour} {
		if got, err := ParseRetention(in); err != nil || got != want {
			t.Errorf("ParseRetention(%q) = %v, %v; want %v", in, got, err, want)
		}
		if got, _ := ParseRetention(FormatRetention(want)); got != want {
			t.Errorf("FormatRetention(%v) = %q does not read back", want, FormatRetention(want))
		}
	}
	for _, in := range []string{"", "d", "x d", "59m", "-3d", "3651d", "forever", "1.5d"} {
		if _, err := ParseRetention(in); err == nil {
			t.Errorf("ParseRetention(%q) accepted", in)
		}
	}
	if got := FormatRetention(36 * time.Hour); got != "36h0m0s" {
		t.Errorf("FormatRetention(36h) = %q", got)
	}
}
