package domain

import "slices"

// Priority is an execution's class. When executors are saturated, a
// queue's high executions start before its normal ones, and normal before
// low.
type Priority string

// Priority classes.
const (
	PriorityHigh   Priority = "high"
	PriorityNormal Priority = "normal"
	PriorityLow    Priority = "low"
)

// Priorities lists the classes in the order executors serve them.
var Priorities = []Priority{PriorityHigh, PriorityNormal, PriorityLow}

// Valid reports whether p is a priority class ("" is not).
func (p Priority) Valid() bool { return slices.Contains(Priorities, p) }

// OrNormal is p, or PriorityNormal if p is "".
func (p Priority) OrNormal() Priority {
	if p == "" {
		return PriorityNormal
	}
	return p
}
