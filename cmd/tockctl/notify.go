package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/tock-sched/tock/api/models"
)

// The notification commands: channels (where messages go), rules (which
// jobs' events are worth one) and the notifications made.

// secretFlags give a webhook channel's signing secret, on the command
// line or, better (other users cannot see it in the process list), from
// a file.
type secretFlags struct {
	Secret     string `help:"The webhook's signing secret (16 to 4096 bytes); better --secret-file, which other users cannot see in the process list." xor:"secret" placeholder:"SECRET"`
	SecretFile string `help:"Read the webhook's signing secret from this file (\"-\": standard input), without its final newline." xor:"secret" placeholder:"FILE"`
}

// secret is the secret the flags give; nil when neither is set.
func (f secretFlags) secret(stdin io.Reader) (*string, error) {
	if f.SecretFile == "" {
		return optional(f.Secret), nil
	}
	var (
		b   []byte
		err error
	)
	if f.SecretFile == "-" {
		b, err = io.ReadAll(stdin)
	} else {
		b, err = os.ReadFile(f.SecretFile)
	}
	if err != nil {
		return nil, fmt.Errorf("--secret-file: %w", err)
	}
	s := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	return &s, nil
}

type channelsCreateCmd struct {
	Name      string `required:"" help:"Channel name, unique in its namespace." placeholder:"NAME"`
	Namespace string `help:"Namespace (the server's default is \"default\")." placeholder:"NS"`
	Type      string `required:"" enum:"webhook,slack" help:"webhook (a JSON POST signed with --secret) or slack (a Slack incoming webhook, whose URL is its secret)."`
	URL       string `name:"url" required:"" help:"Where messages go: the webhook's URL, or the Slack incoming webhook's whole URL (stored encrypted, shown as its host)." placeholder:"URL"`
	secretFlags
}

// Run creates a channel.
func (c *channelsCreateCmd) Run(a *app) error {
	secret, err := c.secret(a.stdin)
	if err != nil {
		return err
	}
	body := models.ChannelCreate{Name: c.Name, Namespace: optional(c.Namespace), Type: models.ChannelType(c.Type), Url: c.URL, Secret: secret}
	r, err := a.api.CreateChannelWithResponse(a.ctx, body)
	if err := check(r, err); err != nil {
		return err
	}
	return a.printChannel(r.Body, r.JSON201)
}

type channelsListCmd struct {
	Namespace string `help:"Only this namespace's channels (default: your key's namespace, or every one)." placeholder:"NS"`
}

// Run lists channels.
func (c *channelsListCmd) Run(a *app) error {
	r, err := a.api.ListChannelsWithResponse(a.ctx, &models.ListChannelsParams{Namespace: optional(c.Namespace)})
	if err := check(r, err); err != nil {
		return err
	}
	if a.json {
		return a.printRawJSON(r.Body)
	}
	l, err := decoded(r.JSON200)
	if err != nil {
		return err
	}
	a.channelTable(l.Items)
	return nil
}

// channelID is a command's channel argument: its id, or its name in
// --namespace.
type channelID struct {
	ID        string `arg:"" help:"Channel id, or name (of --namespace)." name:"channel"`
	Namespace string `help:"The namespace of a channel given by name (default \"default\")." placeholder:"NS"`
}

// id is the channel's id, its name looked up if need be.
func (c channelID) id(a *app) (uuid.UUID, error) {
	return resolveID(c.ID, c.Namespace, "channel", func(ns string) (map[string]uuid.UUID, error) {
		return channelIDs(a, ns)
	})
}

// channelIDs are the ids of namespace ns's channels, by name.
func channelIDs(a *app, ns string) (map[string]uuid.UUID, error) {
	r, err := a.api.ListChannelsWithResponse(a.ctx, &models.ListChannelsParams{Namespace: &ns})
	if err := check(r, err); err != nil {
		return nil, err
	}
	l, err := decoded(r.JSON200)
	if err != nil {
		return nil, err
	}
	out := map[string]uuid.UUID{}
	for _, ch := range l.Items {
		out[ch.Name] = ch.Id
	}
	return out, nil
}

// resolveID is arg as an id: a UUID as it is, else the name of one of
// namespace ns's (default "default") resources of kind noun, which
// byName lists.
func resolveID(arg, ns, noun string, byName func(ns string) (map[string]uuid.UUID, error)) (uuid.UUID, error) {
	if id, err := uuid.Parse(arg); err == nil {
		return id, nil
	}
	if ns == "" {
		ns = "default"
	}
	ids, err := byName(ns)
	if err != nil {
		return uuid.Nil, fmt.Errorf("%s %s: list the %ss of namespace %s: %w", noun, arg, noun, ns, err)
	}
	id, ok := ids[arg]
	if !ok {
		return uuid.Nil, fmt.Errorf("%s %s: namespace %s has no %s of that name (give its id, or its namespace with --namespace)", noun, arg, ns, noun)
	}
	return id, nil
}

type channelsGetCmd struct{ channelID }

// Run shows a channel.
func (c *channelsGetCmd) Run(a *app) error {
	id, err := c.id(a)
	if err != nil {
		return err
	}
	r, err := a.api.GetChannelWithResponse(a.ctx, id)
	if err := check(r, err); err != nil {
		return err
	}
	return a.printChannel(r.Body, r.JSON200)
}

type channelsUpdateCmd struct {
	channelID
	Name string `help:"A new name." placeholder:"NAME"`
	URL  string `name:"url" help:"A new URL (a Slack channel's whole URL again); a webhook's URL on another host needs a new secret too." placeholder:"URL"`
	secretFlags
	Pause  bool `help:"Pause the channel: it is sent nothing." xor:"state"`
	Resume bool `help:"Resume a paused channel." xor:"state"`
}

// Run changes a channel with one PATCH.
func (c *channelsUpdateCmd) Run(a *app) error {
	id, err := c.id(a)
	if err != nil {
		return err
	}
	secret, err := c.secret(a.stdin)
	if err != nil {
		return err
	}
	body := models.ChannelPatch{Name: optional(c.Name), Url: optional(c.URL), Secret: secret, Paused: pausedOf(c.Pause, c.Resume)}
	if body == (models.ChannelPatch{}) {
		return errors.New("nothing to change: give --name, --url, --secret, --secret-file, --pause or --resume")
	}
	r, err := a.api.UpdateChannelWithResponse(a.ctx, id, body)
	if err := check(r, err); err != nil {
		return err
	}
	return a.printChannel(r.Body, r.JSON200)
}

type channelsDeleteCmd struct{ channelID }

// Run deletes a channel.
func (c *channelsDeleteCmd) Run(a *app) error {
	id, err := c.id(a)
	if err != nil {
		return err
	}
	r, err := a.api.DeleteChannelWithResponse(a.ctx, id)
	if err := check(r, err); err != nil {
		return err
	}
	if !a.json {
		fmt.Fprintf(a.stdout, "deleted channel %s\n", id)
	}
	return nil
}

type channelsTestCmd struct{ channelID }

// Run sends a sample message through a channel now; the exit code is 1
// when it was not delivered.
func (c *channelsTestCmd) Run(a *app) error {
	id, err := c.id(a)
	if err != nil {
		return err
	}
	r, err := a.api.TestChannelWithResponse(a.ctx, id)
	if err := check(r, err); err != nil {
		return err
	}
	res, err := decoded(r.JSON200)
	if err != nil {
		return err
	}
	if a.json {
		err = a.printRawJSON(r.Body)
	} else {
		a.deliveryTable([]string{id.String()}, []models.DeliveryResult{res})
	}
	if err == nil && !res.Delivered {
		err = errors.New("the test message was not delivered")
	}
	return err
}

// printChannel prints what an endpoint answering with one channel
// returned.
func (a *app) printChannel(raw []byte, v *models.Channel) error {
	if a.json {
		return a.printRawJSON(raw)
	}
	ch, err := decoded(v)
	if err != nil {
		return err
	}
	a.channelTable([]models.Channel{ch})
	return nil
}

func (a *app) channelTable(chans []models.Channel) {
	w := a.table()
	fmt.Fprintln(w, "ID\tNAME\tTYPE\tURL\tSECRET\tSTATE")
	for _, ch := range chans {
		secret := "-"
		if ch.SecretSet {
			secret = "set"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", ch.Id, qualified(ch.Namespace, ch.Name), ch.Type, ch.Url, secret, pausedText(ch.Paused))
	}
	w.Flush()
}

// deliveryTable prints the outcomes of test messages, one per channel.
func (a *app) deliveryTable(channels []string, results []models.DeliveryResult) {
	w := a.table()
	fmt.Fprintln(w, "CHANNEL\tDELIVERED\tSTATUS\tTOOK\tERROR")
	for i, res := range results {
		delivered, status := "no", "-"
		if res.Delivered {
			delivered = "yes"
		}
		if res.Status != nil {
			status = strconv.Itoa(*res.Status)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%dms\t%s\n", channels[i], delivered, status, res.TookMs, orDash(oneLine(deref(res.Error), 80)))
	}
	w.Flush()
}

// ruleFlags are the fields of a rule a create or an update gives.
type ruleFlags struct {
	Event         []string `help:"An event worth a message (repeatable, or comma-separated): execution.dead, execution.failed, job.failing, job.recovered, job.silent, execution.late, execution.slow, handler.open, handler.close." placeholder:"KIND"`
	Channel       []string `help:"A channel the messages go to, by id or by name (repeatable, or comma-separated)." placeholder:"CHANNEL"`
	FailingAfter  *int     `help:"For job.failing: that many dead executions of a job in a row (1-1000; default 3)." placeholder:"N"`
	SilentGrace   string   `help:"For job.silent: how long past its schedule's interval a job may go without a success (\"1m\", the default; at most 168h)." placeholder:"DUR"`
	LateAfter     string   `help:"For execution.late: how long after its time an execution may start (default 1m; at most 168h)." placeholder:"DUR"`
	SlowAfter     string   `help:"For execution.slow: how long an execution's last attempt may run (default 10m; at most 168h)." placeholder:"DUR"`
	GroupInterval string   `help:"The least time between two messages of the rule to a channel; what happens in between goes out together (default 1m; at most 24h)." placeholder:"DUR"`
}

// events is the --event flags' kinds; nil when none is set.
func (f ruleFlags) events() *[]models.NotifyEvent {
	if len(f.Event) == 0 {
		return nil
	}
	out := []models.NotifyEvent{}
	for _, e := range f.Event {
		out = append(out, models.NotifyEvent(strings.TrimSpace(e)))
	}
	return &out
}

// channels is the --channel flags' channels as ids, names looked up
// among namespace ns's channels; nil when none is set.
func (f ruleFlags) channels(a *app, ns string) (*[]uuid.UUID, error) {
	if len(f.Channel) == 0 {
		return nil, nil
	}
	out := []uuid.UUID{}
	var byName map[string]uuid.UUID // read once, when a name is given
	for _, v := range f.Channel {
		v = strings.TrimSpace(v)
		if id, err := uuid.Parse(v); err == nil {
			out = append(out, id)
			continue
		}
		if byName == nil {
			var err error
			if byName, err = channelIDs(a, ns); err != nil {
				return nil, fmt.Errorf("--channel %s: list the channels of namespace %s: %w", v, ns, err)
			}
		}
		id, ok := byName[v]
		if !ok {
			return nil, fmt.Errorf("--channel %s: namespace %s has no channel of that name (nor is it an id)", v, ns)
		}
		out = append(out, id)
	}
	return &out, nil
}

type rulesCreateCmd struct {
	Name      string `required:"" help:"Rule name, unique in its namespace." placeholder:"NAME"`
	Namespace string `help:"Namespace (the server's default is \"default\"); its channels are the ones a rule may use." placeholder:"NS"`
	Selector  string `short:"l" help:"Only the namespace's jobs whose labels match this selector (\"team=payments\"; default every job)." placeholder:"SEL"`
	Paused    bool   `help:"Create the rule paused."`
	ruleFlags
}

// Run creates a rule.
func (c *rulesCreateCmd) Run(a *app) error {
	if len(c.Event) == 0 || len(c.Channel) == 0 {
		return errors.New("a rule needs --event and --channel (each at least once)")
	}
	ns := c.Namespace
	if ns == "" {
		ns = "default"
	}
	chans, err := c.channels(a, ns)
	if err != nil {
		return err
	}
	body := models.RuleCreate{Name: c.Name, Namespace: optional(c.Namespace), Selector: optional(c.Selector),
		Events: *c.events(), Channels: *chans, FailingAfter: c.FailingAfter, SilentGrace: optional(c.SilentGrace),
		LateAfter: optional(c.LateAfter), SlowAfter: optional(c.SlowAfter), GroupInterval: optional(c.GroupInterval),
		Paused: trueOrNil(c.Paused)}
	r, err := a.api.CreateRuleWithResponse(a.ctx, body)
	if err := check(r, err); err != nil {
		return err
	}
	return a.printRule(r.Body, r.JSON201)
}

type rulesListCmd struct {
	Namespace string `help:"Only this namespace's rules (default: your key's namespace, or every one)." placeholder:"NS"`
}

// Run lists rules.
func (c *rulesListCmd) Run(a *app) error {
	r, err := a.api.ListRulesWithResponse(a.ctx, &models.ListRulesParams{Namespace: optional(c.Namespace)})
	if err := check(r, err); err != nil {
		return err
	}
	if a.json {
		return a.printRawJSON(r.Body)
	}
	l, err := decoded(r.JSON200)
	if err != nil {
		return err
	}
	a.ruleTable(l.Items)
	return nil
}

// ruleID is a command's rule argument: its id, or its name in
// --namespace.
type ruleID struct {
	ID        string `arg:"" help:"Rule id, or name (of --namespace)." name:"rule"`
	Namespace string `help:"The namespace of a rule given by name (default \"default\")." placeholder:"NS"`
}

// id is the rule's id, its name looked up if need be.
func (c ruleID) id(a *app) (uuid.UUID, error) {
	return resolveID(c.ID, c.Namespace, "rule", func(ns string) (map[string]uuid.UUID, error) {
		r, err := a.api.ListRulesWithResponse(a.ctx, &models.ListRulesParams{Namespace: &ns})
		if err := check(r, err); err != nil {
			return nil, err
		}
		l, err := decoded(r.JSON200)
		if err != nil {
			return nil, err
		}
		out := map[string]uuid.UUID{}
		for _, rule := range l.Items {
			out[rule.Name] = rule.Id
		}
		return out, nil
	})
}

type rulesGetCmd struct{ ruleID }

// Run shows a rule, with its thresholds.
func (c *rulesGetCmd) Run(a *app) error {
	id, err := c.id(a)
	if err != nil {
		return err
	}
	r, err := a.api.GetRuleWithResponse(a.ctx, id)
	if err := check(r, err); err != nil {
		return err
	}
	return a.printRule(r.Body, r.JSON200)
}

type rulesUpdateCmd struct {
	ruleID
	Name     string  `help:"A new name." placeholder:"NAME"`
	Selector *string `short:"l" help:"A new label selector (\"\": every job of the namespace)." placeholder:"SEL"`
	ruleFlags
	Pause  bool `help:"Pause the rule: nothing is sent, then or later, until it is resumed." xor:"state"`
	Resume bool `help:"Resume a paused rule." xor:"state"`
}

// Run changes a rule with one PATCH: --event and --channel replace all
// its events and channels.
func (c *rulesUpdateCmd) Run(a *app) error {
	id, err := c.id(a)
	if err != nil {
		return err
	}
	body := models.RulePatch{Name: optional(c.Name), Selector: c.Selector, Events: c.events(), FailingAfter: c.FailingAfter,
		SilentGrace: optional(c.SilentGrace), LateAfter: optional(c.LateAfter), SlowAfter: optional(c.SlowAfter),
		GroupInterval: optional(c.GroupInterval), Paused: pausedOf(c.Pause, c.Resume)}
	if len(c.Channel) > 0 {
		// Names are looked up in the rule's namespace.
		g, err := a.api.GetRuleWithResponse(a.ctx, id)
		if err := check(g, err); err != nil {
			return err
		}
		rule, err := decoded(g.JSON200)
		if err != nil {
			return err
		}
		if body.Channels, err = c.channels(a, rule.Namespace); err != nil {
			return err
		}
	}
	if isZeroRulePatch(body) {
		return errors.New("nothing to change: give a field's flag, --pause or --resume (see --help)")
	}
	return a.patchRule(id, body)
}

func isZeroRulePatch(p models.RulePatch) bool {
	b, _ := json.Marshal(p)
	return bytes.Equal(b, []byte("{}"))
}

// patchRule sends a rule's PATCH and prints the rule it answers with.
func (a *app) patchRule(id uuid.UUID, body models.RulePatch) error {
	r, err := a.api.UpdateRuleWithResponse(a.ctx, id, body)
	if err := check(r, err); err != nil {
		return err
	}
	return a.printRule(r.Body, r.JSON200)
}

type rulesPauseCmd struct{ ruleID }

// Run pauses a rule (PATCH paused: true).
func (c *rulesPauseCmd) Run(a *app) error {
	id, err := c.id(a)
	if err != nil {
		return err
	}
	return a.patchRule(id, models.RulePatch{Paused: pausedOf(true, false)})
}

type rulesResumeCmd struct{ ruleID }

// Run resumes a rule (PATCH paused: false).
func (c *rulesResumeCmd) Run(a *app) error {
	id, err := c.id(a)
	if err != nil {
		return err
	}
	return a.patchRule(id, models.RulePatch{Paused: pausedOf(false, true)})
}

type rulesDeleteCmd struct{ ruleID }

// Run deletes a rule.
func (c *rulesDeleteCmd) Run(a *app) error {
	id, err := c.id(a)
	if err != nil {
		return err
	}
	r, err := a.api.DeleteRuleWithResponse(a.ctx, id)
	if err := check(r, err); err != nil {
		return err
	}
	if !a.json {
		fmt.Fprintf(a.stdout, "deleted rule %s\n", id)
	}
	return nil
}

type rulesTestCmd struct{ ruleID }

// Run sends a sample of the rule's message through each of its channels
// now; the exit code is 1 when one was not delivered.
func (c *rulesTestCmd) Run(a *app) error {
	id, err := c.id(a)
	if err != nil {
		return err
	}
	r, err := a.api.TestRuleWithResponse(a.ctx, id)
	if err := check(r, err); err != nil {
		return err
	}
	res, err := decoded(r.JSON200)
	if err != nil {
		return err
	}
	failed := 0
	channels := make([]string, len(res.Items))
	results := make([]models.DeliveryResult, len(res.Items))
	for i, it := range res.Items {
		channels[i] = it.ChannelId.String()
		results[i] = models.DeliveryResult{Delivered: it.Delivered, Status: it.Status, Error: it.Error, TookMs: it.TookMs}
		if !it.Delivered {
			failed++
		}
	}
	if a.json {
		err = a.printRawJSON(r.Body)
	} else if len(res.Items) == 0 {
		fmt.Fprintln(a.stdout, "the rule has no channel: nothing was sent")
	} else {
		a.deliveryTable(channels, results)
	}
	if err == nil && failed > 0 {
		err = fmt.Errorf("%d of %d test messages were not delivered", failed, len(res.Items))
	}
	return err
}

// printRule prints what an endpoint answering with one rule returned:
// its row, and below it its thresholds and when it last sent.
func (a *app) printRule(raw []byte, v *models.Rule) error {
	if a.json {
		return a.printRawJSON(raw)
	}
	r, err := decoded(v)
	if err != nil {
		return err
	}
	a.ruleTable([]models.Rule{r})
	var d details
	d.add("failing after", strconv.Itoa(r.FailingAfter)+" dead executions in a row")
	d.add("silent grace", r.SilentGrace)
	d.add("late after", r.LateAfter)
	d.add("slow after", r.SlowAfter)
	d.add("group interval", r.GroupInterval)
	d.add("last sent", timeText(r.LastSentAt))
	a.printDetails(d)
	return nil
}

func (a *app) ruleTable(rules []models.Rule) {
	w := a.table()
	fmt.Fprintln(w, "ID\tNAME\tSTATE\tSELECTOR\tEVENTS\tCHANNELS")
	for _, r := range rules {
		events := make([]string, len(r.Events))
		for i, e := range r.Events {
			events[i] = string(e)
		}
		chans := make([]string, len(r.Channels))
		for i, c := range r.Channels {
			chans[i] = c.String()
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Id, qualified(r.Namespace, r.Name), pausedText(r.Paused), orDash(r.Selector),
			strings.Join(events, ","), orDash(strings.Join(chans, ",")))
	}
	w.Flush()
}

type notificationsListCmd struct {
	Namespace string `help:"Only this namespace's notifications (default: your key's namespace, or every one)." placeholder:"NS"`
	Rule      string `help:"Only this rule's notifications." placeholder:"ID"`
	Job       string `help:"Only notifications about this job." placeholder:"ID"`
	State     string `help:"Only notifications in this state: pending, sent or failed." placeholder:"STATE"`
	Limit     int    `help:"Notifications per page (1-500, server default 50)." placeholder:"N"`
	Cursor    string `help:"Continue a listing from a previous page's cursor."`
	All       bool   `help:"Follow every page."`
}

// Run lists notifications, newest first.
func (c *notificationsListCmd) Run(a *app) error {
	p := models.ListNotificationsParams{Namespace: optional(c.Namespace), State: (*models.NotificationState)(optional(c.State))}
	if c.Limit != 0 {
		p.Limit = &c.Limit
	}
	for _, f := range []struct {
		flag, value string
		dst         **uuid.UUID
	}{{"--rule", c.Rule, &p.RuleId}, {"--job", c.Job, &p.JobId}} {
		if f.value == "" {
			continue
		}
		id, err := parseID(f.value)
		if err != nil {
			return fmt.Errorf("%s: %w", f.flag, err)
		}
		*f.dst = &id
	}
	items, raw, cursor, err := listPages(c.Cursor, c.All, func(cursor *string) ([]models.Notification, *string, []byte, error) {
		p.Cursor = cursor
		r, err := a.api.ListNotificationsWithResponse(a.ctx, &p)
		if err := check(r, err); err != nil {
			return nil, nil, nil, err
		}
		page, err := decoded(r.JSON200)
		return page.Items, page.NextCursor, r.Body, err
	})
	if err != nil {
		return err
	}
	return printPage(a, c.All, raw, cursor, "notifications", items, a.notificationTable,
		func(items []models.Notification) any { return models.NotificationList{Items: items} })
}

type notificationsGetCmd struct {
	ID string `arg:"" help:"Notification id." name:"id"`
}

// Run shows a notification: its row, its attempts and its body.
func (c *notificationsGetCmd) Run(a *app) error {
	id, err := parseID(c.ID)
	if err != nil {
		return err
	}
	r, err := a.api.GetNotificationWithResponse(a.ctx, id)
	if err := check(r, err); err != nil {
		return err
	}
	if a.json {
		return a.printRawJSON(r.Body)
	}
	n, err := decoded(r.JSON200)
	if err != nil {
		return err
	}
	a.notificationTable([]models.Notification{n})
	var d details
	d.add("rule", n.RuleId.String())
	d.add("channel", n.ChannelId.String())
	if len(n.JobIds) > 0 {
		jobs := make([]string, len(n.JobIds))
		for i, j := range n.JobIds {
			jobs[i] = j.String()
		}
		d.add("jobs", strings.Join(jobs, ", "))
	}
	if n.NextAttemptAt != nil {
		d.add("next attempt", timeText(n.NextAttemptAt))
	}
	if n.LastError != "" {
		d.add("last error", oneLine(n.LastError, 200))
	}
	a.printDetails(d)
	if len(n.AttemptLog) > 0 {
		fmt.Fprintln(a.stdout)
		w := a.table()
		fmt.Fprintln(w, "ATTEMPT\tAT\tNODE\tSTATUS\tTOOK\tERROR")
		for i, at := range n.AttemptLog {
			status := "-"
			if at.Status != nil {
				status = strconv.Itoa(*at.Status)
			}
			fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%dms\t%s\n", i+1, timeText(&at.At), orDash(deref(at.Node)), status, at.TookMs,
				orDash(oneLine(deref(at.Error), 80)))
		}
		w.Flush()
	}
	var body bytes.Buffer
	if json.Indent(&body, n.Body, "", "  ") == nil {
		fmt.Fprintf(a.stdout, "\nbody:\n%s\n", body.String())
	}
	return nil
}

func (a *app) notificationTable(list []models.Notification) {
	w := a.table()
	fmt.Fprintln(w, "ID\tNAMESPACE\tCREATED\tSTATE\tKINDS\tJOBS\tATTEMPTS\tSENT")
	for _, n := range list {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\n", n.Id, n.Namespace, timeText(&n.CreatedAt), n.State,
			strings.Join(n.Kinds, ","), len(n.JobIds), n.Attempts, timeText(n.SentAt))
	}
	w.Flush()
}

// pausedOf is the paused field of --pause and --resume; nil for neither.
func pausedOf(pause, resume bool) *bool {
	switch {
	case pause:
		return &pause
	case resume:
		return new(bool)
	}
	return nil
}

func pausedText(paused bool) string {
	if paused {
		return "paused"
	}
	return "active"
}

// qualified is a name with its namespace, unless that is the default one.
func qualified(ns, name string) string {
	if ns == "default" {
		return name
	}
	return ns + "/" + name
}
