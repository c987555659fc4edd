package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/tock-sched/tock/api/models"
)

// calendarsListCmd is tockctl calendars list.
type calendarsListCmd struct {
	Namespace string `help:"The calendars of this namespace (default: your key's, or \"default\")." placeholder:"NS"`
}

// calendarsGetCmd is tockctl calendars get.
type calendarsGetCmd struct {
	Name      string `arg:"" help:"Calendar name."`
	Namespace string `help:"Its namespace (default \"default\")." placeholder:"NS"`
	Days      int    `help:"Show the periods it does not allow for this many days from now." default:"14"`
}

// calendarsApplyCmd is tockctl calendars apply.
type calendarsApplyCmd struct {
	File string `short:"f" required:"" help:"The calendar, YAML or JSON, as POST /v1/calendars takes it (\"-\": standard input); created, or replaced when its name exists." placeholder:"FILE"`
}

// calendarsDeleteCmd is tockctl calendars delete.
type calendarsDeleteCmd struct {
	Name      string `arg:"" help:"Calendar name."`
	Namespace string `help:"Its namespace (default \"default\")." placeholder:"NS"`
}

// Run lists calendars.
func (c *calendarsListCmd) Run(a *app) error {
	r, err := a.api.ListCalendarsWithResponse(a.ctx, &models.ListCalendarsParams{Namespace: optional(c.Namespace)})
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
	w := a.table()
	fmt.Fprintln(w, "NAME\tZONE\tMODE\tRULES\tEXTENDS\tREVISION")
	for _, cal := range l.Items {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\n", qualified(cal.Namespace, cal.Name), cmp.Or(deref(cal.Timezone), "UTC"),
			cmp.Or(string(deref(cal.Mode)), "exclude"), calendarRules(cal), cmp.Or(strings.Join(deref(cal.Extends), ","), "-"), cal.Revision)
	}
	return w.Flush()
}

// Run shows a calendar and what it does not allow next.
func (c *calendarsGetCmd) Run(a *app) error {
	r, err := a.api.GetCalendarWithResponse(a.ctx, c.Name, &models.GetCalendarParams{Namespace: optional(c.Namespace), Days: &c.Days})
	if err := check(r, err); err != nil {
		return err
	}
	if a.json {
		return a.printRawJSON(r.Body)
	}
	cal, err := decoded(r.JSON200)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "%s in %s, %s: %s\n", qualified(cal.Namespace, cal.Name), cmp.Or(deref(cal.Timezone), "UTC"),
		cmp.Or(string(deref(cal.Mode)), "exclude"), calendarRules(cal))
	if cal.Periods == nil || len(*cal.Periods) == 0 {
		fmt.Fprintf(a.stdout, "allows every instant of the next %d days\n", c.Days)
		return nil
	}
	w := a.table()
	fmt.Fprintf(w, "NOT ALLOWED FROM\tUNTIL\tCALENDAR\tWHY\n")
	for _, p := range *cal.Periods {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", p.Start.Format(time.RFC3339), p.End.Format(time.RFC3339), p.Calendar, p.Reason)
	}
	return w.Flush()
}

// Run creates the calendar of the file, or replaces it.
func (c *calendarsApplyCmd) Run(a *app) error {
	var raw []byte
	var err error
	if c.File == "-" {
		var buf bytes.Buffer
		_, err = buf.ReadFrom(a.stdin)
		raw = buf.Bytes()
	} else {
		raw, err = os.ReadFile(c.File)
	}
	if err != nil {
		return err
	}
	var doc any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return fmt.Errorf("%s: %w", c.File, err)
	}
	body, err := json.Marshal(doc)
	if err != nil {
		return fmt.Errorf("%s: %w", c.File, err)
	}
	var spec models.CalendarSpec
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		return fmt.Errorf("%s: %w", c.File, err)
	}
	cr, err := a.api.CreateCalendarWithBodyWithResponse(a.ctx, "application/json", bytes.NewReader(body))
	if err == nil && cr.StatusCode() == 409 {
		pr, perr := a.api.PutCalendarWithBodyWithResponse(a.ctx, spec.Name, &models.PutCalendarParams{Namespace: spec.Namespace},
			"application/json", bytes.NewReader(body))
		if err := check(pr, perr); err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "calendar %s replaced\n", spec.Name)
		return nil
	}
	if err := check(cr, err); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "calendar %s created\n", spec.Name)
	return nil
}

// Run deletes a calendar.
func (c *calendarsDeleteCmd) Run(a *app) error {
	r, err := a.api.DeleteCalendarWithResponse(a.ctx, c.Name, &models.DeleteCalendarParams{Namespace: optional(c.Namespace)})
	if err := check(r, err); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "calendar %s deleted\n", c.Name)
	return nil
}

// calendarRules counts a calendar's rules by kind: "3 dates, 1 weekly".
func calendarRules(cal models.Calendar) string {
	var parts []string
	for _, k := range []struct {
		n    int
		what string
	}{
		{len(deref(cal.Dates)), "dates"}, {len(deref(cal.Windows)), "windows"}, {len(deref(cal.Weekly)), "weekly"},
		{len(deref(cal.Daily)), "daily"}, {len(deref(cal.Days)), "day rules"},
	} {
		if k.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", k.n, k.what))
		}
	}
	if len(parts) == 0 {
		return "no rules"
	}
	return strings.Join(parts, ", ")
}
