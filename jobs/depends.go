package jobs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/store/model"
)

// DependsSpec is what a caller says a job waits for (docs/jobs.md, "Jobs
// that wait for jobs").
type DependsSpec struct {
	// On are the upstreams (at most domain.MaxUpstreams): each names a job
	// by id, by name in the job's own namespace, or as "namespace/name",
	// and what its run must end in (domain.DependOnSuccess, the default,
	// DependOnFailure or DependOnAny). An empty On removes the job's
	// dependencies (in a Patch).
	On []DependRef
	// Mode is domain.DependAll (default) or DependAny.
	Mode string
	// Match is domain.MatchSameTime (default) or MatchLatestWithin, with
	// Within its window.
	Match  string
	Within time.Duration
	// WaitTimeout bounds the wait after the scheduled time (nil:
	// domain.DefaultWaitTimeout).
	WaitTimeout *time.Duration
	// OnTimeout and OnUpstreamSkipped are domain.DependSkip (default) or
	// DependRun.
	OnTimeout, OnUpstreamSkipped string
}

// DependRef names an upstream and the outcome an edge asks of it.
type DependRef struct {
	Job string
	On  string
}

// ForeignError: an upstream is in a namespace the caller may not read.
type ForeignError struct{ Field, Namespace string }

func (e *ForeignError) Error() string {
	return fmt.Sprintf("%s: the job is in namespace %q, which you may not read", e.Field, e.Namespace)
}

// checkDepends checks what a spec says by itself, without reading any
// job. chain: the job has no schedule of its own, so its runs are its
// upstreams' scheduled times, matched same_time.
func checkDepends(d *DependsSpec, chain bool, f *faults) {
	if d == nil {
		return
	}
	if chain && len(d.On) == 0 {
		f.add("depends_on", "is required for a job without a schedule that depends on others (a chain)")
	}
	if chain && d.Match == domain.MatchLatestWithin {
		f.add("depends_match", "a job without a schedule (a chain) runs at its upstreams' scheduled times: same_time")
	}
	if len(d.On) > domain.MaxUpstreams {
		f.add("depends_on", "has %d upstreams; at most %d", len(d.On), domain.MaxUpstreams)
	}
	seen := map[string]int{}
	for i, r := range d.On {
		field := fmt.Sprintf("depends_on[%d]", i)
		switch {
		case strings.TrimSpace(r.Job) == "":
			f.add(field+".job", "is required: a job's id, its name, or namespace/name")
		case seen[r.Job] > 0:
			f.add(field+".job", "names %q again (depends_on[%d])", r.Job, seen[r.Job]-1)
		}
		seen[r.Job] = i + 1
		switch r.On {
		case "", domain.DependOnSuccess, domain.DependOnFailure, domain.DependOnAny:
		default:
			f.add(field+".on", "must be success, failure or any; got %q", r.On)
		}
	}
	switch d.Mode {
	case "", domain.DependAll, domain.DependAny:
	default:
		f.add("depends_mode", "must be all or any; got %q", d.Mode)
	}
	switch d.Match {
	case "", domain.MatchSameTime:
		if d.Within != 0 {
			f.add("depends_match.latest_within", "applies only to latest_within matching")
		}
	case domain.MatchLatestWithin:
		if d.Within <= 0 || d.Within > domain.MaxWithin {
			f.add("depends_match.latest_within", "must be a duration above 0 and at most %s", domain.MaxWithin)
		}
	default:
		f.add("depends_match", `must be "same_time" or {"latest_within": <duration>}; got %q`, d.Match)
	}
	if t := d.WaitTimeout; t != nil && (*t < time.Second || *t > domain.MaxWaitTimeout) {
		f.add("wait_timeout", "must be between 1s and %s", domain.MaxWaitTimeout)
	}
	for field, v := range map[string]string{"on_timeout": d.OnTimeout, "on_upstream_skipped": d.OnUpstreamSkipped} {
		if v != "" && v != domain.DependSkip && v != domain.DependRun {
			f.add(field, "must be skip or run; got %q", v)
		}
	}
}

// resolveDepends makes the stored form of d for a job in namespace ns:
// each upstream named by id, defaults filled in. An upstream that does
// not exist is a fault naming it; one in another namespace must pass
// mayRead (nil: none may be read), else a *ForeignError.
func (s *Service) resolveDepends(ctx context.Context, ns string, d *DependsSpec, chain bool,
	mayRead func(namespace string) bool,
) (*domain.Depends, error) {
	return s.ResolveDepends(ctx, ns, d, chain, mayRead, s.store.GetJobRef)
}

// ResolveDepends is resolveDepends with the names of upstreams looked up
// by lookup (which fails with store.ErrNotFound for no such job): an
// apply resolves them among the jobs it creates too.
func (s *Service) ResolveDepends(ctx context.Context, ns string, d *DependsSpec, chain bool,
	mayRead func(namespace string) bool, lookup func(ctx context.Context, namespace, name string) (model.JobRef, error),
) (*domain.Depends, error) {
	out := &domain.Depends{Mode: or(d.Mode, domain.DependAll), Match: or(d.Match, domain.MatchSameTime),
		WaitTimeoutMS: domain.DefaultWaitTimeout.Milliseconds(), OnTimeout: or(d.OnTimeout, domain.DependSkip),
		OnUpstreamSkipped: or(d.OnUpstreamSkipped, domain.DependSkip), Chain: chain}
	if out.Match == domain.MatchLatestWithin {
		out.WithinMS = d.Within.Milliseconds()
	}
	if d.WaitTimeout != nil {
		out.WaitTimeoutMS = d.WaitTimeout.Milliseconds()
	}
	var f faults
	var byID []uuid.UUID
	for _, r := range d.On {
		if id, err := uuid.Parse(r.Job); err == nil {
			byID = append(byID, id)
		}
	}
	refs := map[uuid.UUID]model.JobRef{}
	if len(byID) > 0 {
		var err error
		if refs, err = s.store.ListJobRefs(ctx, byID); err != nil {
			return nil, err
		}
	}
	for i, r := range d.On {
		field := fmt.Sprintf("depends_on[%d].job", i)
		var ref model.JobRef
		if id, err := uuid.Parse(r.Job); err == nil {
			var ok bool
			if ref, ok = refs[id]; !ok {
				f.add(field, "no job has id %s", id)
				continue
			}
		} else {
			rns, name := ns, r.Job
			if i := strings.IndexByte(r.Job, '/'); i >= 0 {
				rns, name = r.Job[:i], r.Job[i+1:]
			}
			ref, err = lookup(ctx, rns, name)
			if errors.Is(err, store.ErrNotFound) {
				f.add(field, "no job is called %q in namespace %q", name, rns)
				continue
			}
			if err != nil {
				return nil, err
			}
		}
		if ref.Namespace != ns && (mayRead == nil || !mayRead(ref.Namespace)) {
			return nil, &ForeignError{Field: field, Namespace: ref.Namespace}
		}
		out.On = append(out.On, domain.Upstream{Job: ref.ID, On: or(r.On, domain.DependOnSuccess)})
	}
	if err := f.err(); err != nil {
		return nil, err
	}
	return out, nil
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// DependsFault turns the store's refusal of a job's dependencies (a
// cycle, an upstream deleted meanwhile) into an *InvalidError naming the
// jobs, or returns err as it is.
func (s *Service) DependsFault(ctx context.Context, err error, self model.JobRef) error {
	var ce *store.CycleError
	var ue *store.UnknownUpstreamError
	switch {
	case errors.As(err, &ce):
		names, nerr := s.store.ListJobRefs(ctx, ce.Path)
		if nerr != nil {
			return err
		}
		parts := make([]string, len(ce.Path))
		for i, id := range ce.Path {
			switch r, ok := names[id]; {
			case ok:
				parts[i] = r.Name
			case id == self.ID:
				parts[i] = self.Name
			default:
				parts[i] = id.String()
			}
		}
		return &InvalidError{Faults: []domain.FieldError{{Field: "depends_on",
			Message: "would close a dependency cycle: " + strings.Join(parts, " → ")}}}
	case errors.As(err, &ue):
		return &InvalidError{Faults: []domain.FieldError{{Field: "depends_on",
			Message: fmt.Sprintf("no job has id %s (deleted meanwhile)", ue.ID)}}}
	}
	return err
}
