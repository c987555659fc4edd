package api

import (
	"bytes"
	"encoding/json"
	"sort"
	"strconv"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/google/uuid"
)

// checkShape checks raw against the OpenAPI schema s, the way the
// document describes it: JSON types, required properties, unknown
// properties (where additionalProperties is false), nulls and the
// date-time and uuid formats. It reports each mismatch under its dotted
// path so that the client learns which field is wrong, which neither
// encoding/json nor a generic schema validator says plainly. Value rules
// (lengths, patterns, ranges) are the handlers' business, with messages
// of their own.
func checkShape(path string, s *openapi3.Schema, raw json.RawMessage, errs *fieldErrors) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		errs.add(path, "is required")
		return
	}
	if bytes.Equal(raw, []byte("null")) {
		if !s.Nullable {
			errs.add(path, "must not be null")
		}
		return
	}
	t := s.Type
	switch {
	case t.Is(openapi3.TypeObject):
		if raw[0] != '{' {
			errs.add(path, "must be an object")
			return
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
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
				checkShape(join(path, k), p.Value, m[k], errs)
			case s.AdditionalProperties.Schema != nil && s.AdditionalProperties.Schema.Value != nil:
				checkShape(join(path, k), s.AdditionalProperties.Schema.Value, m[k], errs)
			case s.AdditionalProperties.Has != nil && !*s.AdditionalProperties.Has:
				errs.add(join(path, k), "unknown field")
			}
		}
	case t.Is(openapi3.TypeArray):
		var items []json.RawMessage
		if raw[0] != '[' || json.Unmarshal(raw, &items) != nil {
			errs.add(path, "must be an array")
			return
		}
		if s.Items == nil || s.Items.Value == nil {
			return
		}
		for i, item := range items {
			checkShape(path+"["+strconv.Itoa(i)+"]", s.Items.Value, item, errs)
		}
	case t.Is(openapi3.TypeString):
		var v string
		if raw[0] != '"' || json.Unmarshal(raw, &v) != nil {
			errs.add(path, "must be a string")
			return
		}
		switch s.Format {
		case "date-time":
			if _, err := time.Parse(time.RFC3339, v); err != nil {
				errs.add(path, "must be an RFC 3339 time such as 2026-12-01T09:00:00Z")
			}
		case "uuid":
			if _, err := uuid.Parse(v); err != nil {
				errs.add(path, "must be a UUID")
			}
		}
	case t.Is(openapi3.TypeInteger):
		if _, err := strconv.ParseInt(string(raw), 10, 64); err != nil {
			errs.add(path, "must be an integer")
		}
	case t.Is(openapi3.TypeNumber):
		var n json.Number
		if raw[0] == '"' || json.Unmarshal(raw, &n) != nil {
			errs.add(path, "must be a number")
		}
	case t.Is(openapi3.TypeBoolean):
		if !bytes.Equal(raw, []byte("true")) && !bytes.Equal(raw, []byte("false")) {
			errs.add(path, "must be true or false")
		}
	}
	// No type: any JSON value.
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
