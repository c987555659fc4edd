package model

import (
	"time"

	"github.com/google/uuid"
)

// SlotKey is a concurrency key in use: how many of its slots are held and
// how many executions wait for one (the oldest of them scheduled at
// OldestWaiting; nil when none waits).
type SlotKey struct {
	// Slot is the scoped key (domain.Concurrency.Slot;
	// domain.SlotKeyParts splits it).
	Slot          string
	Held, Waiting int
	OldestWaiting *time.Time
}

// SlotHolder is an execution holding a key's slot or waiting for one,
// since Since.
type SlotHolder struct {
	ExecutionID  uuid.UUID
	ScheduledFor time.Time
	JobID        uuid.UUID
	Namespace    string
	Since        time.Time
}
