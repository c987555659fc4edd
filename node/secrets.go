package node

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tock-sched/tock/secret"
)

// LoadKeyring reads the keys of secret headers from file
// (--secret-key-file); nil when file is empty.
func LoadKeyring(file string) (*secret.Keyring, error) {
	if file == "" {
		return nil, nil
	}
	k, err := secret.LoadFile(file)
	if err != nil {
		return nil, fmt.Errorf("--secret-key-file: %w", err)
	}
	return k, nil
}

// devKeys are tockd dev's keys: those of file, or when it is empty, of
// secret.keys in the data directory, created with one new key if
// missing. It returns the file's path too.
func devKeys(file, dataDir string) (*secret.Keyring, string, error) {
	if file != "" {
		k, err := LoadKeyring(file)
		return k, file, err
	}
	path := filepath.Join(dataDir, "secret.keys")
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, "", err
	}
	if err := secret.WriteNewFile(path, "dev1"); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, "", err
	}
	k, err := LoadKeyring(path)
	return k, path, err
}

// keyring is what the api (jobs.Sealer) and executor
// (executor.SecretOpener) roles take of a *secret.Keyring.
type keyring interface {
	Seal(plaintext, ad []byte) (string, []byte, error)
	Open(keyID string, sealed, ad []byte) ([]byte, error)
}

// keys is k as those roles take it: a nil interface, not a nil pointer in
// one, when there is no key.
func keys(k *secret.Keyring) keyring {
	if k == nil {
		return nil
	}
	return k
}
