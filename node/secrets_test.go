package node

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tock-sched/tock/secret"
)

// writeKeys writes a key file of these lines, mode 0600, and returns its
// path.
func writeKeys(t *testing.T, dir, name string, lines ...string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// newKey is a new key line of id.
func newKey(t *testing.T, id string) string {
	t.Helper()
	line, err := secret.GenerateKey(id)
	if err != nil {
		t.Fatal(err)
	}
	return line
}

// Without a key file, the roles get no keyring: a nil interface, not a
// nil pointer in one.
func TestNoKeyFileNoKeyring(t *testing.T) {
	k, err := LoadKeyring("")
	if err != nil || k != nil || keys(k) != nil {
		t.Errorf("no key file: %v, %v", k, err)
	}
}

// tockd dev makes a key file in its data directory once, and keeps using
// it: what it sealed before a restart opens after.
func TestDevKeyFile(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), ".dev")
	k, path, err := devKeys("", dir)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(path); err != nil || info.Mode().Perm() != 0o600 || filepath.Dir(path) != dir {
		t.Fatalf("dev key file %s: %v %v", path, info.Mode(), err)
	}
	kid, ct, err := k.Seal([]byte("v"), []byte("h"))
	if err != nil {
		t.Fatal(err)
	}
	again, _, err := devKeys("", dir)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := again.Open(kid, ct, []byte("h")); err != nil || string(v) != "v" {
		t.Errorf("after a restart: %q, %v", v, err)
	}
	// --secret-key-file wins.
	own := writeKeys(t, t.TempDir(), "keys", newKey(t, "mine"))
	if k, p, err := devKeys(own, dir); err != nil || p != own || k.Primary() != "mine" {
		t.Errorf("dev with --secret-key-file: %s %v", p, err)
	}
}
