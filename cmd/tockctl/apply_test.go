package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tock-sched/tock/api/models"
)

// diffCode runs tockctl diff and returns its exit code and output.
func diffCode(t *testing.T, url, dir, set string, flags ...string) result {
	t.Helper()
	return tockctl(t, url, append([]string{"diff", "-f", dir, "--set", set}, flags...)...)
}

// export → apply → diff is empty, for jobs of every kind: adopted in
// their own cluster with no field to change, and created in a fresh one
// from the files; then a file changed, removed and broken, as a team's
// repository would see them.
//
// Not parallel: the secret comes from the environment, as in CI.
func TestApplyRoundTrip(t *testing.T) {
	const secret = "Bearer appl1ed-s3cret"
	t.Setenv("TOCK_SECRET_PAY_HOOK_AUTHORIZATION", secret)
	src := fileServer(t)
	for _, j := range jobKinds(secret) {
		post(t, src.URL, j)
	}
	dir := t.TempDir()
	ok(t, src.URL, "export", "--namespace", "src", "--dir", dir)
	files := filepath.Join(dir, "src")

	// In their own cluster the jobs belong to no set: conflicts, until
	// adopted, which changes no field of any of them.
	r := diffCode(t, src.URL, files, "nightly")
	if r.code != 1 || strings.Count(r.stdout, "! conflict") != len(jobKinds(secret)) {
		t.Fatalf("diff before adopting: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := tockctl(t, src.URL, "apply", "-f", files, "--set", "nightly"); r.code != 1 || !strings.Contains(r.stderr, "conflicts") {
		t.Fatalf("apply without --adopt: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	out := ok(t, src.URL, "-o", "json", "apply", "-f", files, "--set", "nightly", "--adopt", "--commit", "abc123")
	var p models.ApplySetPlan
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatal(err)
	}
	for _, c := range p.Changes {
		if c.Action != "adopt" || c.Fields != nil {
			t.Errorf("%s: %s, fields %v; want adopted as it is", c.Name, c.Action, c.Fields)
		}
	}
	if r := diffCode(t, src.URL, files, "nightly"); r.code != 0 || !strings.Contains(r.stdout, "no changes") {
		t.Fatalf("diff after adopting: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if out := ok(t, src.URL, "applysets"); !strings.Contains(out, "src/nightly  9     1         no      abc123") {
		t.Fatalf("applysets:\n%s", out)
	}

	// A fresh cluster made from the files.
	dst := fileServer(t)
	if r := diffCode(t, dst.URL, files, "nightly"); r.code != 1 || strings.Count(r.stdout, "+ create") != len(jobKinds(secret)) {
		t.Fatalf("diff in a fresh cluster: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	ok(t, dst.URL, "apply", "-f", files, "--set", "nightly")
	if r := diffCode(t, dst.URL, files, "nightly"); r.code != 0 {
		t.Fatalf("diff after apply: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	again := t.TempDir()
	ok(t, dst.URL, "export", "--set", "nightly", "--dir", again)
	if r := diffCode(t, src.URL, filepath.Join(again, "src"), "nightly"); r.code != 0 {
		t.Fatalf("the fresh cluster's export differs from the first: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// A file changed in the repository: one update, its field before and after.
	edit(t, filepath.Join(files, "a-import.yaml"), `cron: 15 30 2 * * *`, `cron: 15 30 3 * * *`)
	r = diffCode(t, dst.URL, files, "nightly")
	if r.code != 1 || !strings.Contains(r.stdout, "~ update    a-import") ||
		!strings.Contains(r.stdout, `schedule: {"cron":"15 30 2 * * *"`) || !strings.Contains(r.stdout, "1 to update") {
		t.Fatalf("diff of an edited file: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// A file removed: an orphan, deleted with --prune.
	if err := os.Remove(filepath.Join(files, "now.yaml")); err != nil {
		t.Fatal(err)
	}
	if r := diffCode(t, dst.URL, files, "nightly"); r.code != 1 || !strings.Contains(r.stdout, "? orphan    now") {
		t.Fatalf("diff without a file: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	out = ok(t, dst.URL, "apply", "-f", files, "--set", "nightly", "--prune")
	if !strings.Contains(out, "1 updated, 1 deleted") || !strings.Contains(out, `schedule: {"cron":"15 30 2 * * *"`) {
		t.Fatalf("apply --prune printed:\n%s", out)
	}
	if r := diffCode(t, dst.URL, files, "nightly", "--prune"); r.code != 0 {
		t.Fatalf("diff after the apply: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// A file the server refuses: the error names its file and line; exit 2
	// for diff.
	edit(t, filepath.Join(files, "held.yaml"), `cron: 0 0 * * * *`, `cron: 0 0 25 * * *`)
	r = diffCode(t, dst.URL, files, "nightly")
	if want := filepath.Join(files, "held.yaml") + ":1: held: schedule.cron"; r.code != 2 || !strings.Contains(r.stderr, want) {
		t.Fatalf("diff of a bad file: exit %d, want 2 and %q\n%s%s", r.code, want, r.stdout, r.stderr)
	}
}

// edit replaces old with new in file, failing the test unless it is there.
func edit(t *testing.T, file, old, new string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		t.Fatalf("%s has no %q:\n%s", file, old, b)
	}
	if err := os.WriteFile(file, []byte(strings.Replace(string(b), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}
