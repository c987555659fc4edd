package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/MicahParks/keyfunc/v3"

	"github.com/tock-sched/tock/api"
	"github.com/tock-sched/tock/store"
)

// checkAuth refuses to start an api node that requires keys while none
// exists (nobody could call it, and the fix would be to turn keys off),
// and warns at every start of one that does not require them.
func checkAuth(ctx context.Context, cfg Config, st *store.Store, log *slog.Logger) error {
	if !cfg.Roles.Has(RoleAPI) {
		return nil
	}
	if cfg.AuthNone {
		log.Warn("the API is open: no authentication (tockd dev, or --auth none); anyone who reaches " + cfg.HTTPAddr + " may create, run and delete any job")
		return nil
	}
	if cfg.JWT.URL != "" {
		return nil // tokens of the identity provider can call it
	}
	n, err := st.CountUsableAPIKeys(ctx)
	if err != nil {
		return err
	}
	if n == 0 {
		return ErrNoKeys
	}
	return nil
}

// JWTSettings are where JWT bearer tokens' keys come from and what the
// tokens must say (tockd --jwks-url, --jwt-issuer, --jwt-audience,
// --jwt-roles-claim).
type JWTSettings struct {
	URL, Issuer, Audience, RolesClaim string
}

// jwtConfig fetches the JWK Set (and keeps it fresh, until ctx ends):
// the API's JWT verification, or nil when no URL is set. A JWK Set that
// cannot be fetched at start is an error: the node would refuse every
// token.
func jwtConfig(ctx context.Context, s JWTSettings) (*api.JWTConfig, error) {
	if s.URL == "" {
		return nil, nil
	}
	no := false
	kf, err := keyfunc.NewDefaultOverrideCtx(ctx, []string{s.URL}, keyfunc.Override{NoErrorReturnFirstHTTPReq: &no, HTTPTimeout: 10 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("--jwks-url %s: %w", s.URL, err)
	}
	return &api.JWTConfig{Keyfunc: kf.Keyfunc, Issuer: s.Issuer, Audience: s.Audience, RolesClaim: s.RolesClaim}, nil
}

// ErrNoKeys is why an api node that requires keys does not start while
// none exists: it would not start open by accident.
var ErrNoKeys = errors.New("no API key exists, so nobody could use the API: create the first one with " +
	"`tockd keys create --postgres-url ... --namespace '*' --role admin`, " +
	"or start with --auth none to serve the API without authentication (only where nobody else can reach it)")
