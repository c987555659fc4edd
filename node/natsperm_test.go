package node

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/executor"
	"github.com/tock-sched/tock/internal/embedded"
	"github.com/tock-sched/tock/wire"
)

// The example permissions, deploy/nats/custom-executor.conf, loaded into
// a NATS server as it is (ports and store moved): tockd's user sets tock
// up as tockd does; the custom executor's user runs the Go SDK for its
// handler (pulls its queue, reports events, watches cancellations, writes
// its handler states) without a single permission error, and is refused
// everything else a custom executor must not do. The same refusals,
// checked against a server that gives the executor's user every right,
// are all reported as allowed: the checks see a wrong permission.
func TestNATSPermissionsExample(t *testing.T) {
	const execPassword = "send-email-secret"
	t.Setenv("TOCKD_NATS_PASSWORD", "tockd-secret")
	t.Setenv("SEND_EMAIL_NATS_PASSWORD", execPassword)
	conf := filepath.Join("..", "deploy", "nats", "custom-executor.conf")
	url := natsFromConfig(t, conf)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	tockdJS := tockdNATS(t, ctx, url)
	ex, exJS, refused := executorNATS(t, url, execPassword)

	// The SDK, as examples/custom-executor runs it.
	ran := make(chan string, 1)
	w, err := executor.New(executor.Config{NATS: ex, ExecutorID: "perm-test",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	w.Handle("send-email", func(ctx context.Context, x *executor.Execution) (string, error) {
		fmt.Fprintln(executor.Log(ctx), "sending to a@example.com")
		ran <- x.ExecutionID
		return "sent", nil
	})
	wctx, stopWorker := context.WithCancel(ctx)
	workerDone := make(chan error, 1)
	go func() { workerDone <- w.Run(wctx) }()
	events := eventReader(t, ctx, tockdJS)
	id := publishExecution(t, ctx, tockdJS, "send-email", domain.PriorityNormal)
	select {
	case got := <-ran:
		if got != id {
			t.Errorf("the SDK ran execution %s, want %s", got, id)
		}
	case err := <-workerDone:
		t.Fatalf("the SDK stopped: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatalf("the SDK did not run the execution within 30s; NATS refused: %v", drain(refused))
	}
	events.await(t, id, "succeeded")
	stopWorker()
	if err := <-workerDone; err != nil {
		t.Fatal(err)
	}
	if errs := drain(refused); len(errs) > 0 {
		t.Errorf("NATS refused the SDK's executor: %v", errs)
	}
	if n := streamMsgs(t, ctx, tockdJS, wire.ExecStream); n != 0 {
		t.Errorf("%d executions left in %s after the SDK acked its one", n, wire.ExecStream)
	}
	if n := streamMsgs(t, ctx, tockdJS, wire.LogStream); n != 1 {
		t.Errorf("%d messages in %s, want the attempt's log", n, wire.LogStream)
	}

	// By hand: pulling its queue, acking, reporting an event and writing
	// its handler state work.
	id = publishExecution(t, ctx, tockdJS, "send-email", domain.PriorityHigh)
	c, err := exJS.Consumer(ctx, wire.ExecStream, wire.ConsumerName("send-email", domain.PriorityHigh))
	if err != nil {
		t.Fatal(err)
	}
	batch, err := c.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for m := range batch.Messages() {
		if got := m.Headers().Get(wire.HeaderExecutionID); got != id {
			t.Errorf("pulled %s, want %s", got, id)
		}
		if err := m.DoubleAck(ctx); err != nil {
			t.Errorf("ack: %v", err)
		}
	}
	if n := streamMsgs(t, ctx, tockdJS, wire.ExecStream); n != 0 {
		t.Errorf("%d executions left in %s after the pull and ack", n, wire.ExecStream)
	}
	if _, err := exJS.Publish(ctx, wire.EventSubjectPrefix+"started",
		[]byte(`{"type":"started","execution_id":"`+id+`","attempt":1,"executor_id":"by-hand"}`)); err != nil {
		t.Errorf("publish an event: %v", err)
	}
	events.await(t, id, "started")
	kv, err := exJS.KeyValue(ctx, wire.BreakerBucket)
	if err != nil {
		t.Fatal(err)
	}
	if err := wire.PutBreakerState(ctx, kv, wire.BreakerState{Key: "send-email", Queue: "send-email", ExecutorID: "by-hand"}); err != nil {
		t.Errorf("write its handler state: %v", err)
	}
	if errs := drain(refused); len(errs) > 0 {
		t.Errorf("NATS refused: %v", errs)
	}

	// Another queue's execution, waiting for the built-in http executor.
	if _, err := wire.EnsureConsumer(ctx, tockdJS, domain.HandlerHTTP, domain.PriorityNormal, wire.ConsumerOptions{}); err != nil {
		t.Fatal(err)
	}
	other := publishExecution(t, ctx, tockdJS, domain.HandlerHTTP, domain.PriorityNormal)

	if allowed := forbidden(t, ex, refused); len(allowed) > 0 {
		t.Errorf("the executor's user was allowed to:\n  %s", strings.Join(allowed, "\n  "))
	}

	// Nothing the refused calls asked for happened.
	for _, s := range []string{wire.ExecStream, wire.EventStream} {
		if _, err := tockdJS.Stream(ctx, s); err != nil {
			t.Errorf("stream %s: %v", s, err)
		}
	}
	if _, err := tockdJS.Stream(ctx, "EVIL"); err == nil {
		t.Error("stream EVIL exists")
	}
	if n := streamMsgs(t, ctx, tockdJS, wire.ExecStream); n != 1 {
		t.Errorf("%d executions in %s, want 1 (the http one; none published by the executor)", n, wire.ExecStream)
	}
	hc, err := tockdJS.Consumer(ctx, wire.ExecStream, wire.ConsumerName(domain.HandlerHTTP, domain.PriorityNormal))
	if err != nil {
		t.Fatal(err)
	}
	batch, err = hc.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for m := range batch.Messages() {
		got++
		md, _ := m.Metadata()
		if m.Headers().Get(wire.HeaderExecutionID) != other || md.NumDelivered != 1 {
			t.Errorf("the http queue delivered %s (delivery %d), want %s on its first delivery", m.Headers().Get(wire.HeaderExecutionID), md.NumDelivered, other)
		}
	}
	if got != 1 {
		t.Errorf("the http queue delivered %d executions, want 1", got)
	}

	// The same checks against an executor user with every right: each
	// must be reported.
	t.Run("checks catch wrong permissions", func(t *testing.T) {
		open := filepath.Join(t.TempDir(), "open.conf")
		if err := os.WriteFile(open, []byte(`port: 4222
jetstream { store_dir: "/data/nats" }
authorization { users: [
  {user: tockd, password: $TOCKD_NATS_PASSWORD}
  {user: send-email, password: $SEND_EMAIL_NATS_PASSWORD}
] }
`), 0o600); err != nil {
			t.Fatal(err)
		}
		url := natsFromConfig(t, open)
		tockdJS := tockdNATS(t, ctx, url)
		if _, err := wire.EnsureConsumer(ctx, tockdJS, domain.HandlerHTTP, domain.PriorityNormal, wire.ConsumerOptions{}); err != nil {
			t.Fatal(err)
		}
		publishExecution(t, ctx, tockdJS, domain.HandlerHTTP, domain.PriorityNormal)
		ex, _, refused := executorNATS(t, url, execPassword)
		allowed := forbidden(t, ex, refused)
		if want := len(forbiddenChecks(nil)); len(allowed) != want {
			t.Errorf("with every right, %d of %d forbidden actions were allowed:\n  %s", len(allowed), want, strings.Join(allowed, "\n  "))
		}
	})
}

// natsFromConfig starts a NATS server from the configuration file conf,
// on a free port with its store in a temporary directory, for the test,
// and returns its URL.
func natsFromConfig(t *testing.T, conf string) string {
	t.Helper()
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatalf("load %s: %v", conf, err)
	}
	port, err := embedded.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	opts.Host, opts.Port, opts.StoreDir = "127.0.0.1", port, t.TempDir()
	opts.NoLog, opts.NoSigs = true, true
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(30 * time.Second) {
		s.Shutdown()
		t.Fatal("NATS not ready after 30s")
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return fmt.Sprintf("nats://127.0.0.1:%d", port)
}

// tockdNATS connects as tockd's user, as a scheduler node does (creating
// the streams), until the test ends.
func tockdNATS(t *testing.T, ctx context.Context, url string) jetstream.JetStream {
	t.Helper()
	nc, js, err := connectNATS(ctx, Config{NATSURL: url, NodeID: "perm-tockd", Roles: RolesOf(RoleScheduler),
		NATSAuth: NATSAuth{User: "tockd", Password: "tockd-secret"}}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	// The logs' stream, which tockd's log recorder makes.
	if err := wire.EnsureLogStream(ctx, js, 1); err != nil {
		t.Fatal(err)
	}
	return js
}

// executorNATS connects as the custom executor's user, with its inbox
// prefix; refused receives the errors NATS reports for the connection.
func executorNATS(t *testing.T, url, password string) (*nats.Conn, jetstream.JetStream, chan error) {
	t.Helper()
	refused := make(chan error, 100)
	nc, err := nats.Connect(url, nats.UserInfo("send-email", password), nats.CustomInboxPrefix("_INBOX_send-email"),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			select {
			case refused <- err:
			default:
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js, refused
}

// forbiddenCheck is something a custom executor must not do: its
// attempt, and the subject NATS must refuse (to publish to, or with
// subscribe set, to subscribe to).
type forbiddenCheck struct {
	what      string
	subject   string
	subscribe bool
	try       func() error
}

// forbiddenChecks are the actions a custom executor for send-email must
// be refused, over nc.
func forbiddenChecks(nc *nats.Conn) []forbiddenCheck {
	req := func(subject, body string) func() error {
		return func() error {
			_, err := nc.Request(subject, []byte(body), 500*time.Millisecond)
			return err
		}
	}
	pub := func(subject string) func() error {
		return func() error {
			if err := nc.Publish(subject, []byte(`{"execution_id":"`+uuid.NewString()+`"}`)); err != nil {
				return err
			}
			return nc.Flush()
		}
	}
	sub := func(subject string) func() error {
		return func() error {
			s, err := nc.SubscribeSync(subject)
			if err != nil {
				return err
			}
			_ = nc.Flush()
			time.Sleep(200 * time.Millisecond)
			return s.Unsubscribe()
		}
	}
	b64 := base64.RawURLEncoding.EncodeToString
	httpNormal := wire.ConsumerName(domain.HandlerHTTP, domain.PriorityNormal)
	return []forbiddenCheck{
		{what: "publish an execution for its own queue", subject: "tock.exec.send-email.normal", try: pub("tock.exec.send-email.normal")},
		{what: "publish an execution for the http queue", subject: "tock.exec.http.normal", try: pub("tock.exec.http.normal")},
		{what: "pull another queue's execution", subject: "$JS.API.CONSUMER.MSG.NEXT.TOCK_EXEC." + httpNormal,
			try: req("$JS.API.CONSUMER.MSG.NEXT.TOCK_EXEC."+httpNormal, `{"batch":1,"no_wait":true}`)},
		{what: "read another queue's consumer", subject: "$JS.API.CONSUMER.INFO.TOCK_EXEC." + httpNormal,
			try: req("$JS.API.CONSUMER.INFO.TOCK_EXEC."+httpNormal, "")},
		{what: "see executions of every queue", subject: "tock.exec.>", subscribe: true, try: sub("tock.exec.>")},
		{what: "read every client's replies (other queues' pulled executions)", subject: "_INBOX.>", subscribe: true, try: sub("_INBOX.>")},
		{what: "read other executors' events", subject: "tock.events.>", subscribe: true, try: sub("tock.events.>")},
		{what: "create a stream", subject: "$JS.API.STREAM.CREATE.EVIL",
			try: req("$JS.API.STREAM.CREATE.EVIL", `{"name":"EVIL","subjects":["evil.>"]}`)},
		{what: "delete the executions stream", subject: "$JS.API.STREAM.DELETE.TOCK_EXEC", try: req("$JS.API.STREAM.DELETE.TOCK_EXEC", "")},
		{what: "purge the executions stream", subject: "$JS.API.STREAM.PURGE.TOCK_EXEC", try: req("$JS.API.STREAM.PURGE.TOCK_EXEC", "")},
		{what: "change the events stream", subject: "$JS.API.STREAM.UPDATE.TOCK_EVENTS",
			try: req("$JS.API.STREAM.UPDATE.TOCK_EVENTS", `{"name":"TOCK_EVENTS","subjects":["tock.events.>"],"max_age":1000000000}`)},
		{what: "change the recorder's consumer", subject: "$JS.API.CONSUMER.CREATE.TOCK_EVENTS.tock_recorder.tock.events.>",
			try: req("$JS.API.CONSUMER.CREATE.TOCK_EVENTS.tock_recorder.tock.events.>", `{"stream_name":"TOCK_EVENTS","config":{"durable_name":"tock_recorder","ack_policy":"none"}}`)},
		{what: "give its own consumer another queue's executions", subject: "$JS.API.CONSUMER.CREATE.TOCK_EXEC.tock_send-email_high.tock.exec.http.high",
			try: req("$JS.API.CONSUMER.CREATE.TOCK_EXEC.tock_send-email_high.tock.exec.http.high", `{"stream_name":"TOCK_EXEC","config":{"durable_name":"tock_send-email_high","filter_subject":"tock.exec.http.high","ack_policy":"explicit"}}`)},
		{what: "delete its queue's consumer", subject: "$JS.API.CONSUMER.DELETE.TOCK_EXEC.tock_send-email_high",
			try: req("$JS.API.CONSUMER.DELETE.TOCK_EXEC.tock_send-email_high", "")},
		{what: "cancel an execution", subject: "$KV.TOCK_CANCELLED.x", try: pub("$KV.TOCK_CANCELLED.x")},
		{what: "write another handler's state", subject: "$KV.TOCK_HANDLERS." + b64([]byte("http:example.com")) + ".x",
			try: pub("$KV.TOCK_HANDLERS." + b64([]byte("http:example.com")) + ".x")},
	}
}

// forbidden tries every forbiddenCheck at once and returns those that
// NATS did not refuse within a few seconds.
func forbidden(t *testing.T, nc *nats.Conn, refused chan error) []string {
	t.Helper()
	drain(refused)
	checks := forbiddenChecks(nc)
	var wg sync.WaitGroup
	for _, c := range checks {
		wg.Go(func() { _ = c.try() }) // a refused request times out; what counts is NATS's refusal
	}
	pending := map[string]forbiddenCheck{}
	for _, c := range checks {
		kind := "publish to"
		if c.subscribe {
			kind = "subscription to"
		}
		pending[strings.ToLower(fmt.Sprintf("%s %q", kind, c.subject))] = c
	}
	deadline := time.After(5 * time.Second)
wait:
	for len(pending) > 0 {
		select {
		case err := <-refused:
			msg := strings.ToLower(err.Error())
			for k := range pending {
				if strings.Contains(msg, k) {
					delete(pending, k)
				}
			}
		case <-deadline:
			break wait
		}
	}
	wg.Wait()
	var allowed []string
	for _, c := range checks {
		for _, p := range pending {
			if p.subject == c.subject && p.subscribe == c.subscribe {
				allowed = append(allowed, c.what+" ("+c.subject+")")
			}
		}
	}
	return allowed
}

// drain empties refused and returns what it held.
func drain(refused chan error) []error {
	var errs []error
	for {
		select {
		case err := <-refused:
			errs = append(errs, err)
		default:
			return errs
		}
	}
}

// publishExecution publishes an execution for queue, as the dispatcher
// does, and returns its id.
func publishExecution(t *testing.T, ctx context.Context, js jetstream.JetStream, queue string, prio domain.Priority) string {
	t.Helper()
	h := domain.Handler{Type: domain.HandlerCustom, Name: queue}
	if queue == domain.HandlerHTTP {
		h = domain.Handler{Type: domain.HandlerHTTP, URL: "https://example.com/hook"}
	}
	x := &wire.Execution{ExecutionID: uuid.NewString(), JobID: uuid.NewString(), Namespace: "default", JobName: "perm",
		ScheduledFor: time.Now().UTC(), Handler: h, Priority: prio}
	msg, err := x.Msg()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.PublishMsg(ctx, msg, jetstream.WithMsgID(x.MsgID())); err != nil {
		t.Fatal(err)
	}
	return x.ExecutionID
}

func streamMsgs(t *testing.T, ctx context.Context, js jetstream.JetStream, stream string) uint64 {
	t.Helper()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// events reads the event stream through a consumer of its own.
type events struct {
	c    jetstream.Consumer
	seen []string // message bodies
}

func eventReader(t *testing.T, ctx context.Context, js jetstream.JetStream) *events {
	t.Helper()
	c, err := js.CreateOrUpdateConsumer(ctx, wire.EventStream, jetstream.ConsumerConfig{Durable: "perm_test_observer",
		AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: wire.EventSubjectPrefix + ">"})
	if err != nil {
		t.Fatal(err)
	}
	return &events{c: c}
}

// await waits until an event of type typ for execution id arrives.
func (e *events) await(t *testing.T, id, typ string) {
	t.Helper()
	want := []string{`"execution_id":"` + id + `"`, `"type":"` + typ + `"`}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		for _, body := range e.seen {
			// The SDK batches events: a JSON array of them.
			for _, one := range strings.Split(body, "},{") {
				if strings.Contains(one, want[0]) && strings.Contains(one, want[1]) {
					return
				}
			}
		}
		batch, err := e.c.Fetch(10, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			e.seen = append(e.seen, string(m.Data()))
			_ = m.Ack()
		}
	}
	t.Fatalf("no %s event for %s within 20s; events: %s", typ, id, e.seen)
}
