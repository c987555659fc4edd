// Package auth is who may do what in tock: API keys (their form, how
// they are made and how their secrets are kept), the four roles and the
// principal a request is made by, with its grants per namespace.
//
// It knows nothing of HTTP or storage; the api package authenticates
// requests and checks them against the permission each operation of the
// OpenAPI document declares, and the store keeps keys' hashes.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"strings"
)

// Role is what a grant allows in a namespace. Each role allows what the
// roles before it allow.
type Role int

// The roles, from least to most.
const (
	// NoRole allows nothing.
	NoRole Role = iota
	// Reader reads: every GET.
	Reader
	// Operator also runs, pauses, resumes, cancels, retries and
	// backfills jobs and executions.
	Operator
	// Editor also creates, updates and deletes jobs.
	Editor
	// Admin also manages keys and namespace settings and, in every
	// namespace (AllNamespaces), reads the cluster's views.
	Admin
)

// Roles are the roles' names, least first.
var Roles = []string{"reader", "operator", "editor", "admin"}

// String is the role's name.
func (r Role) String() string {
	if r >= Reader && r <= Admin {
		return Roles[r-1]
	}
	return "none"
}

// ParseRole reads a role's name.
func ParseRole(s string) (Role, error) {
	for i, name := range Roles {
		if s == name {
			return Role(i + 1), nil
		}
	}
	return NoRole, fmt.Errorf("must be one of %s", strings.Join(Roles, ", "))
}

// AllNamespaces is the namespace of a grant that applies in every
// namespace, and to the cluster's views.
const AllNamespaces = "*"

// Grant is a role in a namespace (or in AllNamespaces).
type Grant struct {
	Namespace string
	Role      Role
}

// Principal is who a request is made by: a key (Subject "key:<id>") or a
// token's subject, with its grants.
type Principal struct {
	// Subject names the principal in the audit trail and in errors.
	Subject string
	// KeyID is the API key's id; "" for other principals.
	KeyID  string
	Grants []Grant
}

// Anonymous is the principal of an API served without authentication
// (tockd dev, tockd serve --auth none): it may do everything.
var Anonymous = &Principal{Subject: "anonymous", Grants: []Grant{{Namespace: AllNamespaces, Role: Admin}}}

// Role is p's role in namespace ns: the highest of its grants there or
// in every namespace. In AllNamespaces it is the role of p's grant for
// every namespace alone.
func (p *Principal) Role(ns string) Role {
	best := NoRole
	for _, g := range p.Grants {
		if (g.Namespace == ns || g.Namespace == AllNamespaces) && g.Role > best {
			best = g.Role
		}
	}
	return best
}

// Allows reports whether p has at least role need in ns.
func (p *Principal) Allows(ns string, need Role) bool { return p.Role(ns) >= need }

// Everywhere reports whether p's grants cover every namespace.
func (p *Principal) Everywhere() bool { return p.Role(AllNamespaces) > NoRole }

// NamespacesWith are the namespaces of p's grants of at least role r
// (AllNamespaces among them for a grant in every namespace).
func (p *Principal) NamespacesWith(r Role) []string {
	var out []string
	for _, g := range p.Grants {
		if g.Role >= r && g.Role > NoRole {
			out = append(out, g.Namespace)
		}
	}
	return out
}

// Denied says why p may not do action in ns, as the API's 403 says it:
// "role reader in namespace team-a does not allow jobs.create".
func (p *Principal) Denied(ns, action string) string {
	r := p.Role(ns)
	if ns == AllNamespaces {
		if r == NoRole {
			return fmt.Sprintf("%s needs a role in every namespace (a key made with namespace %q); %s has none", action, AllNamespaces, p.Subject)
		}
		return fmt.Sprintf("role %s in every namespace does not allow %s", r, action)
	}
	if r == NoRole {
		return fmt.Sprintf("%s has no role in namespace %s, so it may not %s", p.Subject, ns, action)
	}
	return fmt.Sprintf("role %s in namespace %s does not allow %s", r, ns, action)
}

// Key is an API key: tock_<ID>_<Secret>, both letters and digits. The ID
// is public (it names the key in listings and the audit trail); only a
// hash of the secret is stored.
type Key struct {
	ID, Secret string
}

// Lengths of a key's parts. A secret of 32 characters of 62 holds 190
// random bits.
const (
	IDLen     = 12
	SecretLen = 32
)

// KeyPrefix starts every key, so that scanners of leaked secrets can
// find tock's.
const KeyPrefix = "tock_"

const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// NewKey makes a key from crypto/rand.
func NewKey() (Key, error) {
	id, err := randomText(IDLen)
	if err != nil {
		return Key{}, err
	}
	secret, err := randomText(SecretLen)
	if err != nil {
		return Key{}, err
	}
	return Key{ID: id, Secret: secret}, nil
}

// randomText is n characters of alphabet, uniformly (bytes past the
// largest multiple of 62 are drawn again).
func randomText(n int) (string, error) {
	out := make([]byte, 0, n)
	buf := make([]byte, n*2)
	for len(out) < n {
		if _, err := rand.Read(buf); err != nil {
			return "", fmt.Errorf("auth: random: %w", err)
		}
		for _, b := range buf {
			if b < 248 && len(out) < n { // 248 = 4 × 62
				out = append(out, alphabet[b%62])
			}
		}
	}
	return string(out), nil
}

// String is the key as a client sends it.
func (k Key) String() string { return KeyPrefix + k.ID + "_" + k.Secret }

// ErrMalformed is a bearer token that is not a key's form.
var ErrMalformed = errors.New("not a tock API key (tock_<id>_<secret>)")

// ParseKey reads a key in the form String writes.
func ParseKey(s string) (Key, error) {
	rest, ok := strings.CutPrefix(s, KeyPrefix)
	if !ok || len(rest) != IDLen+1+SecretLen || rest[IDLen] != '_' {
		return Key{}, ErrMalformed
	}
	k := Key{ID: rest[:IDLen], Secret: rest[IDLen+1:]}
	if !alnum(k.ID) || !alnum(k.Secret) {
		return Key{}, ErrMalformed
	}
	return k, nil
}

// ValidID reports whether s has the form of a key's id.
func ValidID(s string) bool { return len(s) == IDLen && alnum(s) }

func alnum(s string) bool {
	for i := 0; i < len(s); i++ {
		if !strings.ContainsRune(alphabet, rune(s[i])) {
			return false
		}
	}
	return true
}

// Hash is what is stored of a key's secret: its SHA-256. A secret holds
// 190 random bits, so a slow password hash (bcrypt, argon2) would add
// nothing against guessing and would cost every request; the id is part
// of the hashed text so that a hash cannot be moved to another key.
func (k Key) Hash() []byte {
	sum := sha256.Sum256([]byte(k.ID + "\x00" + k.Secret))
	return sum[:]
}

// Matches reports, in constant time, whether k's secret is the one hash
// was made of.
func (k Key) Matches(hash []byte) bool { return subtle.ConstantTimeCompare(k.Hash(), hash) == 1 }

type principalKey struct{}

// WithPrincipal is ctx carrying p, for the use cases and the audit trail
// to know who acts.
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom is the principal ctx carries; nil if none.
func PrincipalFrom(ctx context.Context) *Principal {
	p, _ := ctx.Value(principalKey{}).(*Principal)
	return p
}
