package jobs

import (
	"fmt"
	"maps"
	"net/url"
	"sort"
	"strings"

	"github.com/tock-sched/tock/domain"
)

// Sealer encrypts the values of secret headers; *secret.Keyring is the
// real one. ad is the associated data the value is bound to
// (domain.SecretHeaderAD of its header's name).
type Sealer interface {
	Seal(plaintext, ad []byte) (keyID string, sealed []byte, err error)
}

// Limits on an http handler's secret headers.
const (
	// MaxSecretHeaders is the most secret headers a handler may have.
	MaxSecretHeaders = 16
	// MaxSecretValue is the longest secret header value, in bytes.
	MaxSecretValue = 4 << 10
)

// noKey is the fault of secret headers given to a Service without a
// Sealer.
const noKey = "this server has no --secret-key-file, so it cannot store secrets"

// sealSecrets checks the secret headers given for a handler of type typ
// (name → value) and seals the new values. In a change (patch), a value
// of domain.SecretMask keeps the stored value of that header: those names
// come back in keep, for resolveSecrets; when creating a job it is a
// fault, being what the API shows in place of a value. An error is the
// Sealer's failure, not a fault.
func (s *Service) sealSecrets(typ string, given map[string]string, patch bool, f *faults) (sealed map[string]domain.SealedSecret, keep []string, err error) {
	if len(given) == 0 {
		return nil, nil, nil
	}
	if typ != domain.HandlerHTTP {
		if typ != "" {
			f.add("handler.secret_headers", "is not allowed for handler type %s", typ)
		}
		return nil, nil, nil
	}
	before := len(*f)
	if len(given) > MaxSecretHeaders {
		f.add("handler.secret_headers", "must hold at most %d headers", MaxSecretHeaders)
	}
	names := sortedNames(given)
	seen := map[string]string{}
	fresh := 0
	for _, name := range names {
		v := given[name]
		field := "handler.secret_headers." + name
		if !isToken(name) {
			f.add("handler.secret_headers", "%q is not a valid header name", name)
			continue
		}
		if other, dup := seen[strings.ToLower(name)]; dup {
			f.add(field, "is the same header as %q (header names are case-insensitive)", other)
			continue
		}
		seen[strings.ToLower(name)] = name
		switch msg := secretValueProblem(v); {
		case v == domain.SecretMask && patch:
			keep = append(keep, name)
		case v == domain.SecretMask:
			f.add(field, "is %q, what the API shows in place of a secret: give the value", domain.SecretMask)
		case msg != "":
			f.add(field, "%s", msg)
		default:
			fresh++
		}
	}
	if fresh > 0 && s.sealer == nil {
		f.add("handler.secret_headers", "%s", noKey)
	}
	if len(*f) > before || fresh == 0 {
		return nil, keep, nil
	}
	seal := s.sealFunc()
	sealed = make(map[string]domain.SealedSecret, fresh)
	for _, name := range names {
		if v := given[name]; v != domain.SecretMask {
			if sealed[name], err = seal(name, v); err != nil {
				return nil, nil, err
			}
		}
	}
	return sealed, keep, nil
}

// sealFunc seals the value of header name.
type sealFunc func(name, value string) (domain.SealedSecret, error)

// sealFunc is the Service's sealing of one header's value; nil without a
// Sealer.
func (s *Service) sealFunc() sealFunc {
	if s.sealer == nil {
		return nil
	}
	return func(name, value string) (domain.SealedSecret, error) {
		kid, ct, err := s.sealer.Seal([]byte(value), domain.SecretHeaderAD(name))
		if err != nil {
			return domain.SealedSecret{}, fmt.Errorf("seal secret header: %w", err)
		}
		return domain.SealedSecret{KeyID: kid, Data: ct}, nil
	}
}

// secretValueProblem says what is wrong with a secret header's value, or
// "" if nothing is. The messages never quote the value.
func secretValueProblem(v string) string {
	switch {
	case v == "":
		return "must not be empty"
	case len(v) > MaxSecretValue:
		return fmt.Sprintf("must be at most %d bytes", MaxSecretValue)
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return "must not contain control characters (CR, LF, NUL and the like)"
		}
	}
	return ""
}

// checkMaskedHeaders refuses, when a job is created, a plain header whose
// value is the mask the API shows for sensitive headers: it was copied
// from an answer of the API, and the value is not in it.
func checkMaskedHeaders(h domain.Handler, f *faults) {
	for _, name := range sortedNames(h.Headers) {
		if h.Headers[name] == domain.SecretMask && domain.SensitiveHeader(name) {
			f.add("handler.headers."+name, "is %q, what the API shows in place of a sensitive header's value: give the value (better, in handler.secret_headers)", domain.SecretMask)
		}
	}
}

// checkSecretNames checks a handler's plain and secret headers together:
// a header is one or the other, and a handler has at most
// MaxSecretHeaders secret ones.
func checkSecretNames(h domain.Handler, f *faults) {
	if len(h.SecretHeaders) == 0 {
		return
	}
	plain := map[string]string{}
	for name := range h.Headers {
		plain[strings.ToLower(name)] = name
	}
	for _, name := range sortedNames(h.SecretHeaders) {
		if other, ok := plain[strings.ToLower(name)]; ok {
			f.add("handler.secret_headers."+name, "is also in handler.headers (as %q): a header is plain or secret, not both", other)
		}
	}
	if len(h.SecretHeaders) > MaxSecretHeaders {
		f.add("handler.secret_headers", "must hold at most %d headers", MaxSecretHeaders)
	}
}

// resolveSecrets makes the handler a change gives (h, checked, its new
// secret values sealed) complete against the stored one, old: masked
// plain headers and secret headers sent as domain.SecretMask (keep) take
// their stored values, and secret headers left out of the change
// (given is false) are kept. A secret header kept that the stored handler
// has as a plain header takes that value, sealed by seal (nil: the
// service has no key): so a credential stored in clear before secret
// headers existed, which the API hides, moves into secret_headers
// without being typed again. A value is kept only while the handler
// calls the same origin (scheme, host and port): a change of URL must not
// send stored credentials somewhere else.
func resolveSecrets(h domain.Handler, old domain.Handler, given bool, keep []string, seal sealFunc) (domain.Handler, error) {
	if h.Type != domain.HandlerHTTP {
		return h, nil
	}
	var f faults
	moved := old.Type != domain.HandlerHTTP || Origin(old.URL) != Origin(h.URL)
	const elsewhere = "the handler's URL now has another origin (scheme, host and port) than the stored one, which is where the stored value was meant for: give the value again"
	h.Headers = maps.Clone(h.Headers)
	for _, name := range sortedNames(h.Headers) {
		if h.Headers[name] != domain.SecretMask || !domain.SensitiveHeader(name) {
			continue
		}
		field := "handler.headers." + name
		stored, ok := lookupFold(old.Headers, name)
		switch {
		case !ok || old.Type != domain.HandlerHTTP:
			f.add(field, "is %q, which keeps the stored value, but the job has no header %s", domain.SecretMask, name)
		case moved:
			f.add(field, "is %q, which keeps the stored value, but %s", domain.SecretMask, elsewhere)
		default:
			h.Headers[name] = stored
		}
	}
	h.SecretHeaders = maps.Clone(h.SecretHeaders)
	switch {
	case !given && len(old.SecretHeaders) > 0 && old.Type == domain.HandlerHTTP:
		if moved {
			f.add("handler.secret_headers", "is left out, which keeps the stored secret headers, but %s (or null to remove them)", elsewhere)
			break
		}
		h.SecretHeaders = maps.Clone(old.SecretHeaders)
	case given:
		for _, name := range keep {
			field := "handler.secret_headers." + name
			stored, ok := lookupFold(old.SecretHeaders, name)
			if plain, isPlain := lookupFold(old.Headers, name); !ok && isPlain && old.Type == domain.HandlerHTTP && !moved {
				if seal == nil {
					f.add(field, "%s", noKey)
					continue
				}
				sealed, err := seal(name, plain)
				if err != nil {
					return h, err
				}
				stored, ok = sealed, true
			}
			switch {
			case !ok || old.Type != domain.HandlerHTTP:
				f.add(field, "is %q, which keeps the stored value, but the job has no secret header %s", domain.SecretMask, name)
			case moved:
				f.add(field, "is %q, which keeps the stored value, but %s", domain.SecretMask, elsewhere)
			default:
				if h.SecretHeaders == nil {
					h.SecretHeaders = map[string]domain.SealedSecret{}
				}
				h.SecretHeaders[name] = stored
			}
		}
	}
	if len(h.SecretHeaders) == 0 {
		h.SecretHeaders = nil
	}
	checkSecretNames(h, &f)
	return h, f.err()
}

// Origin is the origin of an http(s) URL: scheme, host and port (the
// scheme's default when it has none), in lower case; "" if it has none.
func Origin(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return ""
	}
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		switch scheme {
		case "http":
			port = "80"
		case "https":
			port = "443"
		}
	}
	return scheme + "://" + strings.ToLower(u.Hostname()) + ":" + port
}

// lookupFold is m's value under name, compared case-insensitively (an
// exact match first).
func lookupFold[V any](m map[string]V, name string) (V, bool) {
	if v, ok := m[name]; ok {
		return v, true
	}
	for k, v := range m {
		if strings.EqualFold(k, name) {
			return v, true
		}
	}
	var zero V
	return zero, false
}

// sortedNames are m's keys in order, so that faults come in a fixed one.
func sortedNames[V any](m map[string]V) []string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}
