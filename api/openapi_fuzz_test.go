package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/google/uuid"
	"golang.org/x/net/http/httpguts"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/changes"
	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/internal/testenv"
	"github.com/tock-sched/tock/partition"
	"github.com/tock-sched/tock/store/model"
	"github.com/tock-sched/tock/wire"
)

// TestOpenAPIFuzzNo5xx sends every operation of openapi.yaml requests
// made from the document: valid ones, then ones with a path, query or
// header parameter or a member of the JSON body replaced by a boundary
// or bad value, a member left out or one added, the body cut short or
// of the wrong kind, the key missing or bad. The server has every
// backend up (Postgres, NATS, etcd), so whatever it is sent it must
// never answer 5xx, and every 4xx must be a problem+json whose 400s name
// the faulty field. The seed is fixed: a run sends the same requests
// (but for the fixtures' ids and the time) every time.
func TestOpenAPIFuzzNo5xx(t *testing.T) {
	t.Parallel()
	start := time.Now()
	fz := newSpecFuzzer(t)
	ops := specOperations(t)
	setup := time.Since(start)
	for _, op := range ops {
		fz.fuzz(op)
	}
	fz.report(t, ops, setup, time.Since(start))
}

// fuzzSeed seeds each operation's generator, with the operation's id.
const fuzzSeed = 37

// An operation gets its valid requests, the changes of the request as a
// whole, coreStrings in each parameter, and a sample of the other
// changes of one parameter or body member: fuzzBase plus fuzzPerTarget
// for each parameter and member, at most fuzzCap. About 5,700 requests
// in all: 10 s on two idle cores with the race detector.
const (
	fuzzBase      = 40
	fuzzPerTarget = 12
	fuzzCap       = 300
)

// fuzzTimeout bounds one request. The change feed's stream is not read:
// its headers are its answer.
const fuzzTimeout = 15 * time.Second

// specOp is one operation of the document, as the fuzzer reads it.
type specOp struct {
	id, method, path string
	params           []*openapi3.Parameter
	// body is the schema of its JSON request body (nil: none), bodyName
	// that schema's name among the components.
	body     *openapi3.Schema
	bodyName string
}

// specOperations reads the operations of openapi.yaml, ordered by path
// and method, the deletes last (they use up the fixtures the others
// name).
func specOperations(t *testing.T) []*specOp {
	t.Helper()
	doc, err := specDoc()
	if err != nil {
		t.Fatal(err)
	}
	var ops []*specOp
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			o := &specOp{id: op.OperationID, method: method, path: path}
			own := map[string]bool{}
			for _, p := range op.Parameters {
				o.params = append(o.params, p.Value)
				own[p.Value.In+" "+p.Value.Name] = true
			}
			for _, p := range item.Parameters {
				if !own[p.Value.In+" "+p.Value.Name] {
					o.params = append(o.params, p.Value)
				}
			}
			if rb := op.RequestBody; rb != nil && rb.Value != nil {
				if mt := rb.Value.Content.Get("application/json"); mt != nil && mt.Schema != nil {
					o.body = mt.Schema.Value
					o.bodyName = mt.Schema.Ref[strings.LastIndex(mt.Schema.Ref, "/")+1:]
				}
			}
			ops = append(ops, o)
		}
	}
	sort.Slice(ops, func(i, j int) bool {
		a, b := ops[i], ops[j]
		if (a.method == http.MethodDelete) != (b.method == http.MethodDelete) {
			return b.method == http.MethodDelete
		}
		return a.path+" "+a.method < b.path+" "+b.method
	})
	if len(ops) < 50 {
		t.Fatalf("only %d operations in openapi.yaml", len(ops))
	}
	return ops
}

// specFuzzer is a server with every backend up, the fixtures that valid
// requests name, and what the requests got.
type specFuzzer struct {
	a      *authEnv
	client *http.Client
	ns     string              // the fixtures' namespace
	fx     map[string][]string // fixture ids by kind (job, execution, …; see idKind)

	mu       sync.Mutex
	statuses map[string]map[int]int // by operation id
	took     map[string]time.Duration
	sent     int
	faults   []string
}

func newSpecFuzzer(t *testing.T) *specFuzzer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	js := testenv.JetStream(t)
	if err := wire.EnsureStreams(ctx, js); err != nil {
		t.Fatal(err)
	}
	if err := wire.EnsureChangeStream(ctx, js, 1); err != nil {
		t.Fatal(err)
	}
	cli, _ := etcdClient(t)
	a := newAuthEnv(t, func(c *Config) {
		c.Executors = JetStreamExecutors{JS: js}
		c.Changes = changes.NewFeed(js, nil)
		c.Cluster = partition.NewObserver(cli, "t")
	})
	runNode(t, cli, a.store, "node-a", true)
	f := &specFuzzer{a: a, client: a.http.Client(), ns: "team-a", statuses: map[string]map[int]int{}, took: map[string]time.Duration{}}
	f.fixtures(t)
	return f
}

// fixtures makes, in namespace f.ns, what the valid requests name: two
// jobs, a queued execution and a dead one, a backfill, a channel, a
// rule, a notification and a key (not the fuzzer's own, which it must
// not delete).
func (f *specFuzzer) fixtures(t *testing.T) {
	t.Helper()
	a := f.a
	job := a.fixtureJob(f.ns)
	dead := a.fixtureExecution(f.ns)
	a.finish(uuid.MustParse(dead), domain.EventFailed, true)
	f.fx = map[string][]string{"job": {job, a.fixtureJob(f.ns)}, "execution": {a.fixtureExecution(f.ns), dead}}
	r := a.as(a.admin, "POST", "/v1/jobs/"+job+"/backfill", map[string]any{
		"from": time.Now().Add(-48 * time.Hour).UTC().Format(time.RFC3339),
		"to":   time.Now().Add(-24 * time.Hour).UTC().Format(time.RFC3339)})
	mustStatus(t, r, http.StatusAccepted)
	var b models.Backfill
	r.decode(t, &b)
	f.fx["backfill"] = []string{b.Id.String()}
	channel := a.fixtureChannel(f.ns)
	rule := a.fixtureRule(f.ns)
	n := insertNotification(t, a.store, model.Notification{Namespace: f.ns, State: "sent",
		RuleID: uuid.MustParse(rule), ChannelID: uuid.MustParse(channel)})
	f.fx["channel"], f.fx["rule"], f.fx["notification"] = []string{channel}, []string{rule}, []string{n.ID.String()}
	r = a.as(a.admin, "POST", "/v1/keys", map[string]any{"namespace": f.ns, "role": "reader"})
	mustStatus(t, r, http.StatusCreated)
	var k models.KeyCreated
	r.decode(t, &k)
	f.fx["key"] = []string{k.Id}
}

// idKind is the kind of fixture whose id a parameter or body member
// named name of an operation on path holds ("" if none).
func idKind(path, name string) string {
	switch name {
	case "job_id":
		return "job"
	case "rule_id":
		return "rule"
	case "execution_id":
		return "execution"
	case "backfill_id":
		return "backfill"
	case "key_id":
		return "key"
	case "channel_id", "channels":
		return "channel"
	case "id":
		for _, p := range [][2]string{{"/v1/jobs/", "job"}, {"/v1/executions/", "execution"},
			{"/v1/notification-channels/", "channel"}, {"/v1/notification-rules/", "rule"}, {"/v1/notifications/", "notification"}} {
			if strings.HasPrefix(path, p[0]) {
				return p[1]
			}
		}
	}
	return ""
}

// fuzzReq is one request of an operation.
type fuzzReq struct {
	what   string            // what it tries, for reports
	path   map[string]string // path parameters, unescaped
	query  []string          // name=value, as sent
	header http.Header
	body   []byte // nil: none
	ctype  string // the body's Content-Type
	noKey  bool   // without the fuzzer's admin key
	// tree is the body as a value (maps, slices, json.RawMessage…),
	// if it is JSON the fuzzer made; nil otherwise.
	tree any
}

func (r fuzzReq) clone(what string) fuzzReq {
	c := r
	c.what = what
	c.path = maps.Clone(r.path)
	c.query = slices.Clone(r.query)
	c.header = r.header.Clone()
	if c.header == nil {
		c.header = http.Header{}
	}
	return c
}

// withTree is r with body tree.
func (r fuzzReq) withTree(what string, tree any) fuzzReq {
	c := r.clone(what)
	raw, err := json.Marshal(tree)
	if err != nil {
		panic(fmt.Sprintf("%s: %v", what, err)) // a bug of the fuzzer's
	}
	c.body, c.ctype, c.tree = raw, "application/json", tree
	return c
}

// gen makes the requests of one operation.
type gen struct {
	rng   *rand.Rand
	op    *specOp
	f     *specFuzzer
	names int // names made, for new ones
	now   time.Time
}

// fuzz sends op its valid requests, then the requests made by changing
// one thing of the first valid one it took (or of the first, if it took
// none), each on one of two connections.
func (f *specFuzzer) fuzz(op *specOp) {
	start := time.Now()
	defer func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.took[op.id] = time.Since(start)
	}()
	seed := uint64(0)
	for _, c := range op.id {
		seed = seed*31 + uint64(c)
	}
	g := &gen{rng: rand.New(rand.NewPCG(fuzzSeed, seed)), op: op, f: f, now: time.Now().UTC().Truncate(time.Second)}
	valid := g.validRequests()
	base, taken := valid[0], false
	for _, r := range valid {
		if status := f.send(op, r); status >= 200 && status < 300 && !taken {
			base, taken = r, true
		}
	}
	always, sampled, targets := g.mutations(base)
	g.rng.Shuffle(len(sampled), func(i, j int) { sampled[i], sampled[j] = sampled[j], sampled[i] })
	n := min(fuzzBase+fuzzPerTarget*targets, fuzzCap, len(sampled))
	work := make(chan fuzzReq)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for r := range work {
				f.send(op, r)
			}
		})
	}
	for _, r := range append(always, sampled[:n]...) {
		work <- r
	}
	close(work)
	wg.Wait()
}

// validRequests are requests of g.op the document allows: with its
// required parameters (naming each fixture of its kind in turn: a
// retry takes only a dead execution), and with every parameter; the
// body with its required members, with every member, and the one known
// to be taken.
func (g *gen) validRequests() []fuzzReq {
	var out []fuzzReq
	for _, all := range []bool{false, true} {
		r := fuzzReq{what: "valid", path: map[string]string{}, header: http.Header{}}
		if all {
			r.what = "valid, every parameter"
		}
		for _, p := range g.op.params {
			if p.Required || all {
				g.setParam(&r, p, g.validParam(p))
			}
		}
		rs := []fuzzReq{r}
		for _, p := range g.op.params {
			if ids := g.f.fx[idKind(g.op.path, p.Name)]; p.In == openapi3.ParameterInPath && len(ids) > 1 && !all {
				rs = nil
				for _, id := range ids {
					c := r.clone(r.what)
					c.path[p.Name] = id
					rs = append(rs, c)
				}
			}
		}
		for _, r := range rs {
			if g.op.body == nil {
				out = append(out, r)
				continue
			}
			if good := g.knownGood(); good != nil && !all {
				out = append(out, r.withTree(r.what+", body known good", good))
			}
			out = append(out, r.withTree(r.what, g.valid(g.op.body, "", all, 0)))
		}
	}
	return out
}

// knownGood is a body of g.op's schema that the server takes, or nil.
// The document cannot say all it takes: that a schedule has at most one
// of cron, at and in, or that a webhook needs a secret.
func (g *gen) knownGood() any {
	// The jobs made go to a namespace of their own: the bulk pause and
	// resume of the fixtures' namespace change a few jobs, not hundreds.
	job := func() map[string]any {
		b := jobBody(g.name())
		b["namespace"] = "made"
		return b
	}
	switch g.op.bodyName {
	case "JobCreate":
		return job()
	case "JobBatchCreate":
		return map[string]any{"jobs": []any{job()}}
	case "JobPatch":
		return map[string]any{"schedule": map[string]any{"cron": "@daily"}, "labels": map[string]any{"team": "payments"}}
	case "BackfillRequest":
		return map[string]any{"from": g.now.Add(-3 * time.Hour).Format(time.RFC3339), "to": g.now.Add(-time.Hour).Format(time.RFC3339)}
	case "PreviewRequest":
		return map[string]any{"schedule": map[string]any{"cron": "0 30 9 * * MON-FRI", "timezone": "Europe/Berlin"}, "count": 3}
	case "ChannelCreate":
		return channelBody(g.f.ns, g.name())
	case "RuleCreate":
		return ruleBody(g.f.ns, g.name(), g.f.fx["channel"][0])
	}
	return nil
}

// name is a name no request made before.
func (g *gen) name() string {
	g.names++
	return fmt.Sprintf("fuzz-%s-%d", strings.ToLower(g.op.id), g.names)
}

func (g *gen) uuid() string {
	var b [16]byte
	for i := range b {
		b[i] = byte(g.rng.UintN(256))
	}
	return uuid.Must(uuid.FromBytes(b[:])).String()
}

// validParam is a value of p the document allows.
func (g *gen) validParam(p *openapi3.Parameter) string {
	var s *openapi3.Schema
	if p.Schema != nil {
		s = p.Schema.Value
	}
	switch v := g.valid(s, p.Name, true, 0).(type) {
	case string:
		return v
	case []any: // form style: comma-separated
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = fmt.Sprint(e)
		}
		return strings.Join(parts, ",")
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	default:
		return fmt.Sprint(v)
	}
}

// valid is a value of schema s, for a member or parameter named name,
// that the document allows; full fills in optional members too.
func (g *gen) valid(s *openapi3.Schema, name string, full bool, depth int) any {
	if s == nil || depth > 6 {
		return "fuzz"
	}
	if alts := append(slices.Clone(s.OneOf), s.AnyOf...); len(alts) > 0 {
		return g.valid(alts[g.rng.IntN(len(alts))].Value, name, full, depth+1)
	}
	if len(s.AllOf) > 0 {
		m := map[string]any{}
		for _, sub := range s.AllOf {
			if o, ok := g.valid(sub.Value, name, full, depth+1).(map[string]any); ok {
				maps.Copy(m, o)
			}
		}
		return m
	}
	if len(s.Enum) > 0 {
		return s.Enum[g.rng.IntN(len(s.Enum))]
	}
	switch {
	case s.Type.Is(openapi3.TypeObject) || len(s.Properties) > 0:
		if len(s.Properties) == 0 && s.Example != nil {
			return s.Example
		}
		m := map[string]any{}
		for _, k := range slices.Sorted(maps.Keys(s.Properties)) {
			if full || slices.Contains(s.Required, k) {
				m[k] = g.valid(s.Properties[k].Value, k, full, depth+1)
			}
		}
		if ap := s.AdditionalProperties.Schema; ap != nil && len(s.Properties) == 0 && full {
			m["fuzz"] = g.valid(ap.Value, "fuzz", full, depth+1)
		}
		return m
	case s.Type.Is(openapi3.TypeArray):
		var items *openapi3.Schema
		if s.Items != nil {
			items = s.Items.Value
		}
		out := []any{}
		for range max(1, int(s.MinItems)) {
			out = append(out, g.valid(items, name, full, depth+1))
		}
		return out
	case s.Type.Is(openapi3.TypeInteger), s.Type.Is(openapi3.TypeNumber):
		if s.Example != nil {
			return s.Example
		}
		n := 1.0
		if s.Min != nil {
			n = max(n, *s.Min)
		}
		if s.Max != nil {
			n = min(n, *s.Max)
		}
		return n
	case s.Type.Is(openapi3.TypeBoolean):
		return g.rng.IntN(2) == 0
	}
	return g.validString(s, name)
}

// validString is a string of schema s for a member or parameter named
// name: a fixture's id, the fixtures' namespace, a new name, the
// schema's example, or text of its format and pattern.
func (g *gen) validString(s *openapi3.Schema, name string) string {
	if ids := g.f.fx[idKind(g.op.path, name)]; len(ids) > 0 {
		return ids[g.rng.IntN(len(ids))]
	}
	if name == "namespace" {
		return g.f.ns
	}
	if ex, ok := s.Example.(string); ok {
		return ex
	}
	v := "fuzz"
	switch {
	case name == "name":
		v = g.name()
	case s.Format == "uuid":
		v = g.uuid()
	case s.Format == "date-time":
		v = g.now.Add(time.Hour).Format(time.RFC3339)
	}
	if re, err := regexp.Compile(s.Pattern); err == nil && s.Pattern != "" && !re.MatchString(v) {
		for _, c := range []string{"fuzz-1", "fuzz", "a", "1"} {
			if re.MatchString(c) {
				v = c
				break
			}
		}
	}
	for uint64(len(v)) < s.MinLength {
		v += "x"
	}
	return v
}

// The values parameters and body members are tried with, whatever
// their type: what users mistype, what client libraries send for
// nothing, the edges of numbers, times and text, and what Postgres and
// NATS cannot take.
var (
	// coreStrings go to every parameter; badStrings to a sample.
	coreStrings = []string{"", " ", "ü", "\x00", "\xff", "-1", "99999999999999999999", strings.Repeat("ü", 5000)}
	badStrings  = []string{
		"\t", "日本", "\U0001F600", "a\x00b", "\xed\xa0\x80", "\u2028", "0", "1", "-9223372036854775809",
		"9223372036854775807", "1e1000000",
		"1.5", "NaN", "true", "null", "[]", "{}", "*", ">", "a.b", "a b", "a*b", "../..", "%", "'", "\"", "\\",
		"00000000-0000-0000-0000-000000000000", "ffffffff-ffff-ffff-ffff-ffffffffffff", "not-a-uuid",
		"3fa85f64-5717-4562-b3fc-2c963f66afa", "{3fa85f64-5717-4562-b3fc-2c963f66afa6}", " 3fa85f64-5717-4562-b3fc-2c963f66afa6 ",
		"1h", "-1h", "0s", "1e1000000s", "9999999999h", "2562047h48m", "30d", "-30d",
		"9999-12-31T23:59:59Z", "0000-01-01T00:00:00Z", "2026-02-30T00:00:00Z", "2026-11-23T09:00:00+01:00", "2026-11-23 09:00:00",
		strings.Repeat("a", 300),
	}
	// badJSON are JSON texts, each put where a member's value goes.
	badJSON = []string{
		`null`, `""`, `" "`, `"ü"`, `"\u0000"`, `"\ud800"`, `"a\u0000b"`, `0`, `-1`, `1.5`, `-0`, `1e1000000`, `-1e1000000`,
		`1e-1000000`, `9223372036854775808`, `-9223372036854775809`, `18446744073709551616`, `true`, `false`, `[]`, `[null]`,
		`{}`, `{"fuzz_unknown":1}`, `"not-a-uuid"`, `"00000000-0000-0000-0000-000000000000"`, `"-1h"`, `"1e1000000s"`,
		`"9999999999h"`, `"9999-12-31T23:59:59Z"`, `"0000-01-01T00:00:00Z"`, `"2026-02-30T00:00:00Z"`, `"*"`, `"a b"`,
		`"` + strings.Repeat("a", 300) + `"`, `"` + strings.Repeat("x", 70000) + `"`, `[` + strings.Repeat(`"a",`, 2000) + `"a"]`,
	}
	// badQueries are query text added to a request as it is.
	badQueries = []string{"%zz", "a=%", "=x", "&&&", "%00=1", "%FF=1", "a[b]=1", ";", "+", strings.Repeat("x=1&", 500) + "x=1"}
	// badKeys are Authorization headers that carry no key of the server's.
	badKeys = []string{"", "Bearer tock_ü", "Bearer " + strings.Repeat("x", 5000)}
)

// mutations are the requests made from base by changing one thing:
// always, those that change it as a whole (its body, its key, many
// of its parameters and members at once); sampled, those that change
// one parameter or body member, of which there are targets.
func (g *gen) mutations(base fuzzReq) (always, sampled []fuzzReq, targets int) {
	for _, k := range badKeys {
		r := base.clone(fmt.Sprintf("Authorization %.20q", k))
		r.noKey = true
		if k != "" {
			r.header.Set("Authorization", k)
		}
		always = append(always, r)
	}
	for range 3 {
		always = append(always, g.allBad(base))
	}
	for _, q := range badQueries {
		r := base.clone("query " + q)
		r.query = append(r.query, q)
		sampled = append(sampled, r)
	}
	for _, p := range g.op.params {
		targets++
		for _, v := range coreStrings {
			r := base.clone(fmt.Sprintf("%s %s=%q", p.In, p.Name, clip(v, 20)))
			g.setParam(&r, p, v)
			always = append(always, r)
		}
		for _, v := range g.paramValues(p) {
			r := base.clone(fmt.Sprintf("%s %s=%q", p.In, p.Name, clip(v, 20)))
			g.setParam(&r, p, v)
			sampled = append(sampled, r)
		}
		name := url.QueryEscape(p.Name)
		switch p.In {
		case openapi3.ParameterInQuery:
			for _, c := range []struct {
				what  string
				query []string
			}{
				{"twice", []string{name + "=" + url.QueryEscape(g.validParam(p)), name + "=x"}},
				{"without =", []string{name}},
				{"=%20", []string{name + "=%20"}},
			} {
				r := base.clone("query " + p.Name + " " + c.what)
				r.query = append(r.query, c.query...)
				sampled = append(sampled, r)
			}
		case openapi3.ParameterInHeader:
			r := base.clone("header " + p.Name + " twice")
			r.header[http.CanonicalHeaderKey(p.Name)] = []string{"a", "b"}
			sampled = append(sampled, r)
		}
	}
	if g.op.body == nil {
		r := base.clone("a body where none goes")
		r.body, r.ctype = []byte(`{"fuzz_unknown":1}`), "application/json"
		return append(always, r), sampled, targets
	}
	always = append(always, g.wholeBodies(base)...)
	members, n := g.memberChanges(base)
	return always, append(sampled, members...), targets + n
}

// allBad is base with each parameter and member, at random, replaced
// by a bad value: a problem naming many fields at once.
func (g *gen) allBad(base fuzzReq) fuzzReq {
	r := base.clone("many bad values")
	for _, p := range g.op.params {
		if g.rng.IntN(2) == 0 {
			g.setParam(&r, p, badStrings[g.rng.IntN(len(badStrings))]+coreStrings[g.rng.IntN(len(coreStrings))])
		}
	}
	if base.tree == nil {
		return r
	}
	tree := base.tree
	for _, p := range paths(base.tree, nil, 0) {
		if g.rng.IntN(3) == 0 {
			tree = setAt(tree, p, json.RawMessage(badJSON[g.rng.IntN(len(badJSON))]))
		}
	}
	return r.withTree(r.what, tree)
}

// paramValues are the values p is sampled from: badStrings, an unknown id
// and, by p's schema, the bounds of its numbers and lengths and its
// enum's values misspelt.
func (g *gen) paramValues(p *openapi3.Parameter) []string {
	vals := append(slices.Clone(badStrings), g.uuid())
	if p.Schema == nil || p.Schema.Value == nil {
		return vals
	}
	s := p.Schema.Value
	if s.Min != nil {
		vals = append(vals, strconv.FormatFloat(*s.Min-1, 'f', -1, 64))
	}
	if s.Max != nil {
		vals = append(vals, strconv.FormatFloat(*s.Max, 'f', -1, 64), strconv.FormatFloat(*s.Max+1, 'f', -1, 64))
	}
	if s.MaxLength != nil {
		vals = append(vals, strings.Repeat("a", int(*s.MaxLength)), strings.Repeat("a", int(*s.MaxLength)+1))
	}
	for _, e := range s.Enum {
		if e, ok := e.(string); ok {
			vals = append(vals, strings.ToUpper(e), e+" ", e+",x")
		}
	}
	if s.Type.Is(openapi3.TypeInteger) {
		vals = append(vals, "500", "501", "2147483648", "0x10", "+1", "1_000")
	}
	return vals
}

// setParam sets parameter p of r to v (unescaped).
func (g *gen) setParam(r *fuzzReq, p *openapi3.Parameter, v string) {
	switch p.In {
	case openapi3.ParameterInPath:
		r.path[p.Name] = v
	case openapi3.ParameterInQuery:
		prefix := url.QueryEscape(p.Name) + "="
		r.query = slices.DeleteFunc(r.query, func(q string) bool { return strings.HasPrefix(q, prefix) })
		r.query = append(r.query, prefix+url.QueryEscape(v))
	case openapi3.ParameterInHeader:
		r.header.Set(p.Name, v)
	}
}

// wholeBodies are base with another body: not JSON, not an object, cut
// short, nested deep, too large, or with another media type.
func (g *gen) wholeBodies(base fuzzReq) []fuzzReq {
	raw := base.body
	if len(raw) < 2 {
		raw = []byte("{}")
	}
	bodies := map[string][]byte{
		"empty": {}, "blank": []byte(" \n"), "null": []byte("null"), "an array": []byte("[]"), "a string": []byte(`"x"`),
		"a number": []byte("1"), "true": []byte("true"), "{}": []byte("{}"), "cut in half": raw[:len(raw)/2],
		"cut to a byte": raw[:1], "with garbage after": append(slices.Clone(raw), "x"...),
		"twice": append(slices.Clone(raw), raw...), "after a BOM": append([]byte("\ufeff"), raw...),
		"not UTF-8": []byte("{\"name\":\"\xff\"}"), "with a NUL": []byte("{\"name\":\"a\x00\"}"),
		"nested deep":      []byte(strings.Repeat("[", 100000) + strings.Repeat("]", 100000)),
		"objects deep":     []byte(strings.Repeat(`{"a":`, 20000) + "1" + strings.Repeat("}", 20000)),
		"a key twice":      append([]byte(`{"fuzz_dup":1,"fuzz_dup":2,`), raw[1:]...),
		"past the maximum": append([]byte(`{"fuzz_pad":"`+strings.Repeat("x", maxBodyBytes)+`",`), raw[1:]...),
	}
	var out []fuzzReq
	for _, what := range slices.Sorted(maps.Keys(bodies)) {
		r := base.clone("body " + what)
		r.body, r.ctype, r.tree = bodies[what], "application/json", nil
		out = append(out, r)
	}
	for _, ct := range []string{"", "text/plain", "application/x-www-form-urlencoded", "application/json; charset=latin1", "application/merge-patch+json"} {
		r := base.clone(fmt.Sprintf("Content-Type %q", ct))
		r.ctype = ct
		out = append(out, r)
	}
	return out
}

// memberChanges are base with one member of its body changed: replaced
// by a bad value, left out, or with an unknown member in it; or with a
// member the document allows and base leaves out added, with a valid
// value or a bad one. It returns them and how many members there are.
func (g *gen) memberChanges(base fuzzReq) (out []fuzzReq, members int) {
	if base.tree == nil {
		return nil, 0
	}
	with := func(what string, tree any) {
		// The jobs, channels and rules the fuzzer names get new names:
		// a name taken is a 409 before the member tried is looked at.
		out = append(out, base.withTree(what, renamed(tree, g)))
	}
	with("body with an unknown member", setAt(base.tree, []any{"fuzz_unknown"}, 1))
	present := paths(base.tree, nil, 0)
	for _, p := range present {
		where := pathString(p)
		for _, v := range g.memberValues(base.tree, p) {
			with("body "+where+"="+clip(v, 40), setAt(base.tree, p, json.RawMessage(v)))
		}
		if _, ok := p[len(p)-1].(string); ok {
			with("body without "+where, deleteAt(base.tree, p))
		}
		if _, ok := getAt(base.tree, p).(map[string]any); ok {
			with("body "+where+" with an unknown member", setAt(base.tree, append(slices.Clone(p), "fuzz_unknown"), 1))
		}
	}
	absent := absentMembers(g.op.body, base.tree)
	for _, p := range absent {
		where := pathString(p)
		name := p[len(p)-1].(string)
		with("body with "+where, setAt(base.tree, p, g.valid(schemaAt(g.op.body, p), name, false, 0)))
		for _, v := range g.memberValues(base.tree, p) {
			with("body with "+where+"="+clip(v, 40), setAt(base.tree, p, json.RawMessage(v)))
		}
	}
	return out, len(present) + len(absent)
}

// absentMembers are the members the schema s of a body allows that tree,
// such a body, leaves out: of tree itself and of each object in it.
func absentMembers(s *openapi3.Schema, tree any) [][]any {
	var out [][]any
	for _, p := range append([][]any{nil}, paths(tree, nil, 0)...) {
		obj, ok := getAt(tree, p).(map[string]any)
		sp := schemaAt(s, p)
		if !ok || sp == nil {
			continue
		}
		for _, k := range slices.Sorted(maps.Keys(sp.Properties)) {
			if _, ok := obj[k]; !ok {
				out = append(out, append(slices.Clone(p), k))
			}
		}
	}
	return out
}

// memberValues are the JSON values the member at p of tree is tried
// with: badJSON and, by its schema, the bounds of its numbers, lengths
// and items, and its enum's values misspelt.
func (g *gen) memberValues(tree any, p []any) []string {
	vals := slices.Clone(badJSON)
	s := schemaAt(g.op.body, p)
	if s == nil {
		return vals
	}
	if s.Min != nil {
		vals = append(vals, strconv.FormatFloat(*s.Min-1, 'f', -1, 64))
	}
	if s.Max != nil {
		vals = append(vals, strconv.FormatFloat(*s.Max+1, 'f', -1, 64))
	}
	if s.MaxLength != nil {
		vals = append(vals, strconv.Quote(strings.Repeat("a", int(*s.MaxLength)+1)))
	}
	if s.MinLength > 1 {
		vals = append(vals, strconv.Quote(strings.Repeat("a", int(s.MinLength)-1)))
	}
	if s.MaxItems != nil {
		if many, err := json.Marshal(slices.Repeat([]any{getAt(tree, append(slices.Clone(p), 0))}, int(*s.MaxItems)+1)); err == nil {
			vals = append(vals, string(many))
		}
	}
	for _, e := range s.Enum {
		if e, ok := e.(string); ok {
			vals = append(vals, strconv.Quote(strings.ToUpper(e)), strconv.Quote(e+" "))
		}
	}
	return vals
}

// renamed is tree with each "name" the generator made replaced by a
// new one.
func renamed(tree any, g *gen) any {
	switch v := tree.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for _, k := range slices.Sorted(maps.Keys(v)) {
			e := v[k]
			if s, ok := e.(string); ok && k == "name" && strings.HasPrefix(s, "fuzz-") {
				e = g.name()
			}
			out[k] = renamed(e, g)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = renamed(e, g)
		}
		return out
	}
	return tree
}

// paths lists the members of tree (a path is map keys and slice
// indexes), outer ones first, to depth 5.
func paths(tree any, prefix []any, depth int) [][]any {
	if depth == 5 {
		return nil
	}
	var out [][]any
	visit := func(k, v any) {
		p := append(slices.Clone(prefix), k)
		out = append(out, p)
		out = append(out, paths(v, p, depth+1)...)
	}
	switch v := tree.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			visit(k, v[k])
		}
	case []any:
		for i, e := range v {
			visit(i, e)
		}
	}
	return out
}

// pathString writes p as problems name fields: handler.headers.X, jobs[0].name.
func pathString(p []any) string {
	var sb strings.Builder
	for _, k := range p {
		switch k := k.(type) {
		case string:
			if sb.Len() > 0 {
				sb.WriteByte('.')
			}
			sb.WriteString(k)
		case int:
			fmt.Fprintf(&sb, "[%d]", k)
		}
	}
	return sb.String()
}

// getAt is the member of tree at p, nil if there is none.
func getAt(tree any, p []any) any {
	for _, k := range p {
		switch v := tree.(type) {
		case map[string]any:
			tree = v[k.(string)]
		case []any:
			i := k.(int)
			if i >= len(v) {
				return nil
			}
			tree = v[i]
		default:
			return nil
		}
	}
	return tree
}

// setAt is tree with v at p: the maps and slices on the way are copied,
// the rest shared.
func setAt(tree any, p []any, v any) any {
	if len(p) == 0 {
		return v
	}
	switch t := tree.(type) {
	case map[string]any:
		out := maps.Clone(t)
		k := p[0].(string)
		out[k] = setAt(t[k], p[1:], v)
		return out
	case []any:
		out := slices.Clone(t)
		i := p[0].(int)
		out[i] = setAt(t[i], p[1:], v)
		return out
	}
	return tree
}

// deleteAt is tree without the map member at p.
func deleteAt(tree any, p []any) any {
	parent, ok := getAt(tree, p[:len(p)-1]).(map[string]any)
	if !ok {
		return tree
	}
	out := maps.Clone(parent)
	delete(out, p[len(p)-1].(string))
	return setAt(tree, p[:len(p)-1], out)
}

// schemaAt is the schema of the member at p of a body of schema s, nil
// if it cannot tell (an alternative of a oneOf).
func schemaAt(s *openapi3.Schema, p []any) *openapi3.Schema {
	for _, k := range p {
		if s == nil {
			return nil
		}
		switch k := k.(type) {
		case string:
			if prop := s.Properties[k]; prop != nil {
				s = prop.Value
			} else if ap := s.AdditionalProperties.Schema; ap != nil {
				s = ap.Value
			} else {
				return nil
			}
		case int:
			if s.Items == nil {
				return nil
			}
			s = s.Items.Value
		}
	}
	return s
}

// clip is s cut to n bytes, for reports.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return fmt.Sprintf("%s…(%d bytes)", strings.ToValidUTF8(s[:n], ""), len(s))
}

// send sends r to op, records the status and checks the answer; it
// returns the status, 0 if none came (or the request could not be sent:
// a header no HTTP client sends).
func (f *specFuzzer) send(op *specOp, r fuzzReq) int {
	path := op.path
	for name, v := range r.path {
		path = strings.ReplaceAll(path, "{"+name+"}", url.PathEscape(v))
	}
	if len(r.query) > 0 {
		path += "?" + strings.Join(r.query, "&")
	}
	method := strings.ToUpper(op.method)
	what := fmt.Sprintf("%s %s (%s: %s)", method, clip(path, 200), op.id, clip(r.what, 80))
	if r.body != nil {
		what += fmt.Sprintf(" with body %q", clip(string(r.body), 200))
	}
	ctx, cancel := context.WithTimeout(context.Background(), fuzzTimeout)
	defer cancel()
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(ctx, method, f.a.http.URL+path, body)
	if err != nil {
		f.fault(fmt.Sprintf("%s: %v", what, err)) // a bug of the fuzzer's
		return 0
	}
	for k, vs := range r.header {
		for _, v := range vs {
			if !httpguts.ValidHeaderFieldValue(v) {
				return 0
			}
			req.Header.Add(k, v)
		}
	}
	if r.body != nil && r.ctype != "" {
		req.Header.Set("Content-Type", r.ctype)
	}
	if !r.noKey {
		req.Header.Set("Authorization", "Bearer "+f.a.admin)
	}
	res, err := f.client.Do(req)
	if err != nil {
		f.fault(fmt.Sprintf("%s: no answer: %v", what, err))
		return 0
	}
	defer res.Body.Close()
	stream := res.Header.Get("Content-Type") == "text/event-stream"
	var got []byte
	if !stream {
		if got, err = io.ReadAll(res.Body); err != nil {
			f.fault(fmt.Sprintf("%s: %d, body cut off: %v", what, res.StatusCode, err))
		}
	}
	f.record(op.id, res.StatusCode)
	switch {
	case res.StatusCode >= 500:
		f.fault(fmt.Sprintf("%s: %d %s", what, res.StatusCode, got))
	case stream && res.StatusCode != http.StatusOK:
		f.fault(fmt.Sprintf("%s: a stream with status %d", what, res.StatusCode))
	case res.StatusCode >= 400:
		if msg := problemFault(res.StatusCode, res.Header, got); msg != "" {
			f.fault(fmt.Sprintf("%s: %s", what, msg))
		}
	}
	return res.StatusCode
}

// problemFault says how an error response of status 400 to 499 breaks
// the API's promise for it, "" if it keeps it: a problem+json body of
// the same status, with a type and a title, whose 400s name each faulty
// field.
func problemFault(status int, header http.Header, body []byte) string {
	if ct := header.Get("Content-Type"); ct != ProblemContentType {
		return fmt.Sprintf("status %d with content type %q: %s", status, ct, body)
	}
	var p models.Problem
	if err := json.Unmarshal(body, &p); err != nil {
		return fmt.Sprintf("status %d: problem does not decode: %v: %s", status, err, body)
	}
	if p.Status != status || p.Type == "" || p.Title == "" {
		return fmt.Sprintf("problem %s for status %d", body, status)
	}
	if status == http.StatusBadRequest {
		if p.Errors == nil || len(*p.Errors) == 0 {
			return fmt.Sprintf("400 names no field: %s", body)
		}
		for _, e := range *p.Errors {
			if e.Field == "" || e.Message == "" {
				return fmt.Sprintf("a field error without its field or message: %s", body)
			}
		}
	}
	return ""
}

func (f *specFuzzer) record(op string, status int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.statuses[op] == nil {
		f.statuses[op] = map[int]int{}
	}
	f.statuses[op][status]++
	f.sent++
}

func (f *specFuzzer) fault(msg string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults = append(f.faults, msg)
}

// report fails the test for each fault, and unless most requests got
// past authentication to the handlers: few 401 and 403, 2xx from most
// operations, and many of the handlers' 4xx (400, 404, 409, 422…).
func (f *specFuzzer) report(t *testing.T, ops []*specOp, setup, took time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	const shown = 40
	for i, msg := range f.faults {
		if i == shown {
			t.Errorf("… and %d more", len(f.faults)-shown)
			break
		}
		t.Error(msg)
	}
	if len(f.faults) > 0 {
		t.Logf("the server's log:\n%s", lastLines(f.a.logs.String(), 60))
	}
	var ok, denied, refused, opsOK int
	for _, op := range ops {
		st := f.statuses[op.id]
		var line []string
		took := false
		for _, code := range slices.Sorted(maps.Keys(st)) {
			n := st[code]
			line = append(line, fmt.Sprintf("%d×%d", n, code))
			switch {
			case code < 300:
				ok += n
				took = true
			case code == http.StatusUnauthorized || code == http.StatusForbidden:
				denied += n
			case code < 500:
				refused += n
			}
		}
		if took {
			opsOK++
		}
		t.Logf("%-18s %6v  %s", op.id, f.took[op.id].Round(time.Millisecond), strings.Join(line, " "))
	}
	t.Logf("%d requests to %d operations in %v (setup %v): %d 2xx, %d 401 or 403, %d other 4xx; %d operations answered 2xx",
		f.sent, len(ops), took.Round(time.Millisecond), setup.Round(time.Millisecond), ok, denied, refused, opsOK)
	if denied > f.sent/10 {
		t.Errorf("%d of %d requests were refused by authentication: the fuzz proves little", denied, f.sent)
	}
	if ok < f.sent/20 || refused < f.sent/2 {
		t.Errorf("%d 2xx and %d 4xx past authentication of %d requests: too few reached the handlers", ok, refused, f.sent)
	}
	if opsOK < len(ops)*9/10 {
		t.Errorf("only %d of %d operations answered any request with 2xx", opsOK, len(ops))
	}
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
