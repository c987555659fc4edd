package model

import (
	"encoding/json"
	"time"
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
