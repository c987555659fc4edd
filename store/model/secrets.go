package model

import "github.com/google/uuid"

// ResealFailure is a stored handler store.ResealSecrets could not re-seal.
type ResealFailure struct {
	// Table is job_specs or jobs; ID the row's id.
	Table string
	ID    uuid.UUID
	Err   error
}

// ResealResult counts what store.ResealSecrets did.
type ResealResult struct {
	// Specs and Jobs count the rows rewritten; Seen counts the rows with
	// secret headers it read.
	Specs, Jobs, Seen int64
	// Failed are the rows reseal refused; they are left as they were.
	Failed []ResealFailure
}
