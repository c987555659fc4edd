package maintenance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tock-sched/tock/internal/promreg"
	"github.com/tock-sched/tock/store/model"
)

// RetentionStore is what Retention needs from Postgres; *store.Store is
// one.
type RetentionStore interface {
	Now(ctx context.Context) (time.Time, error)
	ApplyRetention(ctx context.Context, now time.Time, p model.RetentionPolicy) (model.RetentionResult, error)
}

// RetentionConfig configures a Retention. Store is required.
type RetentionConfig struct {
	Store RetentionStore
	// Default is how long execution history is kept for namespaces
	// without their own; 0 (or less) turns retention off: nothing is
	// dropped, nor are completed jobs deleted.
	Default time.Duration
	// CompletedJobs is how long a completed one-shot job is kept; 0 keeps
	// them.
	CompletedJobs time.Duration
	// Archiver, if set, writes each day out before it is dropped, and a
	// namespace's executions before they are deleted from a kept day.
	Archiver *Archiver
	Logger   *slog.Logger
	// Registerer is where tock_retention_days_dropped_total,
	// tock_retention_rows_deleted_total,
	// tock_retention_completed_jobs_deleted_total and
	// tock_maintenance_last_success_timestamp_seconds are registered; nil
	// registers them nowhere.
	Registerer prometheus.Registerer
}

// WithDefaults is c with the fields it leaves zero (or negative) set to
// their defaults. A zero Default stays zero (retention off).
func (c RetentionConfig) WithDefaults() RetentionConfig {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func (c *RetentionConfig) validate() error {
	if c.Store == nil {
		return errors.New("maintenance: RetentionConfig.Store is required")
	}
	if c.CompletedJobs < 0 {
		return fmt.Errorf("maintenance: CompletedJobs %s must not be negative", c.CompletedJobs)
	}
	return nil
}

// Retention bounds history (store.ApplyRetention): it drops the whole day
// partitions of executions and attempts past retention (a namespace's
// own, or Default), deletes from the days it keeps the executions of the
// namespaces past theirs, in batches, each after the Archiver wrote them
// out when one is set, and deletes completed one-shot jobs after
// CompletedJobs.
type Retention struct {
	cfg         RetentionConfig
	log         *slog.Logger
	daysDropped prometheus.Counter
	rowsDeleted *prometheus.CounterVec
	jobsDeleted prometheus.Counter
	last        prometheus.Gauge
}

// NewRetention checks cfg (with its defaults) and returns a Retention.
func NewRetention(cfg RetentionConfig) (*Retention, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	var err error
	r := &Retention{cfg: cfg, log: cfg.Logger,
		daysDropped: promreg.Register(cfg.Registerer, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tock_retention_days_dropped_total",
			Help: "Days of execution history (executions and attempts partitions) dropped by retention.",
		}), &err),
		rowsDeleted: promreg.Register(cfg.Registerer, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tock_retention_rows_deleted_total",
			Help: "Rows of execution history (table: executions or attempts) deleted by retention from days it kept, the namespaces' past their retention.",
		}, []string{"table"}), &err),
		jobsDeleted: promreg.Register(cfg.Registerer, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tock_retention_completed_jobs_deleted_total",
			Help: "Completed one-shot jobs deleted by retention.",
		}), &err),
		last: lastSuccess(cfg.Registerer, &err).WithLabelValues("retention"),
	}
	if err != nil {
		return nil, fmt.Errorf("maintenance: register retention metrics: %w", err)
	}
	for _, table := range []string{"executions", "attempts", "execution_logs"} {
		r.rowsDeleted.WithLabelValues(table) // exported from the start, at 0
	}
	return r, nil
}

// RunOnce applies retention by the database's clock, and logs what it
// did (also when it stopped at a day it could not archive).
func (r *Retention) RunOnce(ctx context.Context) error {
	if r.cfg.Default <= 0 {
		r.last.SetToCurrentTime()
		return nil
	}
	now, err := r.cfg.Store.Now(ctx)
	if err != nil {
		return err
	}
	p := model.RetentionPolicy{Default: r.cfg.Default, CompletedJobs: r.cfg.CompletedJobs}
	if r.cfg.Archiver != nil {
		p.Archive, p.ArchiveRows = r.cfg.Archiver.Archive, r.cfg.Archiver.ArchiveRows
	}
	res, err := r.cfg.Store.ApplyRetention(ctx, now, p)
	r.daysDropped.Add(float64(len(res.Dropped)))
	r.rowsDeleted.WithLabelValues("executions").Add(float64(res.Deleted))
	r.rowsDeleted.WithLabelValues("attempts").Add(float64(res.DeletedAttempts))
	r.rowsDeleted.WithLabelValues("execution_logs").Add(float64(res.DeletedLogChunks))
	r.jobsDeleted.Add(float64(res.CompletedJobs))
	if len(res.Dropped) > 0 || res.Deleted > 0 || res.CompletedJobs > 0 || res.SkippedRanges > 0 {
		r.log.Info("retention", "days_dropped", len(res.Dropped), "days_archived", len(res.Archived),
			"days_kept_longer", len(res.Kept), "executions_deleted", res.Deleted,
			"attempts_deleted", res.DeletedAttempts, "log_chunks_deleted", res.DeletedLogChunks, "executions_archived", res.ArchivedRows,
			"completed_jobs_deleted", res.CompletedJobs, "skipped_ranges_deleted", res.SkippedRanges)
	}
	if err != nil {
		return err
	}
	r.last.SetToCurrentTime()
	return nil
}
