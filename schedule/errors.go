package schedule

// FieldError reports an invalid schedule and names the request field at
// fault ("schedule.cron", "schedule.timezone", "schedule.at",
// "schedule.in", "schedule.anchor", or "schedule" when the fields
// conflict), so that the API
// can point the user at it. Every error this package returns is a
// *FieldError.
type FieldError struct {
	// Field is the offending field's path in a job request.
	Field string
	// Message says what is wrong, in words fit for the user.
	Message string
}

// Error returns "field: message", for example
// "schedule.cron: expected 5 or 6 fields, found 3".
func (e *FieldError) Error() string {
	return e.Field + ": " + e.Message
}

// Request field names, as the API spells them.
const (
	fieldSchedule = "schedule"
	fieldCron     = "schedule.cron"
	fieldTimezone = "schedule.timezone"
	fieldAt       = "schedule.at"
	fieldIn       = "schedule.in"
	fieldAnchor   = "schedule.anchor"
	fieldStartAt  = "schedule.start_at"
	fieldEndAt    = "schedule.end_at"
	fieldMaxRuns  = "schedule.max_runs"
	fieldJitter   = "schedule.jitter"
)
