package main

import (
	"fmt"
	"time"

	"github.com/tock-sched/tock/api/models"
)

// jobBackfillCmd is tockctl jobs backfill.
type jobBackfillCmd struct {
	jobID
	idempotency
	From string `required:"" help:"First scheduled time to fire (RFC 3339, included)." placeholder:"TIME"`
	To   string `required:"" help:"End of the range (RFC 3339, excluded); not after now." placeholder:"TIME"`
}

func (c *jobBackfillCmd) Run(a *app) error {
	id, err := parseID(c.ID)
	if err != nil {
		return err
	}
	var body models.BackfillRequest
	for _, f := range []struct {
		flag, v string
		to      *time.Time
	}{{"--from", c.From, &body.From}, {"--to", c.To, &body.To}} {
		if *f.to, err = time.Parse(time.RFC3339, f.v); err != nil {
			return fmt.Errorf("%s %q is not an RFC 3339 time such as 2026-07-01T09:00:00Z", f.flag, f.v)
		}
	}
	r, err := a.api.BackfillJobWithResponse(a.ctx, id, &models.BackfillJobParams{IdempotencyKey: c.key()}, body)
	if err := check(r, err); err != nil {
		return err
	}
	if a.json {
		return a.printRawJSON(r.Body)
	}
	b, err := decoded(r.JSON202)
	if err != nil {
		return err
	}
	a.backfillTable([]models.Backfill{b})
	return nil
}

// jobBackfillsCmd is tockctl jobs backfills.
type jobBackfillsCmd struct {
	jobID
	Limit  int    `help:"Backfills per page (1-500, server default 50)." placeholder:"N"`
	Cursor string `help:"Continue a listing from a previous page's cursor."`
	All    bool   `help:"Follow every page."`
}

func (c *jobBackfillsCmd) Run(a *app) error {
	id, err := parseID(c.ID)
	if err != nil {
		return err
	}
	p := models.ListJobBackfillsParams{}
	if c.Limit != 0 {
		p.Limit = &c.Limit
	}
	items, raw, cursor, err := listPages(c.Cursor, c.All, func(cursor *string) ([]models.Backfill, *string, []byte, error) {
		p.Cursor = cursor
		r, err := a.api.ListJobBackfillsWithResponse(a.ctx, id, &p)
		if err := check(r, err); err != nil {
			return nil, nil, nil, err
		}
		page, err := decoded(r.JSON200)
		return page.Items, page.NextCursor, r.Body, err
	})
	if err != nil {
		return err
	}
	return printPage(a, c.All, raw, cursor, "backfills", items, a.backfillTable,
		func(items []models.Backfill) any { return models.BackfillList{Items: items} })
}

// jobBackfillStopCmd is tockctl jobs backfill-stop.
type jobBackfillStopCmd struct {
	jobID
	BackfillID string `arg:"" name:"backfill-id" help:"Backfill id (from jobs backfills)."`
}

func (c *jobBackfillStopCmd) Run(a *app) error {
	id, err := parseID(c.ID)
	if err != nil {
		return err
	}
	bid, err := parseID(c.BackfillID)
	if err != nil {
		return fmt.Errorf("backfill %w", err)
	}
	r, err := a.api.StopJobBackfillWithResponse(a.ctx, id, bid)
	if err := check(r, err); err != nil {
		return err
	}
	if !a.json {
		fmt.Fprintf(a.stdout, "stopped backfill %s\n", c.BackfillID)
	}
	return nil
}

// backfillTable prints backfills, one a line.
func (a *app) backfillTable(bs []models.Backfill) {
	w := a.table()
	fmt.Fprintln(w, "ID\tSTATE\tFROM\tTO\tTOTAL\tFIRED\tNEXT\tCREATED\tFINISHED\tERROR")
	for _, b := range bs {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\n", b.Id, b.State, timeText(&b.From), timeText(&b.To),
			b.Total, b.Fired, timeText(&b.NextAt), timeText(&b.CreatedAt), timeText(b.FinishedAt), orDash(deref(b.Error)))
	}
	w.Flush()
}
