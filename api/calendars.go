package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/calendar"
	"github.com/tock-sched/tock/jobs"
	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/store/model"
)

// Calendars are kept as the API takes them (CalendarSpec, without the
// namespace) and evaluated by package calendar.

// CreateCalendar handles POST /v1/calendars.
func (h *endpoints) CreateCalendar(c echo.Context) error {
	var req models.CalendarSpec
	_, shape, err := h.readBody(c, h.s.calendarSchema, &req)
	if err != nil {
		return err
	}
	ns := namespaceOrDefault(deref(req.Namespace))
	if err := h.s.allow(c, "createCalendar", "namespace", ns); err != nil {
		return err
	}
	if err := h.checkCalendar(c, ns, req, shape); err != nil {
		return err
	}
	cal := model.Calendar{Namespace: ns, Name: req.Name, Spec: calendarSpecJSON(req)}
	if err := h.s.store.CreateCalendar(c.Request().Context(), &cal); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return conflict(fmt.Sprintf("A calendar named %q already exists in namespace %q.", req.Name, ns))
		}
		return h.storeError(c, err, "calendar", uuid.Nil)
	}
	c.Response().Header().Set(echo.HeaderLocation, "/v1/calendars/"+cal.Name+"?namespace="+ns)
	c.Response().Header().Set("ETag", `"`+strconv.FormatInt(cal.Revision, 10)+`"`)
	return c.JSON(http.StatusCreated, calendarOf(cal, nil))
}

// ListCalendars handles GET /v1/calendars.
func (h *endpoints) ListCalendars(c echo.Context, p models.ListCalendarsParams) error {
	ns, err := h.s.listNamespace(c, "listCalendars", deref(p.Namespace))
	if err != nil {
		return err
	}
	ns = namespaceOrDefault(ns)
	if err := h.queryNamespace(c, "listCalendars", ns); err != nil {
		return err
	}
	cals, err := h.s.store.ListCalendars(c.Request().Context(), ns)
	if err != nil {
		return h.storeError(c, err, "calendar", uuid.Nil)
	}
	out := models.CalendarList{Items: make([]models.Calendar, 0, len(cals))}
	for _, cal := range cals {
		out.Items = append(out.Items, calendarOf(cal, nil))
	}
	return c.JSON(http.StatusOK, out)
}

// GetCalendar handles GET /v1/calendars/{name}: the calendar, and the
// periods it does not allow over the days asked for.
func (h *endpoints) GetCalendar(c echo.Context, name string, p models.GetCalendarParams) error {
	ns := namespaceOrDefault(deref(p.Namespace))
	if err := h.queryNamespace(c, "getCalendar", ns); err != nil {
		return err
	}
	var errs fieldErrors
	from := time.Now().UTC()
	if p.From != nil {
		from = p.From.UTC()
	}
	days := 14
	if p.Days != nil {
		if days = *p.Days; days < 1 || days > 366 {
			errs.add("days", "must be between 1 and 366")
		}
	}
	if err := errs.err(); err != nil {
		return err
	}
	ctx := c.Request().Context()
	cal, err := h.s.store.GetCalendar(ctx, ns, name)
	if errors.Is(err, store.ErrNotFound) {
		return notFound(fmt.Sprintf("No calendar %q in namespace %q.", name, ns))
	}
	if err != nil {
		return h.storeError(c, err, "calendar", uuid.Nil)
	}
	compiled, err := h.compiledCalendars(c, ns, nil)
	if err != nil {
		return err
	}
	var periods []models.CalendarPeriod
	if cc := compiled[name]; cc != nil {
		for _, pd := range cc.Periods(from, from.AddDate(0, 0, days), 1000) {
			periods = append(periods, models.CalendarPeriod{Start: pd.Start, End: pd.End, Calendar: pd.Calendar, Reason: pd.Reason})
		}
	}
	c.Response().Header().Set("ETag", `"`+strconv.FormatInt(cal.Revision, 10)+`"`)
	return c.JSON(http.StatusOK, calendarOf(cal, &periods))
}

// PutCalendar handles PUT /v1/calendars/{name}.
func (h *endpoints) PutCalendar(c echo.Context, name string, p models.PutCalendarParams) error {
	ns := namespaceOrDefault(deref(p.Namespace))
	if err := h.queryNamespace(c, "putCalendar", ns); err != nil {
		return err
	}
	rev, err := ifMatch(p.IfMatch)
	if err != nil {
		return err
	}
	var req models.CalendarSpec
	_, shape, err := h.readBody(c, h.s.calendarSchema, &req)
	if err != nil {
		return err
	}
	if req.Name != name {
		shape.add("name", "is %q, not the calendar's name %q (a calendar is not renamed)", req.Name, name)
	}
	if req.Namespace != nil && *req.Namespace != ns {
		shape.add("namespace", "is %q, not the calendar's namespace %q", *req.Namespace, ns)
	}
	if err := h.checkCalendar(c, ns, req, shape); err != nil {
		return err
	}
	cal := model.Calendar{Namespace: ns, Name: name, Spec: calendarSpecJSON(req)}
	switch err := h.s.store.UpdateCalendar(c.Request().Context(), &cal, rev); {
	case errors.Is(err, store.ErrNotFound):
		return notFound(fmt.Sprintf("No calendar %q in namespace %q.", name, ns))
	case errors.Is(err, store.ErrRevision):
		return preconditionFailed("calendar " + name)
	case err != nil:
		return h.storeError(c, err, "calendar", uuid.Nil)
	}
	// The jobs that name it, directly or through calendars that extend
	// it, follow the change within a second or two (see
	// jobs.Service.CalendarChanged): the calendar is stored already, so
	// a failure here is logged, not answered.
	if _, err := h.s.jobs.CalendarChanged(c.Request().Context(), ns, name); err != nil {
		h.s.log.ErrorContext(c.Request().Context(), "apply a calendar's change to the jobs naming it", "namespace", ns, "calendar", name, "err", err)
	}
	c.Response().Header().Set("ETag", `"`+strconv.FormatInt(cal.Revision, 10)+`"`)
	return c.JSON(http.StatusOK, calendarOf(cal, nil))
}

// DeleteCalendar handles DELETE /v1/calendars/{name}.
func (h *endpoints) DeleteCalendar(c echo.Context, name string, p models.DeleteCalendarParams) error {
	ns := namespaceOrDefault(deref(p.Namespace))
	if err := h.queryNamespace(c, "deleteCalendar", ns); err != nil {
		return err
	}
	ctx := c.Request().Context()
	cals, err := h.s.store.ListCalendars(ctx, ns)
	if err != nil {
		return h.storeError(c, err, "calendar", uuid.Nil)
	}
	var by []string
	for _, cal := range cals {
		var spec calendar.Spec
		if json.Unmarshal(cal.Spec, &spec) == nil && slices.Contains(spec.Extends, name) {
			by = append(by, cal.Name)
		}
	}
	if len(by) > 0 {
		return conflict(fmt.Sprintf("Calendars %s extend calendar %q: change them first.", strings.Join(by, ", "), name))
	}
	users, err := h.s.jobs.CalendarUsers(ctx, ns, name, 11)
	if err != nil {
		return h.storeError(c, err, "calendar", uuid.Nil)
	}
	if len(users) > 0 {
		more := ""
		if len(users) > 10 {
			users, more = users[:10], " and more"
		}
		return conflict(fmt.Sprintf("Jobs %s%s name calendar %q: take it out of their calendars first.", strings.Join(users, ", "), more, name))
	}
	if err := h.s.store.DeleteCalendar(ctx, ns, name); errors.Is(err, store.ErrNotFound) {
		return notFound(fmt.Sprintf("No calendar %q in namespace %q.", name, ns))
	} else if err != nil {
		return h.storeError(c, err, "calendar", uuid.Nil)
	}
	return c.NoContent(http.StatusNoContent)
}

// queryNamespace checks that a namespace of the query is a valid name
// and that the caller may call op in it (the guard checked it only when
// the query named one); the calendars' and the concurrency keys'
// handlers share it.
func (h *endpoints) queryNamespace(c echo.Context, op, ns string) error {
	if msg := jobs.NameProblem(ns); msg != "" {
		return invalid("namespace", "%s", msg)
	}
	return h.s.allow(c, op, "namespace", ns)
}

// checkCalendar checks req as the namespace's calendars would hold it
// (its extends resolved among them, cycles refused), with the body's
// shape faults.
func (h *endpoints) checkCalendar(c echo.Context, ns string, req models.CalendarSpec, shape fieldErrors) error {
	if msg := jobs.NameProblem(req.Name); msg != "" {
		shape.add("name", "%s", msg)
	}
	var spec calendar.Spec
	if err := json.Unmarshal(calendarSpecJSON(req), &spec); err != nil {
		return h.internal(c, err)
	}
	_, err := h.compiledCalendars(c, ns, &spec)
	var fe fieldErrors
	var cerr *calendarProblem
	switch {
	case errors.As(err, &cerr):
		fe = cerr.errs
	case err != nil:
		return err
	}
	return shape.merge(fe).err()
}

// calendarProblem carries the faults of the calendar being written.
type calendarProblem struct{ errs fieldErrors }

func (p *calendarProblem) Error() string { return "invalid calendar" }

// compiledCalendars compiles the namespace's calendars, with replacing in
// place of (or beside) the stored one of its name. A fault of replacing
// is a *calendarProblem naming its field; a fault of a stored calendar
// (one it extends) names that calendar.
func (h *endpoints) compiledCalendars(c echo.Context, ns string, replacing *calendar.Spec) (map[string]*calendar.Calendar, error) {
	cals, err := h.s.store.ListCalendars(c.Request().Context(), ns)
	if err != nil {
		return nil, h.storeError(c, err, "calendar", uuid.Nil)
	}
	specs := make([]calendar.Spec, 0, len(cals)+1)
	for _, cal := range cals {
		var spec calendar.Spec
		if err := json.Unmarshal(cal.Spec, &spec); err != nil {
			return nil, h.internal(c, fmt.Errorf("stored calendar %s/%s: %w", ns, cal.Name, err))
		}
		spec.Name = cal.Name
		if replacing != nil && spec.Name == replacing.Name {
			continue
		}
		specs = append(specs, spec)
	}
	if replacing != nil {
		specs = append(specs, *replacing)
	}
	compiled, err := calendar.Compile(specs)
	if err == nil {
		return compiled, nil
	}
	var (
		errs   fieldErrors
		faults calendar.Errors
	)
	if !errors.As(err, &faults) {
		return nil, h.internal(c, err)
	}
	for _, f := range faults {
		switch {
		case replacing != nil && f.Calendar == replacing.Name:
			errs = append(errs, models.FieldError{Field: f.Field, Message: f.Message})
		default:
			errs = append(errs, models.FieldError{Field: "extends", Message: fmt.Sprintf("calendar %q it extends is invalid: %s: %s", f.Calendar, f.Field, f.Message)})
		}
	}
	if replacing == nil {
		return nil, h.internal(c, err)
	}
	return nil, &calendarProblem{errs: errs}
}

// calendarSpecJSON is what is stored of a calendar: its body without the
// namespace.
func calendarSpecJSON(req models.CalendarSpec) json.RawMessage {
	req.Namespace = nil
	b, _ := json.Marshal(req)
	return b
}

// calendarOf is the API's form of a stored calendar.
func calendarOf(cal model.Calendar, periods *[]models.CalendarPeriod) models.Calendar {
	var out models.Calendar
	_ = json.Unmarshal(cal.Spec, &out)
	out.Name, out.Namespace = cal.Name, cal.Namespace
	out.Revision, out.CreatedAt, out.UpdatedAt = cal.Revision, cal.CreatedAt, cal.UpdatedAt
	if periods != nil {
		if *periods == nil {
			*periods = []models.CalendarPeriod{}
		}
		out.Periods = periods
	}
	return out
}
