package model

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"
)

// AuditEntry is one change in the audit trail.
type AuditEntry struct {
	At time.Time
	ID uuid.UUID
	// Actor made the change: key:<id>, anonymous (an open API).
	Actor     string
	Namespace string
	// Action is the operation's action (jobs.create, keys.delete, …).
	Action string
	// Resource names what changed: job <id>, execution <id>, key <id>,
	// namespace <name>, jobs (a bulk change).
	Resource string
	// Before and After are the resource as the API showed it (secrets
	// masked); nil where there is none (a creation's before, a deletion's
	// after).
	Before, After json.RawMessage
	// Detail is what the change was part of, when more than the request:
	// an apply's set, revision and commit; nil otherwise.
	Detail json.RawMessage
}
