package store

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store/model"
)

// TestNotifyDecidedOnce: recording decides execution.dead for each dead
// execution of a job a rule chooses, job.failing once when its run of
// dead executions reaches the rule's N, job.recovered once on the first
// success after that; reports recorded twice decide nothing twice; a job
// the selector leaves out gets nothing. Grouping makes one message per
// channel, and a claimed message is not claimed again while leased.
func TestNotifyDecidedOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	ch, err := s.CreateChannel(ctx, model.Channel{Namespace: "default", Name: "hook", Type: model.ChannelWebhook,
		URL: "https://example.test/hook"})
	if err != nil {
		t.Fatal(err)
	}
	rule, err := s.CreateRule(ctx, model.Rule{Namespace: "default", Name: "team-a", Selector: "team=a",
		Events:   []string{domain.NotifyExecutionDead, domain.NotifyJobFailing, domain.NotifyJobRecovered},
		Channels: []uuid.UUID{ch.ID}, FailingAfter: 2, GroupInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	chosen := testJob("chosen", nil)
	chosen.Labels = domain.Labels{"team": "a"}
	mustCreate(t, s, chosen)
	other := mustCreate(t, s, testJob("other", nil))

	at := baseTime()
	run := func(j *model.Job, ok bool) {
		t.Helper()
		at = at.Add(time.Second)
		x, err := s.CreateManualExecution(ctx, j.ID, at)
		if err != nil {
			t.Fatal(err)
		}
		outcome := domain.OutcomeFailed
		if ok {
			outcome = domain.OutcomeSucceeded
		}
		for range 2 { // delivered twice
			if err := s.attemptStarted(ctx, x.ID, 1, "e1", at); err != nil {
				t.Fatal(err)
			}
			if err := s.attemptFinished(ctx, x.ID, 1, "e1", at.Add(time.Millisecond), outcome, true, "refused", ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	kinds := func() map[string]int {
		rows, err := s.pool.Query(ctx, `SELECT kind FROM notification_events WHERE rule_id = $1`, rule.ID)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int{}
		for rows.Next() {
			var k string
			if err := rows.Scan(&k); err != nil {
				t.Fatal(err)
			}
			out[k]++
		}
		return out
	}
	run(chosen, false)
	run(other, false)
	if k := kinds(); k[domain.NotifyExecutionDead] != 1 || k[domain.NotifyJobFailing] != 0 {
		t.Fatalf("after one dead execution: %v", k)
	}
	run(chosen, false) // the second in a row: failing
	run(chosen, false) // the third: nothing more
	run(other, false)
	run(other, false)
	if k := kinds(); k[domain.NotifyExecutionDead] != 3 || k[domain.NotifyJobFailing] != 1 || k[domain.NotifyJobRecovered] != 0 {
		t.Fatalf("after three dead executions: %v", k)
	}
	if n := count(t, s, `SELECT consecutive FROM job_failures WHERE job_id = $1`, chosen.ID); n != 3 {
		t.Errorf("the chosen job's run of dead executions is %d, want 3", n)
	}
	run(chosen, true)
	run(chosen, true)
	if k := kinds(); k[domain.NotifyJobRecovered] != 1 || k[domain.NotifyJobFailing] != 1 {
		t.Fatalf("after two successes: %v", k)
	}
	if n := count(t, s, `SELECT count(*) FROM job_failures WHERE job_id = $1`, chosen.ID); n != 0 {
		t.Errorf("a success left the job's run of dead executions")
	}
	// Failing again after a recovery is a new run: told again.
	run(chosen, false)
	run(chosen, false)
	if k := kinds(); k[domain.NotifyJobFailing] != 2 {
		t.Fatalf("a second run of dead executions: %v", k)
	}

	made, err := s.GroupNotifications(ctx, 10, func(id uuid.UUID, r *model.Rule, c *model.Channel, evs []model.NotifyEvent) (json.RawMessage, error) {
		return json.Marshal(map[string]any{"id": id, "events": len(evs)})
	})
	if err != nil || made != 1 {
		t.Fatalf("GroupNotifications = %d, %v; want one message", made, err)
	}
	if made, err = s.GroupNotifications(ctx, 10, nil); err != nil || made != 0 {
		t.Fatalf("grouped again = %d, %v", made, err)
	}
	ds, err := s.ClaimNotifications(ctx, 10, time.Minute)
	if err != nil || len(ds) != 1 || ds[0].Channel.ID != ch.ID {
		t.Fatalf("claim = %+v, %v", ds, err)
	}
	var body struct{ Events int }
	_ = json.Unmarshal(ds[0].Notification.Body, &body)
	if body.Events != 8 { // 5 dead, 2 failing, 1 recovered
		t.Errorf("the message lists %d events, want 8", body.Events)
	}
	if again, err := s.ClaimNotifications(ctx, 10, time.Minute); err != nil || len(again) != 0 {
		t.Fatalf("claimed while leased: %d, %v", len(again), err)
	}
	if err := s.RecordDelivery(ctx, ds[0].Notification.ID, model.DeliveryAttempt{At: time.Now(), Status: 204}, true, nil); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetNotification(ctx, ds[0].Notification.ID)
	if err != nil || got.State != model.NotificationSent || got.Attempts != 1 || len(got.AttemptLog) != 1 {
		t.Fatalf("after delivery: %+v, %v", got, err)
	}
	list, _, err := s.ListNotifications(ctx, NotificationFilter{JobID: &chosen.ID})
	if err != nil || len(list) != 1 {
		t.Fatalf("by job: %d, %v", len(list), err)
	}
	if list, _, err = s.ListNotifications(ctx, NotificationFilter{JobID: &other.ID}); err != nil || len(list) != 0 {
		t.Fatalf("by the other job: %d, %v", len(list), err)
	}
}

// TestNotifyLateSlowFailedAndInterval: a retried failure, a late start and
// a slow run are each told once; a rule's group interval holds its next
// message back until it has passed; sent messages go with retention.
func TestNotifyLateSlowFailedAndInterval(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	ch, err := s.CreateChannel(ctx, model.Channel{Namespace: "default", Name: "hook", Type: model.ChannelWebhook,
		URL: "https://example.test/hook"})
	if err != nil {
		t.Fatal(err)
	}
	rule, err := s.CreateRule(ctx, model.Rule{Namespace: "default", Name: "all",
		Events:   []string{domain.NotifyExecutionFailed, domain.NotifyExecutionLate, domain.NotifyExecutionSlow},
		Channels: []uuid.UUID{ch.ID}, FailingAfter: 3, LateAfter: time.Second, SlowAfter: 2 * time.Second, GroupInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	j := mustCreate(t, s, testJob("j", nil)) // retries: 3 attempts
	at := baseTime()
	kinds := func() map[string]int {
		out := map[string]int{}
		rows, err := s.pool.Query(ctx, `SELECT kind, count(*) FROM notification_events WHERE rule_id = $1 GROUP BY kind`, rule.ID)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var k string
			var n int
			if err := rows.Scan(&k, &n); err != nil {
				t.Fatal(err)
			}
			out[k] = n
		}
		return out
	}
	// On time and quick: nothing.
	x, err := s.CreateManualExecution(ctx, j.ID, at)
	if err != nil {
		t.Fatal(err)
	}
	start := x.ScheduledFor
	_ = s.attemptStarted(ctx, x.ID, 1, "e1", start.Add(100*time.Millisecond))
	_ = s.attemptFinished(ctx, x.ID, 1, "e1", start.Add(time.Second), domain.OutcomeSucceeded, false, "", "ok")
	if k := kinds(); len(k) != 0 {
		t.Fatalf("an execution on time and quick: %v", k)
	}
	// Late by 3 s, then an attempt that fails and will be retried, then a
	// second attempt that runs 5 s: late, failed and slow, once each
	// although every report comes twice.
	y, err := s.CreateManualExecution(ctx, j.ID, at.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	start = y.ScheduledFor
	for range 2 {
		if err := s.attemptStarted(ctx, y.ID, 1, "e1", start.Add(3*time.Second)); err != nil {
			t.Fatal(err)
		}
		if err := s.attemptFinished(ctx, y.ID, 1, "e1", start.Add(4*time.Second), domain.OutcomeFailed, false, "flaky", ""); err != nil {
			t.Fatal(err)
		}
	}
	if k := kinds(); k[domain.NotifyExecutionLate] != 1 || k[domain.NotifyExecutionFailed] != 1 || k[domain.NotifyExecutionSlow] != 0 {
		t.Fatalf("after a late start and a retried failure: %v", k)
	}
	for range 2 {
		if err := s.recordOne(ctx, model.AttemptEvent{ID: y.ID, Attempt: 2, Dispatch: 1, Executor: "e1", At: start.Add(10 * time.Second), Type: domain.EventStarted}); err != nil {
			t.Fatal(err)
		}
		if err := s.recordOne(ctx, model.AttemptEvent{ID: y.ID, Attempt: 2, Dispatch: 1, Executor: "e1", At: start.Add(15 * time.Second), Type: domain.EventSucceeded}); err != nil {
			t.Fatal(err)
		}
	}
	if k := kinds(); k[domain.NotifyExecutionLate] != 1 || k[domain.NotifyExecutionFailed] != 1 || k[domain.NotifyExecutionSlow] != 1 {
		t.Fatalf("after a slow second attempt: %v", k)
	}

	build := func(id uuid.UUID, r *model.Rule, c *model.Channel, evs []model.NotifyEvent) (json.RawMessage, error) {
		return json.Marshal(map[string]any{"id": id, "events": len(evs)})
	}
	if made, err := s.GroupNotifications(ctx, 10, build); err != nil || made != 1 {
		t.Fatalf("first message: %d, %v", made, err)
	}
	z, err := s.CreateManualExecution(ctx, j.ID, at.Add(2*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	_ = s.attemptStarted(ctx, z.ID, 1, "e1", z.ScheduledFor.Add(5*time.Second))
	if made, err := s.GroupNotifications(ctx, 10, build); err != nil || made != 0 {
		t.Fatalf("a message within the group interval: %d, %v", made, err)
	}
	if _, err := s.pool.Exec(ctx, `UPDATE notification_rules SET last_sent_at = now() - interval '2 hours' WHERE id = $1`, rule.ID); err != nil {
		t.Fatal(err)
	}
	if made, err := s.GroupNotifications(ctx, 10, build); err != nil || made != 1 {
		t.Fatalf("once the interval has passed: %d, %v", made, err)
	}

	// Retention: the sent message of two days ago goes, the pending one
	// stays.
	ds, err := s.ClaimNotifications(ctx, 10, time.Minute)
	if err != nil || len(ds) != 2 {
		t.Fatalf("claim: %d, %v", len(ds), err)
	}
	if err := s.RecordDelivery(ctx, ds[0].Notification.ID, model.DeliveryAttempt{At: time.Now(), Status: 200}, true, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `UPDATE notifications SET created_at = now() - interval '2 days'`); err != nil {
		t.Fatal(err)
	}
	res, err := s.ApplyRetention(ctx, time.Now(), model.RetentionPolicy{Default: 24 * time.Hour})
	if err != nil || res.Notifications != 1 {
		t.Fatalf("retention deleted %d notifications, %v; want 1", res.Notifications, err)
	}
	if n := count(t, s, `SELECT count(*) FROM notifications WHERE state = 'pending'`); n != 1 {
		t.Errorf("retention left %d pending notifications, want 1", n)
	}
}

// TestGroupingAndChannelDeletion: a rule whose message cannot be made
// does not hold up the others' (it is tried again next time); deleting a
// channel fails its notifications not yet delivered, and takes it out of
// its rules.
func TestGroupingAndChannelDeletion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	ch, err := s.CreateChannel(ctx, model.Channel{Namespace: "default", Name: "hook", Type: model.ChannelWebhook,
		URL: "https://example.test/hook"})
	if err != nil {
		t.Fatal(err)
	}
	var rules []*model.Rule
	for _, name := range []string{"broken", "fine"} {
		r, err := s.CreateRule(ctx, model.Rule{Namespace: "default", Name: name, Events: []string{domain.NotifyJobSilent},
			Channels: []uuid.UUID{ch.ID}, FailingAfter: 3})
		if err != nil {
			t.Fatal(err)
		}
		rules = append(rules, r)
		if _, err := s.CreateNotifyEvents(ctx, []model.NotifyEvent{{ID: uuid.Must(uuid.NewV7()), RuleID: r.ID,
			Namespace: "default", Kind: domain.NotifyJobSilent, At: time.Now(), DedupKey: name}}); err != nil {
			t.Fatal(err)
		}
	}
	build := func(id uuid.UUID, r *model.Rule, c *model.Channel, evs []model.NotifyEvent) (json.RawMessage, error) {
		if r.Name == "broken" {
			return nil, errors.New("cannot build")
		}
		return json.Marshal(map[string]any{"id": id})
	}
	made, err := s.GroupNotifications(ctx, 10, build)
	if made != 1 || err == nil || !strings.Contains(err.Error(), rules[0].ID.String()) {
		t.Fatalf("GroupNotifications = %d, %v; want the fine rule's message and the broken rule's error", made, err)
	}
	if n := count(t, s, `SELECT count(*) FROM notification_events WHERE grouped_at IS NULL AND rule_id = $1`, rules[0].ID); n != 1 {
		t.Errorf("the broken rule's event was taken: %d left", n)
	}

	if err := s.DeleteChannel(ctx, ch.ID); err != nil {
		t.Fatal(err)
	}
	list, _, err := s.ListNotifications(ctx, NotificationFilter{})
	if err != nil || len(list) != 1 || list[0].State != model.NotificationFailed || list[0].LastError != "the channel was deleted" {
		t.Fatalf("after the channel's deletion: %+v, %v", list, err)
	}
	if ds, err := s.ClaimNotifications(ctx, 10, time.Minute); err != nil || len(ds) != 0 {
		t.Errorf("claimed %d after the channel's deletion, %v", len(ds), err)
	}
	if r, err := s.GetRule(ctx, rules[1].ID); err != nil || len(r.Channels) != 0 {
		t.Errorf("the rule keeps channels %v, %v", r.Channels, err)
	}
}

// A batch with both successes and deaths (writeStreaks' third way, which
// takes every job_failures row first, in job id order) ends the runs of
// the jobs that succeeded and grows those of the jobs that died: a job
// that recovers is told so, one whose run reaches failing_after is told
// failing, one that died again after its success in the batch starts a
// new run, and one that succeeded without a run has no row.
func TestNotifyBatchWithSuccessesAndDeaths(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	ch, err := s.CreateChannel(ctx, model.Channel{Namespace: "default", Name: "hook", Type: model.ChannelWebhook,
		URL: "https://example.test/hook"})
	if err != nil {
		t.Fatal(err)
	}
	rule, err := s.CreateRule(ctx, model.Rule{Namespace: "default", Name: "team-a", Selector: "team=a",
		Events:   []string{domain.NotifyJobFailing, domain.NotifyJobRecovered},
		Channels: []uuid.UUID{ch.ID}, FailingAfter: 2, GroupInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	jobs := map[string]*model.Job{}
	for _, name := range []string{"recovers", "fails", "again", "fine"} {
		j := testJob(name, nil)
		j.Labels = domain.Labels{"team": "a"}
		jobs[name] = mustCreate(t, s, j)
	}
	at := baseTime()
	execution := func(j *model.Job) uuid.UUID {
		t.Helper()
		at = at.Add(time.Second)
		x, err := s.CreateManualExecution(ctx, j.ID, at)
		if err != nil {
			t.Fatal(err)
		}
		return x.ID
	}
	end := func(x uuid.UUID, ok bool, after time.Duration) []model.AttemptEvent {
		ended := model.AttemptEvent{ID: x, Attempt: 1, Executor: "e1", Type: domain.EventSucceeded, At: at.Add(after)}
		if !ok {
			ended.Type, ended.Final, ended.Error = domain.EventFailed, true, "refused"
		}
		return []model.AttemptEvent{{ID: x, Attempt: 1, Executor: "e1", Type: domain.EventStarted, At: at}, ended}
	}
	for _, name := range []string{"recovers", "recovers", "fails", "again", "again"} {
		record(t, s, end(execution(jobs[name]), false, time.Millisecond)...)
	}
	var batch []model.AttemptEvent
	batch = append(batch, end(execution(jobs["recovers"]), true, time.Millisecond)...)
	batch = append(batch, end(execution(jobs["fails"]), false, time.Millisecond)...)
	batch = append(batch, end(execution(jobs["again"]), true, time.Millisecond)...)
	batch = append(batch, end(execution(jobs["again"]), false, 2*time.Millisecond)...)
	batch = append(batch, end(execution(jobs["fine"]), true, time.Millisecond)...)
	record(t, s, batch...)

	runs := map[string]string{}
	for name, j := range jobs {
		runs[name] = jsonOf(t, s, `SELECT coalesce((SELECT json_build_array(consecutive, cardinality(failing_rules))
			FROM job_failures WHERE job_id = $1), 'null')`, j.ID)
	}
	want := map[string]string{"recovers": "null", "fails": "[2, 1]", "again": "[1, 0]", "fine": "null"}
	for name := range jobs {
		if runs[name] != want[name] {
			t.Errorf("%s: run (consecutive, failing rules) %s, want %s", name, runs[name], want[name])
		}
	}
	told := map[string]string{}
	rows, err := s.pool.Query(ctx, `SELECT job_name, string_agg(kind, ',' ORDER BY kind) FROM notification_events
		WHERE rule_id = $1 GROUP BY job_name`, rule.ID)
	if err != nil {
		t.Fatal(err)
	}
	var name, kinds string
	if _, err := pgx.ForEachRow(rows, []any{&name, &kinds}, func() error {
		told[name] = kinds
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	wantTold := map[string]string{"recovers": "job.failing,job.recovered", "fails": "job.failing",
		"again": "job.failing,job.recovered"}
	if !maps.Equal(told, wantTold) {
		t.Errorf("told %v, want %v", told, wantTold)
	}
}
