package main

import (
	"fmt"

	"github.com/tock-sched/tock/api/models"
)

type jobSkipsCmd struct {
	jobID
	Limit  int    `help:"Skipped ranges per page (1-500, server default 50)." placeholder:"N"`
	Cursor string `help:"Continue a listing from a previous page's cursor."`
	All    bool   `help:"Follow every page."`
}

// Run lists the job's skipped runs, newest first, as GET
// /v1/jobs/{id}/skips pages them.
func (c *jobSkipsCmd) Run(a *app) error {
	id, err := parseID(c.ID)
	if err != nil {
		return err
	}
	p := models.ListJobSkipsParams{}
	if c.Limit != 0 {
		p.Limit = &c.Limit
	}
	items, raw, cursor, err := listPages(c.Cursor, c.All, func(cursor *string) ([]models.SkippedRun, *string, []byte, error) {
		p.Cursor = cursor
		r, err := a.api.ListJobSkipsWithResponse(a.ctx, id, &p)
		if err := check(r, err); err != nil {
			return nil, nil, nil, err
		}
		page, err := decoded(r.JSON200)
		return page.Items, page.NextCursor, r.Body, err
	})
	if err != nil {
		return err
	}
	return printPage(a, c.All, raw, cursor, "skipped runs", items, a.skipTable,
		func(items []models.SkippedRun) any { return models.SkippedRunList{Items: items} })
}

// skipTable prints skipped ranges: the first and last scheduled time
// skipped, how many runs from one to the other, why, and when.
func (a *app) skipTable(skips []models.SkippedRun) {
	w := a.table()
	fmt.Fprintln(w, "FIRST\tLAST\tRUNS\tREASON\tRECORDED\tDETAIL")
	for _, k := range skips {
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\n", timeText(&k.First), timeText(&k.Last), k.Runs, k.Reason, timeText(&k.RecordedAt),
			orDash(deref(k.Detail)))
	}
	w.Flush()
}
