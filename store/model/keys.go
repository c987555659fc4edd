package model

import "time"

// APIKey is a stored API key: everything but its secret, of which only
// a hash is kept (auth.Key.Hash).
type APIKey struct {
	ID         string
	SecretHash []byte
	// Namespace is the namespace its role holds in, or "*" for every one.
	Namespace string
	Role      string
	// Name describes the key (who or what uses it); optional.
	Name string
	// CreatedBy is the principal that made it ("tockd keys create" for
	// the command line).
	CreatedBy  string
	CreatedAt  time.Time
	ExpiresAt  *time.Time
	LastUsedAt *time.Time
}

// Idempotent is what store.ClaimIdempotencyKey found for a key.
type Idempotent struct {
	// Claimed: the key was free (or expired) and is now this request's,
	// in progress until store.SaveIdempotencyResponse or store.ReleaseIdempotencyKey.
	Claimed bool
	// Mismatch: the key was used by a different request (its hash
	// differs).
	Mismatch bool
	// InProgress: the same request holds the key and has not answered
	// yet.
	InProgress bool
	// The first response, to replay (Status > 0).
	Status      int
	ContentType string
	Response    []byte
}
