package api

import (
	"errors"
	"fmt"
	"strings"

	"github.com/golang-jwt/jwt/v5"

	"github.com/tock-sched/tock/auth"
)

// JWTConfig accepts JWT bearer tokens besides API keys: tokens signed by
// a key of the identity provider's JWK Set (Keyfunc; tockd --jwks-url),
// from Issuer, for Audience, unexpired. The token's RolesClaim maps
// namespaces to roles, as an object ({"team-a": "editor", "*":
// "reader"}) or a list of "namespace:role" strings; a token without it
// may do nothing. The token's sub names it in errors and the audit
// trail (jwt:<sub>).
type JWTConfig struct {
	Keyfunc          jwt.Keyfunc
	Issuer, Audience string
	// RolesClaim is the claim holding the grants; "tock_roles" when empty.
	RolesClaim string
}

// DefaultRolesClaim is the claim a JWT's grants are read from.
const DefaultRolesClaim = "tock_roles"

// jwtAlgorithms are the signature algorithms accepted: asymmetric ones
// only, so that a JWK Set's public keys can never be used as HMAC
// secrets.
var jwtAlgorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// verifyJWT checks token and returns its principal, or why it is
// refused.
func (c *JWTConfig) verifyJWT(token string) (*auth.Principal, error) {
	claims := jwt.MapClaims{}
	_, err := jwt.ParseWithClaims(token, claims, c.Keyfunc, jwt.WithValidMethods(jwtAlgorithms),
		jwt.WithIssuer(c.Issuer), jwt.WithAudience(c.Audience), jwt.WithExpirationRequired(), jwt.WithIssuedAt())
	if err != nil {
		return nil, err
	}
	sub, _ := claims["sub"].(string)
	if sub == "" {
		return nil, errors.New("the token has no sub claim")
	}
	name := c.RolesClaim
	if name == "" {
		name = DefaultRolesClaim
	}
	grants, err := grantsOf(claims[name])
	if err != nil {
		return nil, fmt.Errorf("claim %s: %w", name, err)
	}
	return &auth.Principal{Subject: "jwt:" + sub, Grants: grants}, nil
}

// grantsOf reads a roles claim: {"ns": "role"} or ["ns:role"].
func grantsOf(v any) ([]auth.Grant, error) {
	var pairs [][2]string
	switch v := v.(type) {
	case nil:
		return nil, nil
	case map[string]any:
		for ns, r := range v {
			role, ok := r.(string)
			if !ok {
				return nil, fmt.Errorf("the role of %q is not a string", ns)
			}
			pairs = append(pairs, [2]string{ns, role})
		}
	case []any:
		for _, e := range v {
			s, _ := e.(string)
			ns, role, ok := strings.Cut(s, ":")
			if !ok {
				return nil, fmt.Errorf("%q is not namespace:role", s)
			}
			pairs = append(pairs, [2]string{ns, role})
		}
	default:
		return nil, errors.New("must be an object of namespace to role, or a list of namespace:role")
	}
	var out []auth.Grant
	for _, p := range pairs {
		role, err := auth.ParseRole(p[1])
		if err != nil {
			return nil, fmt.Errorf("namespace %s: role %q: %v", p[0], p[1], err)
		}
		out = append(out, auth.Grant{Namespace: p[0], Role: role})
	}
	return out, nil
}
