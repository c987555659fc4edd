package notify

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/schedule"
	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/store/model"
)

// Silence: a job is silent when the run its schedule expected after its
// last success (or, for a job that never succeeded, after it was created
// or resumed) has not succeeded within the rule's grace of its scheduled
// time. So the grace must cover how long the job runs. Only active
// recurring jobs can be silent: a paused job, a completed one, a one-shot
// job never are. Each silence is told once: its event's identity is the
// job and the moment its silence is counted from, so the next silence
// (after another success) is a new one.

// silenceLoop sweeps for silent jobs every cfg.Silence, one node at a
// time in the cluster (store.SilenceSweep).
func (s *Service) silenceLoop(ctx context.Context) {
	t := time.NewTicker(s.cfg.Silence)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := s.cfg.Store.SilenceSweep(ctx, s.SweepSilence); err != nil && ctx.Err() == nil {
			s.log.Warn("look for silent jobs", "err", err)
		}
	}
}

// SweepSilence writes a job.silent event for every job a job.silent rule
// chooses that is silent now.
func (s *Service) SweepSilence(ctx context.Context) error {
	rules, err := s.cfg.Store.ListActiveRules(ctx, "")
	if err != nil {
		return err
	}
	now := s.cfg.Now()
	var evs []model.NotifyEvent
	for _, r := range rules {
		if !slices.Contains(r.Events, domain.NotifyJobSilent) {
			continue
		}
		jobs, err := s.cfg.Store.ListSilenceCandidates(ctx, r)
		if err != nil {
			return err
		}
		for _, j := range jobs {
			due, ok := silentAfter(&s.schedules, j, r.SilentGrace)
			if !ok || !now.After(due) {
				continue
			}
			detail, _ := json.Marshal(map[string]any{"since": j.Since, "expected_by": due,
				"silent_for": now.Sub(j.Since).Truncate(time.Second).String(), "grace_ms": r.SilentGrace.Milliseconds()})
			id := j.JobID
			evs = append(evs, model.NotifyEvent{ID: uuid.Must(uuid.NewV7()), RuleID: r.ID, Namespace: r.Namespace,
				Kind: domain.NotifyJobSilent, JobID: &id, JobName: j.Name, At: now.UTC(), Detail: detail,
				DedupKey: r.ID.String() + "/" + domain.NotifyJobSilent + "/" + j.JobID.String() + "/" +
					j.Since.UTC().Format(time.RFC3339Nano)})
		}
	}
	_, err = s.cfg.Store.CreateNotifyEvents(ctx, evs)
	return err
}

// silentAfter is when job j is silent if it has not succeeded: its first
// scheduled run after j.Since, plus grace. ok is false when its schedule
// has no run after then (or cannot be read).
func silentAfter(cache *schedule.Cache, j store.SilentCandidate, grace time.Duration) (time.Time, bool) {
	var spec schedule.Spec
	if err := json.Unmarshal(j.Spec, &spec); err != nil {
		return time.Time{}, false
	}
	sch, err := cache.Compile(spec)
	if err != nil || !sch.Recurring() {
		return time.Time{}, false
	}
	next, ok := sch.Next(j.Since)
	if !ok {
		return time.Time{}, false
	}
	return next.Add(grace), true
}
