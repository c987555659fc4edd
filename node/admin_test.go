package node

import (
	"errors"
	"testing"
	"time"

	"github.com/tock-sched/tock/auth"
)

// TestKeySpecParse: tockd keys create refuses a bad namespace, role or
// expiry by the field's name, before it touches the database, and turns
// an expiry into a time from now.
func TestKeySpecParse(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 500, time.UTC)
	for _, tc := range []struct {
		spec  KeySpec
		field string // "" when valid
	}{
		{KeySpec{Namespace: "team-a", Role: "reader"}, ""},
		{KeySpec{Namespace: "*", Role: "admin", Expires: "90d"}, ""},
		{KeySpec{Namespace: "", Role: "reader"}, "namespace"},
		{KeySpec{Namespace: "Team A", Role: "reader"}, "namespace"},
		{KeySpec{Namespace: "team-a", Role: "root"}, "role"},
		{KeySpec{Namespace: "team-a", Role: "editor", Expires: "soon"}, "expires"},
	} {
		role, _, err := tc.spec.parse(now)
		var se *KeySpecError
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%+v: %v", tc.spec, err)
		case tc.field != "" && (!errors.As(err, &se) || se.Field != tc.field):
			t.Errorf("%+v: error %v, want one about %s", tc.spec, err, tc.field)
		case tc.field == "" && role.String() != tc.spec.Role:
			t.Errorf("%+v: role %s", tc.spec, role)
		}
	}
	_, expires, _ := KeySpec{Namespace: auth.AllNamespaces, Role: "admin", Expires: "12h"}.parse(now)
	if want := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC); expires == nil || !expires.Equal(want) {
		t.Errorf("expires 12h from %s = %v, want %s", now, expires, want)
	}
}
