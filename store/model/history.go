package model

import (
	"time"

	"github.com/tock-sched/tock/domain"
)

// SeriesPoint is one interval of a statistics series
// (store.ListExecutionSeries): the executions scheduled in [At, At +
// the series' interval).
type SeriesPoint struct {
	At time.Time
	// Counts are the executions by state (every state, zeros included);
	// Total their sum.
	Counts map[domain.ExecState]int64
	Total  int64
	// FireLag and StartLag are histograms over store.LagBounds:
	// FireLag of how late executions were fired (scheduled time to the
	// firing's commit; backfills, late by design, left out), StartLag of
	// how late they started (due time to their attempt's start).
	FireLag, StartLag []int64
}
