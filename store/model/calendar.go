package model

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"
)

// Calendar is a stored calendar: its rules as the API takes them
// (package calendar reads them), named in its namespace.
type Calendar struct {
	Namespace string
	Name      string
	Spec      json.RawMessage
	// Revision counts its versions: 1 when created, one more on every
	// replacement (the API's ETag).
	Revision             int64
	CreatedAt, UpdatedAt time.Time
}

// NextRunMove moves a job's next run from From to To (see
// store.UpdateJobNextRuns): a calendar that changed allows runs sooner.
type NextRunMove struct {
	ID     uuid.UUID
	Bucket int
	From   time.Time
	To     time.Time
}
