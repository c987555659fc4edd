package store

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// The firing statements probe each job by its primary key however stale
// the statistics are. The case that went wrong: jobs analyzed while empty,
// then thousands created and due before the next ANALYZE. The generic plan
// then read every partition whole through the jobs_due index, materialized
// it and compared each firing with every row (40-60 s a statement at
// 600,000 jobs in tockbench, and runs skipped as missed).
func TestFirePlanWithStaleStatistics(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStoreWith(t, 64)
	if _, err := s.pool.Exec(ctx, "ANALYZE jobs"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `
		INSERT INTO jobs (id, bucket, namespace, name, schedule, handler, state, created_at, updated_at, next_run_at)
		SELECT id, i % 64, 'default', 'j' || i, '{"cron": "* * * * * *"}', '{"type": "nats", "subject": "a"}',
			'active', now(), now(), now() + (i % 60) * interval '1 s'
		FROM (SELECT gen_random_uuid() AS id, i FROM generate_series(1, 20000) i) g`); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, sql, args string
	}{
		{"fireSQL", fireSQL, "'{}', '{}', '{}', '{}', '{}', 'n', '{}'"},
		{"policyAdvanceSQL", policyAdvanceSQL, "'{}', '{}', '{}', '{}', '{}', 3, '{}', '{}', '{}', '{}', '{}', '{}'"},
	} {
		plan := genericPlan(t, s, c.sql, c.args)
		probes := 0
		for _, l := range plan {
			if strings.Contains(l, "_pkey on jobs_b") {
				probes++
			}
			if strings.Contains(l, "_next_run_at_namespace_name_idx on jobs_b") || strings.Contains(l, "Seq Scan on jobs_b") {
				t.Errorf("%s: jobs read whole: %s", c.name, l)
			}
			// The jobs completed are marked in job_names by their key.
			if strings.Contains(l, "Scan") && strings.Contains(l, " on job_names") && !strings.Contains(l, "job_names_job_id_key on job_names") {
				t.Errorf("%s: job_names read whole: %s", c.name, l)
			}
		}
		if probes == 0 || t.Failed() {
			t.Fatalf("%s: want primary-key probes only; plan:\n%s", c.name, strings.Join(plan, "\n"))
		}
	}
}

// genericPlan is EXPLAIN's generic plan of sql with the firing
// transaction's settings, executed with args.
func genericPlan(t *testing.T, s *Store, sql, args string) []string {
	t.Helper()
	ctx := context.Background()
	var plan []string
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		for _, set := range append(append([]string{}, keyedPlanSettings...), fireJoinSettings...) {
			if _, err := tx.Exec(ctx, set); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, "PREPARE plan_test AS "+sql); err != nil {
			return err
		}
		defer tx.Exec(ctx, "DEALLOCATE plan_test") //nolint:errcheck // the transaction is rolled back on error
		rows, err := tx.Query(ctx, "EXPLAIN EXECUTE plan_test("+args+")")
		if err != nil {
			return err
		}
		plan, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return plan
}
