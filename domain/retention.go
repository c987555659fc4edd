package domain

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// MaxRetention is the longest retention a cluster or namespace may set.
const MaxRetention = 10 * 365 * 24 * time.Hour

// ParseRetention reads a retention: a whole number of days ("90d") or a
// Go duration ("36h"), at least an hour and at most MaxRetention.
func ParseRetention(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	var d time.Duration
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil {
			return 0, fmt.Errorf("%q is not a number of days such as 90d", s)
		}
		d = time.Duration(days) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("%q is neither days (90d) nor a duration (36h)", s)
		}
	}
	switch {
	case d < time.Hour:
		return 0, fmt.Errorf("%s is shorter than an hour", s)
	case d > MaxRetention:
		return 0, fmt.Errorf("%s is longer than 10 years", s)
	}
	return d, nil
}

// FormatRetention writes a retention as ParseRetention reads it: days
// when it is a whole number of them.
func FormatRetention(d time.Duration) string {
	if d%(24*time.Hour) == 0 {
		return strconv.FormatInt(int64(d/(24*time.Hour)), 10) + "d"
	}
	return d.String()
}
