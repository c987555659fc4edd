package api

import (
	"context"
	"time"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store/model"
	"github.com/tock-sched/tock/waits"
)

// waitsTTL is how long the API keeps what it read of the handlers and
// queues to say why executions wait (package waits): a list page of 50
// executions reads NATS and Postgres once.
const waitsTTL = time.Second

// explainWaits fills in why each execution of execs that waits does
// (out[i] is execs[i]'s API form). Without NATS, or when it does not
// answer, only the executions' own state and times explain them.
func (h *endpoints) explainWaits(ctx context.Context, execs []*model.Execution, out []models.Execution) {
	var snap *waits.Snapshot
	read := false
	now := time.Now()
	for i, e := range execs {
		if e.State.Final() || e.State == domain.ExecRunning {
			continue
		}
		if !read && h.s.waits != nil {
			read = true
			s, err := h.s.waits.Get(ctx)
			if err != nil {
				h.s.log.DebugContext(ctx, "read handler states to explain waits", "err", err)
			}
			snap = s
		}
		r := waits.Explain(e, snap.Handler(e.Handler), now)
		if r == nil {
			continue
		}
		out[i].Wait = &models.ExecutionWait{Reason: models.ExecutionWaitReason(r.Kind), Message: r.Message,
			Since: utc(r.Since), Until: utc(r.Until), Handler: nonEmpty(r.Handler), Key: nonEmpty(r.Key)}
	}
}
