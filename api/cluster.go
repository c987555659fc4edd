package api

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/tock-sched/tock/api/models"
)

// noCluster answers the cluster endpoints of a server built without a
// Cluster.
func noCluster() *apiError {
	return newProblem(http.StatusServiceUnavailable, ProblemUnavailable, "Cluster view unavailable",
		"this node has no etcd connection (run it with the scheduler role or --etcd-endpoints)")
}

// etcdError logs a failed etcd read and answers 503: the cluster view
// depends on etcd the way /readyz depends on the database.
func (h *endpoints) etcdError(c echo.Context, err error) error {
	h.s.log.WarnContext(c.Request().Context(), "read cluster state from etcd",
		"method", c.Request().Method, "path", c.Request().URL.Path, "err", err)
	return newProblem(http.StatusServiceUnavailable, ProblemUnavailable, "Cluster view unavailable",
		"etcd did not answer; try again shortly.")
}

// ListPartitions handles GET /v1/partitions, the deprecated name of GET
// /v1/buckets.
func (h *endpoints) ListPartitions(c echo.Context) error { return h.ListBuckets(c) }

// ListBuckets handles GET /v1/buckets: every bucket with its owner in
// etcd, its owner recorded in Postgres, and its job counts.
func (h *endpoints) ListBuckets(c echo.Context) error {
	if h.s.cluster == nil {
		return noCluster()
	}
	ctx := c.Request().Context()
	// etcd first: a hand-over seen in etcd and not yet recorded shows as
	// a difference, never the other way round.
	ectx, cancel := context.WithTimeout(ctx, h.s.clusterWait)
	owners, err := h.s.cluster.Owners(ectx)
	cancel()
	if err != nil {
		return h.etcdError(c, err)
	}
	stats, err := h.s.store.ListBucketStats(ctx)
	if err != nil {
		return h.internal(c, err)
	}
	out := models.BucketList{Items: make([]models.Bucket, 0, len(stats))}
	for _, st := range stats {
		p := models.Bucket{
			Bucket:     st.Bucket,
			Jobs:       st.Jobs,
			ActiveJobs: st.Active,
			NextDue:    utc(st.NextDue),
		}
		if o, ok := owners[st.Bucket]; ok {
			p.Owner, p.Epoch = ptr(o.Node), ptr(o.Epoch)
		}
		if st.Node != "" {
			p.RecordedOwner, p.RecordedEpoch = ptr(st.Node), ptr(st.Epoch)
		}
		out.Items = append(out.Items, p)
	}
	return c.JSON(http.StatusOK, out)
}

// ListNodes handles GET /v1/nodes: the live scheduler nodes in etcd.
func (h *endpoints) ListNodes(c echo.Context) error {
	if h.s.cluster == nil {
		return noCluster()
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), h.s.clusterWait)
	members, err := h.s.cluster.Members(ctx)
	cancel()
	if err != nil {
		return h.etcdError(c, err)
	}
	out := models.NodeList{Items: make([]models.Node, 0, len(members))}
	for _, m := range members {
		buckets := m.Buckets
		if buckets == nil {
			buckets = []int{}
		}
		out.Items = append(out.Items, models.Node{
			Node:            m.Node,
			Addr:            nonEmpty(m.Addr),
			StartedAt:       m.StartedAt.UTC(),
			LeaseTtlSeconds: m.LeaseTTL.Seconds(),
			Buckets:         buckets,
			BucketCount:     len(buckets),
		})
	}
	return c.JSON(http.StatusOK, out)
}
