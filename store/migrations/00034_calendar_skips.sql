-- +goose Up
-- Jobs name calendars (issue 43): a run a calendar does not allow is
-- skipped with reason 'calendar', its detail naming the calendar and rule.
ALTER TABLE skipped_runs DROP CONSTRAINT skipped_runs_reason_check;
ALTER TABLE skipped_runs ADD CONSTRAINT skipped_runs_reason_check
    CHECK (reason IN ('missed', 'overlap', 'paused', 'dependency', 'dependency_timeout', 'calendar'));

-- +goose Down
DELETE FROM skipped_runs WHERE reason = 'calendar';
ALTER TABLE skipped_runs DROP CONSTRAINT skipped_runs_reason_check;
ALTER TABLE skipped_runs ADD CONSTRAINT skipped_runs_reason_check
    CHECK (reason IN ('missed', 'overlap', 'paused', 'dependency', 'dependency_timeout'));
