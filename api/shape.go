package api

import (
	"bytes"
	"encoding/json"
	"sort"
	"strconv"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/google/uuid"

	"github.com/tock-sched/tock/domain"
)

// checkShape checks raw against the OpenAPI schema s, the way the
// document describes it: JSON types, required properties, unknown
// properties (where additionalProperties is false), nulls and the
// date-time and uuid formats. It reports each mismatch under its dotted
// path so that the client learns which field is wrong, which neither
// encoding/json nor a generic schema validator says plainly. Value rules
// (lengths, patterns, ranges) are the endpoints' business, with messages
// of their own.
//
// raw is parsed once and the tree walked: parsing each nested object
// again on the way down cost a batch of 1,000 jobs a fifth of the API's
// CPU.
func checkShape(path string, s *openapi3.Schema, raw json.RawMessage, errs *fieldErrors) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		errs.add(path, "is required")
		return
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber() // numbers keep their text, so that 2.5 is not an integer
	var v any
	if err := d.Decode(&v); err != nil {
		errs.add(path, "is not valid JSON")
		return
	}
	checkValue(path, s, v, errs)
	// Postgres stores no U+0000, no lone surrogate, no invalid UTF-8 and
	// no number beyond numeric's range in text or jsonb; encoding/json
	// lets them all through (the last three as U+FFFD or as text). A
	// value holding one is refused here, where the fault can be named,
	// rather than by the database.
	if _, faults := domain.CheckJSON(raw); len(faults) > 0 {
		for _, f := range faults {
			errs.add(domain.JoinJSONPath(path, f.Path), "%s", f.Message)
		}
	}
}

// checkValue checks a parsed JSON value (as decoded into any, with
// UseNumber) against s.
func checkValue(path string, s *openapi3.Schema, v any, errs *fieldErrors) {
	if len(s.AnyOf) > 0 {
		// Any of the alternatives (the payload's "any JSON value, or
		// null"): the value is fine if one takes it.
		var first fieldErrors
		for i, alt := range s.AnyOf {
			if alt.Value == nil {
				continue
			}
			var e fieldErrors
			checkValue(path, alt.Value, v, &e)
			if len(e) == 0 {
				return
			}
			if i == 0 {
				first = e
			}
		}
		*errs = append(*errs, first...)
		return
	}
	if v == nil {
		if !s.Nullable {
			errs.add(path, "must not be null")
		}
		return
	}
	t := s.Type
	switch {
	case t.Is(openapi3.TypeObject):
		m, ok := v.(map[string]any)
		if !ok {
			errs.add(path, "must be an object")
			return
		}
		for _, req := range s.Required {
			if _, ok := m[req]; !ok {
				errs.add(join(path, req), "is required")
			}
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			switch p := s.Properties[k]; {
			case p != nil && p.Value != nil:
				checkValue(join(path, k), p.Value, m[k], errs)
			case s.AdditionalProperties.Schema != nil && s.AdditionalProperties.Schema.Value != nil:
				checkValue(join(path, k), s.AdditionalProperties.Schema.Value, m[k], errs)
			case s.AdditionalProperties.Has != nil && !*s.AdditionalProperties.Has:
				errs.add(join(path, k), "unknown field")
			}
		}
	case t.Is(openapi3.TypeArray):
		items, ok := v.([]any)
		if !ok {
			errs.add(path, "must be an array")
			return
		}
		if s.Items == nil || s.Items.Value == nil {
			return
		}
		for i, item := range items {
			checkValue(path+"["+strconv.Itoa(i)+"]", s.Items.Value, item, errs)
		}
	case t.Is(openapi3.TypeString):
		str, ok := v.(string)
		if !ok {
			errs.add(path, "must be a string")
			return
		}
		switch s.Format {
		case "date-time":
			if _, err := time.Parse(time.RFC3339, str); err != nil {
				errs.add(path, "must be an RFC 3339 time such as 2026-12-01T09:00:00Z")
			}
		case "uuid":
			if _, err := uuid.Parse(str); err != nil {
				errs.add(path, "must be a UUID")
			}
		}
	case t.Is(openapi3.TypeInteger):
		n, ok := v.(json.Number)
		if _, err := strconv.ParseInt(string(n), 10, 64); !ok || err != nil {
			errs.add(path, "must be an integer")
		}
	case t.Is(openapi3.TypeNumber):
		if _, ok := v.(json.Number); !ok {
			errs.add(path, "must be a number")
		}
	case t.Is(openapi3.TypeBoolean):
		if _, ok := v.(bool); !ok {
			errs.add(path, "must be true or false")
		}
	}
	// No type: any JSON value.
}

// join names member key of the value at path; an empty key is shown as
// "", so that the field a fault names is never empty.
func join(path, key string) string {
	if key == "" {
		key = `""`
	}
	if path == "" {
		return key
	}
	return path + "." + key
}
