package store

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"

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
