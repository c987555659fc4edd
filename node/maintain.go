package node

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tock-sched/tock/maintenance"
	"github.com/tock-sched/tock/store"
)

// maintenancePass is the cluster-wide maintenance services (package
// maintenance) in one pass under the cluster's maintenance lock: the
// daily partitions of the next 7 days, expired idempotency keys, the
// audit trail's days, and retention, archiving each day before it is
// dropped when cfg.ArchiveDir is set. With wait false, a node that finds
// another one running a pass skips its own. Metrics go to reg (nil:
// none). Of cfg it reads the retention fields and ArchiveDir (tockd
// maintain sets only those).
func maintenancePass(st *store.Store, log *slog.Logger, cfg Config, reg prometheus.Registerer, wait bool) (*maintenance.Pass, error) {
	parts, err := maintenance.NewPartitionsAhead(maintenance.PartitionsAheadConfig{Store: st, Logger: log, Registerer: reg})
	if err != nil {
		return nil, err
	}
	keys, err := maintenance.NewIdempotencyPruner(maintenance.IdempotencyPrunerConfig{Store: st, Logger: log, Registerer: reg})
	if err != nil {
		return nil, err
	}
	audit, err := maintenance.NewAuditPruner(maintenance.AuditPrunerConfig{Store: st, Retention: cfg.AuditRetention,
		Logger: log, Registerer: reg})
	if err != nil {
		return nil, err
	}
	var arch *maintenance.Archiver
	if cfg.ArchiveDir != "" {
		if arch, err = maintenance.NewArchiver(maintenance.ArchiverConfig{DB: st.Pool(), Dir: cfg.ArchiveDir,
			Logger: log, Registerer: reg}); err != nil {
			return nil, err
		}
	}
	ret, err := maintenance.NewRetention(maintenance.RetentionConfig{Store: st, Default: cfg.Retention,
		CompletedJobs: cfg.CompletedJobRetention, Archiver: arch, Logger: log, Registerer: reg})
	if err != nil {
		return nil, err
	}
	return maintenance.NewPass(maintenance.PassConfig{Lock: st, Services: []maintenance.Service{parts, keys, audit, ret},
		Wait: wait, Logger: log})
}

// Maintain runs a maintenance pass (maintenancePass) now and every 5
// minutes until ctx ends (tockd maintain).
func Maintain(ctx context.Context, st *store.Store, log *slog.Logger, cfg Config) error {
	p, err := maintenancePass(st, log, cfg, nil, false)
	if err != nil {
		return err
	}
	return p.Run(ctx)
}

// MaintainOnce runs one maintenance pass (tockd maintain --once); with
// wait, it waits for another node's pass to end rather than skip.
func MaintainOnce(ctx context.Context, st *store.Store, log *slog.Logger, cfg Config, wait bool) error {
	p, err := maintenancePass(st, log, cfg, nil, wait)
	if err != nil {
		return err
	}
	return p.RunOnce(ctx)
}
