package jobs

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/schedule"
	"github.com/tock-sched/tock/store/model"
)

// What jobs kept as code (package applyset) need: the definition of a
// job, as a file gives it, compared field by field with a stored one,
// written onto it, and digested. The definition is everything a job
// runs and when, not its runtime state (state, next run, history); a
// paused state is compared only when the file says it.

// ErrLocked: the job belongs to an apply set that refuses changes made
// outside it.
var ErrLocked = errors.New("the job belongs to a locked apply set")

// LockedError names the locked set of ErrLocked.
type LockedError struct{ Set string }

func (e *LockedError) Error() string {
	return fmt.Sprintf("the job belongs to apply set %q, which is locked: change it in the set's files", e.Set)
}

func (e *LockedError) Unwrap() error { return ErrLocked }

// unlocked fails with a *LockedError when j belongs to a locked set.
func unlocked(j *model.Job) error {
	if j.SetLocked {
		return &LockedError{Set: j.ApplySet}
	}
	return nil
}

// BuildDefinition checks nj and returns the job's definition as Build
// does, but paused and without computing a first run (the schedule is
// still checked): FirstRun computes it when the job is to be active.
func (s *Service) BuildDefinition(nj NewJob) (*model.Job, error) {
	nj.Paused = true
	return s.Build(nj, nil)
}

// FirstRun is the first run of schedule sp after now, or a fault naming
// the schedule's field when it has none.
func (s *Service) FirstRun(sp schedule.Spec, now time.Time) (time.Time, error) {
	var f faults
	sched := s.compile(sp, &f)
	if sched == nil {
		return time.Time{}, f.err()
	}
	next, err := sched.First(now)
	if err != nil {
		addScheduleError(err, &f)
		return time.Time{}, f.err()
	}
	return next, nil
}

// Differences lists the fields of the definition in which stored job cur
// and want differ, by the job API's names ("schedule", "handler",
// "handler.secret_headers.<name>", "retry", "depends_on", …). want is
// as BuildDefinition made it (with Depends resolved); paused, when not
// nil, is the paused state the file asks for (compared unless cur has
// completed). A secret header is the same when its stored value opens to
// the value wantSecrets gives in clear.
func (s *Service) Differences(cur, want *model.Job, wantSecrets map[string]string, paused *bool) []string {
	var out []string
	diff := func(field string, same bool) {
		if !same {
			out = append(out, field)
		}
	}
	diff("schedule", SameSchedule(cur.Schedule, want.Schedule))
	ch, wh := cur.Handler, want.Handler
	ch.SecretHeaders, wh.SecretHeaders = nil, nil
	diff("handler", sameJSON(ch, wh))
	for _, name := range s.changedSecrets(cur.Handler.SecretHeaders, wantSecrets) {
		out = append(out, "handler.secret_headers."+name)
	}
	diff("payload", bytes.Equal(canonicalJSON(cur.Payload), canonicalJSON(want.Payload)))
	diff("retry", sameJSON(cur.Retry, want.Retry))
	diff("priority", or(string(cur.Priority), string(domain.PriorityNormal)) == or(string(want.Priority), string(domain.PriorityNormal)))
	diff("timeout", cur.Timeout == want.Timeout)
	diff("labels", maps.Equal(cur.Labels, want.Labels))
	diff("description", cur.Description == want.Description)
	cp, wp := policyOf(cur), policyOf(want)
	diff("missed", sameJSON(cp.Missed, wp.Missed))
	diff("overlap", cp.Overlap == wp.Overlap)
	diff("concurrency", sameJSON(cp.Concurrency, wp.Concurrency))
	diff("rate_limit", sameJSON(cp.RateLimit, wp.RateLimit))
	diff("calendars", slices.Equal(cp.Calendars, wp.Calendars))
	diff("on_excluded", cp.OnExcluded == wp.OnExcluded)
	cd, wd := deref(cur.Depends), deref(want.Depends)
	diff("depends_on", sameJSON(cd.On, wd.On))
	if cur.Depends != nil && want.Depends != nil {
		diff("depends_mode", cd.Mode == wd.Mode)
		diff("depends_match", cd.Match == wd.Match && cd.WithinMS == wd.WithinMS)
		diff("wait_timeout", cd.WaitTimeoutMS == wd.WaitTimeoutMS)
		diff("on_timeout", cd.OnTimeout == wd.OnTimeout)
		diff("on_upstream_skipped", cd.OnUpstreamSkipped == wd.OnUpstreamSkipped)
	}
	if paused != nil && cur.State != domain.JobCompleted {
		diff("paused", (cur.State == domain.JobPaused) == *paused)
	}
	return out
}

// changedSecrets names the secret headers that differ between the stored
// ones and those given in clear, in name order.
func (s *Service) changedSecrets(stored map[string]domain.SealedSecret, given map[string]string) []string {
	var out []string
	for name, v := range given {
		sealed, ok := stored[name]
		if !ok || !s.opens(name, sealed, v) {
			out = append(out, name)
		}
	}
	for name := range stored {
		if _, ok := given[name]; !ok {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// Opener opens what a Sealer sealed; a Sealer that is one (the key ring)
// lets Differences compare secret values.
type Opener interface {
	Open(keyID string, sealed, ad []byte) ([]byte, error)
}

// opens reports whether sealed opens to value; without an Opener every
// value is taken for changed.
func (s *Service) opens(name string, sealed domain.SealedSecret, value string) bool {
	o, ok := s.sealer.(Opener)
	if !ok {
		return false
	}
	got, err := o.Open(sealed.KeyID, sealed.Data, domain.SecretHeaderAD(name))
	return err == nil && string(got) == value
}

// Converge writes the definition of want onto stored job cur, for the
// fields Differences found: a changed schedule gives an active or
// completed job its first run after now (as Update does); paused,
// when "paused" is among them, pauses or resumes it (without catch-up,
// as Resume does). Secret headers unchanged keep their stored sealed
// values. It fails with a fault naming the schedule when the new one has
// no run left.
func (s *Service) Converge(cur, want *model.Job, fields []string, paused *bool, now time.Time) error {
	has := func(f string) bool { return slices.Contains(fields, f) }
	if has("schedule") {
		cur.Schedule = want.Schedule
		cur.PausedNextRunAt, cur.SkipBefore = nil, nil
		switch {
		case want.Depends != nil && want.Depends.Chain:
			cur.NextRunAt = nil
			if cur.State == domain.JobCompleted {
				cur.State = domain.JobActive
			}
		case cur.State != domain.JobPaused:
			next, err := s.FirstRun(want.Schedule, now)
			if err != nil {
				return err
			}
			cur.State, cur.NextRunAt = domain.JobActive, &next
		}
	}
	secrets := cur.Handler.SecretHeaders
	if slices.ContainsFunc(fields, func(f string) bool { return len(f) > 23 && f[:23] == "handler.secret_headers." }) {
		secrets = want.Handler.SecretHeaders
	}
	cur.Handler = want.Handler
	cur.Handler.SecretHeaders = secrets
	cur.Payload, cur.Retry, cur.Priority, cur.Timeout = want.Payload, want.Retry, want.Priority, want.Timeout
	cur.Labels, cur.Description, cur.Policy, cur.Depends = want.Labels, want.Description, want.Policy, want.Depends
	if has("paused") && paused != nil {
		if *paused {
			cur.State, cur.PausedNextRunAt, cur.NextRunAt = domain.JobPaused, cur.NextRunAt, nil
		} else if _, err := resume(cur, now, false); err != nil {
			return err
		}
	}
	return nil
}

// DefinitionHash is a digest of j's definition as the store holds it
// (sealed secret values included, so that a secret changed through the
// API changes it; runtime state excluded).
func DefinitionHash(j *model.Job) string {
	b, _ := json.Marshal(struct {
		Schedule    schedule.Spec
		Handler     domain.Handler
		Payload     json.RawMessage
		Retry       domain.RetryPolicy
		Priority    string
		Timeout     time.Duration
		Labels      domain.Labels
		Description string
		Policy      domain.JobPolicy
		Depends     *domain.Depends
	}{normalSpec(j.Schedule), j.Handler, canonicalJSON(j.Payload), j.Retry, or(string(j.Priority), string(domain.PriorityNormal)),
		j.Timeout, j.Labels, j.Description, policyOf(j), j.Depends})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// SameSchedule reports whether two schedules say the same thing.
func SameSchedule(a, b schedule.Spec) bool { return sameSpec(a, b) }

// normalSpec is sp with its times in UTC, so that equal schedules digest
// alike.
func normalSpec(sp schedule.Spec) schedule.Spec {
	for _, t := range []**time.Time{&sp.At, &sp.Anchor, &sp.StartAt, &sp.EndAt} {
		if *t != nil {
			u := (*t).UTC()
			*t = &u
		}
	}
	return sp
}

// policyOf is j's policy (the zero one for jobs stored before policies).
func policyOf(j *model.Job) domain.JobPolicy {
	if j.Policy == nil {
		return domain.JobPolicy{}
	}
	return *j.Policy
}

func sameJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

// canonicalJSON is v re-encoded with its object keys sorted and no
// spaces (numbers as written), as jsonb gives it back in another order;
// nil for none.
func canonicalJSON(v json.RawMessage) []byte {
	if len(v) == 0 || string(v) == "null" {
		return nil
	}
	d := json.NewDecoder(bytes.NewReader(v))
	d.UseNumber()
	var x any
	if err := d.Decode(&x); err != nil {
		return v
	}
	b, err := json.Marshal(x)
	if err != nil {
		return v
	}
	return b
}
