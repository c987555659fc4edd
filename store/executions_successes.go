package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/tock-sched/tock/store/model"
)

// AlertLabel is the job label that, set to "true", asks for a job's last
// success to be exported as a metric (see ListAlertedJobSuccesses).
const AlertLabel = "tock.io/alert"

// alertedSuccessesSQL reads the last successes of the jobs labelled
// AlertLabel=true. Its label condition is the jobs_alert index's
// predicate, literally (the planner proves a partial index usable only
// from a matching condition, and never from a parameter in a generic
// plan), so it reads the few labelled jobs from that index in each
// partition and probes job_successes' key once for each.
const alertedSuccessesSQL = `
SELECT j.namespace, j.name, COALESCE(
	(SELECT s.last_success_at FROM job_successes s WHERE s.job_id = j.id),
	GREATEST(j.created_at, c.successes_since)),
	COALESCE((SELECT f.consecutive FROM job_failures f WHERE f.job_id = j.id), 0)
FROM jobs j CROSS JOIN cluster c
WHERE j.labels @> '{"` + AlertLabel + `": "true"}' AND j.state <> 'completed'`

// ListAlertedJobSuccesses lists the last success, and the current run of
// dead executions, of every job labelled AlertLabel=true that is not
// completed, in no order.
//
// A job that has not succeeded since it was created (or since tracking
// began, for a job older than that) is reported as succeeding then: a
// new job gets an alert's whole window to succeed a first time before
// "not succeeded for so long" holds. A paused job stays listed (pausing
// stops its successes too); a completed job, which has nothing left to
// run, is not.
func (s *Store) ListAlertedJobSuccesses(ctx context.Context) ([]model.JobLastSuccess, error) {
	rows, err := s.pool.Query(ctx, alertedSuccessesSQL)
	if err != nil {
		return nil, fmt.Errorf("store: alerted jobs' last successes: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (model.JobLastSuccess, error) {
		var j model.JobLastSuccess
		err := r.Scan(&j.Namespace, &j.Name, &j.At, &j.ConsecutiveFailures)
		j.At = j.At.UTC()
		return j, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: alerted jobs' last successes: %w", err)
	}
	return out, nil
}
