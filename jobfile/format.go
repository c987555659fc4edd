package jobfile

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/domain"
)

// Format writes jobs, as the API shows them, as the create bodies a job
// file holds: one YAML document per job, fields in a fixed order (that
// of Parse's documentation in docs/jobs.md), maps sorted by key.
//
// What the server made is left out (id, bucket, state, runs, chain,
// next_run_at, last_run_at, last_success_at, created_at, updated_at), and
// so are values equal to the schema's fixed defaults, which any cluster
// fills in alike: priority normal, an http method POST, a dependency's
// on success, depends_mode all, depends_match same_time, on_timeout and
// on_upstream_skipped skip, wait_timeout 1h. The policies whose defaults
// are the cluster's (retry, missed, overlap) are kept as shown, so that
// a job applied elsewhere behaves as it does here.
//
// The API never shows a secret: each secret header, and each plain header
// whose name says it is a credential, becomes a secret header reference
// {env: TOCK_SECRET_<JOB>_<HEADER>} with a comment asking to set it.
// Upstreams are written by name (namespace/name in another namespace),
// or by id with a comment when the upstream no longer exists.
func Format(jobs []models.Job) ([]byte, error) {
	var buf bytes.Buffer
	for i, j := range jobs {
		if i > 0 {
			buf.WriteString("---\n")
		}
		doc, err := jobNode(j)
		if err != nil {
			return nil, fmt.Errorf("format job %s/%s: %w", j.Namespace, j.Name, err)
		}
		enc := yaml.NewEncoder(&buf)
		enc.SetIndent(2)
		if err := enc.Encode(doc); err != nil {
			return nil, fmt.Errorf("format job %s/%s: %w", j.Namespace, j.Name, err)
		}
		if err := enc.Close(); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}

// SecretEnv is the variable an exported job's secret header refers to:
// TOCK_SECRET_<JOB>_<HEADER>, upper case, each character other than a
// letter or digit an underscore.
func SecretEnv(job, header string) string {
	clean := func(s string) string {
		return strings.Map(func(r rune) rune {
			switch {
			case r >= 'a' && r <= 'z':
				return r - 'a' + 'A'
			case r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
				return r
			}
			return '_'
		}, s)
	}
	return "TOCK_SECRET_" + clean(job) + "_" + clean(header)
}

// mapping builds a YAML mapping in the order its pairs are added.
type mapping struct{ n *yaml.Node }

func newMapping() mapping { return mapping{&yaml.Node{Kind: yaml.MappingNode}} }

func (m mapping) add(key string, v *yaml.Node) *yaml.Node {
	k := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}
	m.n.Content = append(m.n.Content, k, v)
	return k
}

func (m mapping) str(key string, v *string) {
	if v != nil {
		m.add(key, strNode(*v))
	}
}

func (m mapping) empty() bool { return len(m.n.Content) == 0 }

func strNode(s string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
}

func intNode(i int64) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.FormatInt(i, 10)}
}

func timeNode(t time.Time) *yaml.Node {
	return strNode(t.Format(time.RFC3339Nano))
}

func stringMap(m map[string]string) *yaml.Node {
	out := newMapping()
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out.add(k, strNode(m[k]))
	}
	return out.n
}

func jobNode(j models.Job) (*yaml.Node, error) {
	m := newMapping()
	m.add("name", strNode(j.Name))
	m.add("namespace", strNode(j.Namespace))
	m.str("description", j.Description)
	if j.Labels != nil && len(*j.Labels) > 0 {
		m.add("labels", stringMap(*j.Labels))
	}
	if s := scheduleNode(j.Schedule); !s.empty() && !ptrIs(j.Chain, true) {
		m.add("schedule", s.n)
	}
	if j.State == models.JobStatePaused {
		// Applied to a set, it makes the paused state part of the plan.
		m.add("paused", &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: "true"})
	}
	m.add("handler", handlerNode(j))
	if j.Payload != nil && len(*j.Payload) > 0 && string(*j.Payload) != "null" {
		var p yaml.Node
		if err := yaml.Unmarshal(*j.Payload, &p); err != nil {
			return nil, fmt.Errorf("payload: %w", err)
		}
		m.add("payload", p.Content[0])
	}
	if r := j.Retry; r != nil {
		rm := newMapping()
		if r.MaxAttempts != nil {
			rm.add("max_attempts", intNode(int64(*r.MaxAttempts)))
		}
		rm.str("initial_backoff", r.InitialBackoff)
		rm.str("max_backoff", r.MaxBackoff)
		if r.Multiplier != nil {
			rm.add("multiplier", &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!float", Value: strconv.FormatFloat(*r.Multiplier, 'g', -1, 64)})
		}
		rm.str("jitter", (*string)(r.Jitter))
		if !rm.empty() {
			m.add("retry", rm.n)
		}
	}
	m.str("timeout", j.Timeout)
	if j.Priority != nil && *j.Priority != models.PriorityNormal {
		m.add("priority", strNode(string(*j.Priority)))
	}
	if mp := j.Missed; mp != nil {
		mm := newMapping()
		mm.str("policy", (*string)(mp.Policy))
		mm.str("grace", mp.Grace)
		if mp.Max != nil {
			mm.add("max", intNode(int64(*mp.Max)))
		}
		if !mm.empty() {
			m.add("missed", mm.n)
		}
	}
	m.str("overlap", (*string)(j.Overlap))
	if c := j.Concurrency; c != nil {
		cm := newMapping()
		cm.add("key", strNode(c.Key))
		cm.add("limit", intNode(int64(c.Limit)))
		if c.Scope != nil && *c.Scope != models.ConcurrencyScopeNamespace {
			cm.add("scope", strNode(string(*c.Scope)))
		}
		if c.OnLimit != nil && *c.OnLimit != models.ConcurrencyOnLimitWait {
			cm.add("on_limit", strNode(string(*c.OnLimit)))
		}
		m.add("concurrency", cm.n)
	}
	if r := j.RateLimit; r != nil {
		rm := newMapping()
		rm.add("key", strNode(r.Key))
		rm.add("limit", intNode(int64(r.Limit)))
		rm.add("per", strNode(r.Per))
		if r.Burst != nil && *r.Burst != r.Limit {
			rm.add("burst", intNode(int64(*r.Burst)))
		}
		if r.OnLimit != nil && *r.OnLimit != models.RateLimitOnLimitWait {
			rm.add("on_limit", strNode(string(*r.OnLimit)))
		}
		m.add("rate_limit", rm.n)
	}
	if j.Calendars != nil && len(*j.Calendars) > 0 {
		seq := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
		for _, name := range *j.Calendars {
			seq.Content = append(seq.Content, strNode(name))
		}
		m.add("calendars", seq)
		m.str("on_excluded", (*string)(j.OnExcluded))
	}
	if j.DependsOn != nil && len(*j.DependsOn) > 0 {
		seq := &yaml.Node{Kind: yaml.SequenceNode}
		for _, u := range *j.DependsOn {
			um := newMapping()
			var k *yaml.Node
			switch {
			case u.Name == nil:
				k = um.add("job", strNode(u.JobId.String()))
				k.HeadComment = "The upstream job no longer exists: its id is kept, which another cluster does not know."
			case u.Namespace == nil || *u.Namespace == j.Namespace:
				um.add("job", strNode(*u.Name))
			default:
				um.add("job", strNode(*u.Namespace+"/"+*u.Name))
			}
			if u.On != models.UpstreamOnSuccess {
				um.add("on", strNode(string(u.On)))
			}
			seq.Content = append(seq.Content, um.n)
		}
		m.add("depends_on", seq)
		if j.DependsMode != nil && *j.DependsMode != models.DependsModeAll {
			m.add("depends_mode", strNode(string(*j.DependsMode)))
		}
		if j.DependsMatch != nil && len(*j.DependsMatch) > 0 && string(*j.DependsMatch) != `"same_time"` && string(*j.DependsMatch) != "null" {
			var dm yaml.Node
			if err := yaml.Unmarshal(*j.DependsMatch, &dm); err != nil {
				return nil, fmt.Errorf("depends_match: %w", err)
			}
			plain(dm.Content[0])
			m.add("depends_match", dm.Content[0])
		}
		if j.WaitTimeout != nil && *j.WaitTimeout != "1h" && *j.WaitTimeout != "1h0m0s" {
			m.add("wait_timeout", strNode(*j.WaitTimeout))
		}
		if j.OnTimeout != nil && *j.OnTimeout != models.DependsOnTimeoutSkip {
			m.add("on_timeout", strNode(string(*j.OnTimeout)))
		}
		if j.OnUpstreamSkipped != nil && *j.OnUpstreamSkipped != models.DependsOnUpstreamSkippedSkip {
			m.add("on_upstream_skipped", strNode(string(*j.OnUpstreamSkipped)))
		}
	}
	return m.n, nil
}

func scheduleNode(s models.Schedule) mapping {
	m := newMapping()
	m.str("cron", s.Cron)
	m.str("timezone", s.Timezone)
	if s.At != nil {
		m.add("at", timeNode(*s.At))
	}
	m.str("in", s.In)
	if s.Anchor != nil {
		m.add("anchor", timeNode(*s.Anchor))
	}
	if s.StartAt != nil {
		m.add("start_at", timeNode(*s.StartAt))
	}
	if s.EndAt != nil {
		m.add("end_at", timeNode(*s.EndAt))
	}
	if s.MaxRuns != nil {
		m.add("max_runs", intNode(*s.MaxRuns))
	}
	m.str("jitter", s.Jitter)
	return m
}

func handlerNode(j models.Job) *yaml.Node {
	h := j.Handler
	m := newMapping()
	m.add("type", strNode(string(h.Type)))
	m.str("url", h.Url)
	if h.Method != nil && !(h.Type == models.HandlerTypeHttp && *h.Method == "POST") {
		m.add("method", strNode(*h.Method))
	}
	secrets := map[string]bool{}
	if h.SecretHeaders != nil {
		for k := range *h.SecretHeaders {
			secrets[k] = true
		}
	}
	if h.Headers != nil {
		plain := map[string]string{}
		for k, v := range *h.Headers {
			if domain.SensitiveHeader(k) {
				secrets[k] = true // shown as ***; moved to a reference
				continue
			}
			plain[k] = v
		}
		if len(plain) > 0 {
			m.add("headers", stringMap(plain))
		}
	}
	if len(secrets) > 0 {
		sm := newMapping()
		for _, k := range slices.Sorted(maps.Keys(secrets)) {
			env := SecretEnv(j.Name, k)
			ref := newMapping()
			ref.add("env", strNode(env))
			ref.n.Style = yaml.FlowStyle
			key := sm.add(k, ref.n)
			key.HeadComment = "Set " + env + " to this header's value before applying: the API never shows it."
		}
		m.add("secret_headers", sm.n)
	}
	m.str("subject", h.Subject)
	if ptrIs(h.WaitReply, true) {
		m.add("wait_reply", &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: "true"})
	}
	m.str("name", h.Name)
	if l := h.Log; l != nil {
		lm := newMapping()
		if l.CapBytes != nil {
			lm.add("cap_bytes", intNode(*l.CapBytes))
		}
		lm.str("policy", (*string)(l.Policy))
		if !lm.empty() {
			m.add("log", lm.n)
		}
	}
	return m.n
}

// plain drops the JSON styles (flow, quotes) yaml.v3 keeps from JSON.
func plain(n *yaml.Node) {
	n.Style = 0
	for _, c := range n.Content {
		plain(c)
	}
}

func ptrIs[T comparable](p *T, v T) bool { return p != nil && *p == v }
