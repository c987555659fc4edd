// Command tockctl is the command-line client of tock's REST API: it
// creates, lists, changes, pauses, resumes, runs and deletes jobs,
// previews their fire times, lists the runs they skipped, inspects their
// executions, manages notification channels and rules and lists the
// notifications sent, and shows which scheduler node fires which bucket.
//
//	tockctl jobs create --name nightly --cron "0 30 9 * * MON-FRI" --tz Europe/Berlin --http https://example.com/hook
//	tockctl jobs create -f jobs.jsonl
//	tockctl jobs list --state active
//	tockctl jobs update <id> --cron "0 0 10 * * MON-FRI" --payload '{"k": 1}'
//	tockctl jobs preview <id> --count 5
//	tockctl jobs skips <id>
//	tockctl jobs backfill <id> --from 2026-07-01T00:00:00Z --to 2026-07-02T00:00:00Z
//	tockctl schedules preview --cron "0 30 2 * * *" --timezone America/New_York --from 2026-03-07T00:00:00Z
//	tockctl executions list --job <id>
//	tockctl channels create --name oncall --type webhook --url https://hooks.example.com/tock --secret-file secret.txt
//	tockctl rules create --name payments --selector team=payments --event execution.dead --event job.silent --channel oncall
//	tockctl rules test <id>
//	tockctl notifications list --state failed
//	tockctl nodes
//	tockctl buckets
//	tockctl export --namespace payments --dir jobs/
//
// It talks to --server (or $TOCK_SERVER, default http://127.0.0.1:8080;
// an https:// server with --ca-cert, --client-cert and --client-key as
// it needs) and prints tables, or with -o json the API's JSON. It is built on the
// generated client of package client, and links nothing of the server.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/alecthomas/kong"

	"github.com/tock-sched/tock/client"
)

func main() {
	// Ctrl-C ends a command that runs until interrupted (executions
	// watch) with exit code 0.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := runContext(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// cli is tockctl's command line.
type cli struct {
	Server     string `help:"URL of the tock API." env:"TOCK_SERVER" default:"http://127.0.0.1:8080" placeholder:"URL"`
	CACert     string `name:"ca-cert" help:"CA certificates (PEM) to trust for an https:// server, instead of the system's." env:"TOCK_CA_CERT" placeholder:"FILE"`
	ClientCert string `name:"client-cert" help:"Client certificate (PEM) for a server that asks for one (tockd --tls-client-ca), with --client-key." env:"TOCK_CLIENT_CERT" placeholder:"FILE"`
	ClientKey  string `name:"client-key" help:"The private key of --client-cert (PEM)." env:"TOCK_CLIENT_KEY" placeholder:"FILE"`
	Token      string `help:"API key (tock_<id>_<secret>) sent as Authorization: Bearer; prefer the variable, which other users cannot see in the process list." env:"TOCK_TOKEN" placeholder:"KEY"`
	Output     string `short:"o" help:"Output format: ${enum}." enum:"table,json" default:"table"`

	Jobs struct {
		Create  jobsCreateCmd `cmd:"" help:"Create a job."`
		List    jobsListCmd   `cmd:"" help:"List jobs, by namespace and name."`
		Get     jobGetCmd     `cmd:"" help:"Show a job."`
		Update  jobUpdateCmd  `cmd:"" help:"Change a job: its schedule, handler, payload, retry policy, priority, timeout, or missed-run and overlap policies, and pause or resume it."`
		Pause   jobPauseCmd   `cmd:"" help:"Pause a job: it does not fire until resumed."`
		Resume  jobResumeCmd  `cmd:"" help:"Resume a paused job."`
		Run     jobRunCmd     `cmd:"" help:"Run a job now, outside its schedule."`
		Delete  jobDeleteCmd  `cmd:"" help:"Delete a job (its executions are kept)."`
		Preview jobPreviewCmd `cmd:"" help:"List a job's next fire times, marking those a DST change moved or repeats (a paused or completed job's too)."`
		Skips   jobSkipsCmd   `cmd:"" help:"List a job's skipped runs, newest first: the runs its missed-run or overlap policy, a pause or its dependencies kept from firing."`
		Graph   jobGraphCmd   `cmd:"" help:"Show a job's dependencies as text: what it waits for, and what waits for it, transitively."`

		Backfill     jobBackfillCmd     `cmd:"" help:"Fire a cron job's past scheduled times in [--from, --to) that have no execution yet, once each, oldest first, in the background at low priority (paced by tockd --backfill-rate); prints the backfill with its total."`
		Backfills    jobBackfillsCmd    `cmd:"" help:"List a job's backfills, newest first, with their progress (fired: executions each created)."`
		BackfillStop jobBackfillStopCmd `cmd:"" name:"backfill-stop" help:"Stop a running backfill: it fires nothing more (what it fired runs)."`
	} `cmd:"" help:"Manage jobs."`

	Schedules struct {
		Preview schedulesPreviewCmd `cmd:"" help:"List a schedule's fire times, as a job with it would fire them, marking those a DST change moved or repeats."`
	} `cmd:"" help:"Try out schedules before giving them to a job."`

	Executions struct {
		List   execListCmd   `cmd:"" help:"List executions, newest first: a job's, or every job's (--state dead: the dead letters)."`
		Watch  execWatchCmd  `cmd:"" help:"Print executions and jobs as they change, live (GET /v1/changes), until interrupted."`
		Get    execGetCmd    `cmd:"" help:"Show an execution and its attempts."`
		Logs   execLogsCmd   `cmd:"" help:"Print what an execution's attempts wrote (its log); -f follows it live."`
		Cancel execCancelCmd `cmd:"" help:"Cancel a queued or running execution."`
		Retry  execRetryCmd  `cmd:"" help:"Re-drive a dead execution as a fresh series of attempts."`
	} `cmd:"" help:"Inspect, cancel and re-drive executions."`

	Channels struct {
		Create channelsCreateCmd `cmd:"" help:"Create a notification channel: a webhook (JSON, signed with --secret) or a Slack incoming webhook."`
		List   channelsListCmd   `cmd:"" help:"List notification channels, by namespace and name (without their secrets)."`
		Get    channelsGetCmd    `cmd:"" help:"Show a notification channel."`
		Update channelsUpdateCmd `cmd:"" help:"Change a notification channel: its name, URL or secret; pause or resume it."`
		Delete channelsDeleteCmd `cmd:"" help:"Delete a notification channel (it leaves its rules)."`
		Test   channelsTestCmd   `cmd:"" help:"Send a sample message through a channel now; exit code 1 if it was not delivered."`
	} `cmd:"" help:"Notification channels: where rules' messages go."`
	Rules struct {
		Create rulesCreateCmd `cmd:"" help:"Create a notification rule: which jobs' events (--event) go to which channels (--channel)."`
		List   rulesListCmd   `cmd:"" help:"List notification rules, by namespace and name."`
		Get    rulesGetCmd    `cmd:"" help:"Show a notification rule and its thresholds."`
		Update rulesUpdateCmd `cmd:"" help:"Change a notification rule (--event and --channel replace all its events and channels)."`
		Delete rulesDeleteCmd `cmd:"" help:"Delete a notification rule (its notifications stay listed)."`
		Test   rulesTestCmd   `cmd:"" help:"Send a sample of a rule's message through each of its channels now; exit code 1 if one was not delivered."`
		Pause  rulesPauseCmd  `cmd:"" help:"Pause a rule: nothing is sent, then or later, until it is resumed."`
		Resume rulesResumeCmd `cmd:"" help:"Resume a paused rule."`
	} `cmd:"" help:"Notification rules: which jobs' events are worth a message, to which channels."`
	Notifications struct {
		List notificationsListCmd `cmd:"" help:"List notifications, newest first, with their delivery state."`
		Get  notificationsGetCmd  `cmd:"" help:"Show a notification: its attempts and its body as delivered."`
	} `cmd:"" help:"The messages rules made, and how their delivery went."`

	Handlers handlersCmd `cmd:"" help:"List handlers with their circuit breakers, per executor."`

	Nodes      nodesCmd `cmd:"" help:"List the live scheduler nodes and their buckets."`
	Namespaces struct {
		List nsListCmd `cmd:"" default:"1" help:"List namespaces with their jobs and retention."`
		Set  nsSetCmd  `cmd:"" help:"Set a namespace's retention (PUT /v1/namespaces/{ns})."`
	} `cmd:"" help:"Namespaces and their settings."`
	Stats   statsCmd   `cmd:"" help:"Execution statistics per job, handler, namespace or hour: counts by state, success rate, attempts, duration and lag percentiles."`
	Buckets bucketsCmd `cmd:"" aliases:"partitions" help:"List every bucket: its owner and epoch, and its jobs (alias: partitions)."`
	Audit   auditCmd   `cmd:"" help:"The audit trail, newest first: every change made through the API, by whom, with the resource before and after (admin)."`
	Keys    struct {
		Create keysCreateCmd `cmd:"" help:"Create an API key; prints it alone on stdout (the only time it is shown)."`
		List   keysListCmd   `cmd:"" default:"1" help:"List API keys (without their secrets)."`
		Delete keysDeleteCmd `cmd:"" help:"Delete an API key."`
	} `cmd:"" help:"API keys: who may call the API, in which namespace, with which role."`
	Export    exportCmd `cmd:"" help:"Write jobs as files (--dir/<namespace>/<name>.yaml) to keep in git: the create bodies they hold, secret header values left as {env: TOCK_SECRET_<JOB>_<HEADER>} references to fill."`
	Calendars struct {
		List   calendarsListCmd   `cmd:"" default:"1" help:"List calendars: zone, mode, rules, what they extend."`
		Get    calendarsGetCmd    `cmd:"" help:"Show a calendar and the periods it does not allow in the next --days."`
		Apply  calendarsApplyCmd  `cmd:"" help:"Create a calendar from a YAML or JSON file, or replace it when its name exists (editor)."`
		Delete calendarsDeleteCmd `cmd:"" help:"Delete a calendar (not one another extends)."`
	} `cmd:"" help:"Calendars: days and windows jobs must not run in (holidays, maintenance), or may run in alone (business days)."`
	Concurrency concurrencyCmd `cmd:"" help:"Concurrency keys in use: slots held and executions waiting; with KEY, its holders and queue."`
	Apply       applyCmd       `cmd:"" help:"Make a set of jobs (--set) what a directory of job files says, in one transaction: shows the plan (create, update, delete with --prune, adopt, drift), then applies it unless --dry-run."`
	ApplySets   applySetsCmd   `cmd:"" name:"applysets" help:"List the apply sets (jobs kept in files): their jobs, revision, lock, last commit, when and by whom applied."`
	Diff        diffCmd        `cmd:"" help:"Show what apply would change; exit code 0 when nothing, 1 when something, 2 on an error (for CI)."`
	Whoami      whoamiCmd      `cmd:"" help:"Who the server takes you for: your grants, and the namespaces where you may take each action."`
}

// exitCode carries kong's exit requests (after --help) out of its parser.
type exitCode int

// run is tockctl with its arguments and output streams; it returns the
// process's exit code: 0 on success, 1 when a request fails, 2 for a bad
// command line.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) (code int) {
	return runContext(context.Background(), args, stdin, stdout, stderr)
}

// runContext is run until ctx ends.
func runContext(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) (code int) {
	var c cli
	parser, err := kong.New(&c,
		kong.Name("tockctl"),
		kong.Description("Command-line client of tock, the distributed job scheduler."),
		kong.Writers(stdout, stderr),
		kong.Exit(func(code int) { panic(exitCode(code)) }),
		kong.ConfigureHelp(kong.HelpOptions{Compact: true}),
		kong.Vars{"max_batch": strconv.Itoa(client.MaxBatchJobs)},
	)
	if err != nil {
		fmt.Fprintf(stderr, "tockctl: %v\n", err)
		return 2
	}
	defer func() {
		if r := recover(); r != nil {
			ec, ok := r.(exitCode)
			if !ok {
				panic(r)
			}
			code = int(ec)
		}
	}()
	kctx, err := parser.Parse(args)
	if err != nil {
		fmt.Fprintf(stderr, "tockctl: error: %v\n", err)
		return 2
	}
	a := &app{
		ctx:    ctx,
		json:   c.Output == "json",
		stdin:  stdin,
		stdout: stdout,
		stderr: stderr,
	}
	var hc *http.Client
	hc, err = httpClient(c.CACert, c.ClientCert, c.ClientKey)
	if err == nil {
		a.api, err = newClient(c.Server, hc, c.Token)
	}
	if err == nil {
		// The same client without its 30 s timeout, for streams.
		streams := *hc
		streams.Timeout = 0
		a.stream, err = newClient(c.Server, &streams, c.Token)
	}
	if err == nil {
		err = kctx.Run(a)
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			a.printError(ee.err)
		}
		return ee.code
	}
	if err != nil {
		a.printError(err)
		return 1
	}
	return 0
}

// app is what every command runs with.
type app struct {
	ctx    context.Context
	api    *client.ClientWithResponses
	stream *client.ClientWithResponses // api without a timeout: executions watch
	json   bool                        // -o json
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
}
