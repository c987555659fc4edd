package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/client"
)

// batchEnvelope is room left in a request body for {"jobs":[...]} and
// the commas between jobs.
const batchEnvelope = 64

// fileItem is the outcome of one line of a jobs file, as -o json prints
// it.
type fileItem struct {
	Line    int             `json:"line"`
	Status  int             `json:"status"`
	Job     *models.Job     `json:"job,omitempty"`
	Problem *models.Problem `json:"problem,omitempty"`
}

// fileReport is what -o json prints for jobs create -f.
type fileReport struct {
	Created int        `json:"created"`
	Failed  int        `json:"failed"`
	Items   []fileItem `json:"items"`
}

// entry is one line of a jobs file waiting to be sent: its job, or the
// problem that keeps it from being sent.
type entry struct {
	line    int
	job     json.RawMessage
	problem *models.Problem
}

// createFromFile creates the jobs of a JSON Lines file (one job per line,
// in the form POST /v1/jobs takes; blank lines are skipped) with POST
// /v1/jobs:batch, client.MaxBatchJobs per request. Each job is created or
// not on its own: failures are reported with their line numbers, and
// the command fails if any job was not created.
func (c *jobsCreateCmd) createFromFile(a *app) error {
	var in io.Reader
	name := c.File
	if c.File == "-" {
		in, name = a.stdin, "stdin"
	} else {
		f, err := os.Open(c.File)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}

	b := &fileBatcher{a: a, rep: &fileReport{Items: []fileItem{}}}
	r := bufio.NewReader(in)
	var err error
	for line := 1; err == nil; line++ {
		var raw []byte
		raw, err = r.ReadBytes('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("read %s: line %d: %w", name, line, err)
		}
		if err := b.add(line, bytes.TrimSpace(raw)); err != nil {
			return a.fileFailed(b.rep, err)
		}
	}
	if err := b.send(); err != nil {
		return a.fileFailed(b.rep, err)
	}

	rep := b.rep
	if a.json {
		if err := a.printJSON(rep); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(a.stdout, "created %s from %s; %d failed\n", jobCount(rep.Created), name, rep.Failed)
	}
	if rep.Failed > 0 {
		return fmt.Errorf("%d of %d jobs in %s were not created", rep.Failed, rep.Created+rep.Failed, name)
	}
	return nil
}

// fileBatcher gathers a jobs file's lines into batch requests and
// reports every line's outcome in rep.
type fileBatcher struct {
	a       *app
	rep     *fileReport
	pending []entry // in line order
	jobs    int     // entries of pending with a job
	size    int     // bytes of their jobs
}

// add queues line, whose text is raw (trimmed), sending the pending
// jobs first if it would not fit in their request. A line that cannot be
// a job is queued with its problem, to be reported in order.
func (b *fileBatcher) add(line int, raw []byte) error {
	switch {
	case len(raw) == 0:
		return nil
	case len(raw) > client.MaxBatchBytes-batchEnvelope:
		b.pending = append(b.pending, entry{line: line, problem: localProblem("the job is larger than a request may be (%d bytes)", client.MaxBatchBytes-batchEnvelope)})
		return nil
	case !json.Valid(raw):
		b.pending = append(b.pending, entry{line: line, problem: localProblem("not valid JSON: write one job object per line")})
		return nil
	}
	if b.jobs == client.MaxBatchJobs || b.size+len(raw)+1 > client.MaxBatchBytes-batchEnvelope {
		if err := b.send(); err != nil {
			return err
		}
	}
	b.pending = append(b.pending, entry{line: line, job: raw})
	b.jobs, b.size = b.jobs+1, b.size+len(raw)+1
	return nil
}

// send creates the pending jobs with one request and reports every
// pending line, in order.
func (b *fileBatcher) send() error {
	if len(b.pending) == 0 {
		return nil
	}
	var (
		res    models.JobBatchResult
		lineOf []int // the line of each job of the request
	)
	if b.jobs > 0 {
		body := make([]json.RawMessage, 0, b.jobs)
		var first, last int
		for _, e := range b.pending {
			if e.problem == nil {
				body = append(body, e.job)
				lineOf = append(lineOf, e.line)
				if first == 0 {
					first = e.line
				}
				last = e.line
			}
		}
		err := b.a.createBatch(body, &res)
		if err == nil && len(res.Items) != len(body) {
			err = fmt.Errorf("the server answered %d results for %d jobs", len(res.Items), len(body))
		}
		if err != nil {
			return fmt.Errorf("lines %d to %d: %w", first, last, err)
		}
	}
	k := 0
	for _, e := range b.pending {
		p := e.problem
		if p == nil {
			it := res.Items[k]
			k++
			if it.Status == 201 && it.Job != nil {
				b.rep.Created++
				b.rep.Items = append(b.rep.Items, fileItem{Line: e.line, Status: it.Status, Job: it.Job})
				continue
			}
			if p = it.Problem; p == nil {
				p = &models.Problem{Status: it.Status, Title: "Not created"}
			}
			p = withLines(p, lineOf)
		}
		b.rep.Failed++
		b.rep.Items = append(b.rep.Items, fileItem{Line: e.line, Status: p.Status, Problem: p})
		if !b.a.json {
			b.a.printLineProblem(e.line, p)
		}
	}
	b.pending, b.jobs, b.size = b.pending[:0], 0, 0
	return nil
}

// createBatch creates jobs with one POST /v1/jobs:batch request, and
// decodes the answer into res. The jobs go as they are, for the server
// to check, so that a line that is not a job is refused as the API
// refuses it.
func (a *app) createBatch(jobs []json.RawMessage, res *models.JobBatchResult) error {
	body, err := json.Marshal(map[string]any{"jobs": jobs})
	if err != nil {
		return err
	}
	r, err := a.api.CreateJobBatchWithBodyWithResponse(a.ctx, &models.CreateJobBatchParams{}, "application/json", bytes.NewReader(body))
	if err := check(r, err); err != nil {
		return err
	}
	*res, err = decoded(r.JSON200)
	return err
}

// fileFailed reports a request that failed as a whole: what was created
// before it stays, and nothing after it was sent.
func (a *app) fileFailed(rep *fileReport, err error) error {
	if a.json {
		_ = a.printJSON(rep)
	} else {
		fmt.Fprintf(a.stdout, "created %s; %d failed; stopped at a failed request\n", jobCount(rep.Created), rep.Failed)
	}
	return fmt.Errorf("%w (the jobs of earlier lines that were created stay; these lines and the ones after them were not created, unless the request failed after the server created them)", err)
}

// localProblem is a line tockctl refuses before sending it, in the
// form of the server's problems.
func localProblem(format string, args ...any) *models.Problem {
	detail := fmt.Sprintf(format, args...)
	return &models.Problem{Type: client.ProblemValidation, Title: "Invalid request", Status: 400, Detail: &detail}
}

// printLineProblem prints why the job of a line was not created: a
// validation problem's fields (as POST /v1/jobs names them), or the
// problem's detail.
func (a *app) printLineProblem(line int, p *models.Problem) {
	if p.Type == client.ProblemValidation && p.Errors != nil && len(*p.Errors) > 0 {
		errs := *p.Errors
		if len(errs) == 1 {
			fmt.Fprintf(a.stderr, "line %d: %s: %s\n", line, jobField(errs[0].Field), errs[0].Message)
			return
		}
		fmt.Fprintf(a.stderr, "line %d: %d fields are invalid\n", line, len(errs))
		for _, fe := range errs {
			fmt.Fprintf(a.stderr, "  %s: %s\n", jobField(fe.Field), fe.Message)
		}
		return
	}
	msg := p.Title
	if p.Detail != nil && *p.Detail != "" {
		msg = *p.Detail
	}
	fmt.Fprintf(a.stderr, "line %d: %s\n", line, msg)
}

// jobField is a batch item's field as the job's own: "jobs[3].name" is
// "name", and "jobs[3]" the job itself.
func jobField(f string) string {
	if !strings.HasPrefix(f, "jobs[") {
		return f
	}
	_, rest, ok := strings.Cut(f, "]")
	if !ok {
		return f
	}
	if rest = strings.TrimPrefix(rest, "."); rest == "" {
		return "job"
	}
	return rest
}

// jobsRef is a reference to a job of a batch request in the server's
// words: "jobs[3]".
var jobsRef = regexp.MustCompile(`jobs\[(\d+)\]`)

// withLines rewrites the references to jobs of the request in the
// problem's detail ("comes earlier in this request (jobs[0])") as the
// lines of the file they came from; field names are left to jobField.
func withLines(p *models.Problem, lineOf []int) *models.Problem {
	if p.Detail == nil {
		return p
	}
	out := *p
	detail := jobsRef.ReplaceAllStringFunc(*p.Detail, func(ref string) string {
		k, err := strconv.Atoi(jobsRef.FindStringSubmatch(ref)[1])
		if err != nil || k >= len(lineOf) {
			return ref
		}
		return "line " + strconv.Itoa(lineOf[k])
	})
	out.Detail = &detail
	return &out
}

// jobCount is "1 job" or "n jobs".
func jobCount(n int) string {
	if n == 1 {
		return "1 job"
	}
	return strconv.Itoa(n) + " jobs"
}
