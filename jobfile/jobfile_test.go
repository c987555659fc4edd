package jobfile_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/jobfile"
)

// Parse's errors name the file, the line and the field, as a user sees them.
func TestParseErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, file, data string
		want             []string // the error's lines
	}{
		{"unknown field", "jobs/payments.yaml", `name: a
handler: {type: custom, name: a}
---
name: b
handler:
  type: custom
  name: b
retry:
  max_attempts: 3
  max_atempts: 5
`, []string{"jobs/payments.yaml:10: jobs[1].retry.max_atempts: unknown field"}},
		{"wrong types", "j.yaml", `- name: a
  handler: {type: custom, name: a}
  timeout: 30
  retry: {max_attempts: "3"}
  labels: [a]
  schedule: {at: tomorrow}
`, []string{
			"j.yaml:3: jobs[0].timeout: expected a string, got the integer 30",
			`j.yaml:4: jobs[0].retry.max_attempts: expected an integer, got the string "3"`,
			"j.yaml:5: jobs[0].labels: expected a mapping of names to strings, got a list",
			`j.yaml:6: jobs[0].schedule.at: "tomorrow" is not an RFC 3339 time (as 2026-07-01T09:00:00Z)`,
		}},
		{"bad enum and missing", "j.yml", `name: a
handler: {type: htp}
priority: urgent
---
handler: {type: nats, subject: x}
`, []string{
			`j.yml:2: jobs[0].handler.type: "htp" is not one of http, nats, custom`,
			`j.yml:3: jobs[0].priority: "urgent" is not one of high, normal, low`,
			"j.yml:5: jobs[1]: name is required",
		}},
		{"literal secret", "jobs/pay.yaml", `name: pay
handler:
  type: http
  url: https://pay.example.com/hook
  secret_headers:
    X-Ref: {env: REF}
    Authorization: Bearer 6f1c9d2e
`, []string{"jobs/pay.yaml:7: jobs[0].handler.secret_headers.Authorization: a literal secret, which a file must not hold: write {env: VARIABLE} or {file: PATH} and set the value there"}},
		{"credential in plain headers", "h.yaml", `name: h
handler:
  type: http
  url: https://h.example.com/
  headers:
    X-Team: pay
    X-Api-Token: abc
`, []string{"h.yaml:7: jobs[0].handler.headers.X-Api-Token: looks like a credential, which a file must not hold: move it to secret_headers as {env: VARIABLE} or {file: PATH}"}},
		{"bad reference", "r.yaml", `name: r
handler:
  type: http
  url: https://r.example.com/
  secret_headers:
    A: {env: X, file: /y}
    B: {vault: x}
`, []string{
			"r.yaml:6: jobs[0].handler.secret_headers.A: a secret reference has one of env and file",
			"r.yaml:7: jobs[0].handler.secret_headers.B.vault: unknown field (a secret reference is {env: VARIABLE} or {file: PATH})",
		}},
		{"json unknown field", "jobs/a.json", `[
  {"name": "a", "handler": {"type": "custom", "name": "a"}},
  {"name": "b", "handler": {"type": "custom", "name": "b", "nmae": "x"}}
]`, []string{"jobs/a.json:3: jobs[1].handler.nmae: unknown field"}},
		{"json syntax", "b.json", "{\"name\": \"a\",\n \"handler\": }", []string{"b.json:2: not JSON: invalid character '}' looking for beginning of value"}},
		{"yaml syntax", "c.yaml", "name: a\nhandler: [\n", []string{"c.yaml:2: not YAML: did not find expected node content"}},
		{"repeated key", "d.yaml", "name: a\nname: b\nhandler: {type: custom, name: a}\n", []string{"d.yaml:2: jobs[0].name: repeated"}},
		{"not a job", "e.yaml", "- 3\n", []string{"e.yaml:1: jobs[0]: expected a job (a mapping), got the integer 3"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			jobs, err := jobfile.Parse(c.file, []byte(c.data))
			if err == nil {
				t.Fatalf("no error; jobs %+v", jobs)
			}
			if got := strings.Split(err.Error(), "\n"); !reflect.DeepEqual(got, c.want) {
				t.Errorf("error:\n%s\nwant:\n%s", err, strings.Join(c.want, "\n"))
			}
			var fe *jobfile.Error
			if !errors.As(err, &fe) || fe.File != c.file {
				t.Errorf("error %v is not a *jobfile.Error of %s", err, c.file)
			}
		})
	}
}

// Both layouts of YAML and both of JSON give the same create bodies.
func TestParseLayouts(t *testing.T) {
	t.Parallel()
	want := `[{"handler":{"name":"a","type":"custom"},"name":"a","payload":{"z":1,"a":[true,null,"x",1e3]}},` +
		`{"handler":{"type":"nats","subject":"s"},"name":"b","namespace":"ops"}]`
	for name, data := range map[string]string{
		"docs.yaml": "name: a\nhandler: {type: custom, name: a}\npayload: {z: 1, a: [true, null, x, 1e3]}\n---\nname: b\nnamespace: ops\nhandler: {type: nats, subject: s}\n",
		"list.yml":  "- name: a\n  handler: {type: custom, name: a}\n  payload: {z: 1, a: [true, ~, x, 1e3]}\n- name: b\n  namespace: ops\n  handler: {type: nats, subject: s}\n",
		"array.json": `[{"name": "a", "handler": {"type": "custom", "name": "a"}, "payload": {"z": 1, "a": [true, null, "x", 1e3]}},
			{"name": "b", "namespace": "ops", "handler": {"type": "nats", "subject": "s"}}]`,
	} {
		jobs, err := jobfile.Parse(name, []byte(data))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, _ := json.Marshal(jobs)
		if !jsonEqual(t, got, []byte(want)) {
			t.Errorf("%s:\n%s\nwant\n%s", name, got, want)
		}
		if p := string(*jobs[0].Payload); p != `{"z":1,"a":[true,null,"x",1e3]}` {
			t.Errorf("%s: payload %s, want its keys in order", name, p)
		}
	}
	one, err := jobfile.Parse("one.json", []byte(`{"name": "a", "handler": {"type": "custom", "name": "a"}}`))
	if err != nil || len(one) != 1 || one[0].Name != "a" {
		t.Errorf("one object: %+v, %v", one, err)
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(x, y)
}

func TestParseDirDuplicates(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.yaml"), "name: x\nhandler: {type: custom, name: x}\n")
	write(t, filepath.Join(dir, "sub", "b.json"), `{"name": "y", "handler": {"type": "custom", "name": "y"}}`)
	write(t, filepath.Join(dir, "sub", "c.yml"), "name: y\nnamespace: other\nhandler: {type: custom, name: y}\n---\n\nname: x\nnamespace: default\nhandler: {type: custom, name: x}\n")
	write(t, filepath.Join(dir, "README.md"), "not a job")
	_, err := jobfile.ParseDir(dir)
	want := filepath.Join(dir, "sub", "c.yml") + ":6: job default/x is also defined at " + filepath.Join(dir, "a.yaml") + ":1"
	if err == nil || err.Error() != want {
		t.Fatalf("error %v, want %s", err, want)
	}
	if err := os.Remove(filepath.Join(dir, "sub", "c.yml")); err != nil {
		t.Fatal(err)
	}
	jobs, err := jobfile.ParseDir(dir)
	if err != nil || len(jobs) != 2 || jobs[0].Name != "x" || jobs[1].Name != "y" {
		t.Fatalf("jobs %+v, %v", jobs, err)
	}
}

func write(t *testing.T, name, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestResolve(t *testing.T) {
	t.Parallel()
	jobs, err := jobfile.Parse("jobs/pay.yaml", []byte(`name: pay
handler:
  type: http
  url: https://pay.example.com/hook
  secret_headers:
    Authorization: {env: PAY_TOKEN}
    X-Key: {file: /run/secrets/pay}
`))
	if err != nil {
		t.Fatal(err)
	}
	if ref, ok := jobfile.RefOf((*jobs[0].Handler.SecretHeaders)["Authorization"]); !ok || ref.Env != "PAY_TOKEN" {
		t.Errorf("reference %+v %v", ref, ok)
	}
	env := map[string]string{"PAY_TOKEN": "Bearer t0k"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	files := map[string]string{"/run/secrets/pay": "k3y\n"}
	read := func(p string) ([]byte, error) {
		if v, ok := files[p]; ok {
			return []byte(v), nil
		}
		return nil, os.ErrNotExist
	}
	failing := append([]models.JobCreate(nil), jobs...)
	err = jobfile.Resolve(failing, func(string) (string, bool) { return "", false }, func(string) ([]byte, error) { return nil, os.ErrNotExist })
	want := "jobs/pay.yaml:6: default/pay.handler.secret_headers.Authorization: environment variable PAY_TOKEN is not set\n" +
		"jobs/pay.yaml:7: default/pay.handler.secret_headers.X-Key: read secret: file does not exist"
	if err == nil || err.Error() != want {
		t.Errorf("error:\n%v\nwant:\n%s", err, want)
	}
	if err := jobfile.Resolve(jobs, lookup, read); err != nil {
		t.Fatal(err)
	}
	if got := *jobs[0].Handler.SecretHeaders; !reflect.DeepEqual(got, map[string]string{"Authorization": "Bearer t0k", "X-Key": "k3y"}) {
		t.Errorf("resolved %v", got)
	}
}
