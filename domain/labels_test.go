package domain

import (
	"strings"
	"testing"
)

func TestLabelsValidate(t *testing.T) {
	ok := Labels{"team": "payments", "tier": "", "example.com/owner": "a-b_c.d", "x": strings.Repeat("v", 63)}
	if errs := ok.Validate(); len(errs) != 0 {
		t.Errorf("%v: %v", ok, errs)
	}
	for _, tc := range []struct {
		l   Labels
		key string
	}{
		{Labels{"-team": "x"}, "-team"},
		{Labels{"team": "-x"}, "team"},
		{Labels{strings.Repeat("k", 64): "x"}, strings.Repeat("k", 64)},
		{Labels{"team": strings.Repeat("v", 64)}, "team"},
		{Labels{"Example.com/x": "y"}, "Example.com/x"},
		{Labels{"/x": "y"}, "/x"},
		{Labels{"a b": "y"}, "a b"},
		{Labels{"team": "a b"}, "team"},
	} {
		errs := tc.l.Validate()
		if len(errs) != 1 || errs[0].Field != tc.key {
			t.Errorf("%v: %v, want one error on %q", tc.l, errs, tc.key)
		}
	}
	many := Labels{}
	for i := range MaxLabels + 1 {
		many[strings.Repeat("k", i%60+1)+string(rune('a'+i%26))+string(rune('a'+i/26))] = "v"
	}
	if errs := many.Validate(); len(errs) == 0 {
		t.Errorf("%d labels: no error", len(many))
	}
}

func TestParseSelectorAndMatches(t *testing.T) {
	l := Labels{"team": "payments", "tier": "web"}
	for _, tc := range []struct {
		sel  string
		want bool
	}{
		{"", true},
		{"team=payments", true},
		{"team==payments", true},
		{"team=search", false},
		{"team=payments,tier!=batch", true},
		{"team=payments,tier!=web", false},
		{"owner!=x", true}, // absent counts as not equal
		{"tier", true},
		{"owner", false},
		{"!owner", true},
		{"!tier", false},
		{" team = payments , tier ", true},
		{"team in (payments,search)", true},
		{"team in (search)", false},
		{"owner in (x)", false},
		{"team notin (search, ops)", true},
		{"team notin (payments)", false},
		{"owner notin (x)", true}, // absent counts as not in
		{"team in (payments),tier notin (batch),!owner", true},
		{"team in ( payments , payments )", true},
	} {
		sel, err := ParseSelector(tc.sel)
		if err != nil {
			t.Errorf("%q: %v", tc.sel, err)
			continue
		}
		if got := sel.Matches(l); got != tc.want {
			t.Errorf("%q matches %v = %v, want %v", tc.sel, l, got, tc.want)
		}
	}
	for _, bad := range []string{"team=payments,", ",team", "-x=y", "team=a b", "!", "=x",
		"team in ()", "team notin ( )", "team in (a,b", "team in a,b)", "team in ((a))", "team in (a b)",
		"team in (-a)", "team within (a)", "-team in (a)"} {
		if _, err := ParseSelector(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
