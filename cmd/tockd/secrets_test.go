package main

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

// tockd refuses, at start, a key file others may read, saying how to fix
// it; and one it can read gives the api and executor roles their keys.
func TestServeSecretKeyFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := writeKeys(t, dir, "keys", newKey(t, "k1"))
	cfg, err := (&ServeCmd{Roles: []string{"api"}, SecretFlags: SecretFlags{SecretKeyFile: path}}).config()
	if err != nil || cfg.Secrets == nil || cfg.Secrets.Primary() != "k1" {
		t.Fatalf("config with a 0600 key file: %v", err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = (&ServeCmd{Roles: []string{"api"}, SecretFlags: SecretFlags{SecretKeyFile: path}}).config()
	if err == nil || !strings.Contains(err.Error(), "--secret-key-file") || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a key file others may read: %v", err)
	}
	if cfg, err := (&ServeCmd{Roles: []string{"api"}}).config(); err != nil || cfg.Secrets != nil {
		t.Errorf("no key file: %v, %v", cfg.Secrets, err)
	}
}
