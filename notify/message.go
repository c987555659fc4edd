package notify

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store/model"
)

// Message is the JSON body a webhook receives: one message of a rule,
// listing what happened since its last one. ID is stable: every attempt
// to deliver the message sends the same body, so a receiver drops a
// message whose id it has seen.
type Message struct {
	ID        string    `json:"id"`
	Type      string    `json:"type"` // "tock.notification"
	Namespace string    `json:"namespace"`
	Rule      RuleRef   `json:"rule"`
	CreatedAt time.Time `json:"created_at"`
	// Test is true for a sample sent by POST .../test.
	Test    bool    `json:"test,omitempty"`
	Summary string  `json:"summary"`
	Events  []Event `json:"events"`
}

// RuleRef names the rule a message is of.
type RuleRef struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// Event is one thing that happened, as a message lists it.
type Event struct {
	ID          string          `json:"id"`
	Kind        string          `json:"kind"`
	At          time.Time       `json:"at"`
	Job         *JobRef         `json:"job,omitempty"`
	ExecutionID string          `json:"execution_id,omitempty"`
	Handler     string          `json:"handler,omitempty"`
	Detail      json.RawMessage `json:"detail,omitempty"`
	Summary     string          `json:"summary"`
	// Log is, on an event about an execution, the API path of its log
	// (GET, on any tockd): the stack, response or output that explains
	// the error the summary quotes.
	Log string `json:"log,omitempty"`
}

// JobRef names the job an event is about.
type JobRef struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// MessageType is Message.Type.
const MessageType = "tock.notification"

// Build makes the body of message id of rule r (to channel c) from evs:
// store.BuildMessage.
func Build(id uuid.UUID, r *model.Rule, _ *model.Channel, evs []model.NotifyEvent) (json.RawMessage, error) {
	return json.Marshal(newMessage(id, r, evs, time.Now()))
}

func newMessage(id uuid.UUID, r *model.Rule, evs []model.NotifyEvent, now time.Time) Message {
	m := Message{ID: id.String(), Type: MessageType, Namespace: r.Namespace, Rule: RuleRef{ID: r.ID.String(), Name: r.Name},
		CreatedAt: now.UTC().Truncate(time.Millisecond), Events: make([]Event, 0, len(evs))}
	for _, e := range evs {
		ev := Event{ID: e.ID.String(), Kind: e.Kind, At: e.At, Handler: e.Handler, Detail: e.Detail}
		if e.JobID != nil {
			ev.Job = &JobRef{ID: e.JobID.String(), Name: e.JobName}
		}
		if e.ExecutionID != nil {
			ev.ExecutionID = e.ExecutionID.String()
			ev.Log = "/v1/executions/" + ev.ExecutionID + "/logs"
		}
		ev.Summary = summary(e)
		m.Events = append(m.Events, ev)
	}
	if len(evs) == 1 {
		m.Summary = m.Events[0].Summary
	} else {
		m.Summary = fmt.Sprintf("%d events of rule %s in %s", len(evs), r.Name, r.Namespace)
	}
	return m
}

// summary is one line on e for people.
func summary(e model.NotifyEvent) string {
	var d struct {
		Error           string `json:"error"`
		Attempts        int    `json:"attempts"`
		Attempt         int    `json:"attempt"`
		ConsecutiveDead int    `json:"consecutive_dead"`
		AfterDead       int    `json:"after_dead"`
		LateMS          int64  `json:"late_ms"`
		TookMS          int64  `json:"took_ms"`
		SilentFor       string `json:"silent_for"`
		Then            string `json:"then"`
		WaitedFor       string `json:"waited_for"`
	}
	_ = json.Unmarshal(e.Detail, &d)
	job := e.Namespace + "/" + e.JobName
	withErr := func(s string) string {
		if d.Error != "" {
			return s + ": " + oneLine(d.Error, 200)
		}
		return s
	}
	switch e.Kind {
	case domain.NotifyExecutionDead:
		return withErr(fmt.Sprintf("%s: an execution is dead after %d attempts", job, d.Attempts))
	case domain.NotifyExecutionFailed:
		return withErr(fmt.Sprintf("%s: attempt %d failed and will be retried", job, d.Attempt))
	case domain.NotifyJobFailing:
		return withErr(fmt.Sprintf("%s is failing: %d dead executions in a row", job, d.ConsecutiveDead))
	case domain.NotifyJobRecovered:
		return fmt.Sprintf("%s recovered: it succeeded after %d dead executions", job, d.AfterDead)
	case domain.NotifyJobSilent:
		return fmt.Sprintf("%s is silent: no success for %s", job, d.SilentFor)
	case domain.NotifyExecutionLate:
		return fmt.Sprintf("%s: an execution started %s late", job, time.Duration(d.LateMS)*time.Millisecond)
	case domain.NotifyExecutionSlow:
		return fmt.Sprintf("%s: an execution ran for %s", job, time.Duration(d.TookMS)*time.Millisecond)
	case domain.NotifyHandlerOpen:
		return fmt.Sprintf("handler %s: its circuit breaker opened; its executions wait", e.Handler)
	case domain.NotifyHandlerClose:
		return fmt.Sprintf("handler %s: its circuit breaker closed again", e.Handler)
	case domain.NotifyExecutionDependencyTimeout:
		return fmt.Sprintf("%s: a run waited out its wait_timeout for its upstreams and was %s (%s)", job,
			map[string]string{"ran": "run anyway", "skipped": "skipped"}[d.Then], oneLine(d.WaitedFor, 200))
	case kindTest:
		return "a test of this channel from tock"
	}
	return e.Kind
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}

// slackBody is the body a Slack-compatible incoming webhook takes: the
// message's events as lines of text.
func slackBody(body []byte) ([]byte, error) {
	var m Message
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "*tock* · rule *%s* in `%s`", m.Rule.Name, m.Namespace)
	if m.Test {
		b.WriteString(" (test)")
	}
	for _, e := range m.Events {
		b.WriteString("\n• ")
		b.WriteString(e.Summary)
		if e.Log != "" {
			b.WriteString(" (log: `GET " + e.Log + "`)")
		}
	}
	return json.Marshal(map[string]string{"text": b.String()})
}

// kindTest is the kind of the sample event of a test message.
const kindTest = "test"

// testMessage is a sample message for POST .../test: one event, of kind
// "test", with a fresh id; it returns the id and the body.
func testMessage(c *model.Channel, r *model.Rule, now time.Time) (uuid.UUID, []byte, error) {
	if r == nil {
		r = &model.Rule{ID: uuid.Nil, Namespace: c.Namespace, Name: "(channel test)"}
	}
	ev := model.NotifyEvent{ID: uuid.Must(uuid.NewV7()), RuleID: r.ID, Namespace: r.Namespace, Kind: kindTest, At: now.UTC()}
	id := uuid.Must(uuid.NewV7())
	m := newMessage(id, r, []model.NotifyEvent{ev}, now)
	m.Test = true
	body, err := json.Marshal(m)
	return id, body, err
}
