package calendar

// Spec is a calendar as users write it, and as the API takes it in JSON.
// What each field means is in the package documentation.
type Spec struct {
	// Name is how jobs and other calendars refer to the calendar; unique
	// among the specs compiled together.
	Name string `json:"name"`
	// Timezone is the IANA zone whose local dates and wall clock the rules
	// are read in; "" is UTC, and "Local" is refused.
	Timezone string `json:"timezone,omitempty"`
	// Mode is ModeExclude (the default when empty) or ModeInclude.
	Mode string `json:"mode,omitempty"`
	// Dates are whole local days, "2026-12-25".
	Dates []string `json:"dates,omitempty"`
	// Windows are dated stretches of local wall time.
	Windows []Window `json:"windows,omitempty"`
	// Weekly are days of the week, whole or from one time to another.
	Weekly []Weekly `json:"weekly,omitempty"`
	// Daily are stretches of every day's wall clock.
	Daily []Daily `json:"daily,omitempty"`
	// Days are cron-style day rules, "DOM MONTH DOW" ("25 12 *", "L * *",
	// "* * MON#1"), each listing whole local days.
	Days []string `json:"days,omitempty"`
	// Extends names calendars that must also allow an instant.
	Extends []string `json:"extends,omitempty"`
}

// Window is a dated stretch of local wall time, from Start up to but not
// including End, each "2026-12-24T18:00" or with seconds,
// "2026-12-24T18:00:30".
type Window struct {
	Start string `json:"start"`
	End   string `json:"end"`
}

// Weekly lists days of the week ("MON" to "SUN", in any case): each whole
// day when Start and End are empty, else from Start to End on each of
// them ("02:00" or "02:00:30"). An End at or before Start ends on the
// next day: Saturday 22:00 to 02:00 runs into Sunday.
type Weekly struct {
	Days  []string `json:"days"`
	Start string   `json:"start,omitempty"`
	End   string   `json:"end,omitempty"`
}

// Daily lists the stretch from Start to End of every day's wall clock;
// an End at or before Start ends on the next day, so "22:00" to "06:00"
// is the night, and "00:00" to "00:00" every whole day.
type Daily struct {
	Start string `json:"start"`
	End   string `json:"end"`
}

// The modes of a calendar.
const (
	// ModeExclude allows every instant its rules do not list.
	ModeExclude = "exclude"
	// ModeInclude allows only the instants its rules list.
	ModeInclude = "include"
)
