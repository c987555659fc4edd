// Package secret encrypts the secrets jobs carry (an HTTP handler's
// secret headers) so that only ciphertext is stored and sent: AES-256-GCM
// under keys read from a key file, each ciphertext naming the key that
// sealed it, so that keys can be rotated.
//
// A key file holds one key a line, "<key-id>:<base64 of 32 bytes>"
// (GenerateKey makes a line); blank lines and lines starting with '#' are
// skipped. The first key seals; every key opens. To rotate, put a new key
// first on every node, restart them, re-seal what is stored (tockd
// secrets reencrypt), then remove the old key.
package secret

import (
	"bufio"
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"strings"
)

// KeySize is the size of a key: AES-256.
const KeySize = 32

// nonceSize is AES-GCM's standard nonce size; a random nonce per value
// keeps the chance of a repeat negligible for far more values than a
// cluster will ever seal under one key (NIST's bound is 2^32).
const nonceSize = 12

// Overhead is how much longer a sealed value is than its plaintext: the
// nonce and the authentication tag.
const Overhead = nonceSize + 16

// keyID is the syntax of a key's id: it is stored with every value
// sealed under the key.
var keyID = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// Errors of Open, for errors.Is.
var (
	// ErrUnknownKey: the value was sealed under a key this keyring does
	// not hold.
	ErrUnknownKey = errors.New("sealed under a key this keyring does not hold")
	// ErrAuth: the value does not open under its key with this
	// associated data: it was altered, moved (sealed for another header),
	// or sealed under another key of the same id.
	ErrAuth = errors.New("the ciphertext does not authenticate")
)

// Keyring holds the keys of a key file. Its methods are safe for
// concurrent use.
type Keyring struct {
	primary string // the id of the key that seals
	aeads   map[string]cipher.AEAD
	ids     []string // in the file's order
}

// LoadFile reads the key file at path. It refuses a file that group or
// others may read or write (the keys are the secrets' only protection),
// one that is not a regular file, and one without a key.
func LoadFile(path string) (*Keyring, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("secret key file: %w", err)
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("secret key file %s: not a regular file", path)
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("secret key file %s: mode %04o lets group or others read or write it; make it readable by tockd's user alone (chmod 600 %s)",
			path, perm, path)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("secret key file: %w", err)
	}
	k, err := Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("secret key file %s: %w", path, err)
	}
	return k, nil
}

// Parse reads a key file's content. Its errors name lines, never keys.
func Parse(raw []byte) (*Keyring, error) {
	k := &Keyring{aeads: map[string]cipher.AEAD{}}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		id, b64, ok := strings.Cut(line, ":")
		if !ok || !keyID.MatchString(id) {
			return nil, fmt.Errorf("line %d: want <key-id>:<base64 of %d bytes>, the id 1 to 64 letters, digits, '.', '_' or '-'", n, KeySize)
		}
		key, err := base64.StdEncoding.DecodeString(b64)
		if err != nil || len(key) != KeySize {
			return nil, fmt.Errorf("line %d (key %s): the key is not the standard base64 of %d bytes", n, id, KeySize)
		}
		if _, dup := k.aeads[id]; dup {
			return nil, fmt.Errorf("line %d: key id %s appears twice", n, id)
		}
		aead, err := newAEAD(key)
		if err != nil {
			return nil, fmt.Errorf("line %d (key %s): %w", n, id, err)
		}
		k.aeads[id] = aead
		k.ids = append(k.ids, id)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(k.ids) == 0 {
		return nil, errors.New("no key in it (generate one with `tockd secrets generate-key`)")
	}
	k.primary = k.ids[0]
	return k, nil
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// GenerateKey returns a new key file line for a key with this id: a
// random 32-byte key, in base64.
func GenerateKey(id string) (string, error) {
	if !keyID.MatchString(id) {
		return "", fmt.Errorf("key id %q: want 1 to 64 letters, digits, '.', '_' or '-'", id)
	}
	key := make([]byte, KeySize)
	if _, err := rand.Read(key); err != nil {
		return "", err
	}
	return id + ":" + base64.StdEncoding.EncodeToString(key), nil
}

// Primary is the id of the key Seal uses: the file's first.
func (k *Keyring) Primary() string { return k.primary }

// KeyIDs are the ids of the keys, in the file's order.
func (k *Keyring) KeyIDs() []string { return append([]string(nil), k.ids...) }

// Seal encrypts plaintext under the primary key, bound to ad (associated
// data: the same ad must be given to Open), and returns the key's id and
// the sealed value (a random nonce, then the ciphertext and its tag).
func (k *Keyring) Seal(plaintext, ad []byte) (keyID string, sealed []byte, err error) {
	aead := k.aeads[k.primary]
	out := make([]byte, nonceSize, nonceSize+len(plaintext)+aead.Overhead())
	if _, err := rand.Read(out); err != nil {
		return "", nil, fmt.Errorf("secret: nonce: %w", err)
	}
	return k.primary, aead.Seal(out, out[:nonceSize], plaintext, ad), nil
}

// Open decrypts a value Seal returned, sealed under key keyID with
// associated data ad. It fails with ErrUnknownKey or ErrAuth; its errors
// name the key id, never the value.
func (k *Keyring) Open(keyID string, sealed, ad []byte) ([]byte, error) {
	aead, ok := k.aeads[keyID]
	if !ok {
		return nil, fmt.Errorf("secret: key %q: %w", keyID, ErrUnknownKey)
	}
	if len(sealed) < nonceSize+aead.Overhead() {
		return nil, fmt.Errorf("secret: key %q: value too short: %w", keyID, ErrAuth)
	}
	plain, err := aead.Open(nil, sealed[:nonceSize], sealed[nonceSize:], ad)
	if err != nil {
		return nil, fmt.Errorf("secret: key %q: %w", keyID, ErrAuth)
	}
	return plain, nil
}

// WriteNewFile creates a key file at path holding one new key with this
// id, readable by its owner alone; it fails if the file exists.
func WriteNewFile(path, id string) error {
	line, err := GenerateKey(id)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("secret key file: %w", err)
	}
	_, err = fmt.Fprintf(f, "# tock secret keys: <key-id>:<base64 of 32 bytes>; the first seals, all open.\n%s\n", line)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path)
		return fmt.Errorf("secret key file: %w", err)
	}
	return nil
}

// IsNotExist reports whether err says a key file does not exist.
func IsNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
