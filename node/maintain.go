package node

import (
	"context"
	"log/slog"
	"time"

	"github.com/tock-sched/tock/archive"
	"github.com/tock-sched/tock/store"
)

// maintainEvery is how often a node runs a maintenance pass.
const maintainEvery = 5 * time.Minute

// Maintain runs a maintenance pass (MaintainOnce) now and every
// maintainEvery until ctx ends. Every node runs it: a pass that finds
// nothing to do reads a few catalog rows, and concurrent passes are
// serialised in the database. Of cfg it reads the retention fields and
// ArchiveDir (tockd maintain sets only those).
func Maintain(ctx context.Context, st *store.Store, log *slog.Logger, cfg Config) error {
	t := time.NewTicker(maintainEvery)
	defer t.Stop()
	for {
		if err := MaintainOnce(ctx, st, log, cfg, false); err != nil && ctx.Err() == nil {
			log.Warn("maintenance", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// MaintainOnce runs a maintenance pass (maintainPass) under the
// cluster's maintenance lock (store.Maintenance): with wait false, a node
// that finds another one doing it skips its pass.
func MaintainOnce(ctx context.Context, st *store.Store, log *slog.Logger, cfg Config, wait bool) error {
	ran, err := st.Maintenance(ctx, wait, func(ctx context.Context) error { return maintainPass(ctx, st, log, cfg) })
	if !ran && err == nil {
		log.Debug("maintenance: another node is running a pass")
	}
	return err
}

// maintainPass creates the daily partitions of the next 7 days and
// applies retention (store.ApplyRetention), archiving each day before it
// is dropped when cfg.ArchiveDir is set, and logs what it did.
func maintainPass(ctx context.Context, st *store.Store, log *slog.Logger, cfg Config) error {
	now, err := st.Now(ctx)
	if err != nil {
		return err
	}
	if err := st.MaintainPartitions(ctx, now, 7); err != nil {
		return err
	}
	if _, err := st.ExpireIdempotencyKeys(ctx, now); err != nil {
		return err
	}
	if n, err := st.MaintainAudit(ctx, now, 7, cfg.AuditRetention); err != nil {
		return err
	} else if n > 0 {
		log.Info("audit retention", "days_dropped", n)
	}
	if cfg.Retention <= 0 {
		return nil
	}
	res, err := st.ApplyRetention(ctx, now, store.RetentionPolicy{
		Default:       cfg.Retention,
		CompletedJobs: cfg.CompletedJobRetention,
		Archive:       archiver(st, log, cfg.ArchiveDir),
	})
	if len(res.Dropped) > 0 || res.CompletedJobs > 0 || res.SkippedRanges > 0 {
		log.Info("retention", "days_dropped", len(res.Dropped), "days_archived", len(res.Archived),
			"days_kept_longer", len(res.Kept), "completed_jobs_deleted", res.CompletedJobs,
			"skipped_ranges_deleted", res.SkippedRanges)
	}
	return err
}

// archiver is the retention hook that writes a day to Parquet files in
// dir (archive.Day) before its partitions are dropped; nil, no
// archiving, when dir is empty.
func archiver(st *store.Store, log *slog.Logger, dir string) func(context.Context, time.Time) error {
	if dir == "" {
		return nil
	}
	return func(ctx context.Context, day time.Time) error {
		res, err := archive.Day(ctx, st.Pool(), dir, day)
		if err != nil {
			return err
		}
		log.Info("archived", "day", day.Format(time.DateOnly), "executions", res.Executions.Rows,
			"attempts", res.Attempts.Rows, "files", []string{res.Executions.Path, res.Attempts.Path})
		return nil
	}
}
