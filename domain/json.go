package domain

import (
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Limits of the numbers tock stores in JSON (PostgreSQL jsonb holds them
// as numeric). PostgreSQL 15 refuses more than 131072 digits before the
// decimal point or 16383 after; releases before 15 also refuse an
// exponent beyond ±1000, and so does tock, whatever the server.
const (
	MaxJSONExponent   = 1000
	MaxJSONIntDigits  = 131072
	MaxJSONFracDigits = 16383
)

const (
	maxJSONDepth  = 10000 // encoding/json's own limit
	maxJSONFaults = 20

	jsonNumberProblem    = "must be a number PostgreSQL can store: an exponent between -1000 and 1000, at most 131072 digits before the decimal point and 16383 after"
	jsonNULProblem       = "must not contain the character U+0000 (\\u0000), which tock cannot store"
	jsonUTF8Problem      = "must be valid UTF-8"
	jsonSurrogateProblem = "must not contain a lone UTF-16 surrogate (\\ud800 to \\udfff outside a pair)"
)

// JSONFault is something in a JSON text that tock cannot store: at Path
// (dotted, with [i] for array items, as the API names fields; "" for the
// text's value itself), what is wrong.
type JSONFault struct {
	Path    string
	Message string
}

// CheckJSON checks that raw is one JSON value that PostgreSQL's jsonb
// stores as it is: valid syntax, valid UTF-8, no U+0000 (jsonb cannot
// hold it), no lone UTF-16 surrogate escape, and numbers within the
// limits above. It returns the faults (at most 20: enough to fix a
// request, never a response as large as the request) and the size in
// bytes of the value as tock sends it to executors: compact, numbers
// written out in full as jsonb normalises them (1e3 is 1000), and the
// characters encoding/json escapes (<, >, &, U+2028, U+2029) six bytes
// each. That size is exact up to duplicate object keys, which jsonb drops.
func CheckJSON(raw []byte) (size int, faults []JSONFault) {
	s := jsonScanner{b: raw}
	s.value("", 0)
	if !s.broken {
		s.space()
		if s.i < len(s.b) {
			s.syntax("")
		}
	}
	return s.size, s.faults
}

// JoinJSONPath puts path, a JSONFault's, under prefix: "a" under
// "payload" is "payload.a", "[2]" is "payload[2]".
func JoinJSONPath(prefix, path string) string {
	switch {
	case path == "":
		return prefix
	case prefix == "" || strings.HasPrefix(path, "["):
		return prefix + path
	}
	return prefix + "." + path
}

// jsonScanner is a strict recursive-descent reader of one JSON text that
// keeps its faults and its wire size.
type jsonScanner struct {
	b      []byte
	i      int
	size   int
	faults []JSONFault
	broken bool // a syntax error: the rest is not read
}

func (s *jsonScanner) fault(path, msg string) {
	if len(s.faults) < maxJSONFaults {
		s.faults = append(s.faults, JSONFault{Path: path, Message: msg})
	}
}

func (s *jsonScanner) syntax(path string) {
	if !s.broken {
		s.broken = true
		s.fault(path, "is not valid JSON (at byte "+strconv.Itoa(s.i)+")")
	}
}

func (s *jsonScanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// value reads the value at s.i, found at path.
func (s *jsonScanner) value(path string, depth int) {
	s.space()
	if s.i >= len(s.b) {
		s.syntax(path)
		return
	}
	if depth > maxJSONDepth {
		s.broken = true
		s.fault(path, "nests deeper than "+strconv.Itoa(maxJSONDepth)+" levels")
		return
	}
	switch c := s.b[s.i]; {
	case c == '{':
		s.object(path, depth)
	case c == '[':
		s.array(path, depth)
	case c == '"':
		_, probs := s.str()
		s.report(path, probs)
	case c == 't':
		s.literal(path, "true")
	case c == 'f':
		s.literal(path, "false")
	case c == 'n':
		s.literal(path, "null")
	case c == '-' || c >= '0' && c <= '9':
		s.number(path)
	default:
		s.syntax(path)
	}
}

func (s *jsonScanner) object(path string, depth int) {
	s.i++ // {
	s.size++
	s.space()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		s.size++
		return
	}
	for !s.broken {
		s.space()
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			s.syntax(path)
			return
		}
		key, probs := s.str()
		// A key is shown with U+0000 escaped, so that the path can be
		// read, and an empty one as "".
		shown := strings.ReplaceAll(key, "\x00", `\u0000`)
		if shown == "" {
			shown = `""`
		}
		keyPath := JoinJSONPath(path, shown)
		s.report(keyPath, probs)
		s.space()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			s.syntax(keyPath)
			return
		}
		s.i++
		s.size++
		s.value(keyPath, depth+1)
		if !s.separator(path, '}') {
			return
		}
	}
}

// separator reads what follows an object's member or an array's element:
// a comma (more follow: true) or closer (the end); anything else is a
// syntax fault.
func (s *jsonScanner) separator(path string, closer byte) bool {
	s.space()
	if s.i >= len(s.b) {
		s.syntax(path)
		return false
	}
	switch s.b[s.i] {
	case ',':
		s.i++
		s.size++
		return true
	case closer:
		s.i++
		s.size++
	default:
		s.syntax(path)
	}
	return false
}

func (s *jsonScanner) array(path string, depth int) {
	s.i++ // [
	s.size++
	s.space()
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
		s.size++
		return
	}
	for n := 0; !s.broken; n++ {
		s.value(path+"["+strconv.Itoa(n)+"]", depth+1)
		if !s.separator(path, ']') {
			return
		}
	}
}

func (s *jsonScanner) literal(path, lit string) {
	if !strings.HasPrefix(string(s.b[s.i:min(len(s.b), s.i+len(lit))]), lit) {
		s.syntax(path)
		return
	}
	s.i += len(lit)
	s.size += len(lit)
}

// String problems, as bits.
const (
	probNUL = 1 << iota
	probUTF8
	probSurrogate
)

func (s *jsonScanner) report(path string, probs int) {
	if probs&probNUL != 0 {
		s.fault(path, jsonNULProblem)
	}
	if probs&probUTF8 != 0 {
		s.fault(path, jsonUTF8Problem)
	}
	if probs&probSurrogate != 0 {
		s.fault(path, jsonSurrogateProblem)
	}
}

// str reads the string at s.i and returns it decoded (anything invalid
// in it as U+FFFD) with its problems.
func (s *jsonScanner) str() (string, int) {
	s.i++ // "
	var (
		out   strings.Builder
		probs int
		n     = 2 // the quotes
	)
	for {
		if s.i >= len(s.b) {
			s.syntax("")
			return out.String(), probs
		}
		c := s.b[s.i]
		var r rune
		switch {
		case c == '"':
			s.i++
			s.size += n
			return out.String(), probs
		case c == '\\':
			if s.i+1 >= len(s.b) {
				s.syntax("")
				return out.String(), probs
			}
			switch e := s.b[s.i+1]; e {
			case '"', '\\', '/':
				r = rune(e)
			case 'b':
				r = '\b'
			case 'f':
				r = '\f'
			case 'n':
				r = '\n'
			case 'r':
				r = '\r'
			case 't':
				r = '\t'
			case 'u':
				u, ok := hex4(s.b[s.i+2:])
				if !ok {
					s.syntax("")
					return out.String(), probs
				}
				s.i += 4
				r = u
				if utf16.IsSurrogate(u) {
					r = utf8.RuneError
					if u < 0xdc00 && s.i+8 <= len(s.b) &&
						s.b[s.i+2] == '\\' && s.b[s.i+3] == 'u' {
						if lo, ok := hex4(s.b[s.i+4:]); ok && lo >= 0xdc00 && lo <= 0xdfff {
							r = utf16.DecodeRune(u, lo)
							s.i += 6
						}
					}
					if r == utf8.RuneError {
						probs |= probSurrogate
					}
				}
			default:
				s.syntax("")
				return out.String(), probs
			}
			s.i += 2
		case c < 0x20:
			s.syntax("")
			return out.String(), probs
		case c < utf8.RuneSelf:
			r = rune(c)
			s.i++
		default:
			var w int
			r, w = utf8.DecodeRune(s.b[s.i:])
			if r == utf8.RuneError && w <= 1 {
				probs |= probUTF8
				w = 1
			}
			s.i += w
		}
		if r == 0 {
			probs |= probNUL
		}
		n += wireLen(r)
		out.WriteRune(r)
	}
}

// wireLen is the bytes r takes in a string as jsonb prints it (", \ and
// control characters escaped) and encoding/json then writes it (<, >, &,
// U+2028 and U+2029 escaped as \u003c and the like).
func wireLen(r rune) int {
	switch {
	case r == '"' || r == '\\' || r == '\b' || r == '\f' || r == '\n' || r == '\r' || r == '\t':
		return 2
	case r < 0x20, r == '<', r == '>', r == '&', r == '\u2028', r == '\u2029':
		return 6
	}
	return utf8.RuneLen(r)
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// number reads the number at s.i: its syntax, its range, and its size
// as jsonb writes it out (1.50e1 is 15.0: the digits after the point
// are the literal's fraction digits less the exponent).
func (s *jsonScanner) number(path string) {
	neg := false
	if s.b[s.i] == '-' {
		neg = true
		s.i++
	}
	digits := func() int {
		start := s.i
		for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
			s.i++
		}
		return s.i - start
	}
	intStart := s.i
	if s.i < len(s.b) && s.b[s.i] == '0' {
		s.i++
	} else if digits() == 0 {
		s.syntax(path)
		return
	}
	intPart := s.b[intStart:s.i]
	var frac []byte
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		start := s.i
		if digits() == 0 {
			s.syntax(path)
			return
		}
		frac = s.b[start:s.i]
	}
	exp := 0
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		expNeg := false
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			expNeg = s.b[s.i] == '-'
			s.i++
		}
		start := s.i
		if digits() == 0 {
			s.syntax(path)
			return
		}
		for _, c := range s.b[start:s.i] {
			if exp <= 1<<30 { // beyond any limit already; no overflow
				exp = exp*10 + int(c-'0')
			}
		}
		if expNeg {
			exp = -exp
		}
	}
	// The value's digits are intPart then frac, with the point after
	// len(intPart)+exp of them; its integer digits are those before the
	// point less the leading zeros.
	point := len(intPart) + exp
	lead := 0
	for lead < len(intPart)+len(frac) && lead < point {
		var c byte
		if lead < len(intPart) {
			c = intPart[lead]
		} else {
			c = frac[lead-len(intPart)]
		}
		if c != '0' {
			break
		}
		lead++
	}
	intDigits := 0 // no digit before the point but zeros: 0e2 is 0
	if lead < len(intPart)+len(frac) && lead < point {
		intDigits = point - lead
	}
	scale := max(0, len(frac)-exp)
	if exp > MaxJSONExponent || exp < -MaxJSONExponent || intDigits > MaxJSONIntDigits || scale > MaxJSONFracDigits {
		s.fault(path, jsonNumberProblem)
	}
	n := max(1, intDigits)
	if neg {
		n++
	}
	if scale > 0 {
		n += 1 + scale
	}
	s.size += n
}
