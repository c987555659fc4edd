package schedule

import "time"

// Spec is a job's schedule as users write it. Exactly one of Cron, At and
// In is set; none of them means "run now". Timezone (an IANA name,
// default UTC) applies to Cron.
type Spec struct {
	Cron     string     `json:"cron,omitempty"`
	Timezone string     `json:"timezone,omitempty"`
	At       *time.Time `json:"at,omitempty"`
	In       string     `json:"in,omitempty"`
}
