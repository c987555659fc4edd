package main

import (
	"context"
	"fmt"
	"time"

	"github.com/tock-sched/tock/archive"
	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/store/model"
)

// historyDeleteFlags are the flags of --mix history --history-delete.
type historyDeleteFlags struct {
	HistoryDelete      bool          `name:"history-delete" help:"--mix history: instead of dropping the oldest day, delete one namespace's executions from it (hist-00, given a retention of its own shorter than the cluster's) while the every-second jobs fire; the other namespaces keep the day."`
	HistoryDeleteBatch int           `name:"history-delete-batch" help:"--history-delete: executions a transaction deletes (0: the store's default, 5,000)."`
	HistoryDeletePause time.Duration `name:"history-delete-pause" help:"--history-delete: pause between two batches (0: as long as the batch took; below 0: none)."`
	HistoryArchiveDir  string        `name:"history-archive-dir" type:"path" help:"--history-delete: archive the executions to Parquet files in this directory before deleting them, as tockd --archive-dir does."`
}

// histDeleteNamespace is the namespace whose executions --history-delete
// deletes: a fifth of the day's with --history-namespaces 5.
const histDeleteNamespace = "hist-00"

// HistoryDelete is the delete of one namespace's executions from the
// oldest day, made by a retention pass while every-second jobs fired.
type HistoryDelete struct {
	Day       time.Time `json:"day"`
	Namespace string    `json:"namespace"`
	// DayRows counts the day's executions before the pass, Rows the
	// namespace's (of every state: failed ones wait for a retry and
	// stay).
	DayRows int64 `json:"day_rows"`
	Rows    int64 `json:"rows"`
	// Deleted and DeletedAttempts are what the pass deleted, Archived
	// the executions it wrote to Parquet first.
	Deleted         int64 `json:"deleted"`
	DeletedAttempts int64 `json:"deleted_attempts"`
	Archived        int64 `json:"archived"`
	// Batch and Pause are the store's batch size and pause (0: its
	// defaults).
	Batch   int     `json:"batch"`
	Pause   string  `json:"pause"`
	Seconds float64 `json:"seconds"`
	// FireLag is the fire lag of the every-second jobs' executions
	// scheduled from a second before the pass began to two after it
	// ended.
	FireLag Lag `json:"fire_lag_ms"`
	// Reloaded says the day was loaded again afterwards.
	Reloaded bool `json:"reloaded"`
}

func (d *HistoryDelete) write(p func(string, ...any)) {
	how := "deleted"
	if d.Archived > 0 {
		how = fmt.Sprintf("archived %d and deleted", d.Archived)
	}
	batch, pause := "5000 (default)", d.Pause
	if d.Batch > 0 {
		batch = fmt.Sprint(d.Batch)
	}
	if pause == "0s" {
		pause = "as long as the batch (default)"
	}
	p("delete of %s's executions from %s (%d of the day's %d): %s %d executions and %d attempts rows in %.3f s (batch %s, pause %s); fire lag meanwhile %s",
		d.Namespace, d.Day.Format(time.DateOnly), d.Rows, d.DayRows, how, d.Deleted, d.DeletedAttempts, d.Seconds,
		batch, pause, d.FireLag)
}

// deleteWhileFiring runs --history-fire-jobs every-second jobs for the
// window (--duration) and, a third into it, applies retention so that it
// deletes hist-00's executions from the oldest day, which the other
// namespaces keep; then loads that day again. The pass runs under the
// cluster's maintenance lock, so that no tockd's own pass runs meanwhile,
// and hist-00's retention is removed again before the lock is released.
func (h *history) deleteWhileFiring(ctx context.Context, d HistoryData) (*HistoryDelete, *Report, error) {
	del := &HistoryDelete{Day: d.From, Namespace: histDeleteNamespace, Batch: h.HistoryDeleteBatch, Pause: h.HistoryDeletePause.String()}
	var from, to time.Time
	pool := h.st.Pool()
	h.duringWindow = func(ctx context.Context, wfrom, wto time.Time) error {
		if err := h.sleepUntil(ctx, wfrom.Add(wto.Sub(wfrom)/3)); err != nil {
			return err
		}
		part := store.DayPartition("executions", d.From)
		if err := pool.QueryRow(ctx, "SELECT count(*), count(*) FILTER (WHERE namespace = $1) FROM "+part,
			del.Namespace).Scan(&del.DayRows, &del.Rows); err != nil {
			return err
		}
		policy := model.RetentionPolicy{
			// Long enough that no day is dropped and the other namespaces
			// keep the oldest.
			Default:     10 * 365 * 24 * time.Hour,
			DeleteBatch: h.HistoryDeleteBatch, DeletePause: h.HistoryDeletePause,
		}
		if dir := h.HistoryArchiveDir; dir != "" {
			if err := archive.CheckDir(dir); err != nil {
				return err
			}
			policy.Archive = func(ctx context.Context, day time.Time) error {
				_, err := archive.Day(ctx, pool, dir, day)
				return err
			}
			policy.ArchiveRows = func(ctx context.Context, sel model.RowSelection) ([]model.ExecutionKey, error) {
				res, err := archive.Rows(ctx, pool, dir, sel)
				return res.Keys, err
			}
		}
		var res model.RetentionResult
		_, err := h.st.Maintenance(ctx, true, func(ctx context.Context) error {
			now := h.dbNow()
			// A retention such that the oldest day has ended that long
			// ago: every execution of the namespace on it is past it, and
			// none of a later day.
			if _, err := h.st.UpdateNamespaceRetention(ctx, del.Namespace, now.Sub(d.From.AddDate(0, 0, 1))); err != nil {
				return err
			}
			defer func() {
				_, _ = h.st.UpdateNamespaceRetention(context.WithoutCancel(ctx), del.Namespace, 0)
			}()
			from = h.dbNow()
			start := time.Now()
			var err error
			res, err = h.st.ApplyRetention(ctx, now, policy)
			del.Seconds = time.Since(start).Seconds()
			to = h.dbNow()
			return err
		})
		if err != nil {
			return err
		}
		del.Deleted, del.DeletedAttempts, del.Archived = res.Deleted, res.DeletedAttempts, res.ArchivedRows
		if len(res.Dropped) != 0 {
			return fmt.Errorf("retention dropped %v, want no day dropped", res.Dropped)
		}
		h.say("deleted %d executions of %s from %s (%d attempts rows) in %.3f s", del.Deleted, del.Namespace,
			d.From.Format(time.DateOnly), del.DeletedAttempts, del.Seconds)
		// The runs due up to two seconds after the pass have fired (fire
		// lead is at most a second) before their lag is read.
		if err := h.sleepUntil(ctx, to.Add(3*time.Second)); err != nil {
			return err
		}
		return pool.QueryRow(ctx, `SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY l), percentile_cont(0.99) WITHIN GROUP (ORDER BY l), max(l)
		FROM (SELECT extract(epoch FROM dispatched_at - scheduled_for)::float8 * 1000 AS l FROM executions
			WHERE namespace = $1 AND scheduled_for >= $2 AND scheduled_for < $3) x`,
			h.ns, from.Add(-time.Second), to.Add(2*time.Second)).Scan(&del.FireLag.P50, &del.FireLag.P99, &del.FireLag.Max)
	}
	rep, err := h.runRecurring(ctx)
	if err != nil {
		return nil, nil, err
	}
	del.FireLag = del.FireLag.rounded()
	// The day again as loaded, for the next run.
	if err := h.dropPartitions(ctx, d.From); err != nil {
		return nil, nil, err
	}
	gen, err := h.newGen(ctx, &d)
	if err != nil {
		return nil, nil, err
	}
	if err := h.loadDay(ctx, gen, d.From, d.From.AddDate(0, 0, 1), true); err != nil {
		return nil, nil, fmt.Errorf("load the day again: %w", err)
	}
	if _, err := pool.Exec(ctx, "VACUUM (ANALYZE) "+store.DayPartition("executions", d.From)); err != nil {
		return nil, nil, err
	}
	del.Reloaded = true
	return del, rep, nil
}
