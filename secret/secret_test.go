package secret

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// keyFile is a key file of the given ids, new keys each.
func keyFile(t *testing.T, ids ...string) []byte {
	t.Helper()
	var b strings.Builder
	b.WriteString("# comment\n\n")
	for _, id := range ids {
		line, err := GenerateKey(id)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(line + "\n")
	}
	return []byte(b.String())
}

func mustParse(t *testing.T, raw []byte) *Keyring {
	t.Helper()
	k, err := Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestSealOpen(t *testing.T) {
	k := mustParse(t, keyFile(t, "k1"))
	ad := []byte("authorization")
	kid, ct, err := k.Seal([]byte("Bearer s3cret"), ad)
	if err != nil {
		t.Fatal(err)
	}
	if kid != "k1" || bytes.Contains(ct, []byte("s3cret")) || len(ct) != len("Bearer s3cret")+Overhead {
		t.Fatalf("sealed %q under %q (%d bytes)", ct, kid, len(ct))
	}
	plain, err := k.Open(kid, ct, ad)
	if err != nil || string(plain) != "Bearer s3cret" {
		t.Fatalf("Open = %q, %v", plain, err)
	}
	// A fresh nonce each time: the same value never seals the same way.
	if _, ct2, _ := k.Seal([]byte("Bearer s3cret"), ad); bytes.Equal(ct, ct2) {
		t.Error("two seals of one value are equal")
	}
}

func TestOpenRefuses(t *testing.T) {
	k := mustParse(t, keyFile(t, "k1"))
	ad := []byte("authorization")
	_, ct, err := k.Seal([]byte("Bearer s3cret"), ad)
	if err != nil {
		t.Fatal(err)
	}
	flipped := func(i int) []byte {
		c := bytes.Clone(ct)
		c[i] ^= 1
		return c
	}
	other := mustParse(t, keyFile(t, "k1")) // the same id, another key
	for _, tc := range []struct {
		name string
		k    *Keyring
		kid  string
		ct   []byte
		ad   string
		want error
	}{
		{"tampered nonce", k, "k1", flipped(0), "authorization", ErrAuth},
		{"tampered ciphertext", k, "k1", flipped(nonceSize), "authorization", ErrAuth},
		{"tampered tag", k, "k1", flipped(len(ct) - 1), "authorization", ErrAuth},
		{"truncated", k, "k1", ct[:Overhead-1], "authorization", ErrAuth},
		{"another header's", k, "k1", ct, "x-api-key", ErrAuth},
		{"unknown key id", k, "k2", ct, "authorization", ErrUnknownKey},
		{"another key of the same id", other, "k1", ct, "authorization", ErrAuth},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plain, err := tc.k.Open(tc.kid, tc.ct, []byte(tc.ad))
			if !errors.Is(err, tc.want) || plain != nil {
				t.Fatalf("Open = %q, %v; want %v", plain, err, tc.want)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("error %q holds the value", err)
			}
		})
	}
}

// Rotation: a new key put first seals from then on, and what the old key
// sealed still opens while the old key is in the file.
func TestRotation(t *testing.T) {
	oldFile := keyFile(t, "k1")
	old := mustParse(t, oldFile)
	kid, ct, err := old.Seal([]byte("v"), []byte("h"))
	if err != nil {
		t.Fatal(err)
	}
	rotated := mustParse(t, append(keyFile(t, "k2"), oldFile...))
	if rotated.Primary() != "k2" || strings.Join(rotated.KeyIDs(), ",") != "k2,k1" {
		t.Fatalf("primary %s, ids %v", rotated.Primary(), rotated.KeyIDs())
	}
	if plain, err := rotated.Open(kid, ct, []byte("h")); err != nil || string(plain) != "v" {
		t.Fatalf("old value under the rotated file: %q, %v", plain, err)
	}
	if kid2, _, _ := rotated.Seal([]byte("v"), []byte("h")); kid2 != "k2" {
		t.Errorf("sealed under %s, want the new first key k2", kid2)
	}
}

func TestParseRefuses(t *testing.T) {
	line, _ := GenerateKey("k1")
	_, b64, _ := strings.Cut(line, ":")
	for name, raw := range map[string]string{
		"empty":         "",
		"comments only": "# nothing\n\n",
		"no id":         ":" + b64,
		"bad id":        "k 1:" + b64,
		"no colon":      b64,
		"not base64":    "k1:???",
		"short key":     "k1:c2hvcnQ=",
		"duplicate id":  line + "\n" + line,
		"trailing junk": "k1:" + b64 + "!",
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Parse([]byte(raw)); err == nil {
				t.Fatalf("Parse(%q) accepted it", raw)
			} else if strings.Contains(err.Error(), b64) {
				t.Errorf("error %q shows the key", err)
			}
		})
	}
}

func TestLoadFileRefusesOpenPermissions(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "keys")
	if err := WriteNewFile(path, "k1"); err != nil {
		t.Fatal(err)
	}
	if err := WriteNewFile(path, "k1"); err == nil {
		t.Fatal("WriteNewFile overwrote an existing file")
	}
	k, err := LoadFile(path)
	if err != nil || k.Primary() != "k1" {
		t.Fatalf("LoadFile of a 0600 file: %v", err)
	}
	for _, mode := range []os.FileMode{0o640, 0o604, 0o660, 0o644} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		_, err := LoadFile(path)
		if err == nil || !strings.Contains(err.Error(), "chmod 600") {
			t.Errorf("mode %04o: %v, want a refusal that says chmod 600", mode, err)
		}
	}
	if _, err := LoadFile(filepath.Join(dir, "missing")); !IsNotExist(err) {
		t.Errorf("missing file: %v", err)
	}
	if _, err := LoadFile(dir); err == nil {
		t.Error("a directory was accepted")
	}
}
