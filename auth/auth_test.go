package auth

import (
	"strings"
	"testing"
)

func TestKeyRoundTrip(t *testing.T) {
	seen := map[string]bool{}
	for range 200 {
		k, err := NewKey()
		if err != nil {
			t.Fatal(err)
		}
		s := k.String()
		if !strings.HasPrefix(s, "tock_") || len(s) != len("tock_")+IDLen+1+SecretLen {
			t.Fatalf("key %q", s)
		}
		got, err := ParseKey(s)
		if err != nil || got != k {
			t.Fatalf("ParseKey(%q) = %+v, %v", s, got, err)
		}
		if !got.Matches(k.Hash()) {
			t.Fatal("a key does not match its own hash")
		}
		if seen[k.ID] || seen[k.Secret] {
			t.Fatal("a random part repeated")
		}
		seen[k.ID], seen[k.Secret] = true, true
	}
}

func TestParseKeyRefuses(t *testing.T) {
	k, _ := NewKey()
	for _, s := range []string{"", "tock_", "Bearer " + k.String(), k.String() + "x", "tok_" + k.ID + "_" + k.Secret,
		"tock_" + k.ID + "-" + k.Secret, "tock_" + k.ID[:IDLen-1] + "!_" + k.Secret, "tock_" + k.ID + "_" + k.Secret[:SecretLen-1] + "é"} {
		if _, err := ParseKey(s); err == nil {
			t.Errorf("ParseKey(%q) accepted", s)
		}
	}
}

func TestHashBindsIDAndSecret(t *testing.T) {
	a, _ := NewKey()
	b := Key{ID: a.ID, Secret: a.Secret[:SecretLen-1] + "0"}
	if a.Secret[SecretLen-1] == '0' {
		b.Secret = a.Secret[:SecretLen-1] + "1"
	}
	if b.Matches(a.Hash()) {
		t.Fatal("another secret matched")
	}
	c := Key{ID: "AAAAAAAAAAAA", Secret: a.Secret}
	if c.Matches(a.Hash()) {
		t.Fatal("the same secret under another id matched")
	}
}

func TestRoles(t *testing.T) {
	p := &Principal{Subject: "key:x", Grants: []Grant{{Namespace: "team-a", Role: Operator}}}
	for _, c := range []struct {
		ns   string
		need Role
		want bool
	}{
		{"team-a", Reader, true}, {"team-a", Operator, true}, {"team-a", Editor, false}, {"team-a", Admin, false},
		{"team-b", Reader, false}, {AllNamespaces, Reader, false},
	} {
		if got := p.Allows(c.ns, c.need); got != c.want {
			t.Errorf("operator in team-a: Allows(%s, %s) = %v", c.ns, c.need, got)
		}
	}
	if got := p.Denied("team-a", "jobs.create"); got != "role operator in namespace team-a does not allow jobs.create" {
		t.Errorf("Denied: %q", got)
	}
	if got := p.Denied("team-b", "jobs.list"); !strings.Contains(got, "no role in namespace team-b") {
		t.Errorf("Denied elsewhere: %q", got)
	}
	all := &Principal{Grants: []Grant{{Namespace: AllNamespaces, Role: Reader}}}
	if !all.Allows("anything", Reader) || all.Allows("anything", Operator) || !all.Everywhere() {
		t.Error("a reader everywhere")
	}
	for i, name := range Roles {
		r, err := ParseRole(name)
		if err != nil || r != Role(i+1) || r.String() != name {
			t.Errorf("role %s: %v %v", name, r, err)
		}
	}
	if _, err := ParseRole("root"); err == nil {
		t.Error("ParseRole(root) accepted")
	}
}
