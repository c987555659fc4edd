package jobs

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/schedule"
	"github.com/tock-sched/tock/store/model"
)

// UpstreamFire says, for one run of a dependent job, which run of one of
// its upstreams it waits for, as their schedules say (what the upstream
// does at run time — fail, run late, be paused — is another matter).
type UpstreamFire struct {
	Job model.JobRef
	On  string
	// At is the upstream's run the dependent run waits for: at the same
	// time (same_time), or the newest within the window before it
	// (latest_within); nil when its schedule has none.
	At *time.Time
	// Note says what that means for the run, in words.
	Note string
}

// upstream is an upstream job with its compiled schedule (nil when it
// does not compile or the job is gone).
type upstream struct {
	ref   model.JobRef
	on    string
	job   *model.Job
	sched *schedule.Schedule
}

func (s *Service) upstreams(ctx context.Context, d *domain.Depends) ([]upstream, error) {
	out := make([]upstream, len(d.On))
	for i, u := range d.On {
		out[i] = upstream{ref: model.JobRef{ID: u.Job}, on: u.On}
		j, err := s.store.GetJob(ctx, u.Job)
		if err != nil {
			continue // gone: it has no run
		}
		out[i].job, out[i].ref = j, model.JobRef{ID: j.ID, Namespace: j.Namespace, Name: j.Name}
		out[i].sched, _ = schedule.Compile(j.Schedule)
	}
	return out, nil
}

// runsAt reports whether u's schedule has a run at t.
func (u upstream) runsAt(t time.Time) bool {
	switch {
	case u.sched == nil:
		return false
	case u.sched.Recurring():
		next, ok := u.sched.Next(t.Add(-time.Millisecond))
		return ok && next.Equal(t)
	}
	return u.job.NextRunAt != nil && u.job.NextRunAt.Equal(t)
}

// latestWithin is u's newest run in (t-w, t], if any.
func (u upstream) latestWithin(t time.Time, w time.Duration) *time.Time {
	switch {
	case u.sched == nil:
		return nil
	case u.sched.Recurring():
		runs, _ := u.sched.Between(t.Add(-w).Add(time.Millisecond), t.Add(time.Millisecond), 100_000)
		if len(runs) == 0 {
			return nil
		}
		return &runs[len(runs)-1]
	}
	if r := u.job.NextRunAt; r != nil && !r.After(t) && r.After(t.Add(-w)) {
		return r
	}
	return nil
}

// previewDepends fills p.Waits for dependent job j (and, for a chain,
// its Fires: its upstreams' next runs, all of them for mode any, those
// they share for all).
func (s *Service) previewDepends(ctx context.Context, p *Preview, j *model.Job, n int) error {
	d := j.Depends
	ups, err := s.upstreams(ctx, d)
	if err != nil {
		return err
	}
	if d.Chain {
		count := map[time.Time]int{}
		var first *schedule.Schedule
		for _, u := range ups {
			if u.sched == nil {
				continue
			}
			if first == nil {
				first = u.sched
			}
			if u.sched.Recurring() {
				fires, _ := u.sched.Preview(p.From, n*len(ups))
				for _, f := range fires {
					count[f.At.UTC()]++
				}
			} else if u.job.NextRunAt != nil {
				count[u.job.NextRunAt.UTC()]++
			}
		}
		var times []time.Time
		for t, c := range count {
			if d.Mode == domain.DependAny || c == len(ups) {
				times = append(times, t)
			}
		}
		slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
		p.Fires = nil
		if first != nil {
			p.Location = first.Location()
			for _, t := range times[:min(n, len(times))] {
				p.Fires = append(p.Fires, first.Classify(t))
			}
		}
	}
	p.Waits = make([][]UpstreamFire, len(p.Fires))
	for i, f := range p.Fires {
		for _, u := range ups {
			uf := UpstreamFire{Job: u.ref, On: u.on}
			name := u.ref.Name
			if name == "" {
				name = u.ref.ID.String()
			}
			if d.Match == domain.MatchLatestWithin {
				uf.At = u.latestWithin(f.At, d.Within())
				if uf.At == nil {
					uf.Note = fmt.Sprintf("%s has no run within %s before: waits for one to end (up to %s)", name, d.Within(), d.WaitTimeout())
				} else {
					uf.Note = fmt.Sprintf("after %s's run at %s ends (%s)", name, uf.At.UTC().Format(time.RFC3339), u.on)
				}
			} else if u.runsAt(f.At) {
				t := f.At
				uf.At = &t
				uf.Note = fmt.Sprintf("after %s's run at the same time ends (%s)", name, u.on)
			} else {
				uf.Note = fmt.Sprintf("%s has no run at this time: the run is %sped (on_upstream_skipped)", name, d.OnUpstreamSkipped)
			}
			p.Waits[i] = append(p.Waits[i], uf)
		}
	}
	return nil
}
