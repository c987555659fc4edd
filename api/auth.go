package api

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/tock-sched/tock/auth"
	"github.com/tock-sched/tock/jobs"
	"github.com/tock-sched/tock/store"
)

// This file authenticates requests and authorises them. Every operation
// of the OpenAPI document declares its permission in x-tock-permission:
// the action (named in 403s and the audit trail), the least role it
// needs, and its scope, which says where the namespace the role must
// hold in comes from:
//
//   - public: no key (health checks, the document itself);
//   - any: a key with the role in some namespace (schedule previews);
//   - cluster: the role in every namespace ("*"): the cluster's views;
//   - job, execution, channel, rule, notification: the namespace of the
//     job, execution, notification channel or rule, or notification the
//     path names, looked up before the handler runs; one the key cannot
//     read answers 404 as if it did not exist;
//   - namespace: the path's namespace;
//   - query: the namespace query parameter; without one, the handler
//     lists the key's own namespace (listNamespace);
//   - body, key: the handler checks, once it has read the body or the
//     key (allow).
//
// New refuses a document with an operation that declares none, so a
// route cannot be added without a permission.

// Problem types of authentication and authorisation.
const (
	ProblemUnauthorized = "https://tock.dev/problems/unauthorized"
	ProblemForbidden    = "https://tock.dev/problems/forbidden"
)

// permission is an operation's x-tock-permission.
type permission struct {
	Method string
	Action string
	Role   auth.Role
	Scope  string
}

var scopes = []string{"public", "any", "cluster", "job", "execution", "channel", "rule", "notification", "namespace", "query", "body", "key"}

// permissions reads every operation's x-tock-permission from doc.
func permissions(doc *openapi3.T) (map[string]permission, error) {
	out := map[string]permission{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			raw, ok := op.Extensions["x-tock-permission"].(map[string]any)
			if !ok {
				return nil, fmt.Errorf("api: %s %s (%s) declares no x-tock-permission", method, path, op.OperationID)
			}
			p := permission{Method: method}
			p.Action, _ = raw["action"].(string)
			p.Scope, _ = raw["scope"].(string)
			role, _ := raw["role"].(string)
			if p.Action == "" || !slices.Contains(scopes, p.Scope) {
				return nil, fmt.Errorf("api: %s's x-tock-permission needs an action and a scope of %v", op.OperationID, scopes)
			}
			if p.Scope != "public" {
				r, err := auth.ParseRole(role)
				if err != nil {
					return nil, fmt.Errorf("api: %s's x-tock-permission role %q: %v", op.OperationID, role, err)
				}
				p.Role = r
			}
			// oapi-codegen's embedded document capitalises operation ids
			// (GetStats); its middlewares are keyed by the document's own
			// (getStats), as every id in openapi.yaml is written.
			id := op.OperationID
			out[strings.ToLower(id[:1])+id[1:]] = p
		}
	}
	return out, nil
}

// keyTTL is how long a node keeps what it found of a key: a deleted key
// is refused by the other nodes within this time.
const keyTTL = 10 * time.Second

// maxCachedKeys bounds the cache (unknown keys are cached too, so that
// a client retrying a bad key does not query the database each time).
const maxCachedKeys = 10000

// keyCache keeps verified keys (and refusals) for keyTTL, by the hash of
// the whole key.
type keyCache struct {
	mu sync.Mutex
	m  map[[32]byte]cachedKey
}

type cachedKey struct {
	p     *auth.Principal
	fault string // why the key is refused; "" if it is not
	until time.Time
}

func (kc *keyCache) get(h [32]byte, now time.Time) (cachedKey, bool) {
	kc.mu.Lock()
	defer kc.mu.Unlock()
	e, ok := kc.m[h]
	if !ok || now.After(e.until) {
		return cachedKey{}, false
	}
	return e, true
}

func (kc *keyCache) put(h [32]byte, e cachedKey) {
	kc.mu.Lock()
	defer kc.mu.Unlock()
	if kc.m == nil || len(kc.m) >= maxCachedKeys {
		kc.m = map[[32]byte]cachedKey{}
	}
	kc.m[h] = e
}

// forget drops the key with id, deleted on this node.
func (kc *keyCache) forget(id string) {
	kc.mu.Lock()
	defer kc.mu.Unlock()
	for h, e := range kc.m {
		if e.p != nil && e.p.KeyID == id {
			delete(kc.m, h)
		}
	}
}

// unauthorized is a 401 with WWW-Authenticate (RFC 6750): error names
// what was wrong with a key sent ("" when none was).
func unauthorized(c echo.Context, errCode, detail string) *apiError {
	h := `Bearer realm="tock"`
	if errCode != "" {
		h += `, error="` + errCode + `"`
	}
	c.Response().Header().Set(echo.HeaderWWWAuthenticate, h)
	return withField(newProblem(http.StatusUnauthorized, ProblemUnauthorized, "Unauthorized", detail),
		"Authorization", "needs a valid API key: Bearer tock_<id>_<secret>")
}

// forbidden is a 403 whose detail names the role, the namespace and the
// action.
func forbidden(field, detail string) *apiError {
	return withField(newProblem(http.StatusForbidden, ProblemForbidden, "Forbidden", detail), field, "is not allowed to this key")
}

// authenticate finds who sent the request, by its bearer key.
func (s *Server) authenticate(c echo.Context) (*auth.Principal, error) {
	h := c.Request().Header.Get(echo.HeaderAuthorization)
	if h == "" {
		return nil, unauthorized(c, "", "This operation needs an API key, sent as Authorization: Bearer tock_<id>_<secret> (tockd keys create, POST /v1/keys).")
	}
	scheme, token, _ := strings.Cut(h, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return nil, unauthorized(c, "invalid_request", "The Authorization header must be Bearer followed by an API key.")
	}
	token = strings.TrimSpace(token)
	if s.jwt != nil && !strings.HasPrefix(token, auth.KeyPrefix) {
		p, err := s.jwt.verifyJWT(token)
		if err != nil {
			return nil, unauthorized(c, "invalid_token", "The bearer token is not a valid JWT of this server's issuer: "+err.Error()+".")
		}
		return p, nil
	}
	k, err := auth.ParseKey(token)
	if err != nil {
		return nil, unauthorized(c, "invalid_token", "The bearer token is not a tock API key (tock_<id>_<secret>).")
	}
	sum := sha256.Sum256([]byte(k.String()))
	now := time.Now()
	e, ok := s.keys.get(sum, now)
	if !ok {
		e, err = s.verify(c.Request().Context(), k, now)
		if err != nil {
			return nil, err
		}
		s.keys.put(sum, e)
	}
	if e.fault != "" {
		return nil, unauthorized(c, "invalid_token", e.fault)
	}
	return e.p, nil
}

// verify looks k up: a principal, or why it is refused, to keep until
// the entry's until.
func (s *Server) verify(ctx context.Context, k auth.Key, now time.Time) (cachedKey, error) {
	until := now.Add(keyTTL)
	rec, err := s.store.UseAPIKey(ctx, k.ID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !k.Matches(rec.SecretHash)) {
		return cachedKey{fault: "The API key is unknown or was deleted.", until: until}, nil
	}
	if err != nil {
		return cachedKey{}, err
	}
	if rec.ExpiresAt != nil {
		if !rec.ExpiresAt.After(now) {
			return cachedKey{fault: fmt.Sprintf("The API key %s expired at %s.", rec.ID, rec.ExpiresAt.UTC().Format(time.RFC3339)), until: until}, nil
		}
		if rec.ExpiresAt.Before(until) {
			until = *rec.ExpiresAt
		}
	}
	role, err := auth.ParseRole(rec.Role)
	if err != nil {
		return cachedKey{}, fmt.Errorf("api: key %s has role %q: %w", rec.ID, rec.Role, err)
	}
	p := &auth.Principal{Subject: "key:" + rec.ID, KeyID: rec.ID, Grants: []auth.Grant{{Namespace: rec.Namespace, Role: role}}}
	return cachedKey{p: p, until: until}, nil
}

// guards are the operations' authorisation middlewares, from perms.
func (s *Server) guards() map[string][]echo.MiddlewareFunc {
	out := map[string][]echo.MiddlewareFunc{}
	for op, p := range s.perms {
		out[op] = []echo.MiddlewareFunc{s.guard(p)}
		// An apply writes its own entries, one per job it changes, in its
		// transaction.
		if p.Method != http.MethodGet && p.Role >= auth.Operator && op != "applyApplySet" {
			out[op] = append(out[op], s.audited(op, p))
		}
	}
	return out
}

// guard authenticates a request to an operation of permission p and
// checks what the scope lets it check before the handler runs.
func (s *Server) guard(p permission) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if p.Scope == "public" {
				return next(c)
			}
			who := auth.Anonymous
			if !s.open {
				var err error
				if who, err = s.authenticate(c); err != nil {
					return err
				}
			}
			if err := s.limitRequest(c, who); err != nil {
				return err
			}
			r := c.Request()
			c.SetRequest(r.WithContext(auth.WithPrincipal(r.Context(), who)))
			if who.Allows(auth.AllNamespaces, p.Role) {
				return next(c) // allowed everywhere: nothing to look up
			}
			switch p.Scope {
			case "any", "query":
				if ns := c.QueryParam("namespace"); p.Scope == "query" && ns != "" {
					if !who.Allows(ns, p.Role) {
						return forbidden("namespace", who.Denied(ns, p.Action))
					}
				} else if len(who.NamespacesWith(p.Role)) == 0 {
					return forbidden("Authorization", who.Denied(firstNamespace(who), p.Action))
				}
			case "cluster":
				return forbidden("Authorization", who.Denied(auth.AllNamespaces, p.Action))
			case "namespace":
				if ns := c.Param("namespace"); !who.Allows(ns, p.Role) {
					return forbidden("namespace", who.Denied(ns, p.Action))
				}
			case "job", "execution", "channel", "rule", "notification":
				id, err := uuid.Parse(strings.TrimSpace(c.Param("id")))
				if err != nil {
					return next(c) // the handler refuses the id
				}
				ns, err := s.namespaceOf(r.Context(), p.Scope, id)
				if errors.Is(err, store.ErrNotFound) {
					return next(c) // the handler answers 404
				}
				if err != nil {
					return s.serverError(c, err)
				}
				if who.Role(ns) == auth.NoRole {
					return notFound(fmt.Sprintf("No %s with id %s.", scopeNoun(p.Scope), id))
				}
				if !who.Allows(ns, p.Role) {
					return forbidden("id", who.Denied(ns, p.Action))
				}
			}
			return next(c)
		}
	}
}

// namespaceOf is the namespace of the resource of scope (job,
// execution, channel, rule, notification) with id; store.ErrNotFound if
// there is none.
func (s *Server) namespaceOf(ctx context.Context, scope string, id uuid.UUID) (string, error) {
	switch scope {
	case "job":
		return s.store.GetJobNamespace(ctx, id)
	case "execution":
		return s.store.GetExecutionNamespace(ctx, id)
	case "channel":
		c, err := s.store.GetChannel(ctx, id)
		if err != nil {
			return "", err
		}
		return c.Namespace, nil
	case "rule":
		r, err := s.store.GetRule(ctx, id)
		if err != nil {
			return "", err
		}
		return r.Namespace, nil
	case "notification":
		n, err := s.store.GetNotification(ctx, id)
		if err != nil {
			return "", err
		}
		return n.Namespace, nil
	}
	return "", fmt.Errorf("api: no lookup of scope %s", scope)
}

// scopeNoun names the resource of a scope in a 404's detail.
func scopeNoun(scope string) string {
	switch scope {
	case "channel":
		return "notification channel"
	case "rule":
		return "notification rule"
	}
	return scope
}

// serverError logs an unexpected failure and answers a bare 500, or 503
// when Postgres is unavailable.
func (s *Server) serverError(c echo.Context, err error) error {
	return s.failure(c, err, "request failed")
}

// firstNamespace names a namespace of who's, for errors.
func firstNamespace(who *auth.Principal) string {
	if len(who.Grants) > 0 {
		return who.Grants[0].Namespace
	}
	return auth.AllNamespaces
}

// principal is who made the request c (auth.Anonymous when the server
// is open).
func principal(c echo.Context) *auth.Principal {
	if p := auth.PrincipalFrom(c.Request().Context()); p != nil {
		return p
	}
	return auth.Anonymous
}

// allow checks, for an operation of scope body or key, that the caller
// may do op in namespace ns; field names where ns came from.
func (s *Server) allow(c echo.Context, op, field, ns string) error {
	p := s.perms[op]
	if who := principal(c); !who.Allows(ns, p.Role) {
		return forbidden(field, who.Denied(ns, p.Action))
	}
	return nil
}

// listNamespace is the namespace a list of operation op reads, given
// the namespace parameter: the parameter, or for a caller without a role
// in every namespace its own namespace (the guard has checked the
// parameter). "" is every namespace.
func (s *Server) listNamespace(c echo.Context, op, given string) (string, error) {
	who := principal(c)
	p := s.perms[op]
	if given != "" || who.Allows(auth.AllNamespaces, p.Role) {
		return given, nil
	}
	mine := who.NamespacesWith(p.Role)
	if len(mine) != 1 {
		return "", invalid("namespace", "is required: this key has roles in %d namespaces", len(mine))
	}
	return mine[0], nil
}

// namespaceOrDefault is the namespace a job is created in.
func namespaceOrDefault(ns string) string {
	if ns == "" {
		return jobs.DefaultNamespace
	}
	return ns
}
