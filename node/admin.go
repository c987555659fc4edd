package node

import (
	"context"
	"fmt"
	"time"

	"github.com/tock-sched/tock/auth"
	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/jobs"
	"github.com/tock-sched/tock/secret"
	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/store/model"
)

// KeySpec is an API key to create straight in the database (`tockd keys
// create`): the first admin key, or any key when no admin key is at hand.
type KeySpec struct {
	// Namespace is where the key's role holds; auth.AllNamespaces ('*')
	// for every namespace and the cluster's views.
	Namespace string
	// Role is reader, operator, editor or admin.
	Role string
	// Expires is how long the key is valid: days (90d) or a duration
	// (12h); "" for never.
	Expires string
	// Name is what the key is for, shown in listings.
	Name string
}

// KeySpecError is a field of a KeySpec that is not valid.
type KeySpecError struct {
	Field string // namespace, role or expires
	Err   error
}

func (e *KeySpecError) Error() string { return e.Field + ": " + e.Err.Error() }

// Unwrap returns the field's problem.
func (e *KeySpecError) Unwrap() error { return e.Err }

// parse checks spec and returns its role and expiry (nil: never), as of
// now; a problem is a *KeySpecError.
func (spec KeySpec) parse(now time.Time) (auth.Role, *time.Time, error) {
	if spec.Namespace != auth.AllNamespaces {
		if msg := jobs.NameProblem(spec.Namespace); msg != "" {
			return 0, nil, &KeySpecError{"namespace", fmt.Errorf("%q %s (or '*' for every namespace)", spec.Namespace, msg)}
		}
	}
	role, err := auth.ParseRole(spec.Role)
	if err != nil {
		return 0, nil, &KeySpecError{"role", err}
	}
	if spec.Expires == "" {
		return role, nil, nil
	}
	d, err := domain.ParseRetention(spec.Expires)
	if err != nil {
		return 0, nil, &KeySpecError{"expires", err}
	}
	t := now.Add(d).UTC().Truncate(time.Second)
	return role, &t, nil
}

// CreateKey checks spec, makes its key and stores the key's hash. It
// returns the key (shown only now: only its hash is stored) and what was
// stored. A problem with spec is a *KeySpecError, found before the
// database is touched.
func CreateKey(ctx context.Context, st *store.Store, spec KeySpec, now time.Time) (string, *model.APIKey, error) {
	role, expires, err := spec.parse(now)
	if err != nil {
		return "", nil, err
	}
	k, err := auth.NewKey()
	if err != nil {
		return "", nil, err
	}
	rec, err := st.CreateAPIKey(ctx, model.APIKey{ID: k.ID, SecretHash: k.Hash(), Namespace: spec.Namespace,
		Role: role.String(), Name: spec.Name, CreatedBy: "tockd keys create", ExpiresAt: expires})
	if err != nil {
		return "", nil, err
	}
	return k.String(), rec, nil
}

// ReencryptSecrets re-seals every stored secret header under k's first
// key, batch rows a transaction (`tockd secrets reencrypt`, the last step
// but one of a key rotation). The result lists the rows whose secrets no
// key of k opens.
func ReencryptSecrets(ctx context.Context, st *store.Store, k *secret.Keyring, batch int) (model.ResealResult, error) {
	return st.ResealSecrets(ctx, batch, reseal(k))
}

// reseal re-seals, under k's first key, the secret headers of a handler
// sealed under another, and says whether it changed any.
func reseal(k *secret.Keyring) func(h *domain.Handler) (bool, error) {
	return func(h *domain.Handler) (bool, error) {
		changed := false
		for name, s := range h.SecretHeaders {
			if s.KeyID == k.Primary() {
				continue
			}
			ad := domain.SecretHeaderAD(name)
			plain, err := k.Open(s.KeyID, s.Data, ad)
			if err != nil {
				return false, fmt.Errorf("secret header %s: %w", name, err)
			}
			kid, ct, err := k.Seal(plain, ad)
			if err != nil {
				return false, err
			}
			h.SecretHeaders[name] = domain.SealedSecret{KeyID: kid, Data: ct}
			changed = true
		}
		return changed, nil
	}
}
