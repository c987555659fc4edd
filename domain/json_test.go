package domain

import (
	"strings"
	"testing"
)

func TestCheckJSON(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		in   string
		size int    // -1: not checked
		path string // of the first fault; "-" for none
		msg  string
	}{
		{"object", `{ "a" : 1 , "b" : [true, null, "x"] }`, len(`{"a":1,"b":[true,null,"x"]}`), "-", ""},
		{"empty containers", `[{}, []]`, len(`[{},[]]`), "-", ""},
		{"numbers written out", `[1e3, 1.50e1, 0.5e-2, -12, 0, 1E+2]`, len(`[1000,15.0,0.005,-12,0,100]`), "-", ""},
		{"zero scale", `0.000e-5`, len(`0.00000000`), "-", ""},
		{"zero with an exponent", `[0e2, 0.0e1, 0.05e2]`, len(`[0,0,5]`), "-", ""},
		{"escapes kept", `"a\"b\\c\n\u0001"`, len(`"a\"b\\c\n\u0001"`), "-", ""},
		{"escapes decoded", `"\u00e9\/"`, len(`"é/"`), "-", ""},
		{"html escaped", `"<&>"`, 2 + 18, "-", ""},
		{"line separator", "\"\u2028\"", 2 + 6, "-", ""},
		{"surrogate pair", `"\ud83d\ude00"`, len(`"😀"`), "-", ""},
		{"NUL", `{"a":["x","\u0000"]}`, -1, "a[1]", "U+0000"},
		{"NUL in a key", `{"k\u0000":1}`, -1, `k\u0000`, "U+0000"},
		{"empty key", `{"":{"":"\u0000"}}`, -1, `"".""`, "U+0000"},
		{"lone high surrogate", `"\ud800"`, -1, "", "surrogate"},
		{"lone low surrogate", `{"s":"\udc00\ud800"}`, -1, "s", "surrogate"},
		{"high then no low", `"\ud800\u0041"`, -1, "", "surrogate"},
		{"invalid UTF-8", "{\"s\":\"\xff\"}", -1, "s", "UTF-8"},
		{"UTF-8 surrogate", "\"\xed\xa0\x80\"", -1, "", "UTF-8"},
		{"huge exponent", `{"n":1e1000000}`, -1, "n", "number"},
		{"tiny exponent", `[1e-1001]`, -1, "[0]", "number"},
		{"zero with huge exponent", `0e1000000`, -1, "", "number"},
		{"exponent at the limit", `1e1000`, 1001, "-", ""},
		{"too many integer digits", strings.Repeat("1", MaxJSONIntDigits+1), -1, "", "number"},
		{"too many fraction digits", "0." + strings.Repeat("1", MaxJSONFracDigits+1), -1, "", "number"},
		{"syntax", `{"a":}`, -1, "a", "not valid JSON"},
		{"trailing", `1 2`, -1, "", "not valid JSON"},
		{"raw control character", "\"a\tb\"", -1, "", "not valid JSON"},
		{"deep", strings.Repeat("[", maxJSONDepth+2) + strings.Repeat("]", maxJSONDepth+2), -1, strings.Repeat("[0]", maxJSONDepth+1), "deeper"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			size, faults := CheckJSON([]byte(tc.in))
			if tc.path == "-" {
				if len(faults) > 0 {
					t.Fatalf("faults %v", faults)
				}
			} else {
				if len(faults) == 0 {
					t.Fatal("no fault")
				}
				if faults[0].Path != tc.path || !strings.Contains(faults[0].Message, tc.msg) {
					t.Errorf("fault %q: %s; want %q: …%s…", faults[0].Path, faults[0].Message, tc.path, tc.msg)
				}
			}
			if tc.size >= 0 && size != tc.size {
				t.Errorf("size %d, want %d", size, tc.size)
			}
		})
	}
}

// At most 20 faults come back, however many there are.
func TestCheckJSONBoundsFaults(t *testing.T) {
	t.Parallel()
	in := "[" + strings.Repeat(`"\u0000",`, 1000) + `1]`
	if _, faults := CheckJSON([]byte(in)); len(faults) != maxJSONFaults {
		t.Errorf("%d faults", len(faults))
	}
}

func TestJoinJSONPath(t *testing.T) {
	t.Parallel()
	for _, tc := range [][3]string{
		{"payload", "", "payload"},
		{"payload", "a.b", "payload.a.b"},
		{"payload", "[2].a", "payload[2].a"},
		{"", "a", "a"},
		{"", "[0]", "[0]"},
	} {
		if got := JoinJSONPath(tc[0], tc[1]); got != tc[2] {
			t.Errorf("JoinJSONPath(%q, %q) = %q, want %q", tc[0], tc[1], got, tc[2])
		}
	}
}
