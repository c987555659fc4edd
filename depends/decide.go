// Package depends makes jobs wait for jobs (docs/jobs.md, "Jobs that
// wait for jobs"): the resolver that decides, for each execution waiting
// for its upstreams, whether it runs, waits on or is skipped, and what a
// waiting execution waits for, in words.
//
// A dependent job's run is fired as any run is (exactly once per
// scheduled time: the executions table's key), but inserted waiting, out
// of the outbox's reach; a chain's run is inserted waiting by its
// upstream's firing. The resolver of the node that owns the execution's
// bucket reads the upstreams' executions from Postgres — never from
// events, so a redelivered or re-recorded end changes nothing — and
// moves the execution from waiting to queued, or into the skip ledger,
// with a statement that acts only on a row still waiting: two nodes that
// decide the same wait (an ownership change) do it once.
package depends

import (
	"fmt"
	"strings"
	"time"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store/model"
)

// Status is where one upstream edge of a waiting execution stands.
type Status int

// Upstream statuses.
const (
	// Pending: the upstream's matching run has not ended (or not come).
	Pending Status = iota
	// Satisfied: it ended as the edge asks (or was skipped and the job
	// says on_upstream_skipped: run).
	Satisfied
	// Refused: it ended otherwise, or its run was skipped (the default
	// on_upstream_skipped: skip).
	Refused
)

// Edge is one upstream of a waiting execution as the resolver judged it.
type Edge struct {
	Upstream domain.Upstream
	Run      model.UpstreamRun
	Status   Status
	// Why says, in words, what the upstream's run is or did.
	Why string
}

// Judge judges each of w's upstreams from what the store found (runs[i]
// for w.Depends.On[i]).
func Judge(w model.Waiting, runs []model.UpstreamRun) []Edge {
	edges := make([]Edge, len(w.Depends.On))
	for i, u := range w.Depends.On {
		r := runs[i]
		e := Edge{Upstream: u, Run: r}
		name := r.JobName
		if name == "" {
			name = u.Job.String()
		}
		skipped := func(why string) {
			e.Why = why
			if w.Depends.OnUpstreamSkipped == domain.DependRun {
				e.Status = Satisfied
			} else {
				e.Status = Refused
			}
		}
		switch x := r.Execution; {
		case x != nil && x.State.Final():
			e.Why = fmt.Sprintf("%s (execution %s, scheduled %s) ended %s", name, x.ID,
				x.ScheduledFor.Format(time.RFC3339Nano), x.State)
			if domain.Accepts(u.On, x.State) {
				e.Status = Satisfied
			} else {
				e.Status, e.Why = Refused, e.Why+", not "+u.On
			}
		case x != nil:
			e.Why = fmt.Sprintf("%s (execution %s) is %s", name, x.ID, x.State)
		case w.Depends.Match == domain.MatchLatestWithin:
			e.Why = fmt.Sprintf("no run of %s ended within %s before %s", name, w.Depends.Within(),
				w.ScheduledFor.Format(time.RFC3339Nano))
		case r.Missing:
			skipped(fmt.Sprintf("upstream job %s no longer exists", name))
		case r.Skipped != "":
			skipped(fmt.Sprintf("%s skipped its run at %s (%s)", name, w.ScheduledFor.Format(time.RFC3339Nano), r.Skipped))
		case r.JobState == domain.JobPaused:
			skipped(fmt.Sprintf("%s is paused and has no run at %s", name, w.ScheduledFor.Format(time.RFC3339Nano)))
		case r.NextRunAt == nil || r.NextRunAt.After(w.ScheduledFor):
			// The upstream fires its runs in order, each in the transaction
			// that moves its next run: past the time with no execution or
			// skip for it, it has no run at this time.
			skipped(fmt.Sprintf("%s has no run at %s", name, w.ScheduledFor.Format(time.RFC3339Nano)))
		default:
			e.Why = fmt.Sprintf("%s has not fired its run at %s yet", name, w.ScheduledFor.Format(time.RFC3339Nano))
		}
		edges[i] = e
	}
	return edges
}

// Decide says what becomes of waiting execution w at now, given its
// judged upstreams: released (ok and Release), skipped (ok and not
// Release), or still waiting (not ok).
func Decide(w model.Waiting, edges []Edge, now time.Time) (model.WaitDecision, bool) {
	d := model.WaitDecision{Waiting: w}
	var sat, ref []Edge
	for _, e := range edges {
		switch e.Status {
		case Satisfied:
			sat = append(sat, e)
		case Refused:
			ref = append(ref, e)
		}
	}
	release := func() (model.WaitDecision, bool) {
		d.Release = true
		for _, e := range sat {
			if x := e.Run.Execution; x != nil {
				d.Upstreams = append(d.Upstreams, *x)
			}
		}
		return d, true
	}
	all := w.Depends.Mode != domain.DependAny
	switch {
	case len(edges) == 0:
		// Its upstreams were all deleted (forced): it waits for nothing.
		return release()
	case all && len(ref) > 0:
		d.Reason, d.Detail = domain.SkipDependency, ref[0].Why
		return d, true
	case all && len(sat) == len(edges):
		return release()
	case !all && len(sat) > 0:
		sat = sat[:1]
		return release()
	case !all && len(ref) == len(edges):
		d.Reason, d.Detail = domain.SkipDependency, whys(ref)
		return d, true
	}
	if now.Before(w.ScheduledFor.Add(w.Depends.WaitTimeout())) {
		return d, false
	}
	d.Timeout = true
	var pending []Edge
	for _, e := range edges {
		if e.Status == Pending {
			pending = append(pending, e)
		}
	}
	d.Detail = fmt.Sprintf("waited %s for: %s", w.Depends.WaitTimeout(), whys(pending))
	if w.Depends.OnTimeout == domain.DependRun {
		return release()
	}
	d.Reason = domain.SkipDependencyTimeout
	return d, true
}

func whys(es []Edge) string {
	s := make([]string, len(es))
	for i, e := range es {
		s[i] = e.Why
	}
	return strings.Join(s, "; ")
}

// Queries are the store lookups that judge the waiting executions ws,
// in order: one per upstream of each.
func Queries(ws []model.Waiting) []model.UpstreamQuery {
	var qs []model.UpstreamQuery
	for _, w := range ws {
		var within time.Duration
		if w.Depends.Match == domain.MatchLatestWithin {
			within = max(w.Depends.Within(), time.Millisecond)
		}
		for _, u := range w.Depends.On {
			qs = append(qs, model.UpstreamQuery{Job: u.Job, At: w.ScheduledFor, Within: within})
		}
	}
	return qs
}
