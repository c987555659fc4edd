package api

import (
	"time"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/schedule"
	"github.com/tock-sched/tock/store/model"
)

// jobOf is the API's view of a stored job.
func jobOf(j *model.Job) models.Job {
	out := models.Job{
		Id:            j.ID,
		Revision:      j.Revision,
		Namespace:     j.Namespace,
		Name:          j.Name,
		Bucket:        j.Bucket,
		State:         models.JobState(j.State),
		Schedule:      scheduleOf(j.Schedule),
		Handler:       handlerView(j.Handler),
		Retry:         retryView(j.Retry),
		Priority:      priorityView(j.Priority),
		NextRunAt:     utc(j.NextRunAt),
		LastRunAt:     utc(j.LastRunAt),
		LastSuccessAt: utc(j.LastSuccessAt),
		CreatedAt:     j.CreatedAt.UTC(),
		UpdatedAt:     j.UpdatedAt.UTC(),
	}
	if len(j.Payload) > 0 {
		p := j.Payload
		out.Payload = &p
	}
	if j.Timeout > 0 {
		out.Timeout = ptr(formatDuration(j.Timeout))
	}
	if len(j.Labels) > 0 {
		out.Labels = ptr(models.Labels(j.Labels))
	}
	if j.Description != "" {
		out.Description = ptr(j.Description)
	}
	if p := j.Policy; p != nil {
		m := models.MissedPolicy{Policy: ptr(models.MissedPolicyPolicy(p.Missed.Policy)), Grace: nonEmpty(p.Missed.Grace)}
		if p.Missed.Max != 0 {
			m.Max = ptr(p.Missed.Max)
		}
		out.Missed = &m
		if p.Overlap != "" {
			out.Overlap = ptr(models.Overlap(p.Overlap))
		}
		if c := p.Concurrency; c != nil {
			out.Concurrency = &models.Concurrency{Key: c.Key, Limit: c.Limit,
				Scope: ptr(models.ConcurrencyScope(c.Scope)), OnLimit: ptr(models.ConcurrencyOnLimit(c.OnLimit))}
		}
		if r := p.RateLimit; r != nil {
			out.RateLimit = &models.RateLimit{Key: r.Key, Limit: r.Limit, Per: r.Per, Burst: ptr(r.Burst),
				OnLimit: ptr(models.RateLimitOnLimit(r.OnLimit))}
		}
		if len(p.Calendars) > 0 {
			out.Calendars = ptr(models.JobCalendars(p.Calendars))
			out.OnExcluded = ptr(models.OnExcluded(p.OnExcluded))
		}
	}
	out.Runs = ptr(j.FiredCount)
	if j.ApplySet != "" {
		out.Applyset = ptr(j.ApplySet)
		if j.SetLocked {
			out.ApplysetLocked = ptr(true)
		}
	}
	dependsView(j, &out)
	return out
}

func scheduleOf(s schedule.Spec) models.Schedule {
	var out models.Schedule
	if s.Cron != "" {
		out.Cron = ptr(s.Cron)
	}
	if s.Timezone != "" {
		out.Timezone = ptr(s.Timezone)
	}
	if s.In != "" {
		out.In = ptr(s.In)
	}
	out.At = utc(s.At)
	out.Anchor = utc(s.Anchor)
	out.StartAt, out.EndAt = utc(s.StartAt), utc(s.EndAt)
	if s.MaxRuns != 0 {
		out.MaxRuns = ptr(s.MaxRuns)
	}
	out.Jitter = nonEmpty(s.Jitter)
	return out
}

// handlerView is the API's view of a handler: it never shows a secret
// (every secret header's value, and that of every plain header whose name
// says it is a credential, is domain.SecretMask). Every answer that shows
// a job shows its handler through here.
func handlerView(h domain.Handler) models.Handler {
	out := models.Handler{Type: models.HandlerType(h.Type)}
	if h.URL != "" {
		out.Url = ptr(h.URL)
	}
	if h.Method != "" {
		out.Method = ptr(h.Method)
	}
	if len(h.Headers) > 0 {
		hs := make(map[string]string, len(h.Headers))
		for k, v := range h.Headers {
			if domain.SensitiveHeader(k) {
				v = domain.SecretMask // a credential stored before secret headers existed
			}
			hs[k] = v
		}
		out.Headers = &hs
	}
	if len(h.SecretHeaders) > 0 {
		hs := make(map[string]string, len(h.SecretHeaders))
		for k := range h.SecretHeaders {
			hs[k] = domain.SecretMask
		}
		out.SecretHeaders = &hs
	}
	if h.Subject != "" {
		out.Subject = ptr(h.Subject)
	}
	if h.WaitReply {
		out.WaitReply = ptr(true)
	}
	if h.Name != "" {
		out.Name = ptr(h.Name)
	}
	if h.Log != nil {
		lp := models.LogPolicy{}
		if h.Log.CapBytes != 0 {
			lp.CapBytes = ptr(h.Log.CapBytes)
		}
		if h.Log.Policy != "" {
			lp.Policy = ptr(models.LogPolicyPolicy(h.Log.Policy))
		}
		out.Log = &lp
	}
	return out
}

func retryView(r domain.RetryPolicy) *models.RetryPolicy {
	if r == (domain.RetryPolicy{}) {
		return nil
	}
	var out models.RetryPolicy
	if r.MaxAttempts != 0 {
		out.MaxAttempts = ptr(r.MaxAttempts)
	}
	if r.InitialBackoff != "" {
		out.InitialBackoff = ptr(r.InitialBackoff)
	}
	if r.MaxBackoff != "" {
		out.MaxBackoff = ptr(r.MaxBackoff)
	}
	if r.Multiplier != 0 {
		out.Multiplier = ptr(r.Multiplier)
	}
	if r.Jitter != "" {
		out.Jitter = ptr(models.RetryPolicyJitter(r.Jitter))
	}
	return &out
}

// executionOf is the API's view of a stored execution; withAttempts adds
// its attempt list (GET /v1/executions/{id} only).
func executionOf(e *model.Execution, withAttempts bool) models.Execution {
	out := models.Execution{
		Id:            e.ID,
		JobId:         e.JobID,
		JobName:       e.JobName,
		Namespace:     e.Namespace,
		ScheduledFor:  e.ScheduledFor.UTC(),
		Manual:        e.Manual,
		State:         models.ExecutionState(e.State),
		Attempts:      e.Attempts,
		Priority:      priorityView(e.Priority),
		NextAttemptAt: utc(e.NextAttemptAt),
		DispatchedAt:  utc(e.DispatchedAt),
		StartedAt:     utc(e.StartedAt),
		FinishedAt:    utc(e.FinishedAt),
		ExecutorId:    nonEmpty(e.ExecutorID),
		FiredBy:       nonEmpty(e.FiredBy),
		Error:         nonEmpty(e.Error),
		Output:        nonEmpty(e.Output),
		DueAt:         utc(e.JitteredDue),
	}
	if e.Backfill {
		out.Backfill = ptr(true)
	}
	if e.Buffered {
		// Its next_attempt_at is a far-future placeholder, not a time.
		out.Buffered, out.NextAttemptAt = ptr(true), nil
	}
	if e.RateKey != "" {
		out.RateLimitKey = ptr(e.RateKey)
	}
	if e.SlotKey != "" {
		out.ConcurrencyKey = ptr(e.SlotKey)
		if e.State == domain.ExecWaiting {
			out.NextAttemptAt = nil // a placeholder too
		}
	}
	if withAttempts {
		list := make([]models.Attempt, 0, len(e.AttemptList))
		for _, a := range e.AttemptList {
			at := models.Attempt{
				Number:      a.Number,
				ExecutorId:  nonEmpty(a.ExecutorID),
				FinishedAt:  utc(a.FinishedAt),
				HeartbeatAt: utc(a.HeartbeatAt),
				Error:       nonEmpty(a.Error),
				Output:      nonEmpty(a.Output),
			}
			if !a.StartedAt.IsZero() {
				at.StartedAt = ptr(a.StartedAt.UTC())
			}
			if a.Outcome != "" {
				at.Outcome = ptr(models.AttemptOutcome(a.Outcome))
			}
			list = append(list, at)
		}
		out.AttemptList = &list
		if len(e.Notes) > 0 {
			notes := make([]models.ExecutionNote, len(e.Notes))
			for i, n := range e.Notes {
				notes[i] = models.ExecutionNote{At: n.At.UTC(), Kind: models.ExecutionNoteKind(n.Kind), Note: n.Note}
			}
			out.Notes = &notes
		}
	}
	return out
}

// priorityView is a stored priority class; "" (never written) is normal.
func priorityView(p domain.Priority) *models.Priority {
	return ptr(models.Priority(p.OrNormal()))
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
