// Package applyset keeps jobs as code: a named set of jobs per namespace
// (an apply set) whose whole desired content a client sends, usually from
// a directory of files in git (tockctl apply, package jobfile). Plan
// compares it with what is stored and says what would change; Apply
// makes exactly that change, in one transaction, or nothing.
//
// A set owns its members (a column of the job, indexed), and nothing
// else: prune deletes only members, a job of the same name outside the
// set is taken in only when the request says adopt, and a job of another
// set never. Each member carries the digest of its definition as the
// set's last apply left it; a member whose definition no longer matches
// it was changed outside the set (drift), which a plan shows and an apply
// puts back. A locked set refuses changes made outside it (jobs'
// ErrLocked). A plan deleting more than half of a set's members, or more
// than MassDelete jobs, is applied only when the request allows it.
package applyset

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/jobs"
	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/store/model"
)

// MassDelete is the most jobs a plan may delete without the request
// allowing a mass delete (so is half of the set's members).
const MassDelete = 10

// Action is what a plan does with one job.
type Action string

// The actions of a plan.
const (
	Create    Action = "create"    // not stored: created
	Update    Action = "update"    // a member whose definition differs
	Delete    Action = "delete"    // a member the files no longer hold (prune)
	Adopt     Action = "adopt"     // a job of no set, taken in (adopt), updated as needed
	Unchanged Action = "unchanged" // a member as the files say
	Orphan    Action = "orphan"    // a member the files no longer hold, kept (no prune)
	Conflict  Action = "conflict"  // a job of the same name the set may not take
)

// Desired is one job the files hold.
type Desired struct {
	Job jobs.NewJob
	// Paused is what the file says of the paused state; nil: it says
	// nothing, and the state is not compared.
	Paused *bool
}

// Request is the desired content of a set and what may be done to reach
// it.
type Request struct {
	Namespace, Set string
	// Jobs are the set's jobs, every one; their namespace is the set's.
	Jobs []Desired
	// Prune deletes the members Jobs no longer holds; Adopt takes in jobs
	// of the same name that belong to no set; Lock locks the set (or, when
	// false, unlocks it) from this apply on; AllowMassDelete allows a plan
	// deleting more than half the members or more than MassDelete jobs.
	Prune, Adopt, Lock, AllowMassDelete bool
	// Commit is what is applied (a git commit), for the set's record and
	// the audit trail; Actor is who applies it.
	Commit, Actor string
	// PlanHash, for Apply, is the hash of the plan to apply.
	PlanHash string
	// MayRead says whether the caller may read a namespace (upstreams in
	// others: see jobs.NewJob.MayRead).
	MayRead func(namespace string) bool
	// Render is a job as the API shows it, for the audit trail.
	Render func(*model.Job) json.RawMessage
	// Room, when set, says whether the namespace has room for n more
	// jobs (its quota): Apply asks it for the plan's creates less its
	// deletes, when that is above 0, and fails with its error.
	Room func(n int) error
}

// Change is what a plan does with one job.
type Change struct {
	Action Action
	Name   string
	// Current is the stored job (nil for a create); Want the definition
	// the files give (nil for a delete and an orphan).
	Current, Want *model.Job
	// Fields are the fields an update or adopt changes, as
	// jobs.Service.Differences names them.
	Fields []string
	// Drift: a member changed outside the set since its last apply.
	Drift bool
	// Reason says why a conflict is one.
	Reason string
	// Paused is what the files say of the paused state (nil: nothing).
	Paused *bool

	desired *Desired
}

// Plan is what applying a request changes.
type Plan struct {
	Namespace, Set string
	// Revision is the set's (after Apply, the one it made); 0 for a set
	// never applied. Lock is whether it is locked (after Apply, as the
	// request left it).
	Revision int64
	Lock     bool
	// Hash names the plan: Apply applies a plan only while it is the
	// same.
	Hash string
	// Changes are by name.
	Changes []Change
	// MassDelete: the plan deletes more than half of the members, or more
	// than MassDelete jobs.
	MassDelete bool
	Applied    bool
}

// Count is how many changes have action a.
func (p *Plan) Count(a Action) int {
	n := 0
	for _, c := range p.Changes {
		if c.Action == a {
			n++
		}
	}
	return n
}

// Drifted is how many members drifted.
func (p *Plan) Drifted() int {
	n := 0
	for _, c := range p.Changes {
		if c.Drift {
			n++
		}
	}
	return n
}

// Errors of Apply, for errors.Is and errors.As.
var (
	// ErrStale: the plan's hash is not the one given (something changed
	// since the plan, or the request is not the planned one).
	ErrStale = errors.New("the jobs or the set changed since the plan")
	// ErrMassDelete: the plan deletes too much for a request that does
	// not allow a mass delete.
	ErrMassDelete = errors.New("the plan deletes more than half of the set's members, or more than 10 jobs")
)

// ConflictError lists the plan's conflicts, which Apply refuses.
type ConflictError struct{ Changes []Change }

func (e *ConflictError) Error() string {
	parts := make([]string, len(e.Changes))
	for i, c := range e.Changes {
		parts[i] = c.Name + ": " + c.Reason
	}
	return "apply set conflicts: " + strings.Join(parts, "; ")
}

// Store is the database the sets live in; *store.Store is the real one.
type Store interface {
	ApplySet(ctx context.Context, namespace, name string, write bool, fn func(ctx context.Context, a *store.ApplySetTx) error) error
}

// Service plans and applies sets.
type Service struct {
	jobs  *jobs.Service
	store Store
}

// New returns a Service over the job use cases (which check and build
// the jobs) and st.
func New(js *jobs.Service, st Store) *Service { return &Service{jobs: js, store: st} }

// Plan says what applying req would change, changing nothing. What is
// wrong with the request's jobs comes back as a *jobs.InvalidError whose
// fields are named jobs[i].<field>.
func (s *Service) Plan(ctx context.Context, req Request) (*Plan, error) {
	if err := checkRequest(req); err != nil {
		return nil, err
	}
	var plan *Plan
	err := s.store.ApplySet(ctx, req.Namespace, req.Set, false, func(ctx context.Context, tx *store.ApplySetTx) error {
		var err error
		plan, err = s.plan(ctx, tx, req)
		return err
	})
	return plan, err
}

// Apply plans req again in one transaction that locks the jobs
// concerned and, if the plan's hash is req.PlanHash, applies all of it
// there: jobs created, updated, adopted and deleted, members owned with
// the digest of their definitions, the set's record saved with one more
// revision, and an audit entry for every job changed. It fails, changing
// nothing, with ErrStale, a *ConflictError, ErrMassDelete, a
// *jobs.InvalidError, or the store's errors (a *store.DependentsError
// when a job to delete is another's upstream).
func (s *Service) Apply(ctx context.Context, req Request) (*Plan, error) {
	if err := checkRequest(req); err != nil {
		return nil, err
	}
	var plan *Plan
	err := s.store.ApplySet(ctx, req.Namespace, req.Set, true, func(ctx context.Context, tx *store.ApplySetTx) error {
		var err error
		if plan, err = s.plan(ctx, tx, req); err != nil {
			return err
		}
		switch {
		case plan.Hash != req.PlanHash:
			return ErrStale
		case plan.Count(Conflict) > 0:
			var cs []Change
			for _, c := range plan.Changes {
				if c.Action == Conflict {
					cs = append(cs, c)
				}
			}
			return &ConflictError{Changes: cs}
		case plan.MassDelete && !req.AllowMassDelete:
			return ErrMassDelete
		}
		if n := plan.Count(Create) - plan.Count(Delete); n > 0 && req.Room != nil {
			if err := req.Room(n); err != nil {
				return err
			}
		}
		return s.apply(ctx, tx, req, plan)
	})
	if err != nil {
		return nil, err
	}
	plan.Applied = true
	return plan, nil
}

// checkRequest refuses a set or namespace name a job could not have.
func checkRequest(req Request) error {
	var faults []domain.FieldError
	if p := jobs.NameProblem(req.Set); p != "" {
		faults = append(faults, domain.FieldError{Field: "name", Message: p})
	}
	if p := jobs.NameProblem(req.Namespace); p != "" {
		faults = append(faults, domain.FieldError{Field: "namespace", Message: p})
	}
	if len(faults) > 0 {
		return &jobs.InvalidError{Faults: faults}
	}
	return nil
}

// plan reads what req concerns in tx and compares.
func (s *Service) plan(ctx context.Context, tx *store.ApplySetTx, req Request) (*Plan, error) {
	set, err := tx.Set(ctx)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(req.Jobs))
	index := map[string]int{}
	var faults []domain.FieldError
	for i, d := range req.Jobs {
		names[i] = d.Job.Name
		if k, dup := index[d.Job.Name]; dup {
			faults = append(faults, domain.FieldError{Field: fmt.Sprintf("jobs[%d].name", i), Message: fmt.Sprintf("repeats jobs[%d]'s", k)})
			continue
		}
		index[d.Job.Name] = i
	}
	stored, err := tx.Jobs(ctx, names)
	if err != nil {
		return nil, err
	}
	byName := map[string]*model.Job{}
	members := 0
	for _, j := range stored {
		byName[j.Name] = j
		if j.ApplySet == req.Set {
			members++
		}
	}
	// Every job's definition, with the ids the new ones will have, so
	// that jobs of the set can depend on each other.
	plan := &Plan{Namespace: req.Namespace, Set: req.Set, Revision: set.Revision, Lock: set.Lock}
	ids := map[string]uuid.UUID{}
	for i := range req.Jobs {
		d := &req.Jobs[i]
		c := Change{Name: d.Job.Name, Current: byName[d.Job.Name], Paused: d.Paused, desired: d}
		if c.Current != nil {
			ids[c.Name] = c.Current.ID
		} else {
			ids[c.Name] = uuid.Must(uuid.NewV7())
		}
		want, err := s.jobs.BuildDefinition(d.Job)
		if err != nil {
			faults = append(faults, prefixed(i, err)...)
			continue
		}
		want.ID = ids[c.Name]
		c.Want = want
		plan.Changes = append(plan.Changes, c)
	}
	lookup := func(ctx context.Context, ns, name string) (model.JobRef, error) {
		if id, ok := ids[name]; ok && ns == req.Namespace {
			return model.JobRef{ID: id, Namespace: ns, Name: name}, nil
		}
		return tx.JobRef(ctx, ns, name)
	}
	for k := range plan.Changes {
		c := &plan.Changes[k]
		if nj := c.desired.Job; nj.Depends != nil {
			if c.Want.Depends, err = s.jobs.ResolveDepends(ctx, req.Namespace, nj.Depends, nj.Chain(), req.MayRead, lookup); err != nil {
				if jobs.Faults(err) == nil {
					return nil, err
				}
				faults = append(faults, prefixed(index[c.Name], err)...)
			}
		}
	}
	for k := range plan.Changes {
		c := &plan.Changes[k]
		if err := s.jobs.CheckCalendars(ctx, c.Want); err != nil {
			if jobs.Faults(err) == nil {
				return nil, err
			}
			faults = append(faults, prefixed(index[c.Name], err)...)
		}
	}
	if len(faults) > 0 {
		return nil, &jobs.InvalidError{Faults: faults}
	}
	for k := range plan.Changes {
		c := &plan.Changes[k]
		cur := c.Current
		switch {
		case cur == nil:
			c.Action = Create
		case cur.ApplySet != req.Set && cur.ApplySet != "":
			c.Action, c.Reason = Conflict, fmt.Sprintf("the job belongs to apply set %q", cur.ApplySet)
		case cur.ApplySet == "" && !req.Adopt:
			c.Action, c.Reason = Conflict, "a job of this name exists outside the set; adopt it to take it in"
		default:
			c.Fields = s.jobs.Differences(cur, c.Want, c.desired.Job.SecretHeaders, c.desired.Paused)
			switch {
			case cur.ApplySet == "":
				c.Action = Adopt
			case len(c.Fields) > 0:
				c.Action = Update
			default:
				c.Action = Unchanged
			}
			c.Drift = cur.ApplySet == req.Set && cur.AppliedHash != jobs.DefinitionHash(cur)
		}
	}
	deletes := 0
	for _, j := range stored {
		if j.ApplySet != req.Set {
			continue
		}
		if _, wanted := index[j.Name]; wanted {
			continue
		}
		c := Change{Action: Orphan, Name: j.Name, Current: j, Drift: j.AppliedHash != jobs.DefinitionHash(j)}
		if req.Prune {
			c.Action = Delete
			deletes++
		}
		plan.Changes = append(plan.Changes, c)
	}
	slices.SortFunc(plan.Changes, func(a, b Change) int { return strings.Compare(a.Name, b.Name) })
	plan.MassDelete = deletes > MassDelete || deletes*2 > members
	plan.Hash = planHash(set, req, plan)
	return plan, nil
}

// prefixed is err's faults with their fields under jobs[i].
func prefixed(i int, err error) []domain.FieldError {
	fs := jobs.Faults(err)
	if fs == nil {
		return []domain.FieldError{{Field: fmt.Sprintf("jobs[%d]", i), Message: err.Error()}}
	}
	out := make([]domain.FieldError, len(fs))
	for k, f := range fs {
		out[k] = domain.FieldError{Field: fmt.Sprintf("jobs[%d].%s", i, f.Field), Message: f.Message}
	}
	return out
}

// planHash digests what the plan depends on: the set's record, the
// request's options, and for each change its action, the stored job's
// id, revision and applied digest, the fields it changes and the
// definition it writes (secret values excepted: their changes are among
// the fields; names of upstreams as the files give them).
func planHash(set model.ApplySet, req Request, plan *Plan) string {
	type entry struct {
		Action   Action
		Name     string
		ID       uuid.UUID
		Revision int64
		Applied  string
		Drift    bool
		Fields   []string
		Want     string
		Depends  *jobs.DependsSpec
		Paused   *bool
	}
	doc := struct {
		Set                                 model.ApplySet
		Lock, Prune, Adopt, AllowMassDelete bool
		Changes                             []entry
	}{Set: set, Lock: req.Lock, Prune: req.Prune, Adopt: req.Adopt, AllowMassDelete: req.AllowMassDelete}
	for _, c := range plan.Changes {
		e := entry{Action: c.Action, Name: c.Name, Drift: c.Drift, Fields: c.Fields}
		if c.Current != nil {
			e.ID, e.Revision, e.Applied = c.Current.ID, c.Current.Revision, c.Current.AppliedHash
		}
		if c.Want != nil {
			w := *c.Want
			w.Handler.SecretHeaders, w.Depends = nil, nil
			e.Want, e.Depends, e.Paused = jobs.DefinitionHash(&w), c.desired.Job.Depends, c.desired.Paused
		}
		doc.Changes = append(doc.Changes, e)
	}
	b, _ := json.Marshal(doc)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// apply makes plan's changes in tx.
func (s *Service) apply(ctx context.Context, tx *store.ApplySetTx, req Request, plan *Plan) error {
	now, err := s.jobs.Now(ctx)
	if err != nil {
		return err
	}
	var (
		owned   []*model.Job
		audit   []model.AuditEntry
		edges   []*model.Job
		faults  []domain.FieldError
		entryOf = func(action string, j *model.Job, before, after json.RawMessage) model.AuditEntry {
			return model.AuditEntry{Actor: req.Actor, Namespace: req.Namespace, Action: action, Resource: "job " + j.ID.String(),
				Before: before, After: after}
		}
	)
	render := req.Render
	if render == nil {
		render = func(*model.Job) json.RawMessage { return nil }
	}
	// Creates first, their edges once they all exist, so that every
	// upstream of the set does when an edge names it.
	for k := range plan.Changes {
		c := &plan.Changes[k]
		if c.Action != Create {
			continue
		}
		j := c.Want
		switch paused := c.desired.Paused != nil && *c.desired.Paused; {
		case paused:
		case j.Depends != nil && j.Depends.Chain:
			j.State = domain.JobActive
		default:
			next, err := s.jobs.FirstRun(j.Schedule, now)
			if err != nil {
				faults = append(faults, prefixed(slices.IndexFunc(req.Jobs, func(d Desired) bool { return d.Job.Name == c.Name }), err)...)
				continue
			}
			j.State, j.NextRunAt = domain.JobActive, &next
		}
		if err := tx.Create(ctx, j); err != nil {
			return err
		}
		if j.Depends != nil {
			edges = append(edges, j)
		}
		owned = append(owned, j)
		audit = append(audit, entryOf("jobs.create", j, nil, render(j)))
	}
	if len(faults) > 0 {
		return &jobs.InvalidError{Faults: faults}
	}
	for _, j := range edges {
		if err := tx.WriteEdges(ctx, j); err != nil {
			return err
		}
	}
	// owned holds the creates alone so far.
	if err := tx.Announce(ctx, owned); err != nil {
		return err
	}
	for k := range plan.Changes {
		c := &plan.Changes[k]
		switch c.Action {
		case Update, Adopt:
			before := render(c.Current)
			// A copy: the plan keeps the job as it was, for its answer.
			cp := *c.Current
			j := &cp
			if len(c.Fields) > 0 {
				if err := s.jobs.Converge(j, c.Want, c.Fields, c.desired.Paused, now); err != nil {
					faults = append(faults, prefixed(slices.IndexFunc(req.Jobs, func(d Desired) bool { return d.Job.Name == c.Name }), err)...)
					continue
				}
				if err := tx.Update(ctx, j); err != nil {
					return err
				}
			}
			owned = append(owned, j)
			action := "jobs.update"
			if c.Action == Adopt {
				action = "jobs.adopt"
			}
			audit = append(audit, entryOf(action, j, before, render(j)))
		case Unchanged:
			owned = append(owned, c.Current)
		}
	}
	if len(faults) > 0 {
		return &jobs.InvalidError{Faults: faults}
	}
	for _, c := range plan.Changes {
		if c.Action != Delete {
			continue
		}
		if err := tx.Delete(ctx, c.Current.ID, c.Current.Revision); err != nil {
			return err
		}
		audit = append(audit, entryOf("jobs.delete", c.Current, render(c.Current), nil))
	}
	hashes := make([]string, len(owned))
	for i, j := range owned {
		hashes[i] = jobs.DefinitionHash(j)
	}
	if err := tx.Own(ctx, owned, hashes); err != nil {
		return err
	}
	saved, err := tx.Save(ctx, req.Lock, req.Commit, req.Actor)
	if err != nil {
		return err
	}
	plan.Revision, plan.Lock = saved.Revision, saved.Lock
	detail, _ := json.Marshal(map[string]any{"applyset": req.Set, "revision": saved.Revision, "commit": req.Commit})
	at := time.Now()
	for i := range audit {
		audit[i].Detail, audit[i].At = detail, at
	}
	return tx.Audit(ctx, audit)
}
