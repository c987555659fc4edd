package calendar

import (
	"strconv"
	"strings"
)

// FieldError reports one invalid field of one calendar, named as the API
// names it ("dates[2]", "windows[0].end", "weekly[1].days[0]", "days[3]",
// "timezone", "mode", "extends[0]", "name"), so that the API can point
// the user at it.
type FieldError struct {
	// Calendar is the name of the calendar at fault.
	Calendar string
	// Field is the offending field's path inside that calendar's spec.
	Field string
	// Message says what is wrong, in words fit for the user.
	Message string
}

// Error returns `calendar "name": field: message`.
func (e *FieldError) Error() string {
	return "calendar " + strconv.Quote(e.Calendar) + ": " + e.Field + ": " + e.Message
}

// Errors is every problem Compile found, in the order of the specs and
// of their fields. It is never empty when returned.
type Errors []*FieldError

// Error returns the problems joined by "; ".
func (es Errors) Error() string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "; ")
}

// Unwrap returns the problems one by one, so that errors.As finds the
// first *FieldError.
func (es Errors) Unwrap() []error {
	errs := make([]error, len(es))
	for i, e := range es {
		errs[i] = e
	}
	return errs
}
