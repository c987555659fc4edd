package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/jobfile"
)

// setFlags are what apply and diff share: the files, the set, and how
// the plan treats what the files leave out.
type setFlags struct {
	File      string `short:"f" required:"" help:"Directory (or file) of job files: YAML or JSON, as tockctl export writes them." placeholder:"DIR"`
	Set       string `required:"" help:"The apply set: the name of the jobs these files own, in their namespace." placeholder:"NAME"`
	Namespace string `help:"The set's namespace (default: the files' jobs', which must all be in one; else \"default\")." placeholder:"NS"`
	Prune     bool   `help:"Delete the set's members the files no longer hold (without, they are kept, shown as orphans)."`
	Adopt     bool   `help:"Take into the set jobs of the same name that belong to no set (without, they are conflicts)."`
}

// applyCmd is tockctl apply.
type applyCmd struct {
	setFlags
	DryRun          bool   `name:"dry-run" help:"Show the plan; change nothing."`
	Lock            bool   `help:"Lock the set: changes to its jobs through the API or the dashboard are refused until an apply without --lock."`
	AllowMassDelete bool   `name:"allow-mass-delete" help:"Apply a plan that deletes more than half of the set's jobs, or more than 10."`
	Commit          string `help:"What is applied (a git commit), recorded with the set and in the audit trail." placeholder:"SHA"`
}

// diffCmd is tockctl diff.
type diffCmd struct {
	setFlags
}

// exitError ends tockctl with code, after printing err if there is one.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return "exit " + strconv.Itoa(e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// request reads the files and makes the plan's request body.
func (f *setFlags) request(a *app) (models.ApplySetRequest, []jobfile.Located, error) {
	var req models.ApplySetRequest
	var located []jobfile.Located
	info, err := os.Stat(f.File)
	if err != nil {
		return req, nil, err
	}
	if info.IsDir() {
		located, err = jobfile.ParseDirLocated(f.File)
	} else {
		var data []byte
		if data, err = os.ReadFile(f.File); err == nil {
			var js []models.JobCreate
			js, err = jobfile.Parse(f.File, data)
			for _, j := range js {
				located = append(located, jobfile.Located{Job: j, File: f.File})
			}
		}
	}
	if err != nil {
		return req, nil, err
	}
	ns := f.Namespace
	for _, l := range located {
		if l.Job.Namespace == nil {
			continue
		}
		switch {
		case ns == "":
			ns = *l.Job.Namespace
		case *l.Job.Namespace != ns:
			return req, nil, fmt.Errorf("%s: the job %s is in namespace %q, the set's is %q: a set is of one namespace (apply each namespace's directory with its own --set)",
				l.Where(), l.Job.Name, *l.Job.Namespace, ns)
		}
	}
	jobs := make([]models.JobCreate, len(located))
	for i, l := range located {
		jobs[i] = l.Job
	}
	if err := jobfile.Resolve(jobs, os.LookupEnv, os.ReadFile); err != nil {
		return req, nil, err
	}
	req.Jobs = jobs
	req.Namespace = optional(ns)
	req.Prune, req.Adopt = &f.Prune, &f.Adopt
	return req, located, nil
}

// plan asks the server for the plan of req.
func (f *setFlags) plan(a *app, req models.ApplySetRequest, located []jobfile.Located) (models.ApplySetPlan, []byte, error) {
	r, err := a.api.PlanApplySetWithResponse(a.ctx, f.Set, req)
	if err := check(r, err); err != nil {
		return models.ApplySetPlan{}, nil, locate(err, located)
	}
	p, err := decoded(r.JSON200)
	return p, r.Body, err
}

// setJobField is a field the server names of the request's jobs.
var setJobField = regexp.MustCompile(`^jobs\[(\d+)\]\.?`)

// locate rewrites the fields of a problem about jobs[i] as the file and
// line the job comes from.
func locate(err error, located []jobfile.Located) error {
	var pe *problemError
	if !errors.As(err, &pe) || pe.problem == nil || pe.problem.Errors == nil {
		return err
	}
	for i, fe := range *pe.problem.Errors {
		m := setJobField.FindStringSubmatch(fe.Field)
		if m == nil {
			continue
		}
		k, _ := strconv.Atoi(m[1])
		if k < len(located) {
			(*pe.problem.Errors)[i].Field = located[k].Where() + ": " + located[k].Job.Name + ": " + strings.TrimPrefix(fe.Field, m[0])
		}
	}
	return err
}

// Run plans, prints the plan and, unless --dry-run, applies it.
func (c *applyCmd) Run(a *app) error {
	req, located, err := c.request(a)
	if err != nil {
		return err
	}
	req.Lock, req.AllowMassDelete, req.Commit = &c.Lock, &c.AllowMassDelete, optional(c.Commit)
	p, raw, err := c.plan(a, req, located)
	if err != nil {
		return err
	}
	if c.DryRun {
		if a.json {
			return a.printRawJSON(raw)
		}
		a.printPlan(p)
		return nil
	}
	switch {
	case p.Summary.Conflict > 0:
		a.printPlan(p)
		return errors.New("the plan has conflicts (above): nothing applied")
	case deref(p.MassDelete) && !c.AllowMassDelete:
		a.printPlan(p)
		return fmt.Errorf("the plan deletes %d jobs, more than half of the set's or more than 10: nothing applied; --allow-mass-delete to apply it", p.Summary.Delete)
	}
	req.PlanHash = &p.PlanHash
	r, err := a.api.ApplyApplySetWithResponse(a.ctx, c.Set, req)
	if err := check(r, err); err != nil {
		return locate(err, located)
	}
	done, err := decoded(r.JSON200)
	if err != nil {
		return err
	}
	if a.json {
		return a.printRawJSON(r.Body)
	}
	a.printPlan(done)
	return nil
}

// Run prints the plan and exits 0 when it changes nothing, 1 when it
// changes something, 2 on an error.
func (c *diffCmd) Run(a *app) error {
	req, located, err := c.request(a)
	if err != nil {
		return &exitError{2, err}
	}
	p, raw, err := c.plan(a, req, located)
	if err != nil {
		return &exitError{2, err}
	}
	if a.json {
		if err := a.printRawJSON(raw); err != nil {
			return &exitError{2, err}
		}
	} else {
		a.printPlan(p)
	}
	if p.Summary.Unchanged != len(p.Changes) {
		return &exitError{code: 1}
	}
	return nil
}

// planMarks are the signs of each action, as terraform's.
var planMarks = map[models.ApplySetChangeAction]string{
	"create": "+", "update": "~", "delete": "-", "adopt": "<", "unchanged": " ", "orphan": "?", "conflict": "!",
}

// printPlan prints p for a person: one line per job that changes, its
// fields' before and after under it, and a summary.
func (a *app) printPlan(p models.ApplySetPlan) {
	w := a.stdout
	state := "never applied"
	if p.Revision > 0 {
		state = "revision " + strconv.FormatInt(p.Revision, 10)
	}
	if deref(p.Lock) {
		state += ", locked"
	}
	if p.Applied {
		fmt.Fprintf(w, "Applied apply set %q in namespace %q (now %s):\n", p.Set, p.Namespace, state)
	} else {
		fmt.Fprintf(w, "Plan of apply set %q in namespace %q (%s):\n", p.Set, p.Namespace, state)
	}
	shown := 0
	for _, c := range p.Changes {
		if c.Action == "unchanged" && !c.Drift {
			continue
		}
		shown++
		line := fmt.Sprintf("  %s %-9s %s", planMarks[c.Action], c.Action, c.Name)
		if c.Drift {
			line += "  (changed outside the set since its last apply)"
		}
		if c.Reason != nil {
			line += ": " + *c.Reason
		}
		if c.Action == "orphan" {
			line += "  (not in the files; kept: --prune deletes it)"
		}
		fmt.Fprintln(w, line)
		if c.Fields != nil {
			for _, f := range *c.Fields {
				fmt.Fprintf(w, "      %s: %s → %s\n", f.Field, planValue(f.Before), planValue(f.After))
			}
		}
	}
	if shown == 0 {
		fmt.Fprintln(w, "  no changes: the jobs are as the files say")
	}
	s := p.Summary
	if p.Applied {
		fmt.Fprintf(w, "Applied: %d created, %d updated, %d deleted, %d adopted; %d unchanged\n", s.Create, s.Update, s.Delete, s.Adopt, s.Unchanged)
	} else {
		fmt.Fprintf(w, "Plan: %d to create, %d to update, %d to delete, %d to adopt; %d unchanged\n", s.Create, s.Update, s.Delete, s.Adopt, s.Unchanged)
	}
	for _, note := range []struct {
		n    int
		text string
	}{
		{s.Drift, "changed outside the set (applying puts the files' definitions back)"},
		{s.Orphan, "in the set but not in the files (kept; --prune deletes them)"},
		{s.Conflict, "in conflict (nothing is applied while there are any; --adopt takes in jobs of no set)"},
	} {
		if note.n > 0 {
			fmt.Fprintf(w, "  %d %s\n", note.n, note.text)
		}
	}
	if deref(p.MassDelete) {
		fmt.Fprintln(w, "  this plan deletes more than half of the set's jobs, or more than 10: --allow-mass-delete to apply it")
	}
}

// planValue is a field's value on one line: its JSON, or "(none)".
func planValue(v any) string {
	if v == nil {
		return "(none)"
	}
	if s, ok := v.(string); ok {
		return strconv.Quote(s)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// applySetsCmd is tockctl applysets.
type applySetsCmd struct {
	Namespace string `help:"Only this namespace's sets (default: every one your key may read)." placeholder:"NS"`
}

// Run lists the apply sets.
func (c *applySetsCmd) Run(a *app) error {
	r, err := a.api.ListApplySetsWithResponse(a.ctx, &models.ListApplySetsParams{Namespace: optional(c.Namespace)})
	if err := check(r, err); err != nil {
		return err
	}
	if a.json {
		return a.printRawJSON(r.Body)
	}
	l, err := decoded(r.JSON200)
	if err != nil {
		return err
	}
	w := a.table()
	fmt.Fprintln(w, "SET\tJOBS\tREVISION\tLOCKED\tCOMMIT\tAPPLIED\tBY")
	for _, s := range l.Items {
		locked := "no"
		if s.Lock {
			locked = "yes"
		}
		fmt.Fprintf(w, "%s\t%d\t%d\t%s\t%s\t%s\t%s\n", qualified(s.Namespace, s.Name), s.Members, s.Revision, locked,
			cmp.Or(deref(s.Commit), "-"), s.AppliedAt.Format("2006-01-02T15:04:05Z"), s.AppliedBy)
	}
	return w.Flush()
}
