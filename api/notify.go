package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/jobs"
	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/store/model"
)

// Notification channels (where messages go), rules (which jobs' events
// are worth one, and to which channels) and the notifications made: the
// API of issue 24. Channels' secrets are sealed like secret headers and
// never shown; every URL is judged by the egress policy of jobs' URLs.

// Limits of channels and rules.
const (
	minChannelSecret = 16
	maxChannelSecret = 4 << 10
	maxChannelURL    = 2048
	maxRuleChannels  = 20
	maxSelector      = 4096
	maxFailingAfter  = 1000
	// maxRuleWait bounds silent_grace, late_after and slow_after;
	// maxGroupInterval bounds group_interval.
	maxRuleWait      = 7 * 24 * time.Hour
	maxGroupInterval = 24 * time.Hour
)

// noSecretKey is the fault of a secret given to a server without a
// keyring, worded as jobs words it for secret headers.
const noSecretKey = "this server has no --secret-key-file, so it cannot store secrets"

// newRule is a new rule with the defaults of what a request leaves out.
func newRule() model.Rule {
	return model.Rule{FailingAfter: 3, SilentGrace: time.Minute, LateAfter: time.Minute, SlowAfter: 10 * time.Minute,
		GroupInterval: time.Minute}
}

// CreateChannel handles POST /v1/notification-channels.
func (h *endpoints) CreateChannel(c echo.Context) error {
	var req models.ChannelCreate
	_, shape, err := h.readBody(c, h.s.channelCreateSchema, &req)
	if err != nil {
		return err
	}
	ch := model.Channel{Namespace: jobs.DefaultNamespace, Name: req.Name, Type: string(req.Type)}
	if req.Namespace != nil {
		ch.Namespace = *req.Namespace // "" is refused below
	}
	if err := h.s.allow(c, "createChannel", "namespace", ch.Namespace); err != nil {
		return err
	}
	var errs fieldErrors
	checkName("namespace", ch.Namespace, &errs)
	checkName("name", ch.Name, &errs)
	if err := h.s.applyChannel(&ch, &req.Url, req.Secret, nil, &errs); err != nil {
		return h.internal(c, err)
	}
	if all := shape.merge(errs); len(all) > 0 {
		return all.err()
	}
	out, err := h.s.store.CreateChannel(c.Request().Context(), ch)
	if errors.Is(err, store.ErrConflict) {
		return channelNameTaken(ch.Namespace, ch.Name)
	}
	if err != nil {
		return h.internal(c, err)
	}
	c.Response().Header().Set(echo.HeaderLocation, "/v1/notification-channels/"+out.ID.String())
	return c.JSON(http.StatusCreated, channelOf(out))
}

// ListChannels handles GET /v1/notification-channels.
func (h *endpoints) ListChannels(c echo.Context, p models.ListChannelsParams) error {
	namespaces, err := h.listNamespaces(c, "listChannels", p.Namespace)
	if err != nil {
		return err
	}
	list, err := h.s.store.ListChannels(c.Request().Context(), namespaces)
	if err != nil {
		return h.internal(c, err)
	}
	out := models.ChannelList{Items: make([]models.Channel, 0, len(list))}
	for _, ch := range list {
		out.Items = append(out.Items, channelOf(ch))
	}
	return c.JSON(http.StatusOK, out)
}

// GetChannel handles GET /v1/notification-channels/{id}.
func (h *endpoints) GetChannel(c echo.Context, id models.ID) error {
	ch, err := h.channel(c, id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, channelOf(ch))
}

// UpdateChannel handles PATCH /v1/notification-channels/{id}: it reads
// the channel, changes it and writes it if no one wrote it meanwhile;
// once more if someone did, and then 409.
func (h *endpoints) UpdateChannel(c echo.Context, id models.ID) error {
	ctx := c.Request().Context()
	var req models.ChannelPatch
	_, shape, err := h.readBody(c, h.s.channelPatchSchema, &req)
	if err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		old, err := h.channel(c, id)
		if err != nil {
			return err
		}
		ch := *old
		var errs fieldErrors
		if req.Name != nil {
			checkName("name", *req.Name, &errs)
			ch.Name = *req.Name
		}
		if req.Paused != nil {
			ch.Paused = *req.Paused
		}
		if err := h.s.applyChannel(&ch, req.Url, req.Secret, old, &errs); err != nil {
			return h.internal(c, err)
		}
		if all := shape.merge(errs); len(all) > 0 {
			return all.err()
		}
		out, err := h.s.store.UpdateChannel(ctx, ch)
		switch {
		case errors.Is(err, store.ErrStale) && attempt == 0:
			continue
		case errors.Is(err, store.ErrStale):
			return conflict(fmt.Sprintf("Notification channel %s changed while this change was being written; read it again and retry.", id))
		case errors.Is(err, store.ErrConflict):
			return channelNameTaken(ch.Namespace, ch.Name)
		case errors.Is(err, store.ErrNotFound):
			return notFound(fmt.Sprintf("No notification channel with id %s.", id))
		case err != nil:
			return h.internal(c, err)
		}
		return c.JSON(http.StatusOK, channelOf(out))
	}
}

// DeleteChannel handles DELETE /v1/notification-channels/{id}.
func (h *endpoints) DeleteChannel(c echo.Context, id models.ID) error {
	err := h.s.store.DeleteChannel(c.Request().Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return notFound(fmt.Sprintf("No notification channel with id %s.", id))
	}
	if err != nil {
		return h.internal(c, err)
	}
	return c.NoContent(http.StatusNoContent)
}

// TestChannel handles POST /v1/notification-channels/{id}/test.
func (h *endpoints) TestChannel(c echo.Context, id models.ID) error {
	ch, err := h.channel(c, id)
	if err != nil {
		return err
	}
	if h.s.notifier == nil {
		return noNotifier()
	}
	a := h.s.notifier.Test(c.Request().Context(), ch, nil)
	return c.JSON(http.StatusOK, deliveryResultOf(a))
}

// channel reads the channel id; a 404 if there is none.
func (h *endpoints) channel(c echo.Context, id uuid.UUID) (*model.Channel, error) {
	ch, err := h.s.store.GetChannel(c.Request().Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound(fmt.Sprintf("No notification channel with id %s.", id))
	}
	if err != nil {
		return nil, h.internal(c, err)
	}
	return ch, nil
}

// applyChannel checks the url and secret a request gives channel ch
// (nil: left as they are; a new channel is given its url) against ch's
// type, and sets them in ch, the secret sealed. old is the stored
// channel of a change, nil for a new one. The faults go to errs; the
// error is the Sealer's failure.
func (s *Server) applyChannel(ch *model.Channel, rawURL, secret *string, old *model.Channel, errs *fieldErrors) error {
	var seal string // what to seal into ch.Secret
	switch ch.Type {
	case model.ChannelWebhook:
		if rawURL != nil {
			if u := s.checkChannelURL(*rawURL, errs); u != nil {
				ch.URL = *rawURL
			}
		}
		switch {
		case secret != nil:
			switch n := len(*secret); {
			case n < minChannelSecret:
				errs.add("secret", "must be at least %d bytes", minChannelSecret)
			case n > maxChannelSecret:
				errs.add("secret", "must be at most %d bytes", maxChannelSecret)
			case s.secrets == nil:
				errs.add("secret", "%s", noSecretKey)
			default:
				seal = *secret
			}
		case old == nil:
			errs.add("secret", "is required for type webhook: the key its messages are signed with (%d to %d bytes)",
				minChannelSecret, maxChannelSecret)
		case rawURL != nil && jobs.Origin(*rawURL) != jobs.Origin(old.URL):
			// Messages signed with the stored key, sent somewhere else,
			// could be replayed to the receiver the key was given for.
			errs.add("secret", "is required with a url of another origin (scheme, host and port) than the stored one: the stored secret was given for that receiver")
		}
	case model.ChannelSlack:
		if secret != nil {
			errs.add("secret", "is not allowed for type slack: a Slack channel's secret is its url")
		}
		if rawURL != nil {
			u := s.checkChannelURL(*rawURL, errs)
			switch {
			case u == nil:
			case strings.Trim(u.Path, "/") == "":
				errs.add("url", "must be the incoming webhook's whole URL (https://hooks.slack.com/services/…), not its scheme and host alone")
			case s.secrets == nil:
				errs.add("url", "%s (a Slack channel's url is its secret)", noSecretKey)
			default:
				ch.URL = u.Scheme + "://" + u.Host
				seal = *rawURL
			}
		}
	default:
		errs.add("type", "must be webhook or slack")
	}
	if len(*errs) > 0 || seal == "" {
		return nil
	}
	kid, sealed, err := s.secrets.Seal([]byte(seal), domain.ChannelSecretAD)
	if err != nil {
		return fmt.Errorf("seal channel secret: %w", err)
	}
	ch.SecretKeyID, ch.Secret = kid, sealed
	return nil
}

// checkChannelURL checks a channel's URL: its form, then the egress
// policy's rules a URL's text can be judged by, as a job's handler.url
// is checked. Its faults never quote it: a Slack URL is a secret.
func (s *Server) checkChannelURL(raw string, errs *fieldErrors) *url.URL {
	if raw == "" {
		errs.add("url", "is required")
		return nil
	}
	if len(raw) > maxChannelURL {
		errs.add("url", "must be at most %d bytes", maxChannelURL)
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		errs.add("url", "is not a URL: %v", err)
		return nil
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs.add("url", "must be an absolute http or https URL")
		return nil
	}
	if err := s.httpPolicy.CheckURL(u); err != nil {
		errs.add("url", "%s", err.Error())
		return nil
	}
	return u
}

func channelNameTaken(namespace, name string) *apiError {
	return conflict(fmt.Sprintf("A notification channel named %q already exists in namespace %q.", name, namespace))
}

// channelOf is the API's view of a channel: never its secret.
func channelOf(ch *model.Channel) models.Channel {
	return models.Channel{Id: ch.ID, Namespace: ch.Namespace, Name: ch.Name, Type: models.ChannelType(ch.Type), Url: ch.URL,
		SecretSet: len(ch.Secret) > 0, Paused: ch.Paused, CreatedAt: ch.CreatedAt.UTC(), UpdatedAt: ch.UpdatedAt.UTC()}
}

// noNotifier is the problem of a test on a server that cannot send.
func noNotifier() *apiError {
	return newProblem(http.StatusServiceUnavailable, ProblemUnavailable, "Notifications unavailable",
		"This server cannot send notifications (it has no notifier); ask another node with the api role.")
}

// deliveryResultOf is the API's view of a test attempt. Its error never
// holds a Slack channel's URL: package notify names only the origin of a
// URL in the errors it makes.
func deliveryResultOf(a model.DeliveryAttempt) models.DeliveryResult {
	out := models.DeliveryResult{Delivered: a.Error == "", Error: nonEmpty(a.Error), TookMs: a.TookMS}
	if a.Status != 0 {
		out.Status = ptr(a.Status)
	}
	return out
}

// CreateRule handles POST /v1/notification-rules.
func (h *endpoints) CreateRule(c echo.Context) error {
	var req models.RuleCreate
	_, shape, err := h.readBody(c, h.s.ruleCreateSchema, &req)
	if err != nil {
		return err
	}
	r := newRule()
	r.Namespace, r.Name = jobs.DefaultNamespace, req.Name
	if req.Namespace != nil {
		r.Namespace = *req.Namespace
	}
	if err := h.s.allow(c, "createRule", "namespace", r.Namespace); err != nil {
		return err
	}
	var errs fieldErrors
	checkName("namespace", r.Namespace, &errs)
	checkName("name", r.Name, &errs)
	in := ruleInput{selector: req.Selector, events: &req.Events, channels: &req.Channels, failingAfter: req.FailingAfter,
		silentGrace: req.SilentGrace, lateAfter: req.LateAfter, slowAfter: req.SlowAfter, groupInterval: req.GroupInterval,
		paused: req.Paused}
	if err := h.applyRule(c.Request().Context(), &r, in, &errs); err != nil {
		return h.internal(c, err)
	}
	if all := shape.merge(errs); len(all) > 0 {
		return all.err()
	}
	out, err := h.s.store.CreateRule(c.Request().Context(), r)
	switch {
	case errors.Is(err, store.ErrConflict):
		return ruleNameTaken(r.Namespace, r.Name)
	case errors.Is(err, store.ErrNotFound):
		return channelsGone(r.Namespace)
	case err != nil:
		return h.internal(c, err)
	}
	c.Response().Header().Set(echo.HeaderLocation, "/v1/notification-rules/"+out.ID.String())
	return c.JSON(http.StatusCreated, ruleOf(out))
}

// ListRules handles GET /v1/notification-rules.
func (h *endpoints) ListRules(c echo.Context, p models.ListRulesParams) error {
	namespaces, err := h.listNamespaces(c, "listRules", p.Namespace)
	if err != nil {
		return err
	}
	list, err := h.s.store.ListRules(c.Request().Context(), namespaces)
	if err != nil {
		return h.internal(c, err)
	}
	out := models.RuleList{Items: make([]models.Rule, 0, len(list))}
	for _, r := range list {
		out.Items = append(out.Items, ruleOf(r))
	}
	return c.JSON(http.StatusOK, out)
}

// GetRule handles GET /v1/notification-rules/{id}.
func (h *endpoints) GetRule(c echo.Context, id models.ID) error {
	r, err := h.rule(c, id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, ruleOf(r))
}

// UpdateRule handles PATCH /v1/notification-rules/{id}, as
// UpdateChannel does a channel's.
func (h *endpoints) UpdateRule(c echo.Context, id models.ID) error {
	ctx := c.Request().Context()
	var req models.RulePatch
	_, shape, err := h.readBody(c, h.s.rulePatchSchema, &req)
	if err != nil {
		return err
	}
	in := ruleInput{selector: req.Selector, events: req.Events, channels: req.Channels, failingAfter: req.FailingAfter,
		silentGrace: req.SilentGrace, lateAfter: req.LateAfter, slowAfter: req.SlowAfter, groupInterval: req.GroupInterval,
		paused: req.Paused}
	for attempt := 0; ; attempt++ {
		old, err := h.rule(c, id)
		if err != nil {
			return err
		}
		r := *old
		var errs fieldErrors
		if req.Name != nil {
			checkName("name", *req.Name, &errs)
			r.Name = *req.Name
		}
		if err := h.applyRule(ctx, &r, in, &errs); err != nil {
			return h.internal(c, err)
		}
		if all := shape.merge(errs); len(all) > 0 {
			return all.err()
		}
		out, err := h.s.store.UpdateRule(ctx, r)
		switch {
		case errors.Is(err, store.ErrStale) && attempt == 0:
			continue
		case errors.Is(err, store.ErrStale):
			return conflict(fmt.Sprintf("Notification rule %s changed while this change was being written; read it again and retry.", id))
		case errors.Is(err, store.ErrConflict):
			return ruleNameTaken(r.Namespace, r.Name)
		case errors.Is(err, store.ErrNotFound):
			// The rule is gone, or one of its channels is.
			if _, err := h.rule(c, id); err != nil {
				return err
			}
			return channelsGone(r.Namespace)
		case err != nil:
			return h.internal(c, err)
		}
		return c.JSON(http.StatusOK, ruleOf(out))
	}
}

// DeleteRule handles DELETE /v1/notification-rules/{id}.
func (h *endpoints) DeleteRule(c echo.Context, id models.ID) error {
	err := h.s.store.DeleteRule(c.Request().Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return notFound(fmt.Sprintf("No notification rule with id %s.", id))
	}
	if err != nil {
		return h.internal(c, err)
	}
	return c.NoContent(http.StatusNoContent)
}

// TestRule handles POST /v1/notification-rules/{id}/test: a sample of
// the rule's message through each of its channels, one after another.
func (h *endpoints) TestRule(c echo.Context, id models.ID) error {
	ctx := c.Request().Context()
	r, err := h.rule(c, id)
	if err != nil {
		return err
	}
	if h.s.notifier == nil {
		return noNotifier()
	}
	out := models.RuleTestResult{Items: make([]models.RuleChannelResult, 0, len(r.Channels))}
	for _, cid := range r.Channels {
		item := models.RuleChannelResult{ChannelId: cid}
		ch, err := h.s.store.GetChannel(ctx, cid)
		switch {
		case errors.Is(err, store.ErrNotFound):
			item.Error = ptr("the channel was deleted")
		case err != nil:
			return h.internal(c, err)
		default:
			res := deliveryResultOf(h.s.notifier.Test(ctx, ch, r))
			item.Delivered, item.Status, item.Error, item.TookMs = res.Delivered, res.Status, res.Error, res.TookMs
		}
		out.Items = append(out.Items, item)
	}
	return c.JSON(http.StatusOK, out)
}

// rule reads the rule id; a 404 if there is none.
func (h *endpoints) rule(c echo.Context, id uuid.UUID) (*model.Rule, error) {
	r, err := h.s.store.GetRule(c.Request().Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound(fmt.Sprintf("No notification rule with id %s.", id))
	}
	if err != nil {
		return nil, h.internal(c, err)
	}
	return r, nil
}

// ruleInput is what a request gives a rule; nil is left as it is.
type ruleInput struct {
	selector                                         *string
	events                                           *[]models.NotifyEvent
	channels                                         *[]uuid.UUID
	failingAfter                                     *int
	silentGrace, lateAfter, slowAfter, groupInterval *string
	paused                                           *bool
}

// applyRule checks what in gives rule r (of its namespace) and sets it.
// The faults go to errs; the error is a failure to read a channel.
func (h *endpoints) applyRule(ctx context.Context, r *model.Rule, in ruleInput, errs *fieldErrors) error {
	if in.selector != nil {
		if len(*in.selector) > maxSelector {
			errs.add("selector", "must be at most %d characters", maxSelector)
		} else if _, err := domain.ParseSelector(*in.selector); err != nil {
			errs.add("selector", "%s", err.Error())
		}
		r.Selector = strings.TrimSpace(*in.selector)
	}
	if in.events != nil {
		r.Events = checkEvents(*in.events, errs)
	}
	if in.channels != nil {
		chans, err := h.checkChannels(ctx, r.Namespace, *in.channels, errs)
		if err != nil {
			return err
		}
		r.Channels = chans
	}
	if in.failingAfter != nil {
		if n := *in.failingAfter; n < 1 || n > maxFailingAfter {
			errs.add("failing_after", "must be between 1 and %d", maxFailingAfter)
		}
		r.FailingAfter = *in.failingAfter
	}
	ruleDuration("silent_grace", in.silentGrace, maxRuleWait, &r.SilentGrace, errs)
	ruleDuration("late_after", in.lateAfter, maxRuleWait, &r.LateAfter, errs)
	ruleDuration("slow_after", in.slowAfter, maxRuleWait, &r.SlowAfter, errs)
	ruleDuration("group_interval", in.groupInterval, maxGroupInterval, &r.GroupInterval, errs)
	if in.paused != nil {
		r.Paused = *in.paused
	}
	return nil
}

// checkEvents checks a rule's event kinds: at least one, each a kind of
// domain.NotifyKinds, none twice.
func checkEvents(events []models.NotifyEvent, errs *fieldErrors) []string {
	if len(events) == 0 {
		errs.add("events", "must name at least one event: %s", strings.Join(domain.NotifyKinds, ", "))
		return nil
	}
	out := make([]string, 0, len(events))
	for i, e := range events {
		field := fmt.Sprintf("events[%d]", i)
		switch j := slices.Index(out, string(e)); {
		case !slices.Contains(domain.NotifyKinds, string(e)):
			errs.add(field, "must be one of %s", strings.Join(domain.NotifyKinds, ", "))
		case j >= 0:
			errs.add(field, "repeats events[%d]", j)
		}
		out = append(out, string(e))
	}
	return out
}

// checkChannels checks a rule's channels: at least one, at most
// maxRuleChannels, none twice, each a channel of namespace ns.
func (h *endpoints) checkChannels(ctx context.Context, ns string, ids []uuid.UUID, errs *fieldErrors) ([]uuid.UUID, error) {
	switch {
	case len(ids) == 0:
		errs.add("channels", "must name at least one channel (its id)")
		return nil, nil
	case len(ids) > maxRuleChannels:
		errs.add("channels", "must name at most %d channels", maxRuleChannels)
		return nil, nil
	}
	for i, id := range ids {
		field := fmt.Sprintf("channels[%d]", i)
		if j := slices.Index(ids[:i], id); j >= 0 {
			errs.add(field, "repeats channels[%d]", j)
			continue
		}
		if jobs.NameProblem(ns) != "" {
			continue // the namespace is refused already
		}
		ch, err := h.s.store.GetChannel(ctx, id)
		switch {
		case errors.Is(err, store.ErrNotFound) || (err == nil && ch.Namespace != ns):
			errs.add(field, "is not the id of a notification channel of namespace %s", ns)
		case err != nil:
			return nil, err
		}
	}
	return ids, nil
}

// ruleDuration parses a rule's duration, if v is given, into dst: a Go
// duration from 0 to most, kept to the millisecond.
func ruleDuration(field string, v *string, most time.Duration, dst *time.Duration, errs *fieldErrors) {
	if v == nil {
		return
	}
	d, err := time.ParseDuration(*v)
	switch {
	case err != nil:
		errs.add(field, "must be a duration such as 90s, 10m or 2h")
	case d < 0:
		errs.add(field, "must not be negative")
	case d > most:
		errs.add(field, "must be at most %s", formatDuration(most))
	default:
		*dst = d.Truncate(time.Millisecond)
	}
}

func ruleNameTaken(namespace, name string) *apiError {
	return conflict(fmt.Sprintf("A notification rule named %q already exists in namespace %q.", name, namespace))
}

// channelsGone is the fault of a rule whose channel was deleted while
// the rule was being written.
func channelsGone(ns string) *apiError {
	return invalid("channels", "names a channel that is not one of namespace %s (deleted meanwhile?)", ns)
}

// ruleOf is the API's view of a rule.
func ruleOf(r *model.Rule) models.Rule {
	out := models.Rule{Id: r.ID, Namespace: r.Namespace, Name: r.Name, Selector: r.Selector,
		Events: make([]models.NotifyEvent, 0, len(r.Events)), Channels: make([]uuid.UUID, 0, len(r.Channels)),
		FailingAfter: r.FailingAfter, SilentGrace: formatDuration(r.SilentGrace), LateAfter: formatDuration(r.LateAfter),
		SlowAfter: formatDuration(r.SlowAfter), GroupInterval: formatDuration(r.GroupInterval), Paused: r.Paused,
		LastSentAt: utc(r.LastSentAt), CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC()}
	for _, e := range r.Events {
		out.Events = append(out.Events, models.NotifyEvent(e))
	}
	out.Channels = append(out.Channels, r.Channels...)
	return out
}

// ListNotifications handles GET /v1/notifications.
func (h *endpoints) ListNotifications(c echo.Context, p models.ListNotificationsParams) error {
	var errs fieldErrors
	f := store.NotificationFilter{RuleID: p.RuleId, JobID: p.JobId, Cursor: deref(p.Cursor), Limit: limitOf(p.Limit, &errs)}
	if st := deref(p.State); st != "" {
		if !st.Valid() {
			errs.add("state", "must be one of pending, sent, failed")
		}
		f.State = string(st)
	}
	if err := errs.err(); err != nil {
		return err
	}
	namespaces, err := h.listNamespaces(c, "listNotifications", p.Namespace)
	if err != nil {
		return err
	}
	f.Namespaces = namespaces
	list, next, err := h.s.store.ListNotifications(c.Request().Context(), f)
	if err != nil {
		return h.storeError(c, err, "notification", uuid.Nil)
	}
	out := models.NotificationList{Items: make([]models.Notification, 0, len(list)), NextCursor: nonEmpty(next)}
	for _, n := range list {
		out.Items = append(out.Items, notificationOf(n))
	}
	return c.JSON(http.StatusOK, out)
}

// GetNotification handles GET /v1/notifications/{id}.
func (h *endpoints) GetNotification(c echo.Context, id models.ID) error {
	n, err := h.s.store.GetNotification(c.Request().Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return notFound(fmt.Sprintf("No notification with id %s.", id))
	}
	if err != nil {
		return h.internal(c, err)
	}
	return c.JSON(http.StatusOK, notificationOf(n))
}

// notificationOf is the API's view of a notification (its errors, as
// package notify wrote them, name no URL but its origin).
func notificationOf(n *model.Notification) models.Notification {
	out := models.Notification{Id: n.ID, Namespace: n.Namespace, RuleId: n.RuleID, ChannelId: n.ChannelID,
		State: models.NotificationState(n.State), Kinds: append(make([]string, 0, len(n.Kinds)), n.Kinds...),
		JobIds: append(make([]uuid.UUID, 0, len(n.JobIDs)), n.JobIDs...), Body: n.Body, CreatedAt: n.CreatedAt.UTC(),
		NextAttemptAt: utc(n.NextAttemptAt), Attempts: n.Attempts, AttemptLog: make([]models.DeliveryAttempt, 0, len(n.AttemptLog)),
		SentAt: utc(n.SentAt), LastError: n.LastError}
	if len(out.Body) == 0 {
		out.Body = []byte("{}")
	}
	for _, a := range n.AttemptLog {
		item := models.DeliveryAttempt{At: a.At.UTC(), Error: nonEmpty(a.Error), TookMs: a.TookMS, Node: nonEmpty(a.Node)}
		if a.Status != 0 {
			item.Status = ptr(a.Status)
		}
		out.AttemptLog = append(out.AttemptLog, item)
	}
	return out
}

// listNamespaces are the namespaces a list of operation op reads, given
// its namespace parameter (see listNamespace): nil for every namespace.
func (h *endpoints) listNamespaces(c echo.Context, op string, given *string) ([]string, error) {
	ns, err := h.s.listNamespace(c, op, deref(given))
	if err != nil || ns == "" {
		return nil, err
	}
	if msg := jobs.NameProblem(ns); msg != "" {
		return nil, invalid("namespace", "%s", msg)
	}
	return []string{ns}, nil
}

// checkName checks a name (of a namespace, channel or rule) as a job's
// name is checked.
func checkName(field, v string, errs *fieldErrors) {
	if msg := jobs.NameProblem(v); msg != "" {
		errs.add(field, "%s", msg)
	}
}
