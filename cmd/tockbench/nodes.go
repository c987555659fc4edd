package main

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// NodeStats is one scheduler node's part in a run: the buckets it owns
// and the executions of the window it fired (executions.fired_by). A
// cluster of several nodes shares the firing about as it shares the
// buckets; a node that owns buckets and fired nothing shows up with 0.
type NodeStats struct {
	Node string `json:"node"`
	// Buckets is how many buckets the node owned when the run was read
	// (bucket_owners, the fencing table: a node that died and whose
	// buckets were not yet taken over still counts them).
	Buckets int   `json:"buckets"`
	Fired   int64 `json:"fired"`
	// Share is Fired over all executions of the window, in percent.
	Share float64 `json:"share_percent"`
	// FireLag and StartLag are as in Report, over this node's executions.
	FireLag  Lag `json:"fire_lag_ms"`
	StartLag Lag `json:"start_lag_ms"`
}

// nodeStatsSQL reads, per node, the buckets it owns and the fire and
// start lags of the run's executions selected by windowFilter that it
// fired. The full join keeps nodes that fired nothing and nodes that no
// longer own a bucket.
const nodeStatsSQL = `
WITH e AS (
	SELECT fired_by AS node, count(*) AS fired,
		percentile_cont(0.5) WITHIN GROUP (ORDER BY fire_lag) AS f50,
		percentile_cont(0.99) WITHIN GROUP (ORDER BY fire_lag) AS f99, max(fire_lag) AS fmax,
		percentile_cont(0.5) WITHIN GROUP (ORDER BY start_lag) AS s50,
		percentile_cont(0.99) WITHIN GROUP (ORDER BY start_lag) AS s99, max(start_lag) AS smax
	FROM (
		SELECT fired_by,
			extract(epoch FROM dispatched_at - scheduled_for)::float8 * 1000 AS fire_lag,
			extract(epoch FROM started_at - scheduled_for)::float8 * 1000 AS start_lag
		FROM executions WHERE ` + windowFilter + `
	) x GROUP BY fired_by
), o AS (
	SELECT node, count(*) AS buckets FROM bucket_owners GROUP BY node
)
SELECT coalesce(e.node, o.node), coalesce(o.buckets, 0), coalesce(e.fired, 0),
	e.f50, e.f99, e.fmax, e.s50, e.s99, e.smax
FROM e FULL JOIN o ON o.node = e.node
ORDER BY 1`

// nodeStats reads every node's part in the run's executions scheduled in
// [from, to).
func (b *bench) nodeStats(ctx context.Context, from, to time.Time) ([]NodeStats, error) {
	rows, err := b.st.Pool().Query(ctx, nodeStatsSQL, b.windowArgs(from, to)...)
	if err != nil {
		return nil, fmt.Errorf("per-node statistics: %w", err)
	}
	defer rows.Close()
	var out []NodeStats
	var total int64
	for rows.Next() {
		var n NodeStats
		if err := rows.Scan(&n.Node, &n.Buckets, &n.Fired,
			&n.FireLag.P50, &n.FireLag.P99, &n.FireLag.Max,
			&n.StartLag.P50, &n.StartLag.P99, &n.StartLag.Max); err != nil {
			return nil, fmt.Errorf("per-node statistics: %w", err)
		}
		n.FireLag, n.StartLag = n.FireLag.rounded(), n.StartLag.rounded()
		total += n.Fired
		out = append(out, n)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("per-node statistics: %w", err)
	}
	for i := range out {
		if total > 0 {
			out[i].Share = float64(out[i].Fired) * 100 / float64(total)
		}
	}
	return out, nil
}

// writeNodes prints one line per node with p, the report writer's
// printer.
func writeNodes(p func(string, ...any), nodes []NodeStats) {
	for i, n := range nodes {
		label := ""
		if i == 0 {
			label = "nodes"
		}
		p("  %-14s %s: %d buckets, fired %d (%.1f%%), fire lag p50 %s p99 %s, start lag p99 %s",
			label, nodeName(n.Node), n.Buckets, n.Fired, n.Share, fmtMS(n.FireLag.P50), fmtMS(n.FireLag.P99), fmtMS(n.StartLag.P99))
	}
}

// nodeSummary is a one-line account of the nodes' shares, for the
// ceiling report's table.
func nodeSummary(nodes []NodeStats) string {
	parts := make([]string, 0, len(nodes))
	for _, n := range nodes {
		parts = append(parts, fmt.Sprintf("%s %.0f%% (%d buckets, fire p99 %s)", nodeName(n.Node), n.Share, n.Buckets, fmtMS(n.FireLag.P99)))
	}
	return strings.Join(parts, ", ")
}

// nodeName shows the empty fired_by (an execution no scheduler fired) as
// such rather than as nothing.
func nodeName(n string) string {
	if n == "" {
		return `""`
	}
	return n
}
