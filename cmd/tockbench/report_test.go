package main

import (
	"strings"
	"testing"
	"time"
)

func TestMinDeliveredSkipsShortIntervals(t *testing.T) {
	if got := minDelivered(nil); got != nil {
		t.Fatalf("no intervals: %v, want nil", *got)
	}
	ivs := []Interval{
		{Seconds: 10, DeliveredPerSecond: 6100},
		{Seconds: 10, DeliveredPerSecond: 5480},
		{Seconds: 10, DeliveredPerSecond: 5900},
		{Seconds: 1.5, DeliveredPerSecond: 200}, // the window's last sliver
	}
	if got := minDelivered(ivs); got == nil || *got != 5480 {
		t.Fatalf("minDelivered = %v, want 5480", got)
	}
	if got := minDelivered(ivs[3:]); got != nil {
		t.Fatalf("only a sliver: %v, want nil", *got)
	}
}

func TestReportShowsEachInterval(t *testing.T) {
	ivs := []Interval{{Seconds: 10, DeliveredPerSecond: 6012.4}, {Seconds: 10, DeliveredPerSecond: 5488.6}}
	r := &Report{Mix: mixSpreadMinute, Window: &Window{Start: time.Unix(0, 0), End: time.Unix(20, 0), Seconds: 20},
		Intervals: ivs, MinDeliveredPerSecond: minDelivered(ivs)}
	var s strings.Builder
	if err := r.write(&s, "text"); err != nil {
		t.Fatal(err)
	}
	if want := "per 10 s       delivered/s min 5489: 6012 5489\n"; !strings.Contains(s.String(), want) {
		t.Fatalf("report lacks %q:\n%s", want, s.String())
	}
	s.Reset()
	if err := r.write(&s, "json"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(s.String(), `"min_delivered_per_second": 5488.6`) || !strings.Contains(s.String(), `"intervals": [`) {
		t.Fatalf("JSON report lacks the intervals:\n%s", s.String())
	}
}
