package model

import "time"

// BreakerChange is one executor's circuit breaker for a handler entering
// State at Since, and why.
type BreakerChange struct {
	Handler, Queue, ExecutorID string
	State                      string
	Since                      time.Time
	Reason                     string
}

// HandlerSeen is when some executor last said it served a handler.
type HandlerSeen struct {
	Handler, Queue string
	LastSeen       time.Time
}
