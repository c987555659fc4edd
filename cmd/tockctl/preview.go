package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/tock-sched/tock/api/models"
)

// previewFlags are the flags both preview commands take.
type previewFlags struct {
	Count int    `help:"How many runs to list (1-1000, server default 10)." placeholder:"N"`
	From  string `help:"List the runs after this RFC 3339 time (default now, by the server's database clock)." placeholder:"TIME"`
}

// values are the flags in the API's terms; nil for those not set.
func (f *previewFlags) values() (count *int, from *time.Time, err error) {
	if f.Count != 0 {
		count = &f.Count
	}
	if f.From != "" {
		t, err := time.Parse(time.RFC3339, f.From)
		if err != nil {
			return nil, nil, fmt.Errorf("--from %q is not an RFC 3339 time such as 2026-12-01T09:00:00Z", f.From)
		}
		from = &t
	}
	return count, from, nil
}

type jobPreviewCmd struct {
	jobID
	previewFlags
}

func (c *jobPreviewCmd) Run(a *app) error {
	id, err := parseID(c.ID)
	if err != nil {
		return err
	}
	count, from, err := c.values()
	if err != nil {
		return err
	}
	r, err := a.api.PreviewJobWithResponse(a.ctx, id, &models.PreviewJobParams{Count: count, From: from})
	if err := check(r, err); err != nil {
		return err
	}
	return a.printPreview(r.Body, r.JSON200)
}

type schedulesPreviewCmd struct {
	Cron     string `help:"Cron expression, seconds first (\"0 30 9 * * MON-FRI\")." xor:"schedule" group:"Schedule (one of)" placeholder:"EXPR"`
	Every    string `help:"A fixed interval (\"90s\", \"1h\"): the cron expression \"@every DUR\"." xor:"schedule" group:"Schedule (one of)" placeholder:"DUR"`
	At       string `help:"Once at this RFC 3339 time." xor:"schedule" group:"Schedule (one of)" placeholder:"TIME"`
	In       string `help:"Once after this delay (\"90s\") from --from." xor:"schedule" group:"Schedule (one of)" placeholder:"DUR"`
	Timezone string `aliases:"tz" help:"IANA time zone of the schedule (default UTC); local times are shown in it." placeholder:"ZONE"`
	previewFlags
}

func (c *schedulesPreviewCmd) Run(a *app) error {
	body := models.PreviewRequest{Schedule: models.Schedule{Timezone: optional(c.Timezone)}}
	switch {
	case c.Cron != "":
		body.Schedule.Cron = &c.Cron
	case c.Every != "":
		body.Schedule.Cron = ptr("@every " + c.Every)
	case c.At != "":
		t, err := time.Parse(time.RFC3339, c.At)
		if err != nil {
			return fmt.Errorf("--at %q is not an RFC 3339 time such as 2026-12-01T09:00:00Z", c.At)
		}
		body.Schedule.At = &t
	case c.In != "":
		body.Schedule.In = &c.In
	default:
		return errors.New("give a schedule: --cron, --every, --at or --in")
	}
	var err error
	if body.Count, body.From, err = c.values(); err != nil {
		return err
	}
	r, err := a.api.PreviewScheduleWithResponse(a.ctx, body)
	if err := check(r, err); err != nil {
		return err
	}
	return a.printPreview(r.Body, r.JSON200)
}

// printPreview prints a preview: the API's JSON, or a table of its runs
// (in UTC, in the schedule's zone, and what a DST change did to each).
func (a *app) printPreview(raw []byte, v *models.Preview) error {
	if a.json {
		return a.printRawJSON(raw)
	}
	p, err := decoded(v)
	if err != nil {
		return err
	}
	w := a.table()
	fmt.Fprintf(w, "UTC\tLOCAL (%s)\tDST\n", p.Timezone)
	for _, f := range p.Fires {
		local := f.Local.Format(time.RFC3339)
		if z := deref(f.Zone); z != "" {
			local += " " + z
		}
		dst := "-"
		if f.Dst != nil {
			dst = string(*f.Dst)
			if f.Note != nil {
				dst += ": " + *f.Note
			}
		}
		fmt.Fprintf(w, "%s\t%s\t%s\n", timeText(&f.At), local, dst)
		for _, u := range deref(f.WaitsFor) {
			fmt.Fprintf(w, "\t  %s\t\n", u.Note)
		}
	}
	w.Flush()
	switch {
	case len(p.Fires) == 0:
		fmt.Fprintf(a.stderr, "no runs after %s\n", timeText(&p.From))
	case p.State != nil && *p.State == models.JobStatePaused:
		fmt.Fprintln(a.stderr, "the job is paused: it fires these runs only once resumed")
	case p.State != nil && *p.State == models.JobStateCompleted:
		fmt.Fprintln(a.stderr, "the job has completed: it fires none of these unless given a new schedule")
	}
	return nil
}

func ptr[T any](v T) *T { return &v }
