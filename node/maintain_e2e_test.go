package node_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tock-sched/tock/node/nodetest"
	"github.com/tock-sched/tock/store"
)

// tockd maintain --once runs one pass, partitions ahead and retention,
// and exits.
func TestMaintainOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pg, st, now := nodetest.MigratedStore(t)
	if err := st.MaintainHistoryPartitions(ctx, now.AddDate(0, 0, -60), 0); err != nil {
		t.Fatal(err)
	}
	old := "executions_" + now.AddDate(0, 0, -60).UTC().Format("20060102")
	partitionsOf := func(parent string) string {
		var names string
		if err := st.Pool().QueryRow(ctx, `SELECT coalesce(string_agg(c.relname, ' '), '') FROM pg_inherits i
			JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = $1::regclass`, parent).Scan(&names); err != nil {
			t.Fatal(err)
		}
		return names
	}
	partitions := func() string { return partitionsOf("executions") }
	// An audit day past --audit-retention.
	oldDay := now.AddDate(0, 0, -60).UTC().Truncate(24 * time.Hour)
	oldAudit := store.DayPartition("audit_log", oldDay)
	if _, err := st.Pool().Exec(ctx, "CREATE TABLE "+oldAudit+" PARTITION OF audit_log FOR VALUES FROM ('"+
		oldDay.Format(time.RFC3339)+"') TO ('"+oldDay.AddDate(0, 0, 1).Format(time.RFC3339)+"')"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(partitions(), old) {
		t.Fatalf("setup: no %s in %s", old, partitions())
	}
	cmd := nodetest.Command(t, "maintain", "--postgres-url", pg, "--once", "--retention", "30d", "--audit-retention", "45d", "--log-level", "warn")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("tockd maintain --once: %v\n%s", err, out)
	}
	got := partitions()
	if strings.Contains(got, old) {
		t.Errorf("a 60-day-old partition survived a 30d retention: %s", got)
	}
	ahead := "executions_" + now.AddDate(0, 0, 7).UTC().Format("20060102")
	if !strings.Contains(got, ahead) {
		t.Errorf("no partition a week ahead (%s): %s", ahead, got)
	}
	// The audit trail's days too, by its own retention.
	audit := partitionsOf("audit_log")
	if strings.Contains(audit, oldAudit) || !strings.Contains(audit, store.DayPartition("audit_log", now.AddDate(0, 0, 7))) {
		t.Errorf("audit partitions after maintain --once --audit-retention 45d: %s", audit)
	}
}
