package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/jobfile"
)

// exportCmd writes jobs as the files "jobs as code" keeps (package
// jobfile): one per job, <namespace>/<name>.yaml under the directory.
type exportCmd struct {
	Namespace string `help:"Only jobs in this namespace (default every namespace the key may read)." placeholder:"NS"`
	Selector  string `short:"l" help:"Only jobs whose labels match this selector, as jobs list --selector." placeholder:"SEL"`
	Set       string `help:"Only the jobs of this apply set (tockctl apply --set)." placeholder:"NAME"`
	Dir       string `name:"dir" short:"d" required:"" help:"Directory to write <namespace>/<name>.yaml into (made if missing; files there of the same names are replaced)." placeholder:"DIR"`
}

func (c *exportCmd) Run(a *app) error {
	p := models.ListJobsParams{Namespace: optional(c.Namespace), Selector: optional(c.Selector)}
	jobs, _, _, err := listPages("", true, a.jobPages(&p))
	if err != nil {
		return err
	}
	written := 0
	for _, j := range jobs {
		if c.Set != "" && deref(j.Applyset) != c.Set {
			continue
		}
		if j, err = named(a, j); err != nil {
			return err
		}
		data, err := jobfile.Format([]models.Job{j})
		if err != nil {
			return err
		}
		name := filepath.Join(c.Dir, fileName(j.Namespace), fileName(j.Name)+".yaml")
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			return fmt.Errorf("export %s/%s: %w", j.Namespace, j.Name, err)
		}
		if err := os.WriteFile(name, data, 0o644); err != nil {
			return fmt.Errorf("export %s/%s: %w", j.Namespace, j.Name, err)
		}
		written++
	}
	fmt.Fprintf(a.stdout, "exported %d jobs to %s\n", written, c.Dir)
	return nil
}

// named is j with its upstreams named, so that its file refers to them by
// name: GET /v1/jobs lists them by id alone, GET /v1/jobs/{id} names them
// (an upstream that no longer exists stays an id).
func named(a *app, j models.Job) (models.Job, error) {
	if j.DependsOn == nil || len(*j.DependsOn) == 0 {
		return j, nil
	}
	r, err := a.api.GetJobWithResponse(a.ctx, j.Id)
	if err := check(r, err); err != nil {
		return j, fmt.Errorf("export %s/%s: %w", j.Namespace, j.Name, err)
	}
	return decoded(r.JSON200)
}

// fileName makes a namespace or job name safe as a file name. The API
// allows letters, digits, '.', '_' and '-' (^[A-Za-z0-9._-]+$), so a
// name could be "." or ".." or start with a dot (a hidden file): a
// leading dot, and anything outside that set should the rule ever widen,
// is written %XX, which no name holds. Parse reads names from the files'
// contents, never from their names.
func fileName(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		ch := s[i]
		ok := ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '_' || ch == '-' || ch == '.' && i > 0
		if ok {
			b.WriteByte(ch)
		} else {
			fmt.Fprintf(&b, "%%%02X", ch)
		}
	}
	return b.String()
}
