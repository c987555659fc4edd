package maintenance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tock-sched/tock/archive"
	"github.com/tock-sched/tock/internal/promreg"
	"github.com/tock-sched/tock/store/model"
)

// ArchiverConfig configures an Archiver. DB and Dir are required.
type ArchiverConfig struct {
	// DB is where the days are read; store.Store.Pool is one.
	DB archive.DB
	// Dir is where each day's Parquet files are written (archive.Day).
	Dir    string
	Logger *slog.Logger
	// Registerer is where tock_archived_days_total is registered; nil
	// registers it nowhere.
	Registerer prometheus.Registerer
}

// WithDefaults is c with the default logger if it has none.
func (c ArchiverConfig) WithDefaults() ArchiverConfig {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func (c *ArchiverConfig) validate() error {
	if c.DB == nil || c.Dir == "" {
		return errors.New("maintenance: ArchiverConfig.DB and Dir are required")
	}
	return nil
}

// Archiver writes a day of execution history to Parquet files before
// Retention drops it, and a namespace's executions before Retention
// deletes them from a day it keeps. It has no loop of its own: archiving
// is a step of Retention's pass (RetentionConfig.Archiver), taken just
// before the day is dropped or the rows deleted, and what it could not
// write is neither dropped nor deleted.
type Archiver struct {
	cfg      ArchiverConfig
	log      *slog.Logger
	archived prometheus.Counter
}

// NewArchiver checks cfg (with its defaults) and that cfg.Dir can be
// written (archive.CheckDir), so that a node with a directory it cannot
// write refuses to start rather than keep every day.
func NewArchiver(cfg ArchiverConfig) (*Archiver, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := archive.CheckDir(cfg.Dir); err != nil {
		return nil, err
	}
	var err error
	a := &Archiver{cfg: cfg, log: cfg.Logger,
		archived: promreg.Register(cfg.Registerer, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tock_archived_days_total",
			Help: "Days of execution history written to Parquet files before retention dropped them.",
		}), &err),
	}
	if err != nil {
		return nil, fmt.Errorf("maintenance: register archive metrics: %w", err)
	}
	return a, nil
}

// Archive writes day (archive.Day) and logs the files; it returns only
// once they are complete and durable. It is Retention's
// model.RetentionPolicy.Archive.
func (a *Archiver) Archive(ctx context.Context, day time.Time) error {
	res, err := archive.Day(ctx, a.cfg.DB, a.cfg.Dir, day)
	if err != nil {
		return err
	}
	a.archived.Inc()
	a.log.Info("archived", "day", day.Format(time.DateOnly), "executions", res.Executions.Rows,
		"attempts", res.Attempts.Rows, "log_chunks", res.Logs.Rows, "files", []string{res.Executions.Path, res.Attempts.Path, res.Logs.Path})
	return nil
}

// ArchiveRows writes the executions sel selects (archive.Rows) and logs
// the files, if any; it returns the keys of the executions written, once
// the files are complete and durable. It is Retention's
// model.RetentionPolicy.ArchiveRows.
func (a *Archiver) ArchiveRows(ctx context.Context, sel model.RowSelection) ([]model.ExecutionKey, error) {
	res, err := archive.Rows(ctx, a.cfg.DB, a.cfg.Dir, sel)
	if err != nil {
		return nil, err
	}
	if len(res.Keys) > 0 {
		a.log.Info("archived", "day", sel.Day.Format(time.DateOnly), "namespace", sel.Namespace,
			"executions", res.Executions.Rows, "attempts", res.Attempts.Rows, "log_chunks", res.Logs.Rows,
			"files", []string{res.Executions.Path, res.Attempts.Path, res.Logs.Path})
	}
	return res.Keys, nil
}
