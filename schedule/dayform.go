package schedule

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// dayForm is a day-field element whose day depends on the month: in day
// of month "L", "L-n", "LW" and "nW", in day of week "DAY#n" and "DAYL".
type dayForm struct {
	kind formKind
	n    int // L-n: n days before the last; nW: the day; DAY#n: which one
	wd   int // DAY#n and DAYL: the weekday, 0 = Sunday
}

type formKind uint8

const (
	formLast        formKind = iota // L, L-n
	formNearest                     // nW
	formNthWeekday                  // DAY#n
	formLastDay                     // DAYL
	formLastWeekday                 // LW
)

// day returns the form's day in a month of n days whose 1st is weekday
// first, as a mask with that day's bit set, or 0 when the month has no
// such day.
func (f dayForm) day(n, first int) uint64 {
	d := 0
	switch f.kind {
	case formLast:
		d = n - f.n // before the 1st: none
	case formNearest:
		// The weekday nearest to day f.n, never leaving the month (Quartz):
		// 1W on a Saturday is Monday the 3rd, a Sunday last day gives the
		// Friday before. A day the month lacks (31W in April) gives none.
		if f.n > n {
			return 0
		}
		d = f.n
		switch (first + d - 1) % 7 {
		case 6: // Saturday
			if d > 1 {
				d--
			} else {
				d += 2
			}
		case 0: // Sunday
			if d < n {
				d++
			} else {
				d -= 2
			}
		}
	case formNthWeekday:
		d = 1 + (f.wd-first+7)%7 + 7*(f.n-1)
	case formLastDay:
		last := (first + n - 1) % 7
		d = n - (last-f.wd+7)%7
	case formLastWeekday:
		// The month's last Monday-to-Friday: the last day, or the Friday
		// before a Saturday or Sunday last day.
		d = n
		switch (first + n - 1) % 7 {
		case 6: // Saturday
			d--
		case 0: // Sunday
			d -= 2
		}
	}
	if d < 1 || d > n {
		return 0
	}
	return 1 << d
}

// splitDayField splits a day field's list into the elements robfig can
// parse, joined again by commas, and the day forms, which parse
// recognizes (it returns ok false for a plain element).
func splitDayField(field string, parse func(string) (dayForm, bool, error)) (string, []dayForm, error) {
	var plain []string
	var forms []dayForm
	for _, e := range strings.Split(field, ",") {
		if e == "" {
			return "", nil, fmt.Errorf("%q: empty list element", field)
		}
		f, ok, err := parse(strings.ToUpper(e))
		switch {
		case err != nil:
			return "", nil, fmt.Errorf("%q: %v", e, err)
		case ok:
			forms = append(forms, f)
		default:
			plain = append(plain, e)
		}
	}
	return strings.Join(plain, ","), forms, nil
}

// parseDomForm parses one element of the day-of-month field, in upper
// case, if it is L, L-n, LW or nW.
func parseDomForm(e string) (dayForm, bool, error) {
	const want = "want L, L-n (n from 0 to 30), LW or nW (n from 1 to 31); ranges and steps of these are not allowed"
	switch {
	case e == "L":
		return dayForm{kind: formLast}, true, nil
	case e == "LW":
		return dayForm{kind: formLastWeekday}, true, nil
	case strings.HasPrefix(e, "L-"):
		n, err := strconv.Atoi(e[2:])
		if err != nil || n < 0 || n > 30 || e[2] == '+' {
			return dayForm{}, false, fmt.Errorf("%s", want)
		}
		return dayForm{kind: formLast, n: n}, true, nil
	case strings.HasSuffix(e, "W"):
		n, err := strconv.Atoi(e[:len(e)-1])
		if err != nil || n < 1 || n > 31 || e[0] == '+' {
			return dayForm{}, false, fmt.Errorf("%s", want)
		}
		return dayForm{kind: formNearest, n: n}, true, nil
	case strings.ContainsAny(e, "LW"):
		return dayForm{}, false, fmt.Errorf("%s", want)
	}
	return dayForm{}, false, nil
}

// parseDowForm parses one element of the day-of-week field, in upper
// case, if it is DAY#n or DAYL.
func parseDowForm(e string) (dayForm, bool, error) {
	const want = "want DAY#n (n from 1 to 5) or DAYL, DAY a name such as MON or a number from 0 (Sunday) to 6; ranges and steps of these are not allowed"
	switch {
	case e == "L":
		return dayForm{}, false, errors.New("a lone L is not allowed in day of week; name the day, such as FRIL for the last Friday")
	case strings.Contains(e, "#"):
		day, nth, _ := strings.Cut(e, "#")
		wd, ok := parseWeekday(day)
		n, err := strconv.Atoi(nth)
		if !ok || err != nil || n < 1 || n > 5 || nth[0] == '+' {
			return dayForm{}, false, fmt.Errorf("%s", want)
		}
		return dayForm{kind: formNthWeekday, n: n, wd: wd}, true, nil
	case strings.Contains(e, "L"): // no day's name has an L
		wd, ok := parseWeekday(strings.TrimSuffix(e, "L"))
		if !ok || !strings.HasSuffix(e, "L") {
			return dayForm{}, false, fmt.Errorf("%s", want)
		}
		return dayForm{kind: formLastDay, wd: wd}, true, nil
	}
	return dayForm{}, false, nil
}

var weekdayNames = []string{"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"}

// parseWeekday parses a weekday, in upper case: a name or 0 to 6.
func parseWeekday(s string) (int, bool) {
	if len(s) == 1 && s[0] >= '0' && s[0] <= '6' {
		return int(s[0] - '0'), true
	}
	for i, name := range weekdayNames {
		if s == name {
			return i, true
		}
	}
	return 0, false
}
