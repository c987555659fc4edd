package model

import "time"

// ApplySet is the record of a set of jobs kept in files (tockctl apply):
// the set owns its members (Job.ApplySet) and nothing else.
type ApplySet struct {
	Namespace string
	Name      string
	// Revision counts the set's applies; 0 for a set never applied.
	Revision int64
	// Lock: changes to its members made outside the set (PATCH, DELETE)
	// are refused.
	Lock bool
	// Commit is what the last apply said it applied (a git commit), or "".
	Commit    string
	AppliedAt time.Time
	AppliedBy string
	// Members counts its jobs (ListApplySets only).
	Members int
}
