package domain

import "strings"

// SecretMask is what the API shows in place of every secret header's
// value, and of the value of every plain header whose name looks
// sensitive (SensitiveHeader). A change that sends it back as a value
// keeps the value stored.
const SecretMask = "***"

// SealedSecret is a secret value as tock stores and sends it: encrypted
// (AES-256-GCM, package secret) under the key KeyID names, and bound to
// what it is the value of (SecretHeaderAD), so that it cannot be moved to
// another header. Only an executor holding the key opens it, just before
// it uses it.
type SealedSecret struct {
	// KeyID names the key that sealed it (a line of the key file).
	KeyID string `json:"kid"`
	// Data is the nonce followed by the ciphertext and its tag (base64
	// in JSON).
	Data []byte `json:"ct"`
}

// SecretHeaderAD is the associated data a secret header's value is
// sealed with: its name, in lower case (header names are
// case-insensitive), so that a value sealed for one header does not open
// as another's.
func SecretHeaderAD(name string) []byte {
	return []byte("tock/secret-header/v1\x00" + strings.ToLower(name))
}

// sensitiveNames are header names whose values are credentials, in lower
// case; sensitiveParts are parts of names that say the same.
var (
	sensitiveNames = map[string]bool{"authorization": true, "proxy-authorization": true, "cookie": true}
	sensitiveParts = []string{"token", "secret", "password", "passwd", "api-key", "apikey", "api_key", "credential", "session"}
)

// SensitiveHeader reports whether a header's name says that its value is
// a credential: Authorization, Proxy-Authorization, Cookie, or a name
// containing token, secret, password, passwd, api-key, apikey, api_key,
// credential or session (in any case). The API hides such a plain
// header's value as it hides secret headers', so that jobs made before
// secret headers existed do not show theirs.
func SensitiveHeader(name string) bool {
	n := strings.ToLower(name)
	if sensitiveNames[n] {
		return true
	}
	for _, p := range sensitiveParts {
		if strings.Contains(n, p) {
			return true
		}
	}
	return false
}
