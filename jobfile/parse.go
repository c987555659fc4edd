// Package jobfile reads and writes jobs kept as code: YAML or JSON files
// holding the bodies POST /v1/jobs takes, checked strictly against the
// API's schema, with secret headers written as references, never values.
package jobfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/domain"
)

// Error is one thing wrong in a file: where it is and what.
type Error struct {
	File string // the name given to Parse
	Line int    // 1-based
	Path string // the field, as jobs[1].retry.max_attempts
	Msg  string
}

func (e *Error) Error() string {
	if e.Path == "" {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s:%d: %s: %s", e.File, e.Line, e.Path, e.Msg)
}

// parsed is a job of a file with where it starts.
type parsed struct {
	job  models.JobCreate
	file string
	line int
}

// Parse reads the jobs of one file: name is the file's name, used in
// errors and to tell JSON (".json") from YAML (anything else). A YAML
// file holds one job per document, or a list of jobs; a JSON file an
// object or an array. A job has exactly the fields of POST /v1/jobs'
// body: an unknown field, a value of the wrong type or enum, or a
// literal secret is an error naming the file, line and field; every such
// error of the file is reported, joined.
//
// A secret header's reference ({env: VAR} or {file: PATH}) is kept in the
// job as an opaque value that Resolve replaces with the secret; the API
// refuses it if sent unresolved (it holds a NUL byte).
func Parse(name string, data []byte) ([]models.JobCreate, error) {
	ps, err := parse(name, data)
	if err != nil {
		return nil, err
	}
	jobs := make([]models.JobCreate, len(ps))
	for i, p := range ps {
		jobs[i] = p.job
	}
	return jobs, nil
}

func parse(name string, data []byte) ([]parsed, error) {
	if strings.EqualFold(pathExt(name), ".json") {
		// yaml.v3 reads JSON too (with line numbers), but also what JSON
		// is not: a .json file must be JSON.
		if err := checkJSON(name, data); err != nil {
			return nil, err
		}
	}
	var roots []*yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, errEOF) {
			break
		}
		if err != nil {
			return nil, yamlError(name, err)
		}
		if len(doc.Content) == 0 {
			continue
		}
		root := doc.Content[0]
		switch {
		case root.Kind == yaml.ScalarNode && root.Tag == "!!null":
			continue // an empty document
		case root.Kind == yaml.SequenceNode:
			roots = append(roots, root.Content...)
		default:
			roots = append(roots, root)
		}
	}
	p := &parser{file: name}
	var out []parsed
	for i, n := range roots {
		path := fmt.Sprintf("jobs[%d]", i)
		var buf bytes.Buffer
		before := len(p.errs)
		p.value(n, reflect.TypeOf(models.JobCreate{}), path, &buf)
		if len(p.errs) > before {
			continue
		}
		var job models.JobCreate
		d := json.NewDecoder(&buf)
		d.DisallowUnknownFields()
		if err := d.Decode(&job); err != nil {
			// The walk checked what the decoder does; this is a bug.
			p.fail(n, path, fmt.Sprintf("decode: %v", err))
			continue
		}
		out = append(out, parsed{job: job, file: name, line: n.Line})
	}
	if len(p.errs) > 0 {
		return nil, errors.Join(p.errs...)
	}
	return out, nil
}

// errEOF is what yaml.v3's decoder ends with.
var errEOF = func() error {
	var n yaml.Node
	return yaml.NewDecoder(bytes.NewReader(nil)).Decode(&n)
}()

// checkJSON reports where data is not JSON.
func checkJSON(name string, data []byte) error {
	var v any
	err := json.Unmarshal(data, &v)
	if err == nil {
		return nil
	}
	var se *json.SyntaxError
	off := int64(len(data))
	if errors.As(err, &se) {
		off = se.Offset
	}
	return &Error{File: name, Line: lineAt(data, off), Msg: "not JSON: " + err.Error()}
}

func lineAt(data []byte, off int64) int {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	return bytes.Count(data[:off], []byte("\n")) + 1
}

// yamlError turns yaml.v3's "yaml: line 3: ..." into file:3: ...
func yamlError(name string, err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 1
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if num, after, ok := strings.Cut(rest, ": "); ok {
			if n, err := strconv.Atoi(num); err == nil {
				line, msg = n, after
			}
		}
	}
	return &Error{File: name, Line: line, Msg: "not YAML: " + msg}
}

// parser walks a job's nodes against the API's Go types, writing the
// job as JSON and collecting what is wrong.
type parser struct {
	file string
	errs []error
}

func (p *parser) fail(n *yaml.Node, path, msg string) {
	p.errs = append(p.errs, &Error{File: p.file, Line: n.Line, Path: path, Msg: msg})
}

var (
	timeType = reflect.TypeOf(time.Time{})
	rawType  = reflect.TypeOf(json.RawMessage{})
)

// enum is what the generated enum types have.
type enum interface{ Valid() bool }

// value checks n against t and writes it as JSON to buf.
func (p *parser) value(n *yaml.Node, t reflect.Type, path string, buf *bytes.Buffer) {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case strings.HasSuffix(path, ".handler.secret_headers"):
		p.secretHeaders(n, path, buf)
		return
	case strings.HasSuffix(path, ".depends_match"):
		p.dependsMatch(n, path, buf)
		return
	case t == rawType:
		p.anyJSON(n, path, buf)
		return
	case t == timeType:
		if !p.scalar(n, path, "an RFC 3339 time", "!!str", "!!timestamp") {
			return
		}
		if _, err := time.Parse(time.RFC3339, n.Value); err != nil {
			p.fail(n, path, fmt.Sprintf("%q is not an RFC 3339 time (as 2026-07-01T09:00:00Z)", n.Value))
			return
		}
		writeString(buf, n.Value)
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		p.object(n, t, path, buf)
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			p.fail(n, path, "expected a mapping of names to "+kindName(t.Elem())+", got "+nodeKind(n))
			return
		}
		buf.WriteByte('{')
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			kp := path + "." + k.Value
			if k.Kind != yaml.ScalarNode {
				p.fail(k, path, "a key must be a string")
				continue
			}
			if seen[k.Value] {
				p.fail(k, kp, "repeated")
				continue
			}
			seen[k.Value] = true
			if strings.HasSuffix(path, ".handler.headers") && domain.SensitiveHeader(k.Value) {
				p.fail(k, kp, "looks like a credential, which a file must not hold: move it to secret_headers as {env: VARIABLE} or {file: PATH}")
				continue
			}
			if buf.Len() > 0 && buf.Bytes()[buf.Len()-1] != '{' {
				buf.WriteByte(',')
			}
			writeString(buf, k.Value)
			buf.WriteByte(':')
			p.value(v, t.Elem(), kp, buf)
		}
		buf.WriteByte('}')
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			p.fail(n, path, "expected a list, got "+nodeKind(n))
			return
		}
		buf.WriteByte('[')
		for i, v := range n.Content {
			if i > 0 {
				buf.WriteByte(',')
			}
			p.value(v, t.Elem(), fmt.Sprintf("%s[%d]", path, i), buf)
		}
		buf.WriteByte(']')
	case reflect.String:
		if !p.scalar(n, path, "a string", "!!str") {
			return
		}
		if e, ok := reflect.ValueOf(n.Value).Convert(t).Interface().(enum); ok && !e.Valid() {
			p.fail(n, path, fmt.Sprintf("%q is not one of %s", n.Value, enumValues(t)))
			return
		}
		writeString(buf, n.Value)
	case reflect.Bool:
		var b bool
		if !p.scalar(n, path, "true or false", "!!bool") || n.Decode(&b) != nil {
			return
		}
		buf.WriteString(strconv.FormatBool(b))
	case reflect.Int, reflect.Int64:
		var i int64
		if !p.scalar(n, path, "an integer", "!!int") {
			return
		}
		if err := n.Decode(&i); err != nil {
			p.fail(n, path, fmt.Sprintf("%s is out of range", n.Value))
			return
		}
		buf.WriteString(strconv.FormatInt(i, 10))
	case reflect.Float64:
		if p.scalar(n, path, "a number", "!!int", "!!float") {
			p.number(buf, n, path)
		}
	default:
		p.fail(n, path, "unsupported field type "+t.String())
	}
}

// object checks a mapping against a struct's JSON fields.
func (p *parser) object(n *yaml.Node, t reflect.Type, path string, buf *bytes.Buffer) {
	if n.Kind != yaml.MappingNode {
		what := "an object"
		if t == reflect.TypeOf(models.JobCreate{}) {
			what = "a job (a mapping)"
		}
		p.fail(n, path, "expected "+what+", got "+nodeKind(n))
		return
	}
	fields := jsonFields(t)
	seen := map[string]bool{}
	buf.WriteByte('{')
	first := true
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		kp := path + "." + k.Value
		f, ok := fields[k.Value]
		switch {
		case k.Kind != yaml.ScalarNode:
			p.fail(k, path, "a key must be a string")
			continue
		case !ok:
			p.fail(k, kp, "unknown field")
			continue
		case seen[k.Value]:
			p.fail(k, kp, "repeated")
			continue
		}
		seen[k.Value] = true
		if v.Kind == yaml.ScalarNode && v.Tag == "!!null" && f.Type.Kind() == reflect.Pointer {
			continue // null is absent
		}
		if !first {
			buf.WriteByte(',')
		}
		first = false
		writeString(buf, k.Value)
		buf.WriteByte(':')
		p.value(v, f.Type, kp, buf)
	}
	buf.WriteByte('}')
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		f := fields[name]
		if f.Type.Kind() != reflect.Pointer && !seen[name] {
			p.fail(n, path, fmt.Sprintf("%s is required", name))
		}
	}
}

// scalar reports whether n is a scalar with one of tags, failing if not.
func (p *parser) scalar(n *yaml.Node, path, want string, tags ...string) bool {
	if n.Kind == yaml.ScalarNode {
		for _, t := range tags {
			if n.Tag == t {
				return true
			}
		}
	}
	p.fail(n, path, "expected "+want+", got "+nodeKind(n))
	return false
}

// secretHeaders reads handler.secret_headers: each value a reference.
func (p *parser) secretHeaders(n *yaml.Node, path string, buf *bytes.Buffer) {
	if n.Kind != yaml.MappingNode {
		p.fail(n, path, "expected a mapping of header names to {env: VARIABLE} or {file: PATH}, got "+nodeKind(n))
		return
	}
	buf.WriteByte('{')
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		kp := path + "." + k.Value
		if v.Kind == yaml.AliasNode {
			v = v.Alias
		}
		if seen[k.Value] {
			p.fail(k, kp, "repeated")
			continue
		}
		seen[k.Value] = true
		if v.Kind == yaml.ScalarNode {
			p.fail(v, kp, "a literal secret, which a file must not hold: write {env: VARIABLE} or {file: PATH} and set the value there")
			continue
		}
		ref, ok := p.secretRef(v, kp)
		if !ok {
			continue
		}
		ref.file, ref.line = p.file, v.Line
		if i > 0 {
			buf.WriteByte(',')
		}
		writeString(buf, k.Value)
		buf.WriteByte(':')
		writeString(buf, ref.encode())
	}
	buf.WriteByte('}')
}

func (p *parser) secretRef(n *yaml.Node, path string) (SecretRef, bool) {
	var ref SecretRef
	if n.Kind != yaml.MappingNode {
		p.fail(n, path, "expected {env: VARIABLE} or {file: PATH}, got "+nodeKind(n))
		return ref, false
	}
	ok := true
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		kp := path + "." + k.Value
		var dst *string
		switch k.Value {
		case "env":
			dst = &ref.Env
		case "file":
			dst = &ref.File
		default:
			p.fail(k, kp, "unknown field (a secret reference is {env: VARIABLE} or {file: PATH})")
			ok = false
			continue
		}
		if !p.scalar(v, kp, "a string", "!!str") {
			ok = false
			continue
		}
		if v.Value == "" {
			p.fail(v, kp, "empty")
			ok = false
			continue
		}
		*dst = v.Value
	}
	if ok && (ref.Env == "") == (ref.File == "") {
		p.fail(n, path, "a secret reference has one of env and file")
		ok = false
	}
	return ref, ok
}

// dependsMatch reads depends_match: "same_time" or {latest_within: D}.
func (p *parser) dependsMatch(n *yaml.Node, path string, buf *bytes.Buffer) {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	switch {
	case n.Kind == yaml.ScalarNode && n.Tag == "!!str" && n.Value == "same_time":
		writeString(buf, n.Value)
	case n.Kind == yaml.MappingNode:
		type latest struct {
			LatestWithin string `json:"latest_within"`
		}
		p.object(n, reflect.TypeOf(latest{}), path, buf)
	default:
		p.fail(n, path, `expected "same_time" or {latest_within: DURATION}, got `+nodeKind(n))
	}
}

// anyJSON writes any value (a payload), keeping the order of its keys.
func (p *parser) anyJSON(n *yaml.Node, path string, buf *bytes.Buffer) {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	switch n.Kind {
	case yaml.MappingNode:
		buf.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode {
				p.fail(k, path, "a key must be a string")
				continue
			}
			if i > 0 {
				buf.WriteByte(',')
			}
			writeString(buf, k.Value)
			buf.WriteByte(':')
			p.anyJSON(n.Content[i+1], path+"."+k.Value, buf)
		}
		buf.WriteByte('}')
	case yaml.SequenceNode:
		buf.WriteByte('[')
		for i, v := range n.Content {
			if i > 0 {
				buf.WriteByte(',')
			}
			p.anyJSON(v, fmt.Sprintf("%s[%d]", path, i), buf)
		}
		buf.WriteByte(']')
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!null":
			buf.WriteString("null")
		case "!!bool":
			var b bool
			_ = n.Decode(&b)
			buf.WriteString(strconv.FormatBool(b))
		case "!!int", "!!float":
			if json.Valid([]byte(n.Value)) {
				buf.WriteString(n.Value) // as written: 1e3 stays 1e3
				return
			}
			p.number(buf, n, path)
		default:
			writeString(buf, n.Value)
		}
	default:
		p.fail(n, path, "unsupported YAML node")
	}
}

// jsonFields are a struct's fields by JSON name.
func jsonFields(t reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out[name] = f
		}
	}
	return out
}

// number writes YAML number n as JSON's, or fails it (NaN, infinities).
func (p *parser) number(buf *bytes.Buffer, n *yaml.Node, path string) {
	var f float64
	b, err := []byte(nil), n.Decode(&f)
	if err == nil {
		b, err = json.Marshal(f)
	}
	if err != nil {
		p.fail(n, path, fmt.Sprintf("%s is not a number JSON can hold", n.Value))
		return
	}
	buf.Write(b)
}

func writeString(buf *bytes.Buffer, s string) {
	b, _ := json.Marshal(s)
	buf.Write(b)
}

// nodeKind names what a node is, for "expected X, got Y".
func nodeKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!str":
			return fmt.Sprintf("the string %q", n.Value)
		case "!!int":
			return "the integer " + n.Value
		case "!!float":
			return "the number " + n.Value
		case "!!bool":
			return n.Value
		case "!!null":
			return "null"
		case "!!timestamp":
			return "the time " + n.Value
		}
		return n.Value
	}
	return "a YAML node"
}

func kindName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "strings"
	default:
		return "values"
	}
}

// enumValues lists an enum type's values, from its generated Valid.
func enumValues(t reflect.Type) string {
	vals, ok := enums[t]
	if !ok {
		return "its values"
	}
	return strings.Join(vals, ", ")
}

// enums are the values of the enum types a job create body uses, as the
// OpenAPI document lists them.
var enums = map[reflect.Type][]string{
	reflect.TypeOf(models.HandlerType("")):              {"http", "nats", "custom"},
	reflect.TypeOf(models.Priority("")):                 {"high", "normal", "low"},
	reflect.TypeOf(models.Overlap("")):                  {"allow", "skip", "buffer_one", "cancel_running"},
	reflect.TypeOf(models.OnExcluded("")):               {"skip", "next_allowed"},
	reflect.TypeOf(models.MissedPolicyPolicy("")):       {"skip", "latest", "all"},
	reflect.TypeOf(models.RetryPolicyJitter("")):        {"full", "equal", "none"},
	reflect.TypeOf(models.LogPolicyPolicy("")):          {"head_tail", "head", "fail"},
	reflect.TypeOf(models.DependsOnOn("")):              {"success", "failure", "any"},
	reflect.TypeOf(models.DependsMode("")):              {"all", "any"},
	reflect.TypeOf(models.DependsOnTimeout("")):         {"skip", "run"},
	reflect.TypeOf(models.DependsOnUpstreamSkipped("")): {"skip", "run"},
	reflect.TypeOf(models.ConcurrencyScope("")):         {"namespace", "cluster"},
	reflect.TypeOf(models.ConcurrencyOnLimit("")):       {"wait", "skip", "cancel_oldest"},
	reflect.TypeOf(models.RateLimitOnLimit("")):         {"wait", "skip"},
}

func pathExt(name string) string {
	i := strings.LastIndexByte(name, '.')
	if i < 0 || strings.ContainsAny(name[i:], `/\`) {
		return ""
	}
	return name[i:]
}
