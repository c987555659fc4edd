package domain

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// Label limits (Kubernetes label syntax).
const (
	// MaxLabels is the most labels a job may carry.
	MaxLabels = 64
	// MaxDescription is the longest description, in bytes.
	MaxDescription = 2000
)

var (
	labelName   = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`)
	labelValue  = regexp.MustCompile(`^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$`)
	labelPrefix = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
)

// Labels are a job's key/value labels, in Kubernetes label syntax: a key
// is an optional DNS-subdomain prefix and '/', then a name of at most 63
// letters, digits, '-', '_' and '.', starting and ending with a letter or
// digit; a value is empty or such a name.
type Labels map[string]string

// LabelKeyProblem says what is wrong with a label key, or "".
func LabelKeyProblem(k string) string {
	name := k
	if prefix, rest, ok := strings.Cut(k, "/"); ok {
		if len(prefix) == 0 || len(prefix) > 253 || !labelPrefix.MatchString(prefix) {
			return "must have a prefix that is a DNS subdomain (lower-case letters, digits, '-' and '.') of at most 253 characters"
		}
		name = rest
	}
	if !labelName.MatchString(name) {
		return "must be at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit (after an optional prefix/)"
	}
	return ""
}

// LabelValueProblem says what is wrong with a label value, or "".
func LabelValueProblem(v string) string {
	if !labelValue.MatchString(v) {
		return "must be empty or at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
	}
	return ""
}

// Validate lists what is wrong with l; each FieldError's Field is the
// label's key.
func (l Labels) Validate() []FieldError {
	var errs []FieldError
	if len(l) > MaxLabels {
		errs = append(errs, FieldError{"", fmt.Sprintf("must have at most %d labels", MaxLabels)})
	}
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if p := LabelKeyProblem(k); p != "" {
			errs = append(errs, FieldError{k, "key " + p})
		} else if p := LabelValueProblem(l[k]); p != "" {
			errs = append(errs, FieldError{k, p})
		}
	}
	return errs
}

// Op is a selector requirement's operator.
type Op string

// Selector operators.
const (
	OpEquals    Op = "="  // the label is there with this value
	OpNotEquals Op = "!=" // the label is not there with this value (absent counts)
	OpExists    Op = "exists"
	OpNotExists Op = "!exists"
	OpIn        Op = "in"    // the label is there with one of these values
	OpNotIn     Op = "notin" // the label is not there with any of these values (absent counts)
)

// Requirement is one condition of a Selector.
type Requirement struct {
	Key    string
	Op     Op
	Value  string   // for OpEquals and OpNotEquals
	Values []string // for OpIn and OpNotIn: at least one
}

// setRequirement is a set-based requirement: "key in (a,b)" or
// "key notin (a,b)".
var setRequirement = regexp.MustCompile(`^(\S+)\s+(in|notin)\s*\((.*)\)$`)

// Selector is a label selector: every requirement must hold.
type Selector []Requirement

// ParseSelector reads a Kubernetes-style label selector: requirements
// separated by commas, each "key=value", "key==value", "key!=value",
// "key" (the label exists), "!key" (it does not), "key in (a,b)" (the
// label has one of these values) or "key notin (a,b)" (it has none of
// them, or is absent). An empty string selects everything.
func ParseSelector(s string) (Selector, error) {
	var sel Selector
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	parts, err := splitSelector(s)
	if err != nil {
		return nil, err
	}
	for _, part := range parts {
		part = strings.TrimSpace(part)
		var r Requirement
		switch {
		case part == "":
			return nil, fmt.Errorf("an empty requirement (two commas in a row, or a trailing comma)")
		case setRequirement.MatchString(part):
			m := setRequirement.FindStringSubmatch(part)
			r = Requirement{Key: m[1], Op: Op(m[2])}
			if strings.TrimSpace(m[3]) == "" {
				return nil, fmt.Errorf("%q: %s needs at least one value", part, m[2])
			}
			for _, v := range strings.Split(m[3], ",") {
				v = strings.TrimSpace(v)
				if p := LabelValueProblem(v); p != "" {
					return nil, fmt.Errorf("%q: value %q %s", part, v, p)
				}
				if !slices.Contains(r.Values, v) {
					r.Values = append(r.Values, v)
				}
			}
		case strings.Contains(part, "!="):
			k, v, _ := strings.Cut(part, "!=")
			r = Requirement{Key: strings.TrimSpace(k), Op: OpNotEquals, Value: strings.TrimSpace(v)}
		case strings.Contains(part, "=="):
			k, v, _ := strings.Cut(part, "==")
			r = Requirement{Key: strings.TrimSpace(k), Op: OpEquals, Value: strings.TrimSpace(v)}
		case strings.Contains(part, "="):
			k, v, _ := strings.Cut(part, "=")
			r = Requirement{Key: strings.TrimSpace(k), Op: OpEquals, Value: strings.TrimSpace(v)}
		case strings.HasPrefix(part, "!"):
			r = Requirement{Key: strings.TrimSpace(part[1:]), Op: OpNotExists}
		case strings.ContainsAny(part, " ()"):
			return nil, fmt.Errorf("%q: not a requirement: use key=value, key!=value, key, !key, key in (a,b) or key notin (a,b)", part)
		default:
			r = Requirement{Key: part, Op: OpExists}
		}
		if p := LabelKeyProblem(r.Key); p != "" {
			return nil, fmt.Errorf("%q: key %s", part, p)
		}
		if p := LabelValueProblem(r.Value); p != "" {
			return nil, fmt.Errorf("%q: value %s", part, p)
		}
		sel = append(sel, r)
	}
	return sel, nil
}

// Matches reports whether labels l satisfy every requirement of s.
func (s Selector) Matches(l Labels) bool {
	for _, r := range s {
		v, ok := l[r.Key]
		switch r.Op {
		case OpEquals:
			if !ok || v != r.Value {
				return false
			}
		case OpNotEquals:
			if ok && v == r.Value {
				return false
			}
		case OpExists:
			if !ok {
				return false
			}
		case OpNotExists:
			if ok {
				return false
			}
		case OpIn:
			if !ok || !slices.Contains(r.Values, v) {
				return false
			}
		case OpNotIn:
			if ok && slices.Contains(r.Values, v) {
				return false
			}
		}
	}
	return true
}

// splitSelector splits a selector at the commas between its
// requirements, not at those inside a set's parentheses.
func splitSelector(s string) ([]string, error) {
	var (
		parts []string
		depth int
		start int
	)
	for i, c := range s {
		switch c {
		case '(':
			if depth++; depth > 1 {
				return nil, fmt.Errorf("%q: nested parentheses", s)
			}
		case ')':
			if depth--; depth < 0 {
				return nil, fmt.Errorf("%q: a ')' without its '('", s)
			}
		case ',':
			if depth == 0 {
				parts = append(parts, s[start:i])
				start = i + 1
			}
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("%q: a '(' without its ')'", s)
	}
	return append(parts, s[start:]), nil
}
